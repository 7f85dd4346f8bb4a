package proxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
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
	outageFrom      = 20 // instance A: its own path fails for 12 minutes: give-ups, budget refusals
	outageTo        = 32
	throttledFrom   = 40 // 429s, 2 of every 3 requests: A and half the fleet
	throttledTo     = 60
	deadlinesFrom   = 65 // A: watches that run out of their own timeout, every minute
	deadlinesTo     = 78
	relistAt        = 80 // A: a LIST 80 minutes into the process's life
	blipFrom        = 84 // the fleet: the control plane fails for 2 minutes, past the window
	blipTo          = 86
	fleetRelistAt   = 86 // the fleet's informers list again after giving up
	refusedAt       = 90 // A: requests for another Host
	shutdownAt      = 100
)

// instance is one scraped process of the timeline: a kretry-proxy's registry and the real
// transport over a scripted upstream.
type instance struct {
	name, job, cluster string
	role               string // "A", "fleet", "lister" (LISTs on purpose every minute), "off" (KRETRY_DISABLE=1)
	metrics            *metrics
	clock              *fakeclock.Clock
	upstream           *answers
	rt, tinyRT         http.RoundTripper
}

const (
	pods       = "/api/v1/namespaces/ns/pods?limit=500"
	configMaps = "/api/v1/namespaces/ns/configmaps?limit=500"
	nextPage   = "/api/v1/namespaces/ns/configmaps?limit=500&continue=page-2" // steady traffic, no initial-state fetch
	watchList  = "/api/v1/namespaces/ns/secrets?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"
	shortWatch = "/api/v1/namespaces/ns/secrets?watch=1&resourceVersion=5&timeoutSeconds=2" // gives up on its deadline
)

// fleetJob is the fleet's job: eight sidecar kretry-proxies in cluster prod-eu-1, and a ninth
// with kretry off.
const fleetJob, fleetCluster = "configmap-watcher", "prod-eu-1"

