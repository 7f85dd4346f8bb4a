package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/kretry/kretry/transport"
)

// The Grafana dashboard in deploy/grafana is written from dashboardPanels by
// TestDashboard (KRETRY_UPDATE=1 rewrites it), with its queries as recording
// rules beside it so that `make rules-test` has promtool parse every one.
var (
	dashboardDir  = filepath.Join("..", "..", "..", "deploy", "grafana")
	dashboardFile = filepath.Join(dashboardDir, "kretry-dashboard.json")
	queriesFile   = filepath.Join(dashboardDir, "kretry-dashboard.queries.yaml")
)

type panelQuery struct{ expr, legend string }

type dashboardPanel struct {
	title, description, unit string
	queries                  []panelQuery
}

// sel is the dashboard's series selector: the job variable, plus matchers.
func sel(matchers ...string) string {
	return "{" + strings.Join(append([]string{`job=~"$job"`}, matchers...), ",") + "}"
}

// dashboardPanels are the dashboard, panel by panel, in reading order.
var dashboardPanels = []dashboardPanel{
	{"Give-ups: failures handed to callers", "kretry stopped retrying (an outage past InternalErrorWindow, a budget refusal, a watch past its deadline). Alert: KretryGivingUp.", "short",
		[]panelQuery{{`sum by (verb, reason) (increase(kretry_giveups_total` + sel() + `[$__rate_interval]))`, "{{verb}} {{reason}}"}}},
	{"Initial-state fetches (relists)", "LISTs and watch-lists callers sent through kretry: each costs the server a whole collection. After the start, these are relists kretry could not spare. Alert: KretryRelistsDespiteKretry.", "short",
		[]panelQuery{{`sum by (verb) (increase(kretry_initial_state_fetches_total` + sel() + `[$__rate_interval]))`, "{{verb}}"}}},
	{"Requests kretry sent, by answer", "First attempts, retries and resumes, by answer class.", "reqps",
		[]panelQuery{{`sum by (outcome) (rate(kretry_requests_total` + sel() + `[$__rate_interval]))`, "{{outcome}}"}}},
	{"Share of requests answered 429", "API Priority and Fairness pressure on this client. Alert: KretryThrottled (over 25% for 15 minutes).", "percentunit",
		[]panelQuery{{`sum(rate(kretry_requests_total` + sel(`outcome="429"`) + `[$__rate_interval])) / sum(rate(kretry_requests_total` + sel() + `[$__rate_interval]))`, "429 share"}}},
	{"Retries and resumes, by reason", "Everything kretry absorbed instead of the caller.", "ops",
		[]panelQuery{{`sum by (verb, reason) (rate(kretry_retries_total` + sel() + `[$__rate_interval]))`, "{{verb}} {{reason}}"}}},
	{"Watch resumes, by reason", "Established watch streams reopened at their resourceVersion: each spared a re-watch, and often a relist.", "ops",
		[]panelQuery{{`sum by (reason) (rate(kretry_watch_resumes_total` + sel() + `[$__rate_interval]))`, "{{reason}}"}}},
	{"Retry budget refusals", "Retries the retry budget refused: the failure went to the caller at once. Alert: KretryRetryBudgetExhausted.", "short",
		[]panelQuery{{`sum by (verb) (increase(kretry_budget_refusals_total` + sel() + `[$__rate_interval]))`, "{{verb}}"}}},
	{"Wait before a retry (p50, p90)", "How long kretry waited before its retries and resumes.", "s",
		[]panelQuery{
			{`histogram_quantile(0.5, sum by (le) (rate(kretry_retry_wait_seconds_bucket` + sel() + `[$__rate_interval])))`, "p50"},
			{`histogram_quantile(0.9, sum by (le) (rate(kretry_retry_wait_seconds_bucket` + sel() + `[$__rate_interval])))`, "p90"},
		}},
	{"LIST bodies resumed mid-read", "LIST bodies broken mid-read and asked for again at their resourceVersion, by outcome.", "short",
		[]panelQuery{{`sum by (outcome) (increase(kretry_list_resumes_total` + sel() + `[$__rate_interval]))`, "{{outcome}}"}}},
	{"kretry-proxy: served and sent upstream", "Requests kretry-proxy served to its clients and sent to the API server (kretry's retries included), by class.", "reqps",
		[]panelQuery{
			{`sum by (class) (rate(kretry_proxy_requests_total` + sel() + `[$__rate_interval]))`, "served {{class}}"},
			{`sum by (class) (rate(kretry_proxy_upstream_requests_total` + sel() + `[$__rate_interval]))`, "upstream {{class}}"},
		}},
	{"kretry-proxy: refusals and open watches", "Requests refused without asking the API server, by reason (alert: KretryProxyRefusing), and the watches being served.", "short",
		[]panelQuery{
			{`sum by (reason) (increase(kretry_proxy_refused_total` + sel() + `[$__rate_interval]))`, "refused {{reason}}"},
			{`sum(kretry_proxy_open_watches` + sel() + `)`, "open watches"},
		}},
}

