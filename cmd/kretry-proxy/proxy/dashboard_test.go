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
	table                    bool // a table of instant queries (one row a series) instead of a time series
}

// sel is the dashboard's series selector: the cluster, job and instance variables, plus
// matchers. A series with no cluster label matches the cluster variable's "All" (.*).
func sel(matchers ...string) string {
	return "{" + strings.Join(append([]string{`cluster=~"$cluster"`, `job=~"$job"`, `instance=~"$instance"`}, matchers...), ",") + "}"
}

// dashboardPanels are the dashboard, panel by panel, in reading order.
var dashboardPanels = []dashboardPanel{
	{"kretry on and off, by job", "Instances whose kretry is on (kretry_enabled 1) and off (0: KRETRY_DISABLE; their other kretry series stay at 0 whatever happens). Alert: KretryDisabled.", "short",
		[]panelQuery{
			{`sum by (job) (kretry_enabled` + sel() + `)`, "on {{job}}"},
			{`sum by (job) (1 - kretry_enabled` + sel() + `)`, "off {{job}}"},
		}, false},
	{"Instances giving up or relisting most (top 10, over the dashboard's range)", "The instances (pods) whose callers got the most failures (give-ups other than deadline) and that fetched whole collections most: the ones to look at first. Alerts: KretryFleetGivingUp, KretryGivingUp, KretryFleetRelisting, KretryRelistsDespiteKretry.", "short",
		[]panelQuery{
			{`topk(10, sum by (cluster, job, instance) (increase(kretry_giveups_total` + sel(`reason!="deadline"`) + `[$__range])) > 0)`, "gave up"},
			{`topk(10, sum by (cluster, job, instance) (increase(kretry_initial_state_fetches_total` + sel() + `[$__range])) > 0)`, "initial-state fetches"},
		}, true},
	{"Give-ups: failures handed to callers", "kretry stopped retrying (an outage past InternalErrorWindow, a budget refusal, a watch past its deadline). Alert: KretryGivingUp.", "short",
		[]panelQuery{{`sum by (verb, reason) (increase(kretry_giveups_total` + sel() + `[$__rate_interval]))`, "{{verb}} {{reason}}"}}, false},
	{"Initial-state fetches (relists)", "LISTs and watch-lists callers sent through kretry: each costs the server a whole collection. After the start, these are relists kretry could not spare. Alert: KretryRelistsDespiteKretry.", "short",
		[]panelQuery{{`sum by (verb) (increase(kretry_initial_state_fetches_total` + sel() + `[$__rate_interval]))`, "{{verb}}"}}, false},
	{"Requests kretry sent, by answer", "First attempts, retries and resumes, by answer class.", "reqps",
		[]panelQuery{{`sum by (outcome) (rate(kretry_requests_total` + sel() + `[$__rate_interval]))`, "{{outcome}}"}}, false},
	{"Share of requests answered 429", "API Priority and Fairness pressure on this client. Alert: KretryThrottled (over 25% for 15 minutes).", "percentunit",
		[]panelQuery{{`sum(rate(kretry_requests_total` + sel(`outcome="429"`) + `[$__rate_interval])) / sum(rate(kretry_requests_total` + sel() + `[$__rate_interval]))`, "429 share"}}, false},
	{"Retries and resumes, by reason", "Everything kretry absorbed instead of the caller.", "ops",
		[]panelQuery{{`sum by (verb, reason) (rate(kretry_retries_total` + sel() + `[$__rate_interval]))`, "{{verb}} {{reason}}"}}, false},
	{"Watch resumes, by reason", "Established watch streams reopened at their resourceVersion: each spared a re-watch, and often a relist.", "ops",
		[]panelQuery{{`sum by (reason) (rate(kretry_watch_resumes_total` + sel() + `[$__rate_interval]))`, "{{reason}}"}}, false},
	{"Retry budget refusals", "Retries the retry budget refused: the failure went to the caller at once. Alert: KretryRetryBudgetExhausted.", "short",
		[]panelQuery{{`sum by (verb) (increase(kretry_budget_refusals_total` + sel() + `[$__rate_interval]))`, "{{verb}}"}}, false},
	{"Wait before a retry (p50, p90)", "How long kretry waited before its retries and resumes.", "s",
		[]panelQuery{
			{`histogram_quantile(0.5, sum by (le) (rate(kretry_retry_wait_seconds_bucket` + sel() + `[$__rate_interval])))`, "p50"},
			{`histogram_quantile(0.9, sum by (le) (rate(kretry_retry_wait_seconds_bucket` + sel() + `[$__rate_interval])))`, "p90"},
		}, false},
	{"LIST bodies resumed mid-read", "LIST bodies broken mid-read and asked for again at their resourceVersion, by outcome.", "short",
		[]panelQuery{{`sum by (outcome) (increase(kretry_list_resumes_total` + sel() + `[$__rate_interval]))`, "{{outcome}}"}}, false},
	{"kretry-proxy: served and sent upstream", "Requests kretry-proxy served to its clients and sent to the API server (kretry's retries included), by class.", "reqps",
		[]panelQuery{
			{`sum by (class) (rate(kretry_proxy_requests_total` + sel() + `[$__rate_interval]))`, "served {{class}}"},
			{`sum by (class) (rate(kretry_proxy_upstream_requests_total` + sel() + `[$__rate_interval]))`, "upstream {{class}}"},
		}, false},
	{"kretry-proxy: refusals and open watches", "Requests refused without asking the API server, by reason (alert: KretryProxyRefusing), and the watches being served.", "short",
		[]panelQuery{
			{`sum by (reason) (increase(kretry_proxy_refused_total` + sel() + `[$__rate_interval]))`, "refused {{reason}}"},
			{`sum(kretry_proxy_open_watches` + sel() + `)`, "open watches"},
		}, false},
}

