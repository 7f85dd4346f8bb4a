//go:build e2e

package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kretry/kretry/internal/harness/apiserver"
	"github.com/kretry/kretry/internal/harness/faultproxy"
)

// prometheusBin is Debian's prometheus server (tools/e2e-deps.sh installs it).
const prometheusBin = "/usr/bin/prometheus"

// ruleScale divides every duration of the shipped rules for the monitoring scenario: their
// `for:` durations and the process age shrink 30 times (10 minutes become 20 s); range
// selectors 7.5 times (5 minutes become 40 s), so that a window still holds more than one of
// kretry's 30-second give-ups in a row, as it does at full scale.
const ruleScale = 30

// rangeScale divides the rules' range selectors.
const rangeScale = 7.5

// scaledRules is deploy/prometheus/kretry-rules.yaml with its `for:` durations and the process
// age divided by ruleScale and its range selectors by rangeScale; it fails the test if the file
// no longer has the forms it rewrites.
func scaledRules(t *testing.T, root string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "deploy", "prometheus", "kretry-rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rules := string(raw)
	scale := func(minutes string, by float64) string {
		m, _ := strconv.Atoi(minutes)
		return strconv.Itoa(int(float64(m*60)/by)) + "s"
	}
	for _, form := range []struct {
		re *regexp.Regexp
		by float64
	}{{regexp.MustCompile(`\[(\d+)m\]`), rangeScale}, {regexp.MustCompile(`for: (\d+)m`), ruleScale}} {
		if !form.re.MatchString(rules) {
			t.Fatalf("kretry-rules.yaml has no %s to scale", form.re)
		}
		rules = form.re.ReplaceAllStringFunc(rules, func(s string) string {
			minutes := form.re.FindStringSubmatch(s)[1]
			return strings.Replace(s, minutes+"m", scale(minutes, form.by), 1)
		})
	}
	age := "> 75 * 60"
	if !strings.Contains(rules, age) {
		t.Fatalf("kretry-rules.yaml has no %q to scale", age)
	}
	return strings.ReplaceAll(rules, age, "> "+strconv.Itoa(75*60/ruleScale))
}

// prometheusServer is Debian's prometheus, run by the test on loopback.
type prometheusServer struct {
	url string
}

