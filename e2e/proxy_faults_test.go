//go:build e2e

package e2e_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// apiFaults is an HTTP-level fault injector standing where a kube-apiserver stands: it serves
// TLS with the cluster's serving certificate (HTTP/2 and HTTP/1.1), forwards every request to
// one kube-apiserver over HTTP/2, counts what it forwards, and on command answers 503 to
// ConfigMap LISTs and WATCHes (a rolling upgrade) or ends every open JSON watch stream with an
// ERROR 500 InternalError event, as kube-apiserver ends a watch after an internal error. The
// TCP fault proxy (cuts) goes in front of it, so both see the same connections.
type apiFaults struct {
	srv *httptest.Server

	unavailableUntil atomic.Int64 // unix nanos
	pendingErrors    atomic.Int64

	mu   sync.Mutex
	wire wireCounts
	// The Authorization of each WATCH forwarded, in order (never log it), as an index into
	// the distinct values: a soak forwards a hundred thousand WATCHes an hour, and a copy of the
	// header each grew the test's heap by 10 MiB an hour.
	watchAuth []uint32
	auths     []string
}

// wireCounts are ConfigMap requests as the API server's side of the cut link saw them.
type wireCounts struct {
	Lists, Lists200, Watches, WatchLists int // forwarded to the API server
	OverHTTP2                            int // of those, the ones that came over HTTP/2
	UnavailableLists, UnavailableWatches int // answered 503 by the injector
	InternalErrors                       int // ERROR 500 events injected
}

func newAPIFaults(t *testing.T, server int) *apiFaults {
	t.Helper()
	cert, err := cluster.ServingCertificate()
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(cluster.CAData())
	upstream := &url.URL{Scheme: "https", Host: cluster.Server(server).Addr()}
	f := &apiFaults{}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(upstream)
			pr.Out.Host = upstream.Host
		},
		Transport:      &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true},
		FlushInterval:  -1,
		ModifyResponse: f.modifyResponse,
		ErrorLog:       discardLog, // a cut client connection is the point here, not news
	}
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		kind := configMapRequest(r)
		if kind != "" && time.Now().UnixNano() < f.unavailableUntil.Load() {
			f.count(func(c *wireCounts) {
				if kind == "list" {
					c.UnavailableLists++
				} else {
					c.UnavailableWatches++
				}
			})
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the server is currently unable to handle the request (injected)","reason":"ServiceUnavailable","code":503}`)
			return
		}
		if kind != "" && r.ProtoMajor == 2 {
			f.count(func(c *wireCounts) { c.OverHTTP2++ })
		}
		switch kind {
		case "list":
			f.count(func(c *wireCounts) { c.Lists++ })
		case "watch":
			f.count(func(c *wireCounts) { c.Watches++ })
			f.mu.Lock()
			f.recordAuth(r.Header.Get("Authorization"))
			f.mu.Unlock()
		case "watch-list":
			f.count(func(c *wireCounts) { c.WatchLists++ })
		}
		rp.ServeHTTP(w, r)
	}))
	f.srv.EnableHTTP2 = true
	f.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	f.srv.Config.ErrorLog = discardLog
	f.srv.StartTLS()
	t.Cleanup(f.srv.Close)
	return f
}

// Addr is the injector's "127.0.0.1:port".
func (f *apiFaults) Addr() string { return strings.TrimPrefix(f.srv.URL, "https://") }

func (f *apiFaults) count(update func(*wireCounts)) {
	f.mu.Lock()
	update(&f.wire)
	f.mu.Unlock()
}

func (f *apiFaults) counts() wireCounts {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.wire
}

// recordAuth appends auth to the WATCHes' Authorization headers; f.mu is held.
func (f *apiFaults) recordAuth(auth string) {
	i := slices.Index(f.auths, auth)
	if i < 0 {
		i = len(f.auths)
		f.auths = append(f.auths, strings.Clone(auth))
	}
	f.watchAuth = append(f.watchAuth, uint32(i))
}

