package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kretry/kretry/transport"
)

// testTimeout bounds every wait for something that must happen; a correct proxy never comes
// near it.
const testTimeout = 10 * time.Second

// upstream is a fake API server: it records every request and answers with handle.
type upstream struct {
	*httptest.Server
	mu       sync.Mutex
	requests []*http.Request
}

func newUpstream(t *testing.T, handle http.HandlerFunc) *upstream {
	t.Helper()
	return newCountingUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) { handle(w, r) })
}

// newCountingUpstream is newUpstream whose handler is also told which request this is,
// counting from 1.
func newCountingUpstream(t *testing.T, handle func(call int, w http.ResponseWriter, r *http.Request)) *upstream {
	t.Helper()
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.requests = append(u.requests, r.Clone(context.Background()))
		call := len(u.requests)
		u.mu.Unlock()
		handle(call, w, r)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) seen() []*http.Request {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]*http.Request(nil), u.requests...)
}

// startProxy serves a Server for up on a free loopback port; it is shut down with the test.
func startProxy(t *testing.T, up *upstream, opts Options) (base string, srv *Server) {
	t.Helper()
	return startProxyFor(t, &rest.Config{Host: up.URL, BearerToken: "proxy-token"}, opts)
}

// startProxyFor is startProxy with a rest.Config of the test's.
func startProxyFor(t *testing.T, cfg *rest.Config, opts Options) (base string, srv *Server) {
	t.Helper()
	srv, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String(), srv
}

func writeList(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"5"},"items":[]}`)
}

// event is one JSON watch frame of a ConfigMap at rv.
func event(rv int) string {
	return fmt.Sprintf(`{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm-%d","namespace":"ns","resourceVersion":"%d"}}}`+"\n", rv, rv)
}

func startWatch(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
}

// watchPath is a resumable watch: it starts at a specific resourceVersion.
const watchPath = "/api/v1/namespaces/ns/configmaps?watch=true&resourceVersion=5"

func get(t *testing.T, ctx context.Context, url string, header http.Header) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// readEvent reads one watch frame (a line) or fails the test after testTimeout.
func readEvent(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	type result struct {
		line string
		err  error
	}
	got := make(chan result, 1)
	go func() {
		line, err := r.ReadString('\n')
		got <- result{line, err}
	}()
	select {
	case res := <-got:
		if res.err != nil {
			t.Fatalf("reading an event: %v (after %q)", res.err, res.line)
		}
		return res.line
	case <-time.After(testTimeout):
		t.Fatalf("no event within %v: the proxy holds it back", testTimeout)
		return ""
	}
}

