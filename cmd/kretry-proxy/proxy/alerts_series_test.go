package proxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"sigs.k8s.io/yaml"

	"github.com/kretry/kretry/internal/harness/fakeclock"
	"github.com/kretry/kretry/transport"
)

// The unit tests of the alerting rules in deploy/prometheus are written by
// TestAlertRuleSeries from the series this package's /metrics registry
// holds (kretry's collectors and the proxy's own) while the real transport
// goes through a scripted timeline, one scrape a minute. `make rules-test`
// runs them with promtool; KRETRY_UPDATE=1 rewrites the file.
var (
	rulesDir      = filepath.Join("..", "..", "..", "deploy", "prometheus")
	rulesTestFile = filepath.Join(rulesDir, "kretry-rules.test.yaml")
)

// answers is an upstream that answers the n-th request with the n-th queued answer.
type answers struct {
	mu    sync.Mutex
	queue []func() *http.Response
}

func (a *answers) add(code int, n int, kv ...string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for range n {
		a.queue = append(a.queue, func() *http.Response {
			header := http.Header{"Content-Type": {"application/json"}}
			for i := 0; i < len(kv); i += 2 {
				header.Set(kv[i], kv[i+1])
			}
			body := `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"5"},"items":[]}`
			if code != 200 {
				body = `{"kind":"Status","apiVersion":"v1","status":"Failure","code":` + strconv.Itoa(code) + `}`
			}
			return &http.Response{StatusCode: code, Header: header, Body: io.NopCloser(strings.NewReader(body)), ContentLength: -1}
		})
	}
}

func (a *answers) RoundTrip(req *http.Request) (*http.Response, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.queue) == 0 {
		return nil, fmt.Errorf("no answer queued for %s", req.URL)
	}
	resp := a.queue[0]()
	a.queue = a.queue[1:]
	resp.Request = req
	return resp, nil
}

// clear drops the answers no request took.
func (a *answers) clear() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.queue = nil
}

func (a *answers) left() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.queue)
}

// The timeline, in minutes: one scrape at the end of each.
const (
	timelineMinutes = 110
	outageFrom      = 20 // an outage past the window: give-ups, budget refusals
	outageTo        = 23
	throttledFrom   = 40 // 429s, 2 of every 3 requests
	throttledTo     = 60
	relistAt        = 80 // a LIST 80 minutes into the process's life
	refusedAt       = 90 // requests for another Host
	shutdownAt      = 100
)

