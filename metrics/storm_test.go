package metrics_test

import (
	"context"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kretry/kretry/internal/harness/fakeclock"
	"github.com/kretry/kretry/metrics"
	"github.com/kretry/kretry/transport"
)

// script answers the n-th request it is sent with the n-th answer.
type script struct {
	mu      sync.Mutex
	answers []func() (*http.Response, error)
}

func (s *script) RoundTrip(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	if len(s.answers) == 0 {
		s.mu.Unlock()
		return nil, io.ErrUnexpectedEOF
	}
	next := s.answers[0]
	s.answers = s.answers[1:]
	s.mu.Unlock()
	resp, err := next()
	if resp != nil {
		resp.Request = req
	}
	return resp, err
}

func answer(code int, body string, kv ...string) func() (*http.Response, error) {
	return func() (*http.Response, error) {
		header := http.Header{"Content-Type": {"application/json"}}
		for i := 0; i < len(kv); i += 2 {
			header.Set(kv[i], kv[i+1])
		}
		return &http.Response{StatusCode: code, Header: header, Body: io.NopCloser(strings.NewReader(body)), ContentLength: -1}, nil
	}
}

var (
	listOK = answer(200, `{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"5"},"items":[]}`)
	status = func(code int) string {
		return `{"kind":"Status","apiVersion":"v1","status":"Failure","code":` + strconv.Itoa(code) + `}`
	}
	s503  = answer(503, status(503))
	s410  = answer(410, status(410))
	s429  = answer(429, status(429), "Retry-After", "1")
	reset = func() (*http.Response, error) {
		return nil, &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	}
	oneEvent = answer(200, `{"type":"ADDED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","resourceVersion":"6"}}}`+"\n")
	error500 = answer(200, `{"type":"ERROR","object":`+status(500)+`}`+"\n")
)

// get sends a GET for url through rt and reads its body whole.
func get(t *testing.T, rt http.RoundTripper, url string) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
}