// TestFlushPerFrame: the client reads event 1 before the server writes event 2.
func TestFlushPerFrame(t *testing.T) {
	clientHasFirst := make(chan struct{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		startWatch(w)
		io.WriteString(w, event(6))
		w.(http.Flusher).Flush()
		select {
		case <-clientHasFirst:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, event(7))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	base, _ := startProxy(t, up, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp := get(t, ctx, base+watchPath, nil)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if te := resp.TransferEncoding; len(te) != 1 || te[0] != "chunked" {
		t.Errorf("Transfer-Encoding %v, want chunked", te)
	}
	body := bufio.NewReader(resp.Body)
	if got := readEvent(t, body); got != event(6) {
		t.Fatalf("first event %q", got)
	}
	close(clientHasFirst)
	if got := readEvent(t, body); got != event(7) {
		t.Fatalf("second event %q", got)
	}
}

// TestWatchResumedUnderneath: the connection breaks in the middle of the second event; kretry
// reopens the watch at the first event's resourceVersion and the client's one response goes
// on, with the torn event whole.
func TestWatchResumedUnderneath(t *testing.T) {
	up := newCountingUpstream(t, func(call int, w http.ResponseWriter, r *http.Request) {
		startWatch(w)
		if call == 1 {
			io.WriteString(w, event(6)+event(7)[:20])
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler) // the connection breaks mid-event
		}
		io.WriteString(w, event(7))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	base, _ := startProxy(t, up, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp := get(t, ctx, base+watchPath, nil)
	defer resp.Body.Close()
	body := bufio.NewReader(resp.Body)
	for _, want := range []string{event(6), event(7)} {
		if got := readEvent(t, body); got != want {
			t.Fatalf("event %q, want %q", got, want)
		}
	}
	seen := up.seen()
	if len(seen) != 2 || seen[1].URL.Query().Get("resourceVersion") != "6" {
		t.Fatalf("upstream saw %d requests, the second at resourceVersion %q; want a resume at 6", len(seen), seen[len(seen)-1].URL.Query().Get("resourceVersion"))
	}
}

// TestDisconnectCancelsUpstream: a client that goes away ends the upstream request at once,
// and kretry does not take the end for a break to resume.
func TestDisconnectCancelsUpstream(t *testing.T) {
	upstreamDone := make(chan struct{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		startWatch(w)
		io.WriteString(w, event(6))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(upstreamDone)
	})
	base, srv := startProxy(t, up, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	resp := get(t, ctx, base+watchPath, nil)
	readEvent(t, bufio.NewReader(resp.Body))
	cancel() // the client goes away: its connection closes
	resp.Body.Close()
	select {
	case <-upstreamDone:
	case <-time.After(testTimeout):
		t.Fatalf("the upstream watch was not cancelled within %v of the client's disconnect", testTimeout)
	}
	shutdown, cancelShutdown := context.WithTimeout(context.Background(), testTimeout)
	defer cancelShutdown()
	if err := srv.Shutdown(shutdown); err != nil { // waits for the proxy's handler
		t.Fatal(err)
	}
	if n := len(up.seen()); n != 1 {
		t.Errorf("upstream saw %d watch requests, want 1 (no resume after the client left)", n)
	}
}

// TestShutdown: open watches end cleanly (the client reads a clean end after the last whole
// event), a LIST in flight is allowed to finish, new connections are refused and /healthz
// says so while it lasts.
func TestShutdown(t *testing.T) {
	listStarted, releaseList := make(chan struct{}), make(chan struct{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") == "" {
			close(listStarted)
			<-releaseList
			writeList(w)
			return
		}
		startWatch(w)
		io.WriteString(w, event(6))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	base, srv := startProxy(t, up, Options{})

	watch := get(t, context.Background(), base+watchPath, nil)
	defer watch.Body.Close()
	watchBody := bufio.NewReader(watch.Body)
	readEvent(t, watchBody)

	listDone := make(chan error, 1)
	go func() {
		resp, err := http.Get(base + "/api/v1/namespaces/ns/configmaps")
		if err == nil {
			var list struct{ Kind string }
			err = json.NewDecoder(resp.Body).Decode(&list)
			resp.Body.Close()
			if err == nil && list.Kind != "ConfigMapList" {
				err = fmt.Errorf("LIST answered %s %q", resp.Status, list.Kind)
			}
		}
		listDone <- err
	}()
	<-listStarted

	shutdownDone := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		shutdownDone <- srv.Shutdown(ctx)
	}()

	rest, err := io.ReadAll(watchBody)
	if err != nil {
		t.Fatalf("the watch ended with %v, want a clean end", err)
	}
	if len(rest) != 0 {
		t.Errorf("after the last event the watch sent %q", rest)
	}
	select {
	case err := <-shutdownDone:
		t.Fatalf("Shutdown returned (%v) with a LIST in flight", err)
	default:
	}
	close(releaseList)
	if err := <-listDone; err != nil {
		t.Errorf("the LIST in flight: %v", err)
	}
	if err := <-shutdownDone; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Errorf("a request after Shutdown was served")
	}
}

// TestOwnHealthzAndMetricsExactly: the proxy answers /healthz and /metrics itself, spelt
// exactly so; every other path goes to the API server, /healthz/etcd, /metrics/ and /Metrics
// among them, and /livez and /readyz.
func TestOwnHealthzAndMetricsExactly(t *testing.T) {
	up := okUpstream(t)
	for _, target := range []string{"/healthz", "/metrics"} {
		if rec, reached := ask(t, up, rest.Config{}, Options{}, httptest.NewRequest(http.MethodGet, target, nil)); reached != nil || rec.Code != http.StatusOK {
			t.Errorf("GET %s: answered %d, reached the API server: %v; want the proxy's own", target, rec.Code, reached != nil)
		}
	}
	reachable(t, up, http.MethodGet, []string{"/healthz/", "/healthz/etcd", "/metrics/", "/Metrics", "/livez", "/readyz"})
}

// TestHealthzWhileShuttingDown: /healthz answers 503 once Shutdown began, and a watch that
// arrives then is refused instead of started.
func TestHealthzWhileShuttingDown(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { t.Errorf("upstream asked: %s", r.URL) })
	srv, err := New(&rest.Config{Host: up.URL}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	handler := srv.Handler()
	check := func(path string, want int) {
		t.Helper()
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://127.0.0.1:8001"+path, nil))
		if rec.Code != want {
			t.Errorf("GET %s: %d, want %d: %s", path, rec.Code, want, rec.Body)
		}
	}
	check("/healthz", http.StatusOK)
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	check("/healthz", http.StatusServiceUnavailable)
	check(watchPath, http.StatusServiceUnavailable)
}

// TestChecks: what is refused before the API server is asked, and what passes.
func TestChecks(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			writeList(w)
			return
		}
		w.WriteHeader(http.StatusCreated)
	})
	exec := "/api/v1/namespaces/ns/pods/p/exec?command=sh"
	tests := []struct {
		name   string
		opts   Options
		method string
		target string // URL path and query
		host   string
		header map[string]string
		want   int // 0: reaches the API server
	}{
		{name: "loopback name", host: "localhost:8001"},
		{name: "loopback IPv4", host: "127.0.0.1:8001"},
		{name: "loopback IPv6 with port", host: "[::1]:8001"},
		{name: "loopback IPv6 without port", host: "[::1]"},
		{name: "no port", host: "localhost"},
		{name: "rebinding name", host: "evil.example:8001", want: http.StatusForbidden},
		{name: "rebinding name on healthz", host: "evil.example", target: "/healthz", want: http.StatusForbidden},
		{name: "rebinding name on metrics", host: "evil.example", target: "/metrics", want: http.StatusForbidden},
		{name: "other loopback IP", host: "127.0.0.2:8001", want: http.StatusForbidden},
		{name: "suffix of a loopback name", host: "localhost.evil.example", want: http.StatusForbidden},
		{name: "loopback origin", header: map[string]string{"Origin": "http://localhost:3000"}},
		{name: "foreign origin", header: map[string]string{"Origin": "https://evil.example"}, want: http.StatusForbidden},
		{name: "null origin", header: map[string]string{"Origin": "null"}, want: http.StatusForbidden},
		{name: "exec", target: exec, want: http.StatusForbidden},
		{name: "exec POST", method: http.MethodPost, target: exec, want: http.StatusForbidden},
		{name: "attach", target: "/api/v1/namespaces/ns/pods/p/attach", want: http.StatusForbidden},
		{name: "portforward", target: "/api/v1/namespaces/ns/pods/p/portforward", want: http.StatusForbidden},
		{name: "pod log", target: "/api/v1/namespaces/ns/pods/p/log"},
		{name: "namespace named pods", target: "/api/v1/namespaces/pods/configmaps"},
		{name: "upgrade header", header: map[string]string{"Upgrade": "websocket", "Connection": "Upgrade"}, want: http.StatusForbidden},
		{name: "connection upgrade token", header: map[string]string{"Connection": "keep-alive, Upgrade"}, want: http.StatusForbidden},
		{name: "exec allowed", opts: Options{AllowUpgrades: true}, target: exec},
		{name: "POST", method: http.MethodPost},
		{name: "DELETE", method: http.MethodDelete},
		{name: "read-only GET", opts: Options{ReadOnly: true}},
		{name: "read-only POST", opts: Options{ReadOnly: true}, method: http.MethodPost, want: http.StatusMethodNotAllowed},
		{name: "read-only PATCH", opts: Options{ReadOnly: true}, method: http.MethodPatch, want: http.StatusMethodNotAllowed},
		{name: "read-only HEAD", opts: Options{ReadOnly: true}, method: http.MethodHead, want: http.StatusMethodNotAllowed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, err := New(&rest.Config{Host: up.URL}, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			method, target, host := tc.method, tc.target, tc.host
			if method == "" {
				method = http.MethodGet
			}
			if target == "" {
				target = "/api/v1/namespaces/ns/configmaps"
			}
			if host == "" {
				host = "127.0.0.1:8001"
			}
			req := httptest.NewRequest(method, target, nil)
			req.Host = host
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			before := len(up.seen())
			rec := httptest.NewRecorder()
			srv.Handler().ServeHTTP(rec, req)
			reached := len(up.seen()) > before
			switch {
			case tc.want == 0 && !reached:
				t.Fatalf("refused with %d: %s", rec.Code, rec.Body)
			case tc.want != 0 && reached:
				t.Fatalf("reached the API server (answer %d), want %d", rec.Code, tc.want)
			case tc.want != 0 && rec.Code != tc.want:
				t.Fatalf("answered %d, want %d: %s", rec.Code, tc.want, rec.Body)
			case tc.want != 0 && !strings.HasSuffix(tc.target, "healthz"):
				var status struct {
					Kind    string
					Code    int
					Message string
				}
				if err := json.Unmarshal(rec.Body.Bytes(), &status); err != nil || status.Kind != "Status" || status.Code != tc.want || status.Message == "" {
					t.Errorf("refusal body %q is not a Status with code %d and a message", rec.Body, tc.want)
				}
			}
		})
	}
}

// TestCredentials: every request carries the proxy's credentials, never the client's.
func TestCredentials(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { writeList(w) })
	base, _ := startProxy(t, up, Options{})
	resp := get(t, context.Background(), base+"/api/v1/namespaces/ns/configmaps", http.Header{"Authorization": {"Bearer client-token"}})
	resp.Body.Close()
	seen := up.seen()
	if len(seen) != 1 || seen[0].Header.Get("Authorization") != "Bearer proxy-token" {
		t.Fatalf("upstream saw Authorization %q, want the proxy's", seen[len(seen)-1].Header.Get("Authorization"))
	}
}

// TestWritesPassedThroughOnce: a POST answered 503 reaches the client as it was, after one
// attempt: writes are never retried.
func TestWritesPassedThroughOnce(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"ServiceUnavailable","code":503}`)
	})
	base, _ := startProxy(t, up, Options{})
	resp, err := http.Post(base+"/api/v1/namespaces/ns/configmaps", "application/json", strings.NewReader(`{"metadata":{"name":"x"}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("status %d, want 503", resp.StatusCode)
	}
	if seen := up.seen(); len(seen) != 1 || seen[0].Method != http.MethodPost {
		t.Errorf("upstream saw %d requests, want the one POST", len(seen))
	}
}