// newInstances are A (job kretry-proxy, no cluster label) and the fleet.
func newInstances(t *testing.T) []*instance {
	t.Helper()
	var out []*instance
	add := func(name, job, cluster, role string) {
		if role == "off" {
			t.Setenv(transport.DisableEnv, "1") // read when the transports are built
		}
		m, err := newMetrics()
		if err != nil {
			t.Fatal(err)
		}
		clock := fakeclock.New(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
		upstream := &answers{}
		config := transport.Config{Clock: clock, Rand: func() float64 { return 0 }, InternalErrorWindow: 2 * time.Second,
			TooManyRequestsWindow: 20 * time.Second, Observer: m.kretry}
		tiny := config
		tiny.RetryBudget = transport.RetryBudget{Ratio: 0.001, MinPerSecond: 0.01, Window: 10 * time.Second} // 1 retry in 100s
		out = append(out, &instance{name: name, job: job, cluster: cluster, role: role, metrics: m, clock: clock, upstream: upstream,
			rt: transport.New(upstream, config), tinyRT: transport.New(upstream, tiny)})
		t.Setenv(transport.DisableEnv, "")
	}
	add("10.0.0.7:8001", "kretry-proxy", "", "A")
	for i := 1; i <= 7; i++ {
		add(fmt.Sprintf("10.0.1.%d:8081", i), fleetJob, fleetCluster, "fleet")
	}
	add("10.0.1.8:8081", fleetJob, fleetCluster, "lister")
	add("10.0.1.9:8081", fleetJob, fleetCluster, "off")
	return out
}

// send sends one GET through rt and reads the answer to its end.
func send(t *testing.T, rt http.RoundTripper, target string) {
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

// failing sends target through rt against an upstream that answers 503 past the window.
func (in *instance) failing(t *testing.T, rt http.RoundTripper, target string) {
	t.Helper()
	in.upstream.add(503, 10)
	send(t, rt, target)
	in.upstream.clear()
}

// minute is what instance in does in one minute of the timeline.
func (in *instance) minute(t *testing.T, minute int) {
	t.Helper()
	ok := func(target string) {
		in.upstream.add(200, 1)
		send(t, in.rt, target)
	}
	throttled := func() {
		for range 2 {
			in.upstream.add(429, 2, "Retry-After", "1")
			in.upstream.add(200, 1)
			send(t, in.rt, nextPage)
		}
	}
	switch in.role {
	case "A":
		switch {
		case minute == 1: // the start: two LISTs and a watch-list
			ok(pods)
			ok(configMaps)
			ok(watchList)
		case minute >= outageFrom && minute < outageTo:
			// Its API server answers 503 for longer than the window (2s): the LIST gives up;
			// on the tiny budget a retry is refused first.
			in.failing(t, in.rt, nextPage)
			in.failing(t, in.tinyRT, nextPage)
		case minute >= throttledFrom && minute < throttledTo:
			throttled()
		case minute >= deadlinesFrom && minute < deadlinesTo:
			in.failing(t, in.rt, shortWatch)
		case minute == relistAt:
			ok(pods)
		case minute == refusedAt:
			in.metrics.refused(refusedHost)
			in.metrics.refused(refusedHost)
		case minute == shutdownAt:
			in.metrics.refused(refusedShutdown)
		}
		if minute < outageFrom || minute >= outageTo { // steady traffic, not during the outage
			ok(nextPage)
		}
	case "fleet", "lister":
		blip := minute >= blipFrom && minute < blipTo
		switch {
		case minute == 1:
			ok(configMaps)
			ok(watchList)
		case blip:
			in.failing(t, in.rt, nextPage)
		case minute == fleetRelistAt && in.role == "fleet":
			ok(configMaps)
		case minute >= throttledFrom && minute < throttledTo && in.name < "10.0.1.5":
			throttled()
		}
		if in.role == "lister" && minute > 1 { // a LIST every minute, on purpose: a failing one during the blip
			if blip {
				in.failing(t, in.rt, configMaps)
			} else {
				ok(configMaps)
			}
		}
		if !blip {
			ok(nextPage)
		}
	case "off":
		if minute == 1 {
			ok(configMaps)
		}
		ok(nextPage)
	}
	if n := in.upstream.left(); n != 0 {
		t.Fatalf("%s, minute %d: %d answers left unused", in.name, minute, n)
	}
}

// TestAlertRuleSeries drives the real kretry transport and the proxy's metrics of each
// instance through the timeline and checks that deploy/prometheus's rule tests are written
// from what they produced.
func TestAlertRuleSeries(t *testing.T) {
	instances := newInstances(t)
	series := map[string][]float64{}
	scrape := func(in *instance, minute int) {
		t.Helper()
		if in.role == "off" {
			t.Setenv(transport.DisableEnv, "1") // kretry_enabled reads it at the scrape
			defer t.Setenv(transport.DisableEnv, "")
		}
		families, err := in.metrics.registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, family := range families {
			if !strings.HasPrefix(family.GetName(), "kretry_") {
				continue // go_* and process_* are the runtime's, not the timeline's
			}
			for _, sample := range family.GetMetric() {
				for name, value := range samples(family, sample, in.target()) {
					if series[name] == nil {
						series[name] = make([]float64, timelineMinutes+1)
					}
					series[name][minute] = value
				}
			}
		}
	}
	for _, in := range instances {
		scrape(in, 0) // the collectors as New leaves them, before any request
	}
	for minute := 1; minute <= timelineMinutes; minute++ {
		for _, in := range instances {
			in.clock.Advance(time.Minute)
			in.minute(t, minute)
			scrape(in, minute)
		}
	}
	// The fleet's series that stay at 0 change no rule's answer but kretry_enabled's: left out,
	// so that the file stays readable.
	for name, values := range series {
		if strings.Contains(name, `job="`+fleetJob+`"`) && !strings.HasPrefix(name, "kretry_enabled{") && !slices.ContainsFunc(values, func(v float64) bool { return v != 0 }) {
			delete(series, name)
		}
	}
	golden(t, rulesTestFile, rulesTest(t, series, instances))
}

// target are the labels the scrape adds to an instance's series.
func (in *instance) target() []string {
	labels := []string{"job", in.job, "instance", in.name}
	if in.cluster != "" {
		labels = append(labels, "cluster", in.cluster)
	}
	return labels
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
func samples(family *dto.MetricFamily, sample *dto.Metric, target []string) map[string]float64 {
	labels := func(extra ...string) string {
		extra = append(extra, target...)
		var parts []string
		for _, l := range sample.GetLabel() {
			parts = append(parts, l.GetName()+"="+strconv.Quote(l.GetValue()))
		}
		for i := 0; i < len(extra); i += 2 {
			parts = append(parts, extra[i]+"="+strconv.Quote(extra[i+1]))
		}
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

// expectation is one alert_rule_test entry: at minute, alert fires as alerts say (none: it
// does not fire).
type expectation struct {
	minute int
	alert  string
	alerts []firing
}

// firing is one alert expected to fire: its labels and the value its annotations show.
type firing struct {
	labels map[string]string
	value  float64
}

// expectations are what the rules must say about the timeline.
var expectations = func() []expectation {
	perInstance := func(severity string, names ...string) []firing {
		var out []firing
		for _, name := range names {
			l := map[string]string{"instance": name, "severity": severity}
			if name == "10.0.0.7:8001" {
				l["job"] = "kretry-proxy"
			} else {
				l["job"], l["cluster"] = fleetJob, fleetCluster
			}
			out = append(out, firing{labels: l})
		}
		return out
	}
	fleet := func(severity string, share float64) []firing {
		return []firing{{labels: map[string]string{"cluster": fleetCluster, "job": fleetJob, "severity": severity}, value: share}}
	}
	const a = "10.0.0.7:8001"
	var out []expectation
	for _, alert := range []string{"KretryFleetGivingUp", "KretryFleetRelisting", "KretryFleetThrottled", "KretryGivingUp",
		"KretryRetryBudgetExhausted", "KretryThrottled", "KretryRelistsDespiteKretry", "KretryProxyRefusing"} {
		out = append(out, expectation{minute: 10, alert: alert}) // healthy
	}
	out = append(out,
		// kretry off in one process: pending, then firing after 10 minutes.
		expectation{minute: 5, alert: "KretryDisabled"},
		expectation{minute: 15, alert: "KretryDisabled", alerts: perInstance("info", "10.0.1.9:8081")},
		// The start's fetches are no relists: the processes are young.
		expectation{minute: 15, alert: "KretryRelistsDespiteKretry"},
		expectation{minute: 17, alert: "KretryFleetRelisting"},
		// A's own outage: pending for 10 minutes, then firing for A alone; one instance is no fleet.
		expectation{minute: outageFrom + 5, alert: "KretryGivingUp"},
		expectation{minute: outageFrom + 5, alert: "KretryRetryBudgetExhausted"},
		expectation{minute: outageFrom + 11, alert: "KretryGivingUp", alerts: perInstance("warning", a)},
		expectation{minute: outageFrom + 11, alert: "KretryRetryBudgetExhausted", alerts: perInstance("warning", a)},
		expectation{minute: outageFrom + 11, alert: "KretryFleetGivingUp"},
		expectation{minute: outageTo + 6, alert: "KretryGivingUp"},
		expectation{minute: outageTo + 6, alert: "KretryRetryBudgetExhausted"},
		// 429 pressure is pending, not firing, until it has lasted 15 minutes.
		expectation{minute: throttledFrom + 10, alert: "KretryThrottled"},
		expectation{minute: throttledFrom + 10, alert: "KretryFleetThrottled"},
		expectation{minute: throttledFrom + 18, alert: "KretryThrottled", alerts: perInstance("warning", a, "10.0.1.1:8081", "10.0.1.2:8081", "10.0.1.3:8081", "10.0.1.4:8081")},
		expectation{minute: throttledFrom + 18, alert: "KretryFleetThrottled", alerts: fleet("warning", 0.5)},
		expectation{minute: throttledFrom + 18, alert: "KretryGivingUp"},
		expectation{minute: throttledTo + 10, alert: "KretryThrottled"},
		expectation{minute: throttledTo + 10, alert: "KretryFleetThrottled"},
		// Watches that run out of their own timeout, for 13 minutes: no give-up alert.
		expectation{minute: deadlinesTo - 1, alert: "KretryGivingUp"},
		expectation{minute: relistAt + 2, alert: "KretryRelistsDespiteKretry", alerts: perInstance("info", a)},
		// The control plane fails for 2 minutes: one fleet alert, no per-instance give-up alert;
		// the fleet relists after it (the program that LISTs every minute on purpose does not count).
		expectation{minute: blipFrom + 1, alert: "KretryFleetGivingUp"},
		expectation{minute: blipTo + 1, alert: "KretryFleetGivingUp", alerts: fleet("critical", 1)},
		expectation{minute: blipTo + 1, alert: "KretryGivingUp"},
		expectation{minute: fleetRelistAt + 1, alert: "KretryFleetRelisting", alerts: fleet("warning", 7.0/8)},
		expectation{minute: fleetRelistAt + 1, alert: "KretryRelistsDespiteKretry", alerts: perInstance("info", a,
			"10.0.1.1:8081", "10.0.1.2:8081", "10.0.1.3:8081", "10.0.1.4:8081", "10.0.1.5:8081", "10.0.1.6:8081", "10.0.1.7:8081")},
		expectation{minute: blipTo + 9, alert: "KretryFleetGivingUp"},
		expectation{minute: refusedAt + 2, alert: "KretryProxyRefusing", alerts: perInstance("warning", a)},
		expectation{minute: fleetRelistAt + 17, alert: "KretryFleetRelisting"},
		expectation{minute: relistAt + 17, alert: "KretryRelistsDespiteKretry", alerts: perInstance("info",
			"10.0.1.1:8081", "10.0.1.2:8081", "10.0.1.3:8081", "10.0.1.4:8081", "10.0.1.5:8081", "10.0.1.6:8081", "10.0.1.7:8081")},
		// A refusal while shutting down is the proxy draining, not an alert.
		expectation{minute: shutdownAt + 2, alert: "KretryProxyRefusing"},
	)
	return out
}()

// render fills in the two templates the rules' annotations use: the alert's value as a
// percentage and its job.
func render(text string, f firing) string {
	return strings.NewReplacer(
		"{{ $value | humanizePercentage }}", strconv.FormatFloat(f.value*100, 'g', 4, 64)+"%",
		"{{ $labels.job }}", f.labels["job"],
	).Replace(text)
}

// rulesTest writes the promtool rule test: series and expectations, with each alert's
// annotations as the rules file states them.
func rulesTest(t *testing.T, series map[string][]float64, instances []*instance) []byte {
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
	tested := map[string]bool{}
	for _, e := range expectations {
		if len(e.alerts) > 0 {
			tested[e.alert] = true
		}
	}
	for alert := range annotations {
		if !tested[alert] {
			t.Errorf("the timeline never fires %s", alert)
		}
	}

	var b bytes.Buffer
	b.WriteString("# Written by TestAlertRuleSeries (cmd/kretry-proxy/proxy/alerts_series_test.go) from the series the\n" +
		"# real kretry transport and kretry-proxy's metrics produced on a scripted timeline, one scrape a\n" +
		"# minute, for one kretry-proxy (job kretry-proxy) and a fleet of nine (job configmap-watcher,\n" +
		"# cluster prod-eu-1: seven alike, one that LISTs every minute on purpose, one with kretry off);\n" +
		"# process_start_time_seconds (the process collector's) says each process started at 0.\n" +
		"# Do not edit: KRETRY_UPDATE=1 rewrites it. Run with `make rules-test`.\n")
	b.WriteString("rule_files:\n  - kretry-rules.yaml\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n")
	names := make([]string, 0, len(series))
	for name := range series {
		names = append(names, name)
	}
	for _, in := range instances {
		var labels []string
		for i, target := 0, in.target(); i < len(target); i += 2 {
			labels = append(labels, target[i]+"="+strconv.Quote(target[i+1]))
		}
		sort.Strings(labels)
		names = append(names, "process_start_time_seconds{"+strings.Join(labels, ",")+"}")
	}
	sort.Strings(names)
	for _, name := range names {
		values := series[name]
		if values == nil {
			values = make([]float64, timelineMinutes+1) // the start time, 0
		}
		fmt.Fprintf(&b, "      - series: '%s'\n        values: '%s'\n", name, expanding(values))
	}
	b.WriteString("    alert_rule_test:\n")
	for _, e := range expectations {
		fmt.Fprintf(&b, "      - eval_time: %dm\n        alertname: %s\n", e.minute, e.alert)
		if len(e.alerts) == 0 {
			b.WriteString("        exp_alerts: []\n")
			continue
		}
		b.WriteString("        exp_alerts:\n")
		for _, f := range e.alerts {
			b.WriteString("          - exp_labels:\n")
			writeMap(&b, "              ", f.labels)
			if a := annotations[e.alert]; len(a) > 0 {
				rendered := map[string]string{}
				for k, v := range a {
					rendered[k] = render(v, f)
				}
				b.WriteString("            exp_annotations:\n")
				writeMap(&b, "              ", rendered)
			}
		}
	}
	return b.Bytes()
}

// expanding writes values in promtool's expanding notation: a run of n+1 values that grow
// by a constant step as "start+stepxn" ("0+0x109" is 110 zeros), a lone value as itself.
func expanding(values []float64) string {
	format := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	var parts []string
	for i := 0; i < len(values); {
		j := i + 1
		if j < len(values) {
			step := values[j] - values[i]
			for j+1 < len(values) && values[j+1]-values[j] == step {
				j++
			}
			if j-i >= 2 {
				sign := "+"
				if step < 0 {
					sign, step = "-", -step
				}
				parts = append(parts, format(values[i])+sign+format(step)+"x"+strconv.Itoa(j-i))
				i = j + 1
				continue
			}
		}
		parts = append(parts, format(values[i]))
		i++
	}
	return strings.Join(parts, " ")
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
	if err := yaml.Unmarshal(want, &manifest); err != nil || len(manifest.Spec.Groups) != 2 || len(manifest.Spec.Groups[0].Rules)+len(manifest.Spec.Groups[1].Rules) != 9 {
		t.Errorf("the manifest does not read back as two groups of 9 rules: %v", err)
	}
}