// DashboardQueries are the dashboard's queries as Prometheus runs them:
// $__rate_interval as 1m, $__range as 1h, and every variable as "All".
func dashboardQueries() []string {
	var out []string
	for _, p := range dashboardPanels {
		for _, q := range p.queries {
			out = append(out, strings.NewReplacer("$__rate_interval", "1m", "$__range", "1h",
				`"$cluster"`, `".*"`, `"$job"`, `".+"`, `"$instance"`, `".+"`).Replace(q.expr))
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
			target := map[string]any{
				"datasource": datasource, "expr": q.expr, "legendFormat": q.legend, "refId": string(rune('A' + j)),
			}
			if p.table {
				target["instant"], target["range"], target["format"] = true, false, "table"
			}
			targets = append(targets, target)
		}
		panel := map[string]any{
			"id": i + 1, "type": "timeseries", "title": p.title, "description": p.description, "datasource": datasource,
			"gridPos":     map[string]int{"h": 8, "w": 12, "x": (i % 2) * 12, "y": (i / 2) * 8},
			"fieldConfig": map[string]any{"defaults": map[string]any{"unit": p.unit}, "overrides": []any{}},
			"targets":     targets,
		}
		if p.table {
			// One row an instance, its give-ups and fetches side by side, largest first.
			panel["type"] = "table"
			panel["transformations"] = []any{
				map[string]any{"id": "merge", "options": map[string]any{}},
				map[string]any{"id": "organize", "options": map[string]any{
					"excludeByName": map[string]bool{"Time": true},
					"renameByName":  map[string]string{"Value #A": "gave up", "Value #B": "initial-state fetches"},
				}},
				map[string]any{"id": "sortBy", "options": map[string]any{"sort": []any{map[string]any{"field": "gave up", "desc": true}}}},
			}
		}
		panels = append(panels, panel)
	}
	dashboard := map[string]any{
		"title": "kretry", "uid": "kretry", "tags": []string{"kretry", "kubernetes"},
		"description":   "What kretry does for its clients: on or off, the instances giving up or relisting most, give-ups, relists, 429 pressure, retries and kretry-proxy. Generated by cmd/kretry-proxy/proxy/dashboard_test.go.",
		"schemaVersion": 39, "editable": true, "refresh": "30s", "time": map[string]string{"from": "now-6h", "to": "now"},
		"templating": map[string]any{"list": []any{
			map[string]any{"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus"},
			// A series without a cluster label (one cluster, no metrics.Options.ConstLabels) matches "All".
			variable(datasource, "cluster", "Cluster", ".*", "label_values(kretry_requests_total, cluster)"),
			variable(datasource, "job", "Job", ".+", `label_values(kretry_requests_total{cluster=~"$cluster"}, job)`),
			variable(datasource, "instance", "Instance", ".+", `label_values(kretry_requests_total{cluster=~"$cluster",job=~"$job"}, instance)`),
		}},
		"panels": panels,
	}
	out, err := json.MarshalIndent(dashboard, "", "  ")
	if err != nil {
		panic(err)
	}
	return append(out, '\n')
}

// variable is a dashboard variable over a label's values, multi-valued, "All" as allValue.
func variable(datasource map[string]string, name, label, allValue, query string) map[string]any {
	return map[string]any{"name": name, "label": label, "type": "query", "datasource": datasource, "includeAll": true, "multi": true,
		"allValue": allValue, "query": map[string]string{"query": query, "refId": name}, "refresh": 2}
}

// queriesRules are the dashboard's queries as recording rules, for
// promtool check rules.
func queriesRules() []byte {
	var b bytes.Buffer
	b.WriteString("# The queries of kretry-dashboard.json as recording rules, so that `make rules-test` has\n" +
		"# promtool parse each one ($__rate_interval as 1m, $__range as 1h, every variable as All).\n" +
		"# Written by TestDashboard.\n" +
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