// startPrometheus runs prometheus scraping targets every second and evaluating rules every
// second, with its data in a temporary directory.
func startPrometheus(t *testing.T, began time.Time, rules string, targets ...string) *prometheusServer {
	t.Helper()
	if _, err := os.Stat(prometheusBin); err != nil {
		msg := fmt.Sprintf("no %s: %v (run `make e2e-deps`)", prometheusBin, err)
		if os.Getenv(apiserver.E2EEnv) == "" {
			t.Skip(msg)
		}
		t.Fatal(msg)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	quoted := make([]string, len(targets))
	for i, target := range targets {
		quoted[i] = strconv.Quote(target)
	}
	config := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files: [rules.yaml]
scrape_configs:
  - job_name: kretry-proxy
    static_configs:
      - targets: [%s]
`, strings.Join(quoted, ", "))
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	startProcess(t, "prometheus", began, dir, prometheusBin,
		"--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	p := &prometheusServer{url: "http://" + addr}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if v, err := p.query("up"); err == nil && len(v) == len(targets) && v[0].value() == 1 {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatal("prometheus did not scrape its targets within 60s")
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// promSample is one element of an instant vector.
type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

func (s promSample) value() float64 {
	text, _ := s.Value[1].(string)
	v, _ := strconv.ParseFloat(text, 64)
	return v
}

// api GETs a Prometheus HTTP API path and decodes its data into out.
func (p *prometheusServer) api(path string, out any) error {
	resp, err := http.Get(p.url + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var envelope struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &envelope); err != nil {
		return fmt.Errorf("%s: %s: %w", path, resp.Status, err)
	}
	if envelope.Status != "success" {
		return fmt.Errorf("%s: %s", path, envelope.Error)
	}
	return json.Unmarshal(envelope.Data, out)
}

// query runs an instant query (an instant vector result).
func (p *prometheusServer) query(q string) ([]promSample, error) {
	var data struct {
		ResultType string       `json:"resultType"`
		Result     []promSample `json:"result"`
	}
	if err := p.api("/api/v1/query?query="+url.QueryEscape(q), &data); err != nil {
		return nil, err
	}
	if data.ResultType != "vector" {
		return nil, fmt.Errorf("%s: a %s, want a vector", q, data.ResultType)
	}
	return data.Result, nil
}

// alertStates are the states of the active alerts by name (pending or firing).
func (p *prometheusServer) alertStates() (map[string]string, error) {
	var data struct {
		Alerts []struct {
			Labels map[string]string `json:"labels"`
			State  string            `json:"state"`
		} `json:"alerts"`
	}
	if err := p.api("/api/v1/alerts", &data); err != nil {
		return nil, err
	}
	states := map[string]string{}
	for _, a := range data.Alerts {
		if states[a.Labels["alertname"]] != "firing" {
			states[a.Labels["alertname"]] = a.State
		}
	}
	return states, nil
}

// dashboardQueries are the queries of deploy/grafana/kretry-dashboard.json, with Grafana's
// variables as a user would have them: $__rate_interval as 1m, $job as every job.
func dashboardQueries(t *testing.T, root string) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "deploy", "grafana", "kretry-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dashboard struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr  string `json:"expr"`
				RefID string `json:"refId"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dashboard); err != nil {
		t.Fatal(err)
	}
	queries := map[string]string{}
	// Every variable as Grafana's "All" has it (a series with no cluster label matches ".*").
	vars := strings.NewReplacer("$__rate_interval", "1m", "$__range", "1h",
		`"$cluster"`, `".*"`, `"$job"`, `".+"`, `"$instance"`, `".+"`)
	for _, panel := range dashboard.Panels {
		for _, target := range panel.Targets {
			q := vars.Replace(target.Expr)
			if strings.Contains(q, "$") {
				t.Fatalf("dashboard %q: a variable this test does not fill in: %s", panel.Title, q)
			}
			queries[panel.Title+" "+target.RefID] = q
		}
	}
	if len(queries) == 0 {
		t.Fatal("the dashboard has no queries")
	}
	return queries
}

