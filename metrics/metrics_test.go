package metrics_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kretry/kretry/metrics"
	"github.com/kretry/kretry/transport"
)

// retryRecorder is a client-go RetryMetric that remembers its calls.
type retryRecorder struct {
	mu    sync.Mutex
	calls []string
}

func (r *retryRecorder) IncrementRetry(_ context.Context, code, method, host string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, code+" "+method+" "+host)
}

func TestObserverCounts(t *testing.T) {
	registry := prometheus.NewRegistry()
	m, err := metrics.New(registry)
	if err != nil {
		t.Fatal(err)
	}
	recorder := &retryRecorder{}
	observer := transport.JoinObservers(m, nil, metrics.ClientGoRetriesTo(recorder))
	host := "10.0.0.1:6443"
	for _, e := range []transport.AttemptEvent{
		{Verb: transport.VerbList, Host: host, Outcome: transport.OutcomeThrottled, Code: 429},
		{Verb: transport.VerbList, Host: host, Outcome: transport.OutcomeSuccess, Code: 200},
		{Verb: transport.VerbWatch, Host: host, Outcome: transport.OutcomeNoResponse},
		{Verb: transport.VerbGet, Host: host, Outcome: transport.OutcomeClientError, Code: 404},
	} {
		observer.ObserveAttempt(e)
	}
	observer.ObserveRetry(transport.RetryEvent{Verb: transport.VerbList, Host: host, Reason: transport.ReasonTooManyRequests, Code: 429, Wait: 2 * time.Second})
	observer.ObserveRetry(transport.RetryEvent{Verb: transport.VerbWatch, Host: host, Reason: transport.ReasonConnection, Wait: 500 * time.Millisecond})
	observer.ObserveRetry(transport.RetryEvent{Verb: transport.VerbWatch, Host: host, Reason: transport.ReasonErrorEvent, Code: 500, Resume: true})
	observer.ObserveGiveUp(transport.GiveUpEvent{Verb: transport.VerbWatch, Reason: transport.ReasonDeadline, Attempts: 3})
	observer.ObserveBudgetRefusal(transport.BudgetEvent{Verb: transport.VerbList, Reason: transport.ReasonServerError})

	want := `
# HELP kretry_budget_refusals_total Retries the retry budget refused (the failure went to the caller at once), by verb.
# TYPE kretry_budget_refusals_total counter
kretry_budget_refusals_total{verb="list"} 1
# HELP kretry_giveups_total Failures kretry stopped retrying and handed to the caller (or ended a watch cleanly on), by verb and reason.
# TYPE kretry_giveups_total counter
kretry_giveups_total{reason="deadline",verb="watch"} 1
# HELP kretry_requests_total Requests kretry sent to the API server (first attempts, retries and watch resumes), by verb and answer class.
# TYPE kretry_requests_total counter
kretry_requests_total{outcome="2xx",verb="list"} 1
kretry_requests_total{outcome="429",verb="list"} 1
kretry_requests_total{outcome="4xx",verb="get"} 1
kretry_requests_total{outcome="connection",verb="watch"} 1
# HELP kretry_retries_total Retries and watch resumes kretry made, by verb and reason.
# TYPE kretry_retries_total counter
kretry_retries_total{reason="429",verb="list"} 1
kretry_retries_total{reason="connection",verb="watch"} 1
kretry_retries_total{reason="error-event",verb="watch"} 1
# HELP kretry_watch_resumes_total Reopenings of an established watch stream at its last resourceVersion, by reason.
# TYPE kretry_watch_resumes_total counter
kretry_watch_resumes_total{reason="error-event"} 1
`
	if err := testutil.GatherAndCompare(nonZero(registry), strings.NewReader(want),
		"kretry_budget_refusals_total", "kretry_giveups_total", "kretry_requests_total",
		"kretry_retries_total", "kretry_watch_resumes_total"); err != nil {
		t.Error(err)
	}
	if got := testutil.CollectAndCount(registry, "kretry_retry_wait_seconds"); got != 2 {
		t.Errorf("wait histogram series = %d, want 2 (list, watch)", got)
	}
	wantCalls := []string{"429 GET " + host, "<error> GET " + host, "500 GET " + host}
	if strings.Join(recorder.calls, "|") != strings.Join(wantCalls, "|") {
		t.Errorf("client-go retries = %q, want %q", recorder.calls, wantCalls)
	}
}

func TestNewTwiceOnOneRegistryShares(t *testing.T) {
	registry := prometheus.NewRegistry()
	first, err := metrics.New(registry)
	if err != nil {
		t.Fatal(err)
	}
	second, err := metrics.New(registry)
	if err != nil {
		t.Fatalf("second New: %v", err)
	}
	first.ObserveBudgetRefusal(transport.BudgetEvent{Verb: transport.VerbWatch})
	second.ObserveBudgetRefusal(transport.BudgetEvent{Verb: transport.VerbWatch})
	want := `
# HELP kretry_budget_refusals_total Retries the retry budget refused (the failure went to the caller at once), by verb.
# TYPE kretry_budget_refusals_total counter
kretry_budget_refusals_total{verb="watch"} 2
`
	if err := testutil.GatherAndCompare(nonZero(registry), strings.NewReader(want), "kretry_budget_refusals_total"); err != nil {
		t.Error(err)
	}
}