// scrape returns what base's /metrics serves, in the Prometheus text format (labels sorted by
// name, as client_golang writes them).
func scrape(t *testing.T, base string) string {
	t.Helper()
	resp := get(t, context.Background(), base+"/metrics", nil)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("/metrics answered %s, Content-Type %q:\n%s", resp.Status, resp.Header.Get("Content-Type"), body)
	}
	return string(body)
}

// hasLines fails t for each of lines not found, newline-terminated, in the /metrics body.
func hasLines(t *testing.T, body string, lines ...string) {
	t.Helper()
	for _, line := range lines {
		if !strings.Contains(body, line+"\n") {
			t.Errorf("/metrics lacks %q:\n%s", line, body)
		}
	}
}

// TestMetrics: served, upstream and refused requests are counted by class and code.
func TestMetrics(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { writeList(w) })
	base, _ := startProxy(t, up, Options{ReadOnly: true})
	for _, target := range []string{"/api/v1/namespaces/ns/configmaps", "/api/v1/namespaces/ns/configmaps", "/version"} {
		resp := get(t, context.Background(), base+target, nil)
		resp.Body.Close()
	}
	resp, err := http.Post(base+"/api/v1/namespaces/ns/configmaps", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	body := scrape(t, base)
	hasLines(t, body,
		`kretry_proxy_requests_total{class="list",code="200"} 2`,
		`kretry_proxy_requests_total{class="get",code="200"} 1`,
		`kretry_proxy_upstream_requests_total{class="list",code="200"} 2`,
		`kretry_proxy_refused_total{reason="method"} 1`,
		`kretry_proxy_refused_total{reason="host"} 0`,
		`kretry_proxy_open_watches 0`,
		`# TYPE kretry_proxy_requests_total counter`,
		`# TYPE kretry_proxy_open_watches gauge`,
		`kretry_requests_total{outcome="2xx",verb="list"} 2`,
	)
}

