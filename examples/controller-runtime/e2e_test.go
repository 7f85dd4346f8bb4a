//go:build e2e

package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kretry/kretry/internal/harness/apiserver"
	"github.com/kretry/kretry/internal/harness/cmwriter"
	"github.com/kretry/kretry/internal/harness/faultproxy"
)

// The manager against a real kube-apiserver v1.37.2 + etcd (internal/harness/apiserver,
// the binaries `make apiserver` builds), reached through a TCP fault proxy (cuts) in front
// of an HTTP fault injector (503s), stock and with kretry, one after the other, each with
// its own namespace and a writer changing ConfigMaps straight at the API server.

// TestManagerUnderFaults runs each fault twice: a stock manager, then one with kretry.
func TestManagerUnderFaults(t *testing.T) {
	cluster := apiserver.StartT(t, apiserver.Options{})
	var rows []string
	for _, fault := range []struct {
		name   string
		run    time.Duration
		inject func(p *faultproxy.Proxy, f *injector) func() string
	}{
		{"random-cuts", 30 * time.Second, func(p *faultproxy.Proxy, _ *injector) func() string {
			// Every connection is cut after an exponentially distributed time, 30 a minute.
			p.SetRule(faultproxy.Rule{CutsPerMinute: 30})
			return func() string {
				p.SetRule(faultproxy.Rule{})
				return fmt.Sprintf("%d cuts in 30s", p.Stats().Cuts)
			}
		}},
		{"503-burst", 25 * time.Second, func(p *faultproxy.Proxy, f *injector) func() string {
			// At 5s every connection is cut and ConfigMap LISTs and WATCHes get 503 for 12s:
			// a rolling upgrade, which the watches must come back through.
			timer := time.AfterFunc(5*time.Second, func() { f.unavailable(12 * time.Second); p.CutAll() })
			return func() string {
				timer.Stop()
				return fmt.Sprintf("12s of 503 from 5s after %d cuts; %d LISTs and %d WATCHes answered 503", p.Stats().Cuts, f.lists503.Load(), f.watches503.Load())
			}
		}},
	} {
		for _, withKretry := range []bool{false, true} {
			client := "stock"
			if withKretry {
				client = "kretry"
			}
			t.Run(fault.name+"/"+client, func(t *testing.T) {
				row := runManager(t, cluster, fault.name, client, withKretry, fault.run, fault.inject)
				rows = append(rows, row.String())
				if withKretry && row.fetches != 1 {
					t.Errorf("kretry, %s: %d initial-state fetches, want 1", fault.name, row.fetches)
				}
			})
		}
	}
	table := figuresHeader + strings.Join(rows, "\n") + "\n" + figuresLegend
	t.Log("\n" + table)
	writeFigures(table)
}

// row is one line of the figures table.
type row struct {
	fault, client                  string
	fetches, wireFetches, fetch200 int64
	wire, watches                  int64
	reconciles                     int64
	retries                        float64
	writes                         int
	converged                      bool
	converge                       time.Duration
	note                           string
}

const figuresHeader = "fault        client  fetches  wire-fetches  200s  wire  WATCH  reconciles  retries  writes  cache=server  note\n"

const figuresLegend = `fetches: initial-state fetches (LIST + sendInitialEvents watch) the manager's client-go sent, counted above kretry;
wire-fetches, wire, WATCH: requests below kretry; 200s: initial-state fetches the server answered 200 (each a full list);
reconciles: Reconcile calls; retries: kretry_retries_total (kretry only); cache=server: the manager's cache equal to a
consistent LIST once the writer stopped (time to converge).
`

func (r row) String() string {
	conv := "yes"
	if !r.converged {
		conv = "NO"
	}
	return fmt.Sprintf("%-12s %-7s %7d %13d %5d %5d %6d %11d %8.0f %7d  %-12s  %s", r.fault, r.client, r.fetches, r.wireFetches,
		r.fetch200, r.wire, r.watches, r.reconciles, r.retries, r.writes, conv+" "+r.converge.Round(100*time.Millisecond).String(), r.note)
}