// TestAlertRuleSeries drives the real kretry transport and the proxy's
// metrics through the timeline and checks that deploy/prometheus's rule
// tests are written from what they produced.
func TestAlertRuleSeries(t *testing.T) {
	m, err := newMetrics()
	if err != nil {
		t.Fatal(err)
	}
	clock := fakeclock.New(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	upstream := &answers{}
	config := transport.Config{Clock: clock, Rand: func() float64 { return 0 }, InternalErrorWindow: 2 * time.Second,
		TooManyRequestsWindow: 20 * time.Second, Observer: m.kretry}
	rt := transport.New(upstream, config)
	tiny := config
	tiny.RetryBudget = transport.RetryBudget{Ratio: 0.001, MinPerSecond: 0.01, Window: 10 * time.Second} // 1 retry in 100s
	tinyRT := transport.New(upstream, tiny)

	send := func(rt http.RoundTripper, target string) {
		t.Helper()
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://10.96.0.1"+target, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatalf("%s: %v", target, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	const (
		pods       = "/api/v1/namespaces/ns/pods?limit=500"
		configMaps = "/api/v1/namespaces/ns/configmaps?limit=500"
		nextPage   = "/api/v1/namespaces/ns/configmaps?limit=500&continue=page-2" // steady traffic, no initial-state fetch
		watchList  = "/api/v1/namespaces/ns/secrets?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"
	)
	series := map[string][]float64{}
	scrape := func(minute int) {
		t.Helper()
		families, err := m.registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, family := range families {
			if !strings.HasPrefix(family.GetName(), "kretry_") {
				continue // go_* and process_* are the runtime's, not the timeline's
			}
			for _, sample := range family.GetMetric() {
				for name, value := range samples(family, sample) {
					if series[name] == nil {
						series[name] = make([]float64, timelineMinutes+1)
					}
					series[name][minute] = value
				}
			}
		}
	}

	scrape(0) // the collectors as New leaves them, before any request
	for minute := 1; minute <= timelineMinutes; minute++ {
		clock.Advance(time.Minute)
		switch {
		case minute == 1: // the start: two LISTs and a watch-list
			upstream.add(200, 3)
			send(rt, pods)
			send(rt, configMaps)
			send(rt, watchList)
		case minute >= outageFrom && minute < outageTo:
			// The API server answers 503 for longer than the window (2s): the
			// LIST gives up; on the tiny budget a retry is refused first.
			upstream.add(503, 10)
			send(rt, nextPage)
			upstream.clear()
			upstream.add(503, 10)
			send(tinyRT, nextPage)
			upstream.clear()
		case minute >= throttledFrom && minute < throttledTo:
			for range 2 {
				upstream.add(429, 2, "Retry-After", "1")
				upstream.add(200, 1)
				send(rt, nextPage)
			}
		case minute == relistAt:
			upstream.add(200, 1)
			send(rt, pods)
		case minute == refusedAt:
			m.refused(refusedHost)
			m.refused(refusedHost)
		case minute == shutdownAt:
			m.refused(refusedShutdown)
		}
		if minute < outageFrom || minute >= outageTo { // steady traffic, not during the outage
			upstream.add(200, 1)
			send(rt, nextPage)
		}
		if n := upstream.left(); n != 0 {
			t.Fatalf("minute %d: %d answers left unused", minute, n)
		}
		scrape(minute)
	}

	golden(t, rulesTestFile, rulesTest(t, series))
}

// golden checks that the committed file at path holds got, or, with
// KRETRY_UPDATE=1, writes got there; it returns the file's content.
func golden(t *testing.T, path string, got []byte) []byte {
	t.Helper()
	if os.Getenv("KRETRY_UPDATE") == "1" {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return got
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is not what %s writes now: run KRETRY_UPDATE=1 go test -run %s ./proxy/ in cmd/kretry-proxy", path, t.Name(), t.Name())
	}
	return want
}

// samples are the series of one sample as promtool's input_series names
// them: a counter or gauge, or a histogram's _bucket, _sum and _count.
func samples(family *dto.MetricFamily, sample *dto.Metric) map[string]float64 {
	labels := func(extra ...string) string {
		var parts []string
		for _, l := range sample.GetLabel() {
			parts = append(parts, l.GetName()+"="+strconv.Quote(l.GetValue()))
		}
		for i := 0; i < len(extra); i += 2 {
			parts = append(parts, extra[i]+"="+strconv.Quote(extra[i+1]))
		}
		parts = append(parts, `job="kretry-proxy"`, `instance="10.0.0.7:8001"`)
		sort.Strings(parts)
		return "{" + strings.Join(parts, ",") + "}"
	}
	name := family.GetName()
	switch {
	case sample.GetCounter() != nil:
		return map[string]float64{name + labels(): sample.GetCounter().GetValue()}
	case sample.GetGauge() != nil:
		return map[string]float64{name + labels(): sample.GetGauge().GetValue()}
	case sample.GetHistogram() != nil:
		h := sample.GetHistogram()
		out := map[string]float64{
			name + "_sum" + labels():                h.GetSampleSum(),
			name + "_count" + labels():              float64(h.GetSampleCount()),
			name + "_bucket" + labels("le", "+Inf"): float64(h.GetSampleCount()),
		}
		for _, b := range h.GetBucket() {
			out[name+"_bucket"+labels("le", strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64))] = float64(b.GetCumulativeCount())
		}
		return out
	}
	return nil
}

// expectation is one alert_rule_test entry: at minute, alert fires with
// these labels (none: it does not fire).
type expectation struct {
	minute int
	alert  string
	labels []map[string]string
}

// expectations are what the rules must say about the timeline.
var expectations = func() []expectation {
	target := func(kv ...string) map[string]string {
		l := map[string]string{"job": "kretry-proxy", "instance": "10.0.0.7:8001"}
		for i := 0; i < len(kv); i += 2 {
			l[kv[i]] = kv[i+1]
		}
		return l
	}
	warning, info := target("severity", "warning"), target("severity", "info")
	var out []expectation
	for _, alert := range []string{"KretryGivingUp", "KretryRetryBudgetExhausted", "KretryThrottled", "KretryRelistsDespiteKretry", "KretryProxyRefusing"} {
		out = append(out, expectation{minute: 10, alert: alert}) // healthy
	}
	out = append(out,
		// The start's fetches are no relists: the process is young.
		expectation{minute: 15, alert: "KretryRelistsDespiteKretry"},
		expectation{minute: 17, alert: "KretryRelistsDespiteKretry"},
		expectation{minute: outageFrom + 2, alert: "KretryGivingUp", labels: []map[string]string{warning}},
		expectation{minute: outageFrom + 2, alert: "KretryRetryBudgetExhausted", labels: []map[string]string{warning}},
		expectation{minute: outageFrom + 2, alert: "KretryThrottled"},
		expectation{minute: outageTo + 7, alert: "KretryGivingUp"},
		expectation{minute: outageTo + 7, alert: "KretryRetryBudgetExhausted"},
		// 429 pressure is pending, not firing, until it has lasted 15 minutes.
		expectation{minute: throttledFrom + 10, alert: "KretryThrottled"},
		expectation{minute: throttledFrom + 18, alert: "KretryThrottled", labels: []map[string]string{warning}},
		expectation{minute: throttledFrom + 18, alert: "KretryGivingUp"},
		expectation{minute: throttledTo + 10, alert: "KretryThrottled"},
		expectation{minute: relistAt + 2, alert: "KretryRelistsDespiteKretry", labels: []map[string]string{info}},
		expectation{minute: relistAt + 17, alert: "KretryRelistsDespiteKretry"},
		expectation{minute: refusedAt + 2, alert: "KretryProxyRefusing", labels: []map[string]string{warning}},
		// A refusal while shutting down is the proxy draining, not an alert.
		expectation{minute: shutdownAt + 2, alert: "KretryProxyRefusing"},
	)
	return out
}()

