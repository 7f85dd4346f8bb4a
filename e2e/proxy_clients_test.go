//go:build e2e

package e2e_test

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kretry/kretry/internal/harness/apiserver"
)

// clientTools are the programs the kretry-proxy scenario runs: kretry-proxy built from this
// checkout, kubectl v1.37.2 and the client-node install from tools/e2e-deps.sh, and Debian's
// Python with python3-kubernetes.
type clientTools struct {
	kretryProxy string // binary
	kubectl     string // binary
	python      string // interpreter with the kubernetes package
	pythonCache string // e2e/clients/python/watch_cache.py
	node        string // binary
	nodeDir     string // holds node_modules and informer.mjs
}

// findClientTools builds kretry-proxy and finds the rest; what is missing skips the test, or
// fails it under KRETRY_E2E.
func findClientTools(t *testing.T) clientTools {
	t.Helper()
	missing := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...) + " (run `make e2e-deps`)"
		if os.Getenv(apiserver.E2EEnv) == "" {
			t.Skip(msg)
		}
		t.Fatal(msg)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Dir(wd)
	binDir, err := apiserver.FindBinDir()
	if err != nil {
		missing("%v", err)
	}
	tools := clientTools{
		kretryProxy: filepath.Join(t.TempDir(), "kretry-proxy"),
		kubectl:     filepath.Join(binDir, "kubectl"),
		python:      "/usr/bin/python3",
		pythonCache: filepath.Join(root, "e2e", "clients", "python", "watch_cache.py"),
		nodeDir:     filepath.Join(root, ".apiserver", "e2e-clients", "node"),
	}
	if _, err := os.Stat(tools.kubectl); err != nil {
		missing("no kubectl: %v", err)
	}
	if out, err := exec.Command(tools.python, "-c", "import kubernetes").CombinedOutput(); err != nil {
		missing("%s cannot import kubernetes: %v: %s", tools.python, err, bytes.TrimSpace(out))
	}
	if tools.node, err = exec.LookPath("node"); err != nil {
		missing("no node: %v", err)
	}
	if _, err := os.Stat(filepath.Join(tools.nodeDir, "node_modules", "@kubernetes", "client-node")); err != nil {
		missing("no @kubernetes/client-node in %s", tools.nodeDir)
	}
	// An ES module finds its packages next to itself, so the script goes beside node_modules.
	script, err := os.ReadFile(filepath.Join(root, "e2e", "clients", "node", "informer.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tools.nodeDir, "informer.mjs"), script, 0o644); err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-o", tools.kretryProxy, ".")
	build.Dir = filepath.Join(root, "cmd", "kretry-proxy")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build kretry-proxy: %v\n%s", err, out)
	}
	return tools
}

