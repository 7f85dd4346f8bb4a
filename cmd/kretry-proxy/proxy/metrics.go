package proxy

import (
	"bufio"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// requestClass is what a request is, for the counters: the kinds kretry tells apart, with
// watch-lists (the streaming initial list informers start with) apart from other watches.
type requestClass string

const (
	classList      requestClass = "list"       // GET on a collection
	classWatch     requestClass = "watch"      // watch=true (or /watch/) without sendInitialEvents
	classWatchList requestClass = "watch_list" // watch with sendInitialEvents=true
	classGet       requestClass = "get"        // any other GET: one object, discovery, /version
	classOther     requestClass = "other"      // any other method
)

func (c requestClass) isWatch() bool { return c == classWatch || c == classWatchList }

// classify tells a request's class from its method, path and query, reading the query as
// kube-apiserver does. It only labels counters: what kretry retries is kretry's to decide.
func classify(r *http.Request) requestClass {
	if r.Method != http.MethodGet {
		return classOther
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return classGet
	}
	query := r.URL.Query()
	watch := boolParam(query, "watch")
	if len(parts) > 0 && parts[0] == "watch" {
		watch, parts = true, parts[1:]
	}
	if len(parts) > 2 && parts[0] == "namespaces" && parts[2] != "status" && parts[2] != "finalize" {
		parts = parts[2:]
	}
	switch {
	case watch && len(parts) > 0:
		if boolParam(query, "sendInitialEvents") {
			return classWatchList
		}
		return classWatch
	case len(parts) == 1:
		return classList
	}
	return classGet
}

// boolParam reads a boolean query parameter as kube-apiserver does: absent, "0", "f" and
// "false" (any case) are false, any other value is true.
func boolParam(query url.Values, name string) bool {
	values, ok := query[name]
	if !ok || len(values) == 0 {
		return false
	}
	switch v := values[0]; {
	case v == "0", strings.EqualFold(v, "f"), strings.EqualFold(v, "false"):
		return false
	}
	return true
}

// metrics are the proxy's counters, served in the Prometheus text format. They are the
// proxy's own until kretry's metrics package lands; kretry's retries show as the difference
// between what was sent upstream and what was served.
type metrics struct {
	mu             sync.Mutex
	servedCounts   map[[2]string]uint64 // class, code
	upstreamCounts map[[2]string]uint64 // class, code or "error"
	refusals       map[string]uint64
	openWatches    atomic.Int64
}

func newMetrics() *metrics {
	return &metrics{servedCounts: map[[2]string]uint64{}, upstreamCounts: map[[2]string]uint64{}, refusals: map[string]uint64{}}
}

func (m *metrics) served(class requestClass, code int) {
	m.mu.Lock()
	m.servedCounts[[2]string{string(class), strconv.Itoa(code)}]++
	m.mu.Unlock()
}

func (m *metrics) refused(reason string) {
	m.mu.Lock()
	m.refusals[reason]++
	m.mu.Unlock()
}

// upstream is a transport wrapper counting every request below kretry, by class and outcome.
func (m *metrics) upstream(next http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := next.RoundTrip(r)
		outcome := "error"
		if err == nil {
			outcome = strconv.Itoa(resp.StatusCode)
		}
		m.mu.Lock()
		m.upstreamCounts[[2]string{string(classify(r)), outcome}]++
		m.mu.Unlock()
		return resp, err
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// ServeHTTP writes the counters in the Prometheus text exposition format, sorted.
func (m *metrics) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	m.mu.Lock()
	served, upstream, refusals := maps.Clone(m.servedCounts), maps.Clone(m.upstreamCounts), maps.Clone(m.refusals)
	m.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	out := bufio.NewWriter(w)
	defer out.Flush()
	writeFamily(out, "kretry_proxy_requests_total", "counter",
		"Requests served to clients, by class and HTTP status code.", served,
		func(k [2]string) string { return fmt.Sprintf(`class=%q,code=%q`, k[0], k[1]) })
	writeFamily(out, "kretry_proxy_upstream_requests_total", "counter",
		`Requests sent to the API server, kretry's retries and watch resumes included, by class and status code ("error": no response).`, upstream,
		func(k [2]string) string { return fmt.Sprintf(`class=%q,code=%q`, k[0], k[1]) })
	writeFamily(out, "kretry_proxy_refused_total", "counter",
		"Requests the proxy refused without asking the API server, by reason.", refusals,
		func(reason string) string { return fmt.Sprintf(`reason=%q`, reason) })
	fmt.Fprintf(out, "# HELP kretry_proxy_open_watches Watches being served now.\n# TYPE kretry_proxy_open_watches gauge\nkretry_proxy_open_watches %d\n", m.openWatches.Load())
}

func writeFamily[K comparable](out *bufio.Writer, name, kind, help string, counts map[K]uint64, labels func(K) string) {
	fmt.Fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, kind)
	lines := make([]string, 0, len(counts))
	for k, v := range counts {
		lines = append(lines, fmt.Sprintf("%s{%s} %d\n", name, labels(k), v))
	}
	slices.Sort(lines)
	for _, line := range lines {
		out.WriteString(line)
	}
}

// statusRecorder remembers the status code of a response. It keeps the ResponseWriter's
// flushing and hijacking reachable: httputil.ReverseProxy flushes through
// http.ResponseController (Unwrap), apimachinery's upgrade handler asserts http.Hijacker.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.code == 0 && code >= 200 {
		r.code = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(p []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return r.ResponseWriter.Write(p)
}

// Flush sends what was written so far to the client.
func (r *statusRecorder) Flush() {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	_ = http.NewResponseController(r.ResponseWriter).Flush()
}

// Hijack hands the connection over, for an allowed protocol upgrade.
func (r *statusRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	r.code = http.StatusSwitchingProtocols
	return http.NewResponseController(r.ResponseWriter).Hijack()
}

// Unwrap is for http.ResponseController.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// status is the code sent, 0 when the handler wrote nothing (an aborted response).
func (r *statusRecorder) status() int { return r.code }