// TestStormCounters drives a scripted storm through two transports that
// share one Metrics and checks every counter's exact value, and what
// client-go's retry metric was told.
func TestStormCounters(t *testing.T) {
	registry := prometheus.NewRegistry()
	m, err := metrics.New(registry)
	if err != nil {
		t.Fatal(err)
	}
	clientGo := &retryRecorder{}
	observer := transport.JoinObservers(m, metrics.ClientGoRetriesTo(clientGo))
	epoch := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	newTransport := func(next http.RoundTripper, budget transport.RetryBudget) http.RoundTripper {
		return transport.New(next, transport.Config{
			Clock: fakeclock.New(epoch), Rand: func() float64 { return 0 },
			InternalErrorWindow: 2 * time.Second, RetryBudget: budget, Observer: observer,
		})
	}
	storm := &script{answers: []func() (*http.Response, error){
		s503, reset, s429, listOK, // a LIST through 503, reset and 429
		s503, s503, s503, // a LIST past its 2s window
		oneEvent, s503, error500, s410, // a watch: broken, reopening answered 503, ERROR 500, then 410
		oneEvent, s503, s503, // a watch of timeoutSeconds=2: broken, 503s until its deadline
	}}
	defaultBudget := newTransport(storm, transport.RetryBudget{})
	tiny := &script{answers: []func() (*http.Response, error){s503, s503}}
	tinyBudget := newTransport(tiny, transport.RetryBudget{Ratio: 0.001, MinPerSecond: 0.1, Window: 10 * time.Second}) // 1 retry

	send := func(rt http.RoundTripper, url string) { t.Helper(); get(t, rt, url) }
	const pods = "http://k8s.test/api/v1/namespaces/ns/pods"
	send(defaultBudget, pods)
	send(defaultBudget, pods)
	send(defaultBudget, pods+"?watch=true&resourceVersion=5")
	send(defaultBudget, pods+"?watch=true&resourceVersion=5&timeoutSeconds=2")
	send(tinyBudget, pods)
	if len(storm.answers)+len(tiny.answers) != 0 {
		t.Fatalf("%d answers left unused", len(storm.answers)+len(tiny.answers))
	}

	want := `
# HELP kretry_budget_refusals_total Retries the retry budget refused (the failure went to the caller at once), by verb.
# TYPE kretry_budget_refusals_total counter
kretry_budget_refusals_total{verb="list"} 1
# HELP kretry_giveups_total Failures kretry stopped retrying and handed to the caller (or ended a watch cleanly on), by verb and reason.
# TYPE kretry_giveups_total counter
kretry_giveups_total{reason="5xx",verb="list"} 2
kretry_giveups_total{reason="deadline",verb="watch"} 1
# HELP kretry_requests_total Requests kretry sent to the API server (first attempts, retries and watch resumes), by verb and answer class.
# TYPE kretry_requests_total counter
kretry_requests_total{outcome="2xx",verb="list"} 1
kretry_requests_total{outcome="429",verb="list"} 1
kretry_requests_total{outcome="5xx",verb="list"} 6
kretry_requests_total{outcome="connection",verb="list"} 1
kretry_requests_total{outcome="2xx",verb="watch"} 3
kretry_requests_total{outcome="4xx",verb="watch"} 1
kretry_requests_total{outcome="5xx",verb="watch"} 3
# HELP kretry_retries_total Retries and watch resumes kretry made, by verb and reason.
# TYPE kretry_retries_total counter
kretry_retries_total{reason="429",verb="list"} 1
kretry_retries_total{reason="5xx",verb="list"} 4
kretry_retries_total{reason="connection",verb="list"} 1
kretry_retries_total{reason="5xx",verb="watch"} 2
kretry_retries_total{reason="broken-body",verb="watch"} 2
kretry_retries_total{reason="error-event",verb="watch"} 1
# HELP kretry_watch_resumes_total Reopenings of an established watch stream at its last resourceVersion, by reason.
# TYPE kretry_watch_resumes_total counter
kretry_watch_resumes_total{reason="5xx"} 2
kretry_watch_resumes_total{reason="broken-body"} 2
kretry_watch_resumes_total{reason="error-event"} 1
`
	if err := testutil.GatherAndCompare(nonZero(registry), strings.NewReader(want),
		"kretry_budget_refusals_total", "kretry_giveups_total", "kretry_requests_total",
		"kretry_retries_total", "kretry_watch_resumes_total"); err != nil {
		t.Error(err)
	}

	// The waits: list 0.8, 0.8 (the reset, no answer: the 1.6s step drawn
	// from [step/2, 5·step/2), its lowest) and 1 (the 429's Retry-After),
	// 0.8 and 1.2, and 0.8 on the tiny budget; watch 0, 0.8 and 1.2, then 0
	// and 0.8.
	wantWaits := map[string]struct {
		count   uint64
		sum     float64
		buckets map[float64]uint64 // cumulative, by upper bound
	}{
		"list":  {6, 5.4, map[float64]uint64{0: 0, 0.5: 0, 1: 5, 2: 6, 60: 6}},
		"watch": {5, 2.8, map[float64]uint64{0: 2, 0.5: 2, 1: 4, 2: 5, 60: 5}},
	}
	families, err := registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, family := range families {
		if family.GetName() != "kretry_retry_wait_seconds" {
			continue
		}
		for _, sample := range family.GetMetric() {
			verb := sample.GetLabel()[0].GetValue()
			h, want := sample.GetHistogram(), wantWaits[verb]
			seen++
			if h.GetSampleCount() != want.count || math.Abs(h.GetSampleSum()-want.sum) > 1e-9 {
				t.Errorf("%s waits: %d summing to %gs, want %d summing to %gs", verb, h.GetSampleCount(), h.GetSampleSum(), want.count, want.sum)
			}
			for _, bucket := range h.GetBucket() {
				if n, ok := want.buckets[bucket.GetUpperBound()]; ok && bucket.GetCumulativeCount() != n {
					t.Errorf("%s waits <= %gs: %d, want %d", verb, bucket.GetUpperBound(), bucket.GetCumulativeCount(), n)
				}
			}
		}
	}
	if seen != 2 {
		t.Errorf("%d wait histograms, want 2 (list, watch)", seen)
	}

	// client-go's rest_client_request_retries_total, through the adapter:
	// one per retry and resume, in order.
	wantCalls := []string{
		"503 GET k8s.test", "<error> GET k8s.test", "429 GET k8s.test", // the first LIST
		"503 GET k8s.test", "503 GET k8s.test", // the LIST past its window
		"<error> GET k8s.test", "503 GET k8s.test", "500 GET k8s.test", // the first watch
		"<error> GET k8s.test", "503 GET k8s.test", // the watch of timeoutSeconds=2
		"503 GET k8s.test", // the tiny budget's one retry
	}
	if got := strings.Join(clientGo.calls, "|"); got != strings.Join(wantCalls, "|") {
		t.Errorf("client-go retries\n\t%q\nwant\n\t%q", clientGo.calls, wantCalls)
	}
}