// writeKubeconfig writes a kubeconfig for server; with a token (and the cluster's CA) for the
// straight path, with neither for kretry-proxy's plain loopback HTTP.
func writeKubeconfig(t *testing.T, server string, token string) string {
	t.Helper()
	cluster := fmt.Sprintf("server: %s", server)
	user := "{}"
	if token != "" {
		cluster += fmt.Sprintf("\n    certificate-authority-data: %s", base64.StdEncoding.EncodeToString(clusterCA()))
		user = fmt.Sprintf("{token: %s}", token)
	}
	content := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    %s
users:
- name: e2e
  user: %s
contexts:
- name: e2e
  context: {cluster: e2e, user: e2e}
current-context: e2e
`, cluster, user)
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func clusterCA() []byte { return cluster.CAData() }

// outLine is one line a process printed on stdout, and when.
type outLine struct {
	At   time.Duration // since the scenario began
	Text string
}

// process is a child of the test, in a process group of its own and killed with the test
// binary if it dies (Pdeathsig). Its stdout is kept line by line, its stderr's tail for
// failure reports.
type process struct {
	name  string
	began time.Time
	cmd   *exec.Cmd
	done  chan struct{}

	mu      sync.Mutex
	lines   []outLine
	stderr  bytes.Buffer
	waitErr error
	exitAt  time.Duration
}

func startProcess(t *testing.T, name string, began time.Time, dir string, bin string, args ...string) *process {
	t.Helper()
	return startProcessEnv(t, name, began, dir, nil, bin, args...)
}

// startProcessEnv is startProcess with env ("KEY=value") added to the environment.
func startProcessEnv(t *testing.T, name string, began time.Time, dir string, env []string, bin string, args ...string) *process {
	t.Helper()
	p := &process{name: name, began: began, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Dir = dir
	p.cmd.Env = append(append(os.Environ(), "HOME="+t.TempDir(), "KUBECONFIG=", "NO_COLOR=1"), env...)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stderr = &lockedWriter{mu: &p.mu, w: &p.stderr}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		scanner := bufio.NewScanner(stdout)
		scanner.Buffer(make([]byte, 64<<10), 4<<20)
		for scanner.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, outLine{At: time.Since(p.began), Text: scanner.Text()})
			p.mu.Unlock()
		}
		err := p.cmd.Wait()
		p.mu.Lock()
		p.waitErr, p.exitAt = err, time.Since(p.began)
		p.mu.Unlock()
		close(p.done)
	}()
	t.Cleanup(func() { p.stop(5 * time.Second) })
	return p
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w.Len() > 64<<10 {
		return len(b), nil // enough for a report
	}
	return l.w.Write(b)
}

func (p *process) output() []outLine {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]outLine(nil), p.lines...)
}

func (p *process) stderrTail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stderr.String()
	if len(s) > 2000 {
		s = s[len(s)-2000:]
	}
	return s
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// exit is how and when the process ended; ok is false while it runs.
func (p *process) exit() (err error, at time.Duration, ok bool) {
	if !p.exited() {
		return nil, 0, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waitErr, p.exitAt, true
}

// stop sends SIGTERM and waits up to grace, then kills the group; it reports whether the
// process ended within grace (or had ended before).
func (p *process) stop(grace time.Duration) bool {
	if p.exited() {
		return true
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return true
	case <-time.After(grace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		return false
	}
}

// waitLine waits until match accepts a line of p's stdout and returns it.
func (p *process) waitLine(timeout time.Duration, match func(string) bool) (string, error) {
	deadline := time.Now().Add(timeout)
	for {
		for _, l := range p.output() {
			if match(l.Text) {
				return l.Text, nil
			}
		}
		if p.exited() {
			err, _, _ := p.exit()
			return "", fmt.Errorf("%s exited (%v); stderr: %s", p.name, err, p.stderrTail())
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("%s: no such line within %v; stderr: %s", p.name, timeout, p.stderrTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// jsonLines decodes the lines of p's stdout that are JSON objects.
func jsonLines(lines []outLine) []map[string]any {
	var objs []map[string]any
	for _, l := range lines {
		var obj map[string]any
		if json.Unmarshal([]byte(l.Text), &obj) == nil {
			objs = append(objs, obj)
		}
	}
	return objs
}

// startKretryProxy runs kretry-proxy against kubeconfig on a free loopback port and returns the
// process and its address.
func startKretryProxy(t *testing.T, tools clientTools, began time.Time, name, kubeconfig string) (*process, string) {
	t.Helper()
	p := startProcess(t, name, began, "", tools.kretryProxy, "--kubeconfig", kubeconfig, "--port", "0")
	line, err := p.waitLine(30*time.Second, func(s string) bool { return strings.HasPrefix(s, "Starting to serve on ") })
	if err != nil {
		t.Fatal(err)
	}
	return p, strings.TrimPrefix(line, "Starting to serve on ")
}

// proxyMetric is the sum of one kretry-proxy counter over the series whose labels contain all
// of the given `name="value"` pairs.
var metricLine = regexp.MustCompile(`^(\w+)\{([^}]*)\} (\d+)$`)

func proxyMetrics(addr string) (func(name string, labels ...string) int, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, errors.New(resp.Status)
	}
	type series struct {
		name, labels string
		value        int
	}
	var all []series
	for _, line := range strings.Split(string(body), "\n") {
		if m := metricLine.FindStringSubmatch(line); m != nil {
			v, _ := strconv.Atoi(m[3])
			all = append(all, series{m[1], m[2], v})
		}
	}
	return func(name string, labels ...string) int {
		sum := 0
	series:
		for _, s := range all {
			if s.name != name {
				continue
			}
			for _, l := range labels {
				if !strings.Contains(s.labels, l) {
					continue series
				}
			}
			sum += s.value
		}
		return sum
	}, nil
}