// runManager runs one manager for d under the fault and returns its row.
func runManager(t *testing.T, cluster *apiserver.Cluster, fault, client string, withKretry bool, d time.Duration,
	inject func(*faultproxy.Proxy, *injector) func() string) row {
	ctx := t.Context()
	admin := kubernetes.NewForConfigOrDie(cluster.Config(apiserver.Admin))
	ns := fmt.Sprintf("cr-%s-%d", fault, time.Now().UnixNano()%1_000_000)
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		if _, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, cmwriter.ConfigMap(fmt.Sprintf("seed-%d", i), 0), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	faults := newInjector(t, cluster)
	proxy, err := faultproxy.New(11, faults.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	cfg := cluster.ConfigFor(proxy.Addr(), apiserver.Admin)
	wire, caller := &counter{}, &counter{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { wire.next = rt; return wire })
	retriesBefore := retriesTotal()
	mgr, r, err := newManager(cfg, options{namespace: ns, metricsAddr: "0", withoutKretry: !withKretry,
		above: func(rt http.RoundTripper) http.RoundTripper { caller.next = rt; return caller }})
	if err != nil {
		t.Fatal(err)
	}
	mgrCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mgrCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	if !mgr.GetCache().WaitForCacheSync(mgrCtx) {
		t.Fatal("the manager's cache did not sync")
	}

	w := cmwriter.Start(admin.CoreV1().ConfigMaps(ns), 11, 100*time.Millisecond)
	end := inject(proxy, faults)
	time.Sleep(d)
	note := end()
	w.Stop()
	writes, fails, _ := w.Stats()
	if fails > 0 {
		note += fmt.Sprintf("; %d writes failed", fails)
	}
	took, convErr := converge(ctx, admin, mgr.GetCache(), ns)
	if convErr != nil {
		t.Errorf("%s: %v", fault, convErr)
	}
	res := row{fault: fault, client: client, fetches: caller.fetches.Load(), wireFetches: wire.fetches.Load(), fetch200: wire.fetches200.Load(),
		wire: wire.requests.Load(), watches: wire.watches.Load(), reconciles: r.reconciles.Load(), writes: writes,
		converged: convErr == nil, converge: took, note: note}
	if withKretry {
		res.retries = retriesTotal() - retriesBefore
	}
	t.Logf("%s", res)
	return res
}

// converge waits up to a minute until the manager's cache equals a consistent LIST.
func converge(ctx context.Context, admin *kubernetes.Clientset, cache client.Reader, ns string) (time.Duration, error) {
	start := time.Now()
	var last string
	for time.Since(start) < time.Minute {
		list, err := admin.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return time.Since(start), err
		}
		want := map[string]string{}
		for _, cm := range list.Items {
			want[cm.Name] = cm.ResourceVersion
		}
		got, err := cacheState(ctx, cache, ns)
		if err != nil {
			return time.Since(start), err
		}
		if fmt.Sprint(got) == fmt.Sprint(want) {
			return time.Since(start), nil
		}
		last = fmt.Sprintf("cache %v\nserver %v", got, want)
		time.Sleep(200 * time.Millisecond)
	}
	return time.Since(start), errors.New("cache != server after a minute:\n" + last)
}

// injector is an HTTP fault injector standing where the kube-apiserver stands: TLS with the
// cluster's serving certificate (HTTP/2), every request forwarded to the API server, except
// ConfigMap LISTs and WATCHes while it is unavailable, which get 503 without Retry-After.
type injector struct {
	srv                  *httptest.Server
	unavailableUntil     atomic.Int64 // unix nanos
	lists503, watches503 atomic.Int64
}

func newInjector(t *testing.T, cluster *apiserver.Cluster) *injector {
	t.Helper()
	cert, err := cluster.ServingCertificate()
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(cluster.CAData())
	upstream := &url.URL{Scheme: "https", Host: cluster.Server(0).Addr()}
	f := &injector{}
	quiet := log.New(io.Discard, "", 0) // cut connections are the point here, not news
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(upstream)
			pr.Out.Host = upstream.Host
		},
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true},
		FlushInterval: -1,
		ErrorLog:      quiet,
	}
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/configmaps") && time.Now().UnixNano() < f.unavailableUntil.Load() {
			if r.URL.Query().Get("watch") == "true" {
				f.watches503.Add(1)
			} else {
				f.lists503.Add(1)
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the server is currently unable to handle the request (injected)","reason":"ServiceUnavailable","code":503}`)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	f.srv.EnableHTTP2 = true
	f.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	f.srv.Config.ErrorLog = quiet
	f.srv.StartTLS()
	t.Cleanup(f.srv.Close)
	return f
}

func (f *injector) addr() string { return strings.TrimPrefix(f.srv.URL, "https://") }

// unavailable answers ConfigMap LISTs and WATCHes 503 for d.
func (f *injector) unavailable(d time.Duration) {
	f.unavailableUntil.Store(time.Now().Add(d).UnixNano())
}

// counter counts ConfigMap requests: initial-state fetches (LISTs and watch-lists), those
// answered 200, and watches.
type counter struct {
	next                http.RoundTripper
	requests, watches   atomic.Int64
	fetches, fetches200 atomic.Int64
}

func (c *counter) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet || !strings.HasSuffix(req.URL.Path, "/configmaps") {
		return c.next.RoundTrip(req)
	}
	q := req.URL.Query()
	fetch := q.Get("watch") != "true" || q.Get("sendInitialEvents") == "true"
	c.requests.Add(1)
	if fetch {
		c.fetches.Add(1)
	} else {
		c.watches.Add(1)
	}
	resp, err := c.next.RoundTrip(req)
	if err == nil && fetch && resp.StatusCode == http.StatusOK {
		c.fetches200.Add(1)
	}
	return resp, err
}

// writeFigures writes the table to .apiserver/e2e-controller-runtime-figures.txt at the
// repository's root, for `make e2e` to print.
func writeFigures(table string) {
	dir := filepath.Join("..", "..", ".apiserver")
	if os.MkdirAll(dir, 0o755) == nil {
		_ = os.WriteFile(filepath.Join(dir, "e2e-controller-runtime-figures.txt"), []byte(table), 0o644)
	}
}