// watchAuthorizations are the Authorization headers of the WATCHes forwarded, in order.
func (f *apiFaults) watchAuthorizations() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, len(f.watchAuth))
	for i, a := range f.watchAuth {
		out[i] = f.auths[a]
	}
	return out
}

// Unavailable answers ConfigMap LISTs and WATCHes 503 (no Retry-After) for d.
func (f *apiFaults) Unavailable(d time.Duration) {
	f.unavailableUntil.Store(time.Now().Add(d).UnixNano())
}

// InternalError ends the next JSON watch stream that reaches an event boundary (one open now,
// or the next one opened) with an ERROR 500 InternalError event: one injection per call.
func (f *apiFaults) InternalError() { f.pendingErrors.Add(1) }

// takeError claims one pending injection.
func (f *apiFaults) takeError() bool {
	for {
		n := f.pendingErrors.Load()
		if n <= 0 {
			return false
		}
		if f.pendingErrors.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

func (f *apiFaults) modifyResponse(resp *http.Response) error {
	kind := configMapRequest(resp.Request)
	if kind == "list" && resp.StatusCode == http.StatusOK {
		f.count(func(c *wireCounts) { c.Lists200++ })
	}
	mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if (kind == "watch" || kind == "watch-list") && resp.StatusCode == http.StatusOK && mediaType == "application/json" {
		resp.Body = &faultStream{body: resp.Body, owner: f}
	}
	return nil
}

// configMapRequest is "list", "watch" or "watch-list" for a GET on a ConfigMap collection,
// reading the query as kube-apiserver does (the Python client sends watch=True), or "".
func configMapRequest(r *http.Request) string {
	if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, "/configmaps") {
		return ""
	}
	q := r.URL.Query()
	switch {
	case !queryTrue(q, "watch"):
		return "list"
	case queryTrue(q, "sendInitialEvents"):
		return "watch-list"
	}
	return "watch"
}

func queryTrue(q url.Values, name string) bool {
	v, ok := q[name]
	if !ok || len(v) == 0 {
		return false
	}
	switch strings.ToLower(v[0]) {
	case "0", "f", "false":
		return false
	}
	return true
}

var discardLog = log.New(io.Discard, "", 0)

// internalErrorEvent is what kube-apiserver sends before it ends a watch on an internal error.
const internalErrorEvent = `{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"etcdserver: leader changed (injected)","reason":"InternalError","code":500}}` + "\n"

// faultStream passes a JSON watch stream through line by line; at a line boundary it may
// claim a pending injection and end the stream with an ERROR 500 event.
type faultStream struct {
	body    io.ReadCloser
	owner   *apiFaults
	partial []byte // bytes of a line not yet complete
	out     []byte // whole lines (or the ERROR event) not yet returned
	done    bool
	err     error
}

func (s *faultStream) Read(p []byte) (int, error) {
	for len(s.out) == 0 {
		if s.done {
			return 0, s.err
		}
		if len(s.partial) == 0 && s.owner.takeError() {
			s.out = []byte(internalErrorEvent)
			s.done, s.err = true, io.EOF
			s.owner.count(func(c *wireCounts) { c.InternalErrors++ })
			break
		}
		buf := make([]byte, 32<<10)
		n, err := s.body.Read(buf)
		s.partial = append(s.partial, buf[:n]...)
		if i := bytes.LastIndexByte(s.partial, '\n'); i >= 0 {
			s.out = append(s.out, s.partial[:i+1]...)
			s.partial = append([]byte(nil), s.partial[i+1:]...)
		}
		if err != nil {
			s.out = append(s.out, s.partial...)
			s.partial = nil
			s.done, s.err = true, err
		}
	}
	n := copy(p, s.out)
	s.out = s.out[n:]
	return n, nil
}

func (s *faultStream) Close() error { return s.body.Close() }

// String is for logs.
func (c wireCounts) String() string {
	return fmt.Sprintf("LIST %d (200: %d), WATCH %d, watch-list %d, 503 injected %d+%d, ERROR 500 injected %d",
		c.Lists, c.Lists200, c.Watches, c.WatchLists, c.UnavailableLists, c.UnavailableWatches, c.InternalErrors)
}