// TestRuntimeMetrics: /metrics serves the Go runtime's and the process's series (the process
// collector reads /proc: Linux only), and promtool, when installed, finds the exposition clean.
func TestRuntimeMetrics(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { writeList(w) })
	base, _ := startProxy(t, up, Options{})
	body := scrape(t, base)
	for _, family := range []string{"go_goroutines", "go_memstats_heap_inuse_bytes", "go_gc_duration_seconds", "go_info"} {
		if !strings.Contains(body, "\n# TYPE "+family+" ") {
			t.Errorf("/metrics has no %s", family)
		}
	}
	if runtime.GOOS == "linux" {
		for _, family := range []string{"process_start_time_seconds", "process_resident_memory_bytes", "process_cpu_seconds_total", "process_open_fds"} {
			if !strings.Contains(body, "\n# TYPE "+family+" ") {
				t.Errorf("/metrics has no %s", family)
			}
		}
		// The start time is this process's: within the test binary's life, in seconds.
		var started float64
		for _, line := range strings.Split(body, "\n") {
			if v, ok := strings.CutPrefix(line, "process_start_time_seconds "); ok {
				started, _ = strconv.ParseFloat(v, 64)
			}
		}
		if now := float64(time.Now().UnixNano()) / 1e9; started <= 0 || started > now || now-started > 3600 {
			t.Errorf("process_start_time_seconds %g, now %g", started, now)
		}
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Logf("no promtool: the exposition is not linted (%v)", err)
		return
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

// TestMetricsOfARetriedList: a LIST answered 503 once and then 200 reaches the client as the
// 200, and /metrics shows kretry's retry (kretry's collectors, told through the transport's
// Observer) next to the proxy's own counters: one request served, two sent upstream.
func TestMetricsOfARetriedList(t *testing.T) {
	up := newCountingUpstream(t, func(call int, w http.ResponseWriter, r *http.Request) {
		if call == 1 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"ServiceUnavailable","code":503}`)
			return
		}
		writeList(w)
	})
	// A short backoff, so that the retry comes at once.
	base, _ := startProxy(t, up, Options{Transport: transport.Config{InitialBackoff: time.Millisecond}})
	resp := get(t, context.Background(), base+"/api/v1/namespaces/ns/configmaps", nil)
	var list struct{ Kind string }
	err := json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || list.Kind != "ConfigMapList" {
		t.Fatalf("LIST answered %s, %q (%v); want the 200 after the retry", resp.Status, list.Kind, err)
	}
	if n := len(up.seen()); n != 2 {
		t.Fatalf("upstream saw %d requests, want 2 (the 503 and the retry)", n)
	}
	body := scrape(t, base)
	hasLines(t, body,
		`kretry_retries_total{reason="5xx",verb="list"} 1`,
		`kretry_requests_total{outcome="5xx",verb="list"} 1`,
		`kretry_requests_total{outcome="2xx",verb="list"} 1`,
		`kretry_retry_wait_seconds_count{verb="list"} 1`,
		`kretry_proxy_requests_total{class="list",code="200"} 1`,
		`kretry_proxy_upstream_requests_total{class="list",code="503"} 1`,
		`kretry_proxy_upstream_requests_total{class="list",code="200"} 1`,
		`kretry_proxy_refused_total{reason="host"} 0`,
		`kretry_proxy_open_watches 0`,
	)
	// kretry's counters are served from the start at 0: none of these may have moved.
	for _, line := range strings.Split(body, "\n") {
		for _, unwanted := range []string{`kretry_giveups_total{`, `kretry_budget_refusals_total{`, `kretry_watch_resumes_total{`} {
			if strings.HasPrefix(line, unwanted) && !strings.HasSuffix(line, "} 0") {
				t.Errorf("/metrics has %s, want 0 after a retry that succeeded", line)
			}
		}
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		method, target string
		want           requestClass
	}{
		{"GET", "/api/v1/namespaces/ns/configmaps", classList},
		{"GET", "/api/v1/configmaps", classList},
		{"GET", "/apis/apps/v1/namespaces/ns/deployments", classList},
		{"GET", "/api/v1/namespaces", classList},
		{"GET", "/api/v1/namespaces/ns", classGet},
		{"GET", "/api/v1/namespaces/ns/status", classGet},
		{"GET", "/api/v1/namespaces/ns/configmaps/cm", classGet},
		{"GET", "/api/v1", classGet},
		{"GET", "/version", classGet},
		{"GET", "/api/v1/namespaces/ns/configmaps?watch=true", classWatch},
		{"GET", "/api/v1/namespaces/ns/configmaps?watch=1&resourceVersion=4", classWatch},
		{"GET", "/api/v1/namespaces/ns/configmaps?watch=false", classList},
		{"GET", "/api/v1/namespaces/ns/configmaps?watch=0", classList},
		{"GET", "/api/v1/watch/namespaces/ns/configmaps", classWatch},
		{"GET", "/api/v1/namespaces/ns/configmaps?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan", classWatchList},
		{"GET", "/api/v1/namespaces/ns/configmaps?watch=true&sendInitialEvents=false", classWatch},
		{"POST", "/api/v1/namespaces/ns/configmaps", classOther},
		{"DELETE", "/api/v1/namespaces/ns/configmaps/cm", classOther},
	}
	for _, tc := range tests {
		if got := classify(httptest.NewRequest(tc.method, tc.target, nil)); got != tc.want {
			t.Errorf("%s %s: %s, want %s", tc.method, tc.target, got, tc.want)
		}
	}
}

func TestHostOf(t *testing.T) {
	for in, want := range map[string]string{
		"localhost:8001": "localhost", "localhost": "localhost", "127.0.0.1:80": "127.0.0.1",
		"[::1]:8001": "::1", "[::1]": "::1", "": "", "[::1": "[::1", "::1]": "::1]", "[": "[",
	} {
		if got := hostOf(in); got != want {
			t.Errorf("hostOf(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestStatusRecorder: the recorder keeps the first code and reports 0 for nothing written.
func TestStatusRecorder(t *testing.T) {
	rec := &statusRecorder{ResponseWriter: httptest.NewRecorder()}
	if rec.status() != 0 {
		t.Fatal("status before any write")
	}
	rec.WriteHeader(http.StatusNotFound)
	rec.WriteHeader(http.StatusOK)
	if rec.status() != http.StatusNotFound {
		t.Errorf("status %d, want the first, 404", rec.status())
	}
	if !errors.Is(http.NewResponseController(rec).Flush(), nil) {
		t.Errorf("Flush through ResponseController failed")
	}
}