// rulesTest writes the promtool rule test: series and expectations, with
// each alert's annotations as the rules file states them.
func rulesTest(t *testing.T, series map[string][]float64) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(rulesDir, "kretry-rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `json:"alert"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatal(err)
	}
	annotations := map[string]map[string]string{}
	for _, group := range rules.Groups {
		for _, rule := range group.Rules {
			annotations[rule.Alert] = rule.Annotations
		}
	}

	var b bytes.Buffer
	b.WriteString("# Written by TestAlertRuleSeries (cmd/kretry-proxy/proxy/alerts_series_test.go) from the series the\n" +
		"# real kretry transport and kretry-proxy's metrics produced on a scripted timeline, one scrape a\n" +
		"# minute; process_start_time_seconds (the process collector's) says the process started at 0.\n" +
		"# Do not edit: KRETRY_UPDATE=1 rewrites it. Run with `make rules-test`.\n")
	b.WriteString("rule_files:\n  - kretry-rules.yaml\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n")
	names := make([]string, 0, len(series))
	for name := range series {
		names = append(names, name)
	}
	sort.Strings(names)
	start := append([]string(nil), names...)
	start = append(start, `process_start_time_seconds{instance="10.0.0.7:8001",job="kretry-proxy"}`)
	for _, name := range start {
		values := series[name]
		if values == nil {
			values = make([]float64, timelineMinutes+1) // the start time, 0
		}
		text := make([]string, len(values))
		for i, v := range values {
			text[i] = strconv.FormatFloat(v, 'g', -1, 64)
		}
		fmt.Fprintf(&b, "      - series: '%s'\n        values: '%s'\n", name, strings.Join(text, " "))
	}
	b.WriteString("    alert_rule_test:\n")
	for _, e := range expectations {
		fmt.Fprintf(&b, "      - eval_time: %dm\n        alertname: %s\n", e.minute, e.alert)
		if len(e.labels) == 0 {
			b.WriteString("        exp_alerts: []\n")
			continue
		}
		b.WriteString("        exp_alerts:\n")
		for _, labels := range e.labels {
			b.WriteString("          - exp_labels:\n")
			writeMap(&b, "              ", labels)
			if a := annotations[e.alert]; len(a) > 0 {
				b.WriteString("            exp_annotations:\n")
				writeMap(&b, "              ", a)
			}
		}
	}
	return b.Bytes()
}

// writeMap writes m as YAML, keys sorted, values quoted.
func writeMap(b *bytes.Buffer, indent string, m map[string]string) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(b, "%s%s: %s\n", indent, k, strconv.Quote(m[k]))
	}
}

// TestPrometheusRuleManifest: deploy/prometheus/kretry-prometheusrule.yaml
// is the rules file as a Prometheus Operator PrometheusRule, line for line.
func TestPrometheusRuleManifest(t *testing.T) {
	rules, err := os.ReadFile(filepath.Join(rulesDir, "kretry-rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	b.WriteString("# kretry's alerting rules (kretry-rules.yaml) as a Prometheus Operator PrometheusRule.\n" +
		"# Written by TestPrometheusRuleManifest from kretry-rules.yaml: edit that file, then run\n" +
		"# KRETRY_UPDATE=1 go test -run TestPrometheusRuleManifest ./proxy/ in cmd/kretry-proxy.\n" +
		"# Set metadata.labels to what your Prometheus's ruleSelector selects.\n" +
		"apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nmetadata:\n  name: kretry\n  labels:\n    app.kubernetes.io/name: kretry\nspec:\n")
	for _, line := range strings.Split(strings.TrimRight(string(rules), "\n"), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		b.WriteString("  " + line + "\n")
	}
	want := golden(t, filepath.Join(rulesDir, "kretry-prometheusrule.yaml"), b.Bytes())
	var manifest struct {
		Spec struct {
			Groups []struct {
				Rules []map[string]any `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(want, &manifest); err != nil || len(manifest.Spec.Groups) != 1 || len(manifest.Spec.Groups[0].Rules) != 5 {
		t.Errorf("the manifest does not read back as one group of 5 rules: %v", err)
	}
}
