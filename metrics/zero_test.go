package metrics_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/kretry/kretry/internal/harness/fakeclock"
	"github.com/kretry/kretry/metrics"
	"github.com/kretry/kretry/transport"
)

// nonZero gathers g without the counter series still at 0, so that a test
// compares what happened, not every series New starts.
func nonZero(g prometheus.Gatherer) prometheus.Gatherer {
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		families, err := g.Gather()
		var kept []*dto.MetricFamily
		for _, family := range families {
			var samples []*dto.Metric
			for _, sample := range family.GetMetric() {
				if c := sample.GetCounter(); c == nil || c.GetValue() != 0 {
					samples = append(samples, sample)
				}
			}
			if len(samples) > 0 {
				family.Metric = samples
				kept = append(kept, family)
			}
		}
		return kept, err
	})
}

// TestSeriesStartAtZero: before any request, every counter has its series
// for the label values kretry reports, at 0, so an alert on increase()
// sees the first give-up; and only those.
func TestSeriesStartAtZero(t *testing.T) {
	registry := prometheus.NewRegistry()
	if _, err := metrics.New(registry); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{
		"kretry_requests_total":                  3 * 7,     // verbs × outcomes
		"kretry_retries_total":                   4 + 8 + 4, // list, watch, get reasons
		"kretry_giveups_total":                   4 + 9 + 4, // and deadline for a watch
		"kretry_watch_resumes_total":             8,
		"kretry_budget_refusals_total":           3,
		"kretry_list_resumes_total":              4,
		"kretry_list_resume_skipped_bytes_total": 1,
		"kretry_initial_state_fetches_total":     2,
		"kretry_retry_wait_seconds":              0,
		"kretry_build_info":                      1,
		"kretry_enabled":                         1,
	}
	families, err := registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, family := range families {
		for _, sample := range family.GetMetric() {
			if v := sample.GetCounter().GetValue(); v != 0 {
				t.Errorf("%s %v = %g before any request", family.GetName(), sample.GetLabel(), v)
			}
		}
		got[family.GetName()] = len(family.GetMetric())
	}
	for name, n := range want {
		if got[name] != n {
			t.Errorf("%s: %d series at start, want %d", name, got[name], n)
		}
	}
	if len(got) != len(want)-1 { // no wait histogram yet
		t.Errorf("families at start: %v", got)
	}
	for _, series := range []string{
		`kretry_giveups_total{reason="5xx",verb="list"} 0`,
		`kretry_giveups_total{reason="deadline",verb="watch"} 0`,
		`kretry_retries_total{reason="429",verb="watch"} 0`,
		`kretry_initial_state_fetches_total{verb="watch"} 0`,
	} {
		if !hasSeries(families, series) {
			t.Errorf("no series %s", series)
		}
	}
}

// hasSeries reports whether families hold series (name{labels} value) as
// the text exposition writes it.
func hasSeries(families []*dto.MetricFamily, series string) bool {
	for _, family := range families {
		for _, sample := range family.GetMetric() {
			var labels []string
			for _, l := range sample.GetLabel() {
				labels = append(labels, l.GetName()+`="`+l.GetValue()+`"`)
			}
			text := family.GetName() + "{" + strings.Join(labels, ",") + "} "
			if strings.HasPrefix(series, text) {
				return true
			}
		}
	}
	return false
}

// TestClusterLabels: two Metrics on one registry, one per cluster, count
// apart under their constant labels.
func TestClusterLabels(t *testing.T) {
	registry := prometheus.NewRegistry()
	east, err := metrics.NewWithOptions(registry, metrics.Options{ConstLabels: prometheus.Labels{"cluster": "east"}})
	if err != nil {
		t.Fatal(err)
	}
	west, err := metrics.NewWithOptions(registry, metrics.Options{ConstLabels: prometheus.Labels{"cluster": "west"}})
	if err != nil {
		t.Fatalf("a second cluster on the registry: %v", err)
	}
	east.ObserveGiveUp(transport.GiveUpEvent{Verb: transport.VerbList, Reason: transport.ReasonServerError})
	west.ObserveGiveUp(transport.GiveUpEvent{Verb: transport.VerbList, Reason: transport.ReasonServerError})
	west.ObserveGiveUp(transport.GiveUpEvent{Verb: transport.VerbList, Reason: transport.ReasonServerError})
	want := `
# HELP kretry_giveups_total Failures kretry stopped retrying and handed to the caller (or ended a watch cleanly on), by verb and reason.
# TYPE kretry_giveups_total counter
kretry_giveups_total{cluster="east",reason="5xx",verb="list"} 1
kretry_giveups_total{cluster="west",reason="5xx",verb="list"} 2
`
	if err := testutil.GatherAndCompare(nonZero(registry), strings.NewReader(want), "kretry_giveups_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(registry, "kretry_initial_state_fetches_total"); n != 4 {
		t.Errorf("%d initial-state series, want 2 per cluster", n)
	}
}

// TestInitialStateFetches: a LIST retried once, a later page, a watch-list
// and a plain watch through transport.New count two initial-state fetches.
func TestInitialStateFetches(t *testing.T) {
	registry := prometheus.NewRegistry()
	m, err := metrics.New(registry)
	if err != nil {
		t.Fatal(err)
	}
	server := &script{answers: []func() (*http.Response, error){s503, listOK, listOK, oneEvent, oneEvent}}
	rt := transport.New(server, transport.Config{Observer: m, Rand: func() float64 { return 0 }, Clock: fakeclock.New(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))})
	const pods = "http://k8s.test/api/v1/namespaces/ns/pods"
	for _, url := range []string{
		pods, pods + "?limit=1&continue=next",
		pods + "?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan",
		pods + "?watch=true&resourceVersion=5",
	} {
		get(t, rt, url)
	}
	want := `
# HELP kretry_initial_state_fetches_total Initial-state fetches callers sent through kretry (a LIST's first page: verb list; a watch with sendInitialEvents=true: verb watch), once per call, kretry's own retries and resumes not included.
# TYPE kretry_initial_state_fetches_total counter
kretry_initial_state_fetches_total{verb="list"} 1
kretry_initial_state_fetches_total{verb="watch"} 1
`
	if err := testutil.GatherAndCompare(registry, strings.NewReader(want), "kretry_initial_state_fetches_total"); err != nil {
		t.Error(err)
	}
}