// TestPrometheusAlerts: Debian's prometheus scrapes kretry-proxy, which serves three clients'
// LISTs from a real kube-apiserver through a TCP fault proxy, and evaluates the shipped
// alerting rules (durations scaled down: ruleScale, rangeScale). No alert may be active for the
// first 15 s. The clients' LISTs are uncached initial-state fetches made on purpose at a steady
// pace: KretryRelistsDespiteKretry, which compares a process's fetches with its own hour before,
// must never fire for them, before or after the proxy is older than the rule's age.
// The API server then becomes unreachable (every connection cut, new ones refused) for longer
// than kretry's 30 s window: KretryGivingUp must fire, stay firing while the faults last, and
// resolve once the API server is reachable again. A request for a Host the proxy does not
// accept must then fire KretryProxyRefusing, which resolves too. No other alert may fire at
// any point, and every dashboard query must return data.
func TestPrometheusAlerts(t *testing.T) {
	sharedCluster(t)
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Dir(wd)
	tools := clientTools{kretryProxy: filepath.Join(t.TempDir(), "kretry-proxy")} // the only client tool it runs
	build := exec.Command("go", "build", "-o", tools.kretryProxy, ".")
	build.Dir = filepath.Join(root, "cmd", "kretry-proxy")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build kretry-proxy: %v\n%s", err, out)
	}
	began := time.Now()
	tcp, err := faultproxy.New(41, cluster.Server(serverA).Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tcp.Close() })
	kubeconfig := writeKubeconfig(t, "https://"+tcp.Addr(), cluster.Token(apiserver.Admin))
	_, proxyAddr := startKretryProxy(t, tools, began, "kretry-proxy", kubeconfig)
	prom := startPrometheus(t, began, scaledRules(t, root), proxyAddr)

	// The clients: three, each a LIST through kretry-proxy every half second, waiting for its answer.
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	const clients = 3
	listed := make(chan int, clients)
	for range clients {
		go list(ctx, proxyAddr, listed)
	}

	const alert = "KretryGivingUp"
	const relists = "KretryRelistsDespiteKretry"
	since := func() string { return time.Since(began).Round(100 * time.Millisecond).String() }
	never := func(map[string]string) bool { return false }
	started, err := prom.query(`process_start_time_seconds{job="kretry-proxy"}`)
	if err != nil || len(started) != 1 {
		t.Fatalf("process_start_time_seconds of kretry-proxy: %v (%v), want one series", started, err)
	}
	proxyStarted := time.Unix(0, int64(started[0].value()*1e9))
	relistAge := 75 * time.Minute / ruleScale // the rule's process age, scaled
	// watchAlerts polls the alerts for up to d, until until; no alert but allowed (and the
	// relist alert once the proxy is old enough) may fire.
	watchAlerts := func(allowed string, d time.Duration, until func(map[string]string) bool) (map[string]string, bool) {
		t.Helper()
		deadline := time.Now().Add(d)
		for {
			states, err := prom.alertStates()
			if err != nil {
				t.Fatal(err)
			}
			for name, state := range states {
				if name == relists && state != "" {
					t.Errorf("%s %s at %s, kretry-proxy %s old: its clients LIST on purpose, want nothing", name, state, since(),
						time.Since(proxyStarted).Round(100*time.Millisecond))
				}
				if name != allowed && name != relists && state == "firing" {
					t.Errorf("%s fired at %s, want only %s", name, since(), allowed)
				}
			}
			if until(states) || time.Now().After(deadline) {
				return states, until(states)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}

	// Healthy for 15 s: nothing pending or firing (the relist alert is watched by age).
	if states, _ := watchAlerts("", 15*time.Second, never); len(states) != 0 && (len(states) != 1 || states[relists] == "") {
		t.Fatalf("alerts %v before any fault", states)
	}
	// The clients keep LISTing at a steady pace, past the rule's process age: no relist alert.
	watchAlerts("", relistAge+10*time.Second, never)
	relistsAge := time.Since(proxyStarted)
	relistsFired := false
	if states, err := prom.alertStates(); err != nil || states[relists] != "" {
		relistsFired = true
		t.Errorf("%s is %q with kretry-proxy %s old, its clients LISTing steadily (%v): want nothing", relists, states[relists], relistsAge.Round(time.Second), err)
	}

	faultsFrom := time.Since(began)
	if err := tcp.Refuse(); err != nil {
		t.Fatal(err)
	}
	tcp.CutAll()
	t.Logf("faults from %s: the API server unreachable", since())
	// The first give-ups come after kretry's 30 s window; the rule then wants them for its
	// (scaled) 20 s.
	_, fired := watchAlerts(alert, 90*time.Second, func(s map[string]string) bool { return s[alert] == "firing" })
	firedAt := time.Since(began)
	if !fired {
		t.Fatalf("%s did not fire within 90s of the faults", alert)
	}
	t.Logf("%s firing at %s (%s into the faults)", alert, since(), (firedAt - faultsFrom).Round(100*time.Millisecond))
	if states, _ := watchAlerts(alert, 3*time.Second, never); states[alert] != "firing" {
		t.Errorf("%s is %q 3s later, the faults still on; want firing", alert, states[alert])
	}
	if err := tcp.Accept(); err != nil {
		t.Fatal(err)
	}
	faultsTo := time.Since(began)
	t.Logf("faults end at %s: the API server reachable again", since())
	_, resolved := watchAlerts(alert, 90*time.Second, func(s map[string]string) bool { return s[alert] == "" })
	resolvedAt := time.Since(began)
	if !resolved {
		t.Fatalf("%s did not resolve within 90s of the faults' end", alert)
	}
	t.Logf("%s resolved at %s (%s after the faults)", alert, since(), (resolvedAt - faultsTo).Round(100*time.Millisecond))

	// kretry-proxy's own alert: a request for a Host it does not accept is refused.
	const refusing = "KretryProxyRefusing"
	req, _ := http.NewRequest(http.MethodGet, "http://"+proxyAddr+"/api/v1/namespaces/default/configmaps", nil)
	req.Host = "attacker.example"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	refusedAt := time.Since(began)
	t.Logf("a request for Host attacker.example at %s: %s", since(), resp.Status)
	_, fired = watchAlerts(refusing, 30*time.Second, func(s map[string]string) bool { return s[refusing] == "firing" })
	refusingFiredAt := time.Since(began)
	if !fired {
		t.Fatalf("%s did not fire within 30s of the refusal", refusing)
	}
	_, resolved = watchAlerts(refusing, 60*time.Second, func(s map[string]string) bool { return s[refusing] == "" })
	refusingResolvedAt := time.Since(began)
	if !resolved {
		t.Fatalf("%s did not resolve within 60s", refusing)
	}
	t.Logf("%s fired at %s, resolved at %s", refusing, refusingFiredAt.Round(100*time.Millisecond), refusingResolvedAt.Round(100*time.Millisecond))

	giveUps, err := prom.query(`sum(kretry_giveups_total{reason="connection"})`)
	if err != nil || len(giveUps) != 1 || giveUps[0].value() == 0 {
		t.Errorf("kretry_giveups_total{reason=\"connection\"}: %v (%v), want the faults' give-ups", giveUps, err)
	}
	queries := dashboardQueries(t, root)
	for name, q := range queries {
		v, err := prom.query(q)
		if err != nil {
			t.Errorf("dashboard %q: %v", name, err)
		} else if len(v) == 0 {
			t.Errorf("dashboard %q returned no data: %s", name, q)
		}
	}
	stop()
	ok := 0
	for range clients {
		ok += <-listed
	}
	if ok == 0 {
		t.Error("no LIST through kretry-proxy succeeded")
	}
	gaveUp := 0.0
	if len(giveUps) == 1 {
		gaveUp = giveUps[0].value()
	}
	r := func(d time.Duration) time.Duration { return d.Round(100 * time.Millisecond) }
	figure := fmt.Sprintf("prometheus e2e (rules' durations /%d, windows /%g): clients LISTing steadily: %s fired %t, kretry-proxy %s old; API server unreachable %s-%s: %s fired at %s, resolved at %s; "+
		"a refused Host at %s: %s fired at %s, resolved at %s; %d LISTs answered 200, %g gave up; %d dashboard queries returned data\n",
		ruleScale, rangeScale, relists, relistsFired, r(relistsAge), r(faultsFrom), r(faultsTo), alert, r(firedAt), r(resolvedAt),
		r(refusedAt), refusing, r(refusingFiredAt), r(refusingResolvedAt), ok, gaveUp, len(queries))
	t.Log(figure)
	if dir := filepath.Join(root, ".apiserver"); os.MkdirAll(dir, 0o755) == nil {
		_ = os.WriteFile(filepath.Join(dir, "e2e-prometheus-figures.txt"), []byte(figure), 0o644)
	}
}

// list LISTs ConfigMaps through kretry-proxy at addr every half second until ctx ends, then
// sends how many were answered 200.
func list(ctx context.Context, addr string, listed chan<- int) {
	ok := 0
	defer func() { listed <- ok }()
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/api/v1/namespaces/default/configmaps", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				ok++
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}