// DashboardQueries are the dashboard's queries as Prometheus runs them:
// $__rate_interval as 1m and $job as any job.
func dashboardQueries() []string {
	var out []string
	for _, p := range dashboardPanels {
		for _, q := range p.queries {
			out = append(out, strings.NewReplacer("$__rate_interval", "1m", `"$job"`, `".+"`).Replace(q.expr))
		}
	}
	return out
}

// dashboardJSON is the Grafana dashboard (schema 39, a Prometheus data
// source picked by the datasource variable, the job variable from
// kretry_requests_total).
func dashboardJSON() []byte {
	datasource := map[string]string{"type": "prometheus", "uid": "${datasource}"}
	var panels []any
	for i, p := range dashboardPanels {
		var targets []any
		for j, q := range p.queries {
			targets = append(targets, map[string]any{
				"datasource": datasource, "expr": q.expr, "legendFormat": q.legend, "refId": string(rune('A' + j)),
			})
		}
		panels = append(panels, map[string]any{
			"id": i + 1, "type": "timeseries", "title": p.title, "description": p.description, "datasource": datasource,
			"gridPos":     map[string]int{"h": 8, "w": 12, "x": (i % 2) * 12, "y": (i / 2) * 8},
			"fieldConfig": map[string]any{"defaults": map[string]any{"unit": p.unit}, "overrides": []any{}},
			"targets":     targets,
		})
	}
	dashboard := map[string]any{
		"title": "kretry", "uid": "kretry", "tags": []string{"kretry", "kubernetes"},
		"description":   "What kretry does for its clients: give-ups, relists, 429 pressure, retries and kretry-proxy. Generated by cmd/kretry-proxy/proxy/dashboard_test.go.",
		"schemaVersion": 39, "editable": true, "refresh": "30s", "time": map[string]string{"from": "now-6h", "to": "now"},
		"templating": map[string]any{"list": []any{
			map[string]any{"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus"},
			map[string]any{"name": "job", "label": "Job", "type": "query", "datasource": datasource, "includeAll": true, "multi": true,
				"allValue": ".+", "query": map[string]string{"query": "label_values(kretry_requests_total, job)", "refId": "job"}, "refresh": 2},
		}},
		"panels": panels,
	}
	out, err := json.MarshalIndent(dashboard, "", "  ")
	if err != nil {
		panic(err)
	}
	return append(out, '\n')
}

// queriesRules are the dashboard's queries as recording rules, for
// promtool check rules.
func queriesRules() []byte {
	var b bytes.Buffer
	b.WriteString("# The queries of kretry-dashboard.json as recording rules, so that `make rules-test` has\n" +
		"# promtool parse each one ($__rate_interval as 1m, $job as any). Written by TestDashboard.\n" +
		"groups:\n  - name: kretry-dashboard-queries\n    rules:\n")
	for i, q := range dashboardQueries() {
		fmt.Fprintf(&b, "      - record: kretry_dashboard:query_%d\n        expr: %q\n", i+1, q)
	}
	return b.Bytes()
}

// metricName matches the metric names in a query: words followed by a
// selector's brace.
var metricName = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)\{`)

// TestDashboard: the committed dashboard and its queries file are what
// dashboardPanels write, and every query names only series kretry-proxy's
// /metrics serves (kretry's collectors and the proxy's own).
func TestDashboard(t *testing.T) {
	golden(t, dashboardFile, dashboardJSON())
	golden(t, queriesFile, queriesRules())

	m, err := newMetrics()
	if err != nil {
		t.Fatal(err)
	}
	// The wait histogram and the proxy's request counters appear with their first event.
	m.kretry.ObserveRetry(transport.RetryEvent{Verb: transport.VerbList, Reason: transport.ReasonServerError})
	m.servedOne(classList, 200)
	m.upstreamReq.WithLabelValues(string(classList), "200").Inc()
	families, err := m.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	for _, family := range families {
		name := family.GetName()
		exported[name] = true
		if family.GetType() == dto.MetricType_HISTOGRAM {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				exported[name+suffix] = true
			}
		}
	}
	var names []string
	for _, q := range dashboardQueries() {
		matches := metricName.FindAllStringSubmatch(q, -1)
		if len(matches) == 0 {
			t.Errorf("query names no series: %s", q)
		}
		for _, match := range matches {
			if !strings.HasPrefix(match[1], "kretry_") || !exported[match[1]] {
				t.Errorf("query names %s, which kretry does not export: %s", match[1], q)
			}
			names = append(names, match[1])
		}
	}
	slices.Sort(names)
	t.Logf("%d queries over %s", len(dashboardQueries()), strings.Join(slices.Compact(names), ", "))
}
