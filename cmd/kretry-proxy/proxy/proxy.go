package proxy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
	kubectlproxy "k8s.io/kubectl/pkg/proxy"

	"github.com/kretry/kretry/transport"
)

// Options tunes a Server. The zero Options is the safe default: loopback Host names only, no
// upgrades, every method, kretry's recommended configuration.
type Options struct {
	// AcceptHosts match the host part of the Host header (and of an Origin header), each
	// against the whole name (New anchors them); default DefaultAcceptHosts.
	AcceptHosts []*regexp.Regexp
	// AllowUpgrades lets protocol upgrades through, and with them pods' exec, attach and
	// portforward, the kubelet's endpoints that are not its read endpoints behind
	// nodes/NAME/proxy/ and behind a pod's or a service's proxy to a kubelet's port (10250,
	// 10255), and proxy paths not in canonical form; default off: they are refused with 403.
	// CONNECT and TRACE are refused either way.
	AllowUpgrades bool
	// ReadOnly refuses every method but GET with 405.
	ReadOnly bool
	// Transport configures kretry; the zero value is the recommended setup. Its Observer, if
	// set, is told what kretry does alongside the kretry collectors the proxy serves on /metrics.
	Transport transport.Config
	// TokenFile, if set, holds the bearer token to send (a pod's service-account token), in
	// place of the rest.Config's own credentials: it is read again whenever the file changes,
	// beneath kretry, so that every retry and every resumed watch carries the token of the
	// moment. A rest.Config's BearerTokenFile is used the same way when TokenFile is empty.
	TokenFile string
	// Keepalive is the TCP keep-alive period of upgraded connections, as `kubectl proxy
	// --keepalive`; default 0: the system's.
	Keepalive time.Duration
	// ErrorLog receives the HTTP server's own errors (never a request's credentials or body);
	// default the log package's standard logger.
	ErrorLog *log.Logger
}

// Server is a running or ready-to-run proxy. Serve and Shutdown may be called from different
// goroutines.
type Server struct {
	opts    Options
	api     http.Handler
	metrics *metrics
	watches watchSet
	http    *http.Server
	closing atomic.Bool
}

// New returns a Server that sends every request it accepts to the API server of cfg, through
// a copy of cfg wrapped with kretry. cfg is not modified.
func New(cfg *rest.Config, opts Options) (*Server, error) {
	hosts, err := wholeNames(opts.AcceptHosts)
	if err != nil {
		return nil, fmt.Errorf("kretry-proxy: AcceptHosts: %w", err)
	}
	opts.AcceptHosts = hosts
	m, err := newMetrics()
	if err != nil {
		return nil, fmt.Errorf("kretry-proxy: %w", err)
	}
	s := &Server{opts: opts, metrics: m}
	cfg = rest.CopyConfig(cfg)
	if tokenPath := cmp.Or(opts.TokenFile, cfg.BearerTokenFile); tokenPath != "" {
		token := &tokenFile{path: tokenPath}
		if _, err := token.current(); err != nil {
			return nil, err
		}
		cfg.BearerToken, cfg.BearerTokenFile = "", ""
		// The first wrapper is the innermost: beneath kretry, each attempt asks for the token.
		cfg.Wrap(token.wrap)
	}
	// Beneath kretry too: the upstream counter sees every attempt kretry makes.
	cfg.Wrap(s.metrics.upstream)
	// kretry tells its collectors on the proxy's registry what it does, and an Observer the
	// caller set in Options.Transport too.
	tc := opts.Transport
	tc.Observer = transport.JoinObservers(s.metrics.kretry, tc.Observer)
	cfg.Wrap(transport.Wrapper(tc))
	cfg.Wrap(newlineAhead)
	api, err := kubectlproxy.NewProxyHandler("/", nil, cfg, opts.Keepalive, false)
	if err != nil {
		return nil, fmt.Errorf("kretry-proxy: %w", err)
	}
	s.api = api

	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", s.healthz)
	mux.Handle("/metrics", s.metrics.handler())
	mux.Handle("/", http.HandlerFunc(s.serveAPI))
	s.http = &http.Server{
		Handler:           s.guard(mux),
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          opts.ErrorLog,
	}
	return s, nil
}

// Handler is the Server's whole HTTP handler: checks, /healthz, /metrics and the API.
func (s *Server) Handler() http.Handler { return s.http.Handler }

// ProbeHandler serves /healthz and /metrics only, without the checks: for an address the
// kubelet's probes and Prometheus reach (a pod's IP, not its loopback). It lends no
// credentials, having no API behind it.
func (s *Server) ProbeHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", s.healthz)
	mux.Handle("/metrics", s.metrics.handler())
	return mux
}

// Serve accepts connections on ln until Shutdown; it then returns nil.
func (s *Server) Serve(ln net.Listener) error {
	if err := s.http.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Shutdown stops accepting connections, ends every open watch cleanly (after its last whole
// event), lets other requests in flight finish, and returns once all are done. When ctx ends
// first, the remaining connections are closed and ctx's error is returned.
func (s *Server) Shutdown(ctx context.Context) error {
	s.closing.Store(true)
	s.watches.endAll()
	err := s.http.Shutdown(ctx)
	if err != nil {
		s.http.Close()
	}
	return err
}

// healthz says whether the proxy serves: it does not ask the API server (its /livez and
// /readyz, proxied, do).
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if s.closing.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, "shutting down")
		return
	}
	fmt.Fprintln(w, "ok")
}

// serveAPI hands an API request the guard let through to kubectl's proxy handler.
func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request) {
	class := classify(r)
	if class.isWatch() {
		ctx, done, ok := s.watches.add(r.Context())
		if !ok {
			s.metrics.refused(refusedShutdown)
			writeStatus(w, http.StatusServiceUnavailable, "kretry-proxy is shutting down")
			return
		}
		defer done()
		r = r.WithContext(ctx)
		s.metrics.openWatches.Inc()
		defer s.metrics.openWatches.Dec()
	}
	// The proxy's own credentials are the ones used (rest.TransportFor leaves a request's own
	// Authorization and Impersonate-User headers in place).
	dropClientIdentity(r.Header)
	rec := &statusRecorder{ResponseWriter: w}
	// Deferred: httputil.ReverseProxy aborts a response broken mid-body with a panic.
	defer func() { s.metrics.servedOne(class, rec.status()) }()
	s.api.ServeHTTP(rec, r)
}

// watchSet holds a cancel function per open watch, so that Shutdown can end them.
type watchSet struct {
	mu     sync.Mutex
	next   uint64
	cancel map[uint64]context.CancelFunc
	ended  bool
}

// add returns a context for one watch and the function to call when it is over; ok is false
// once endAll has run.
func (ws *watchSet) add(parent context.Context) (ctx context.Context, done func(), ok bool) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.ended {
		return nil, nil, false
	}
	if ws.cancel == nil {
		ws.cancel = map[uint64]context.CancelFunc{}
	}
	ctx, cancel := context.WithCancel(parent)
	id := ws.next
	ws.next++
	ws.cancel[id] = cancel
	return ctx, func() {
		ws.mu.Lock()
		delete(ws.cancel, id)
		ws.mu.Unlock()
		cancel()
	}, true
}

// endAll cancels every open watch and refuses new ones.
func (ws *watchSet) endAll() {
	ws.mu.Lock()
	ws.ended = true
	cancels := make([]context.CancelFunc, 0, len(ws.cancel))
	for _, cancel := range ws.cancel {
		cancels = append(cancels, cancel)
	}
	ws.mu.Unlock()
	for _, cancel := range cancels {
		cancel()
	}
}
