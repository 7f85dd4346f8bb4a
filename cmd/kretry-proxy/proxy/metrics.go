package proxy

import (
	"bufio"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	kretrymetrics "github.com/kretry/kretry/metrics"
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

// metrics are what the proxy serves on /metrics, all on one Prometheus registry of its own:
// kretry's collectors (package github.com/kretry/kretry/metrics: kretry_requests_total,
// kretry_retries_total, kretry_watch_resumes_total, kretry_giveups_total,
// kretry_retry_wait_seconds, kretry_budget_refusals_total), told by the kretry transport
// through its Observer, and the proxy's own:
//
//	kretry_proxy_requests_total{class,code}           requests served to clients (code "0": aborted before a status was sent)
//	kretry_proxy_upstream_requests_total{class,code}  requests sent to the API server, kretry's retries and resumes included ("error": no response)
//	kretry_proxy_refused_total{reason}                requests refused without asking the API server
//	kretry_proxy_open_watches                         watches being served now
//
// class is list, watch, watch_list, get or other; reason is host, origin, upgrade, method or
// shutdown. The difference between what was sent upstream and what was served is kretry's
// work, which kretry's own collectors break down by verb and reason.
//
// The registry also holds client_golang's Go runtime collector (go_*: goroutines, memory, GC)
// and process collector (process_*: CPU, resident memory, open files, start time), as every
// Go program's /metrics does: the proxy's memory against its container's limit, and the
// process_start_time_seconds that KretryRelistsDespiteKretry reads.
type metrics struct {
	registry    *prometheus.Registry
	kretry      *kretrymetrics.Metrics // the transport.Observer for kretry's collectors
	served      *prometheus.CounterVec // class, code
	upstreamReq *prometheus.CounterVec // class, code or "error"
	refusals    *prometheus.CounterVec // reason
	openWatches prometheus.Gauge
}

func newMetrics() (*metrics, error) {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		served: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kretry_proxy_requests_total",
			Help: "Requests served to clients, by class and HTTP status code.",
		}, []string{"class", "code"}),
		upstreamReq: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kretry_proxy_upstream_requests_total",
			Help: `Requests sent to the API server, kretry's retries and watch resumes included, by class and status code ("error": no response).`,
		}, []string{"class", "code"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kretry_proxy_refused_total",
			Help: "Requests the proxy refused without asking the API server, by reason.",
		}, []string{"reason"}),
		openWatches: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kretry_proxy_open_watches",
			Help: "Watches being served now.",
		}),
	}
	// The reasons are a closed set: each is served from the start, at 0 until it happens.
	for _, reason := range []string{refusedHost, refusedOrigin, refusedUpgrade, refusedMethod, refusedShutdown} {
		m.refusals.WithLabelValues(reason)
	}
	runtimeCollectors := []prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})}
	for _, c := range append(runtimeCollectors, m.served, m.upstreamReq, m.refusals, m.openWatches) {
		if err := m.registry.Register(c); err != nil {
			return nil, err
		}
	}
	var err error
	if m.kretry, err = kretrymetrics.New(m.registry); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *metrics) servedOne(class requestClass, code int) {
	m.served.WithLabelValues(string(class), strconv.Itoa(code)).Inc()
}

func (m *metrics) refused(reason string) {
	m.refusals.WithLabelValues(reason).Inc()
}

// upstream is a transport wrapper counting every request below kretry, by class and outcome.
func (m *metrics) upstream(next http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := next.RoundTrip(r)
		outcome := "error"
		if err == nil {
			outcome = strconv.Itoa(resp.StatusCode)
		}
		m.upstreamReq.WithLabelValues(string(classify(r)), outcome).Inc()
		return resp, err
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// handler serves the registry in the Prometheus exposition formats.
func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
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
