//go:build e2e

package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/watch"

	"github.com/kretry/kretry/internal/harness/apiserver"
	"github.com/kretry/kretry/internal/harness/faultproxy"
)

// TestSidecarManifests: examples/sidecar (kustomization, Deployment with the Python program
// and kretry-proxy as a native sidecar, RBAC) passes `kubectl apply --dry-run=server` against
// kube-apiserver, with strict field validation; the same manifests with one misspelt field
// do not, so the check is live.
func TestSidecarManifests(t *testing.T) {
	sharedCluster(t)
	tools := findClientTools(t)
	ns := namespace(t, serverA, "sidecar", 0)
	kubeconfig := writeKubeconfig(t, "https://"+cluster.Server(serverA).Addr(), cluster.Token(apiserver.Admin))
	wd, _ := os.Getwd()
	example := filepath.Join(filepath.Dir(wd), "examples", "sidecar")
	apply := func(dir string) (string, error) {
		cmd := exec.Command(tools.kubectl, "--kubeconfig", kubeconfig, "--cache-dir", t.TempDir(),
			"apply", "--dry-run=server", "--validate=strict", "-n", ns, "-k", dir)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := apply(example)
	if err != nil {
		t.Fatalf("kubectl apply --dry-run=server -k examples/sidecar: %v\n%s", err, out)
	}
	for _, want := range []string{"serviceaccount/configmap-watcher", "role.rbac.authorization.k8s.io/configmap-watcher",
		"rolebinding.rbac.authorization.k8s.io/configmap-watcher", "configmap/configmap-watcher-", "deployment.apps/configmap-watcher"} {
		if !strings.Contains(out, want) || !strings.Contains(out, "(server dry run)") {
			t.Errorf("kubectl apply --dry-run=server printed %q, want %s created (server dry run)", out, want)
		}
	}
	t.Logf("kubectl apply --dry-run=server -k examples/sidecar:\n%s", out)

	broken := t.TempDir()
	entries, err := os.ReadDir(example)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(example, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() == "deployment.yaml" {
			b = bytes.Replace(b, []byte("readOnlyRootFilesystem"), []byte("readOnlyRootFileSystem"), 1)
		}
		os.WriteFile(filepath.Join(broken, e.Name()), b, 0o644)
	}
	if out, err := apply(broken); err == nil || !strings.Contains(out, "readOnlyRootFileSystem") {
		t.Errorf("a misspelt field passed the dry run (%v): %s", err, out)
	}
}

// TestProxyInCluster: kretry-proxy started with nothing but a pod's environment
// (KUBERNETES_SERVICE_HOST and _PORT, a service-account directory with token and ca.crt), the
// sidecar example's Python program watching ConfigMaps through it while a TCP fault proxy
// cuts the proxy's connections (at random, and all at once at 4s, 14s and 20s), an ERROR 500
// event ends a watch at 17s, and a writer changes ConfigMaps for 26s. At 10s the token file is
// rotated, as the kubelet rotates it, to the token of another user; both users are in the API
// server's static token file from the start.
//
// It must show: a SelfSubjectReview through the proxy names the first user before the
// rotation and the second right after, with no restart; the watch unbroken (the program lists
// once, its watch never ends, it delivers every change of a reference watch exactly once
// and in order, and its cache equals the server at the end); the proxy sends one LIST, and
// the watches it resumes after the rotation carry the new token.
func TestProxyInCluster(t *testing.T) {
	sharedCluster(t)
	tools := findClientTools(t)
	ctx := context.Background()
	ns := namespace(t, serverA, "incluster", proxySeedObjects)
	admin := adminClient(serverA)
	start, gens, listRV := listState(t, serverA, ns)
	began := time.Now()
	ref := startRawWatcher(t, began, admin.CoreV1().ConfigMaps(ns), strconv.FormatUint(listRV, 10), false)

	faults := newAPIFaults(t, serverA)
	tcp, err := faultproxy.New(31, faults.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tcp.Close() })
	host, port, err := net.SplitHostPort(tcp.Addr())
	if err != nil {
		t.Fatal(err)
	}

	// The service account's directory, as the kubelet mounts it: ..data a symlink to the
	// current version's directory, token and ca.crt symlinks into it.
	sa := &serviceAccountVolume{dir: t.TempDir()}
	sa.publish(t, cluster.Token(apiserver.Admin), ns)
	for _, f := range []string{"token", "ca.crt", "namespace"} {
		if err := os.Symlink(filepath.Join("..data", f), filepath.Join(sa.dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	proxy := startProcessEnv(t, "kretry-proxy in-cluster", began, "",
		[]string{"KUBERNETES_SERVICE_HOST=" + host, "KUBERNETES_SERVICE_PORT=" + port},
		tools.kretryProxy, "--service-account-dir", sa.dir, "--port", "0")
	line, err := proxy.waitLine(30*time.Second, func(s string) bool { return strings.HasPrefix(s, "Starting to serve on ") })
	if err != nil {
		t.Fatal(err)
	}
	proxyAddr := strings.TrimPrefix(line, "Starting to serve on ")
	if _, err := proxy.waitLine(time.Second, func(s string) bool { return strings.Contains(s, "(in-cluster, service account token") }); err != nil {
		t.Errorf("kretry-proxy did not say it found its cluster in-cluster: %v; stdout %q", err, proxy.output())
	}
	whoAmI := func() string {
		t.Helper()
		user, err := selfSubjectReview("http://" + proxyAddr)
		if err != nil {
			t.Fatalf("SelfSubjectReview through kretry-proxy: %v", err)
		}
		return user
	}
	if user := whoAmI(); user != apiserver.Admin.String() {
		t.Fatalf("SelfSubjectReview before the rotation names %q, want %q", user, apiserver.Admin)
	}

	wd, _ := os.Getwd()
	program := filepath.Join(filepath.Dir(wd), "examples", "sidecar", "watch.py")
	python := startProcessEnv(t, "python (examples/sidecar/watch.py)", began, "",
		[]string{"NAMESPACE=" + ns, "KRETRY_PROXY=http://" + proxyAddr}, tools.python, program)
	if _, err := python.waitLine(60*time.Second, func(s string) bool { return strings.HasPrefix(s, `{"list"`) }); err != nil {
		t.Fatal(err)
	}

	t0 := time.Now()
	w := startWriter(t, serverA, ns, 32, 100*time.Millisecond)
	at := func(d time.Duration) { time.Sleep(time.Until(t0.Add(d))) }
	tcp.SetRule(faultproxy.Rule{CutsPerMinute: proxyCutsPerMinute})
	at(4 * time.Second)
	tcp.CutAll()
	at(10 * time.Second)
	// A WATCH that reaches the wire while the token is being rotated may carry either.
	watchesBefore := len(faults.watchAuthorizations())
	sa.publish(t, cluster.Token(apiserver.Limited), ns)
	if user := whoAmI(); user != apiserver.Limited.String() {
		t.Errorf("SelfSubjectReview right after the rotation names %q, want %q", user, apiserver.Limited)
	}
	watchesDuring := len(faults.watchAuthorizations())
	at(14 * time.Second)
	tcp.CutAll()
	at(17 * time.Second)
	faults.InternalError()
	at(20 * time.Second)
	tcp.CutAll()
	at(24 * time.Second)
	tcp.SetRule(faultproxy.Rule{})
	at(26 * time.Second)
	w.Stop()
	final, err := serverState(ctx, serverA, ns)
	if err != nil {
		t.Fatal(err)
	}

	// Settle: until the reference and the program have every change (at most 20s).
	delivered := func() []rawEvent {
		var evs []rawEvent
		for _, o := range jsonLines(python.output()) {
			if typ, ok := o["event"].(string); ok {
				rv, _ := strconv.ParseUint(fmt.Sprint(o["rv"]), 10, 64)
				evs = append(evs, rawEvent{Type: watch.EventType(typ), Name: fmt.Sprint(o["name"]), RV: rv})
			}
		}
		return evs
	}
	var refEvents []rawEvent
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		refEvents = ref.snapshot()
		if got, _ := replay(start, gens, listRV, refEvents); fmt.Sprint(got) == fmt.Sprint(final) && len(delivered()) >= len(refEvents) {
			break
		}
	}
	refEvents = ref.snapshot()
	ref.stopAndWait()
	if _, problems := replay(start, gens, listRV, refEvents); len(problems) > 0 || len(ref.closes) > 0 || len(ref.watchErrs) > 0 {
		t.Fatalf("reference watch (no proxy) is not a valid reference: closes=%+v watch errors=%v problems=%v", ref.closes, ref.watchErrs, problems)
	}
	if user := whoAmI(); user != apiserver.Limited.String() {
		t.Errorf("SelfSubjectReview at the end names %q, want %q", user, apiserver.Limited)
	}
	// Stop the program, then ask the proxy what it served (a request is counted when it is
	// over), then stop the proxy, which must shut down cleanly.
	if !python.stop(10 * time.Second) {
		t.Errorf("the Python program did not stop within 10s of SIGTERM")
	}
	metric, err := proxyMetrics(proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	if !proxy.stop(15 * time.Second) {
		t.Errorf("kretry-proxy did not shut down within 15s of SIGTERM; stderr: %s", proxy.stderrTail())
	} else if err, _, _ := proxy.exit(); err != nil {
		t.Errorf("kretry-proxy exited with %v; stderr: %s", err, proxy.stderrTail())
	}

	// What the program saw.
	var cache map[string]any
	lists, ended := -1, -1
	for _, o := range jsonLines(python.output()) {
		if c, ok := o["cache"].(map[string]any); ok {
			cache = c
			lists, ended = int(o["lists"].(float64)), int(o["ended"].(float64))
		}
		if o["ended"] != nil && o["cache"] == nil {
			t.Errorf("the program's watch ended: %v", o)
		}
	}
	if cache == nil {
		t.Fatalf("the program printed no cache at SIGTERM; last lines %q; stderr: %s", lastLines(python.output(), 5), python.stderrTail())
	}
	got := state{}
	for name, rv := range cache {
		got[name] = fmt.Sprint(rv)
	}
	if fmt.Sprint(got) != fmt.Sprint(final) {
		t.Errorf("cache != server:\ncache  %v\nserver %v", got, final)
	}
	if lists != 1 || ended != 0 {
		t.Errorf("the program listed %d times and saw its watch end %d times, want 1 and 0", lists, ended)
	}
	evs := delivered()
	for i := range max(len(evs), len(refEvents)) {
		var want, have rawEvent
		if i < len(refEvents) {
			want = rawEvent{Type: refEvents[i].Type, Name: refEvents[i].Name, RV: refEvents[i].RV}
		}
		if i < len(evs) {
			have = evs[i]
		}
		if have != want {
			t.Errorf("event %d: got %+v, want %+v (every change exactly once, in order; %d delivered, %d changes)", i, have, want, len(evs), len(refEvents))
			break
		}
	}

	// What the proxy did: one LIST and one WATCH served, one LIST sent, watches resumed on
	// the cut connections, the ones after the rotation with the new token.
	wire := faults.counts()
	served := metric("kretry_proxy_requests_total", `class="list"`)
	watches := metric("kretry_proxy_requests_total", `class="watch"`)
	if served != 1 || watches != 1 || wire.Lists != 1 {
		t.Errorf("kretry-proxy served %d LISTs and %d WATCHes and sent %d LISTs, want 1, 1 and 1", served, watches, wire.Lists)
	}
	auths := faults.watchAuthorizations()
	users := make([]string, len(auths))
	after := 0
	for i, a := range auths {
		switch a {
		case "Bearer " + cluster.Token(apiserver.Admin):
			users[i] = apiserver.Admin.String()
		case "Bearer " + cluster.Token(apiserver.Limited):
			users[i] = apiserver.Limited.String()
			if i >= watchesDuring {
				after++
			}
		default:
			users[i] = "someone else"
		}
		if i < watchesBefore && users[i] != apiserver.Admin.String() || i >= watchesDuring && users[i] != apiserver.Limited.String() {
			t.Errorf("WATCH %d on the wire (%d before the rotation, %d during) was %s's", i+1, watchesBefore, watchesDuring-watchesBefore, users[i])
		}
	}
	if after == 0 || wire.InternalErrors == 0 {
		t.Errorf("%d watches after the rotation, %d ERROR events: the scenario did not exercise a resume with the new token", after, wire.InternalErrors)
	}
	t.Logf("in-cluster: %d changes delivered of %d, %d lists, cache == server %v; %d cuts; on the wire %v; watches by user %v",
		len(evs), len(refEvents), lists, fmt.Sprint(got) == fmt.Sprint(final), tcp.Stats().Cuts, wire, users)
}

// listState is a consistent LIST of ns's ConfigMaps: each one's resourceVersion and writer
// generation, and the list's resourceVersion, from which a reference watch starts.
func listState(t *testing.T, server int, ns string) (start state, gens map[string]int, listRV uint64) {
	t.Helper()
	ls, err := listStart(context.Background(), adminClient(server).CoreV1().ConfigMaps(ns))
	if err != nil {
		t.Fatal(err)
	}
	return ls.state, ls.gens, ls.rv
}

// serviceAccountVolume writes a service account's files as the kubelet does: each version in
// a directory of its own, published by renaming the ..data symlink over the last.
type serviceAccountVolume struct {
	dir     string
	version int
}

func (v *serviceAccountVolume) publish(t *testing.T, token, ns string) {
	t.Helper()
	v.version++
	version := fmt.Sprintf("..%d", v.version)
	files := map[string][]byte{"token": []byte(token), "ca.crt": cluster.CAData(), "namespace": []byte(ns)}
	if err := os.Mkdir(filepath.Join(v.dir, version), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(v.dir, version, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tmp := filepath.Join(v.dir, "..data_tmp")
	if err := os.Symlink(version, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(v.dir, "..data")); err != nil {
		t.Fatal(err)
	}
}

// selfSubjectReview asks the API server behind the proxy at base who the request is from.
func selfSubjectReview(base string) (string, error) {
	resp, err := http.Post(base+"/apis/authentication.k8s.io/v1/selfsubjectreviews", "application/json",
		strings.NewReader(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", resp.Status, body)
	}
	var review struct {
		Status struct {
			UserInfo struct{ Username string }
		}
	}
	if err := json.Unmarshal(body, &review); err != nil {
		return "", err
	}
	return review.Status.UserInfo.Username, nil
}
