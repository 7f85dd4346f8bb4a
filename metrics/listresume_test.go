package metrics_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kretry/kretry/metrics"
	"github.com/kretry/kretry/transport"
)

// TestListResumes: LIST resumes are counted by outcome with the bytes they
// checked, through JoinObservers too, and a LIST resume's retry is not a
// watch resume.
func TestListResumes(t *testing.T) {
	registry := prometheus.NewRegistry()
	m, err := metrics.New(registry)
	if err != nil {
		t.Fatal(err)
	}
	observer := transport.JoinObservers(m, nil, metrics.ClientGoRetriesTo(&retryRecorder{}))
	lists, ok := observer.(transport.ListResumeObserver)
	if !ok {
		t.Fatal("the joined observer does not hear LIST resumes")
	}
	lists.ObserveListResume(transport.ListResumeEvent{Outcome: transport.ListResumed, SkippedBytes: 1000, Requests: 1})
	lists.ObserveListResume(transport.ListResumeEvent{Outcome: transport.ListResumed, SkippedBytes: 24, Requests: 2})
	lists.ObserveListResume(transport.ListResumeEvent{Outcome: transport.ListResumeMismatch, SkippedBytes: 500, Requests: 1})
	observer.ObserveRetry(transport.RetryEvent{Verb: transport.VerbList, Reason: transport.ReasonBrokenBody, Resume: true})

	want := `
# HELP kretry_list_resume_skipped_bytes_total Bytes of LIST bodies read again on a resume and checked against what was already delivered.
# TYPE kretry_list_resume_skipped_bytes_total counter
kretry_list_resume_skipped_bytes_total 1524
# HELP kretry_list_resumes_total LIST bodies broken mid-read and asked for again at their exact resourceVersion, by outcome (resumed, mismatch, gone, gave-up).
# TYPE kretry_list_resumes_total counter
kretry_list_resumes_total{outcome="mismatch"} 1
kretry_list_resumes_total{outcome="resumed"} 2
`
	if err := testutil.GatherAndCompare(nonZero(registry), strings.NewReader(want), "kretry_list_resumes_total", "kretry_list_resume_skipped_bytes_total"); err != nil {
		t.Error(err)
	}
	if err := testutil.GatherAndCompare(nonZero(registry), strings.NewReader(""), "kretry_watch_resumes_total"); err != nil {
		t.Errorf("watch resumes moved after a LIST resume: %v", err)
	}
}
