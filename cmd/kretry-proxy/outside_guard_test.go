package main_test

// An outside test of kretry-proxy's guard: the binary is built and run as a user runs it, against
// a fake API server on loopback that records every request reaching it, and raw HTTP requests
// (hand-written request lines, so that the exact request target is sent) check what it lets
// through. The contract is DESIGN's "kretry-proxy" section and docs/kretry-proxy.md: nothing
// reaching the proxy can run a command or open a tunnel unless --allow-upgrades, it acts with its
// own identity only, and legitimate reads and writes are never refused.

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	outsideToken      = "outside-proxy-own-token"
	outsideCaseHeader = "X-Outside-Case"
)

// outsideRecord is one request that reached the fake API server.
type outsideRecord struct {
	method     string
	requestURI string
	header     http.Header
}

// outsideAPIServer is a fake API server that records what reaches it and answers every request
// with an empty list (a watch gets its headers and is held open until the client goes).
type outsideAPIServer struct {
	srv *httptest.Server

	mu      sync.Mutex
	records []outsideRecord
}

func outsideStartAPIServer(t *testing.T) *outsideAPIServer {
	t.Helper()
	s := &outsideAPIServer{}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.srv.StartTLS()
	t.Cleanup(s.srv.Close)
	return s
}

func (s *outsideAPIServer) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.records = append(s.records, outsideRecord{method: r.Method, requestURI: r.RequestURI, header: r.Header.Clone()})
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	watch := r.URL.Query().Get("watch")
	if r.Method == http.MethodGet && (watch == "true" || watch == "1" || strings.Contains(r.URL.Path, "/watch/")) {
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, `{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","namespace":"ns","resourceVersion":"2"}}}`+"\n")
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
		return
	}
	_, _ = io.WriteString(w, `{"kind":"List","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}`)
}

// reached returns the requests that carried the case's id.
func (s *outsideAPIServer) reached(id string) []outsideRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []outsideRecord
	for _, r := range s.records {
		if r.header.Get(outsideCaseHeader) == id {
			out = append(out, r)
		}
	}
	return out
}

// outsideBuild builds the kretry-proxy binary from this directory once per test run.
func outsideBuild(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kretry-proxy")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// outsideKubeconfig writes a kubeconfig for the fake server with a bearer token.
func outsideKubeconfig(t *testing.T, s *outsideAPIServer) string {
	t.Helper()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.srv.Certificate().Raw})
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: outside
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: outside
  user:
    token: %s
contexts:
- name: outside
  context:
    cluster: outside
    user: outside
current-context: outside
`, s.srv.URL, base64.StdEncoding.EncodeToString(ca), outsideToken)
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// outsideSyncBuffer is a bytes.Buffer safe to write from the child's output copier and read here.
type outsideSyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *outsideSyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *outsideSyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

var outsideServeLine = regexp.MustCompile(`Starting to serve on (127\.0\.0\.1:\d+)`)

// outsideStartProxy runs the binary on a free loopback port and returns its address.
func outsideStartProxy(t *testing.T, bin, kubeconfig string, extra ...string) string {
	t.Helper()
	args := append([]string{"--kubeconfig", kubeconfig, "--address", "127.0.0.1", "--port", "0"}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG=", "KUBERNETES_SERVICE_HOST=", "KUBERNETES_SERVICE_PORT=")
	var out outsideSyncBuffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if m := outsideServeLine.FindStringSubmatch(out.String()); m != nil {
			return m[1]
		}
		if cmd.ProcessState != nil {
			break
		}
		time.Sleep(20 * time.Millisecond) // polling for the child's startup line, not timing
	}
	t.Fatalf("kretry-proxy did not print its address; output:\n%s", out.String())
	return ""
}

// outsideReq is one raw request: method, the exact request target, extra header lines.
type outsideReq struct {
	method  string
	target  string
	headers []string // "Name: value" lines, sent as written
	host    string   // Host header; the proxy's own address when empty
}

// String is how a failure names the request: its method, target, header lines and Host.
func (r outsideReq) String() string {
	s := r.method + " " + r.target
	if len(r.headers) > 0 {
		s += fmt.Sprintf(" %q", r.headers)
	}
	if r.host != "" {
		s += " Host: " + r.host
	}
	return s
}

type outsideResp struct {
	status int
	body   string
}

// writeHeadersAndBody ends a request written by hand: its header lines, "Connection: close"
// unless they set a Connection of their own, the blank line, and a small JSON body for a
// method that carries one.
func writeHeadersAndBody(b *strings.Builder, method string, headers []string) {
	hasConnection := false
	for _, h := range headers {
		if strings.HasPrefix(strings.ToLower(h), "connection:") {
			hasConnection = true
		}
		b.WriteString(h + "\r\n")
	}
	if !hasConnection {
		b.WriteString("Connection: close\r\n")
	}
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch:
		b.WriteString("Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
	default:
		b.WriteString("\r\n")
	}
}

// outsideSend writes the request by hand on a fresh connection and reads the response head (and,
// for anything but a 2xx, up to 4 KiB of its body).
func outsideSend(t *testing.T, addr, id string, r outsideReq) outsideResp {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	host := r.host
	if host == "" {
		host = addr
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n%s: %s\r\n", r.method, r.target, host, outsideCaseHeader, id)
	writeHeadersAndBody(&b, r.method, r.headers)
	if _, err := io.WriteString(conn, b.String()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: r.method})
	if err != nil {
		t.Fatalf("%s %s: reading the response: %v", r.method, r.target, err)
	}
	out := outsideResp{status: resp.StatusCode}
	if resp.StatusCode >= 300 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		out.body = string(body)
	}
	// The body is not closed: closing drains it, and a watch's never ends; closing the
	// connection (deferred) ends it.
	return out
}

// outsideEnv is one running proxy in front of one fake API server.
type outsideEnv struct {
	api  *outsideAPIServer
	addr string
	n    int
}

func (e *outsideEnv) id(t *testing.T) string {
	e.n++
	return fmt.Sprintf("%s#%d", t.Name(), e.n)
}

// refused: a 4xx Status from the proxy, and nothing reached the API server.
func (e *outsideEnv) refused(t *testing.T, r outsideReq) {
	t.Helper()
	id := e.id(t)
	resp := outsideSend(t, e.addr, id, r)
	if got := e.api.reached(id); len(got) > 0 {
		t.Errorf("%s: reached the API server as %s %s (proxy answered %d); want refused", r, got[0].method, got[0].requestURI, resp.status)
		return
	}
	if resp.status < 400 || resp.status >= 500 {
		t.Errorf("%s: proxy answered %d %q; want a 4xx refusal", r, resp.status, outsideShort(resp.body))
		return
	}
	if !strings.Contains(resp.body, `"kind":"Status"`) {
		t.Errorf("%s: refused with %d but the body is not a Status: %q", r, resp.status, outsideShort(resp.body))
	}
}

// passed: the request reached the API server with its method, and the proxy's answer is the
// server's 200.
func (e *outsideEnv) passed(t *testing.T, r outsideReq) []outsideRecord {
	t.Helper()
	id := e.id(t)
	resp := outsideSend(t, e.addr, id, r)
	got := e.api.reached(id)
	if len(got) == 0 {
		t.Errorf("%s: never reached the API server (proxy answered %d %q); a legitimate request must pass", r, resp.status, outsideShort(resp.body))
		return nil
	}
	if got[0].method != r.method {
		t.Errorf("%s %s: reached the API server as %s", r.method, r.target, got[0].method)
	}
	if resp.status != http.StatusOK {
		t.Errorf("%s %s: reached the API server but the proxy answered %d %q", r.method, r.target, resp.status, outsideShort(resp.body))
	}
	return got
}

func outsideShort(s string) string {
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}

// outsideNodeCommandTargets spells a kubelet command endpoint behind the node proxy in many ways.
func outsideNodeCommandTargets() []string {
	var out []string
	kubelet := []string{
		"run/ns/p/c?cmd=id",
		"run/ns/p/uid/c?cmd=id",
		"exec/ns/p/c?command=id&output=1",
		"attach/ns/p/c?output=1",
		"portForward/ns/p",
		"cri/exec/token",
		"checkpoint/ns/p/c",
	}
	nodes := []string{"node-1", "node-1:10250", "https:node-1:10250", "http:node-1:10255", "nodes", "proxy", "run", "metrics"}
	for _, n := range nodes {
		for _, k := range kubelet {
			out = append(out, "/api/v1/nodes/"+n+"/proxy/"+k)
		}
	}
	out = append(out,
		// case
		"/api/v1/nodes/node-1/proxy/RUN/ns/p/c?cmd=id",
		"/api/v1/nodes/node-1/proxy/Run/ns/p/c?cmd=id",
		"/api/v1/nodes/node-1/proxy/EXEC/ns/p/c?command=id",
		"/api/v1/nodes/node-1/proxy/portforward/ns/p",
		"/api/v1/nodes/node-1/proxy/PortForward/ns/p",
		"/api/v1/nodes/node-1/PROXY/run/ns/p/c?cmd=id",
		"/api/v1/NODES/node-1/proxy/run/ns/p/c?cmd=id",
		// percent-encoding, single and double
		"/api/v1/nodes/node-1/proxy/%72un/ns/p/c?cmd=id",
		"/api/v1/nodes/node-1/proxy/%2572un/ns/p/c?cmd=id",
		"/api/v1/nodes/node-1/proxy/run%2Fns%2Fp%2Fc?cmd=id",
		"/api/v1/nodes/node-1/proxy/run%2fns%2fp%2fc?cmd=id",
		"/api/v1/nodes/node-1/proxy/run%252Fns%252Fp%252Fc?cmd=id",
		"/api/v1/nodes/node-1/proxy%2Frun/ns/p/c?cmd=id",
		"/api/v1/nodes/node-1%2Fproxy%2Frun/ns/p/c?cmd=id",
		"/api/v1/nodes/node-1/%70roxy/run/ns/p/c?cmd=id",
		"/api/v1/nodes/node-1/proxy/ru%6E/ns/p/c?cmd=id",
		"/api/v1/nodes/node-1/proxy/ru%256E/ns/p/c?cmd=id",
		// dot segments, plain and encoded (the exact bypass first)
		"/api/v1/nodes/node-1/proxy/run/ns/p/x%252F..%252F..%252F..%252F../c?cmd=id",
		"/api/v1/nodes/node-1/proxy/metrics/../run/ns/p/c?cmd=id",
		"/api/v1/nodes/node-1/proxy/metrics/%2e%2e/run/ns/p/c?cmd=id",
		"/api/v1/nodes/node-1/proxy/metrics/%2E%2E/run/ns/p/c?cmd=id",
		"/api/v1/nodes/node-1/proxy/metrics/%252e%252e/run/ns/p/c?cmd=id",
		"/api/v1/nodes/node-1/proxy/metrics%2F..%2Frun/ns/p/c?cmd=id",
		"/api/v1/nodes/node-1/proxy/metrics%252F..%252Frun/ns/p/c?cmd=id",
		"/api/v1/nodes/node-1/proxy/metrics%252F%252e%252e%252Frun/ns/p/c?cmd=id",
		"/api/v1/nodes/node-1/proxy/stats/../../proxy/run/ns/p/c?cmd=id",
		"/api/v1/nodes/node-1/proxy/./run/ns/p/c?cmd=id",
		"/api/v1/nodes/node-1/proxy/%2e/run/ns/p/c?cmd=id",
		"/api/v1/nodes/node-1/proxy/%252e/run/ns/p/c?cmd=id",
		"/api/v1/nodes/x/../node-1/proxy/run/ns/p/c?cmd=id",
		"/api/v1/nodes/node-1/proxy/run/ns/p/c/../c?cmd=id",
		// empty segments, trailing slashes
		"/api/v1/nodes/node-1/proxy//run/ns/p/c?cmd=id",
		"/api/v1/nodes/node-1/proxy/run//ns/p/c?cmd=id",
		"/api/v1/nodes/node-1//proxy/run/ns/p/c?cmd=id",
		"//api/v1/nodes/node-1/proxy/run/ns/p/c?cmd=id",
		"/api/v1/nodes/node-1/proxy/run/ns/p/c/?cmd=id",
		"/api/v1/nodes/node-1/proxy/%2Frun/ns/p/c?cmd=id",
		"/api/v1/nodes/node-1/proxy/%252Frun/ns/p/c?cmd=id",
		// ; params
		"/api/v1/nodes/node-1/proxy/run;x=y/ns/p/c?cmd=id",
		"/api/v1/nodes/node-1;x=y/proxy/run/ns/p/c?cmd=id",
		"/api/v1/nodes/node-1/proxy/metrics;/../run/ns/p/c?cmd=id",
		// query-only variations
		"/api/v1/nodes/node-1/proxy/run/ns/p/c",
		"/api/v1/nodes/node-1/proxy/run/ns/p/c?",
		"/api/v1/nodes/node-1/proxy/run/ns/p/c?cmd=id&x=/../metrics",
		"/api/v1/nodes/node-1/proxy/run/ns/p/c?/metrics",
		// absolute-form request target
		"http://127.0.0.1/api/v1/nodes/node-1/proxy/run/ns/p/c?cmd=id",
	)
	return out
}

// outsidePodCommandTargets spells pods' exec, attach and portforward in many ways, under
// namespaces and pods named like resource words.
func outsidePodCommandTargets() []string {
	var out []string
	words := []string{"ns", "namespaces", "pods", "proxy", "exec", "attach", "nodes", "api", "watch", "v1"}
	for _, ns := range words {
		for _, sub := range []string{"exec?command=id&stdout=1", "attach?stdout=1", "portforward?ports=80"} {
			out = append(out, "/api/v1/namespaces/"+ns+"/pods/p/"+sub)
		}
	}
	for _, pod := range []string{"namespaces", "pods", "exec", "proxy", "portforward"} {
		out = append(out, "/api/v1/namespaces/pods/pods/"+pod+"/exec?command=id")
	}
	out = append(out,
		"/api/v1/namespaces/namespaces/pods/pods/exec?command=id",
		"/api/v1/namespaces/ns/pods/p/exec/?command=id",
		"/api/v1/namespaces/ns/pods/p/exec",
		"/api/v1/namespaces/ns/pods/p//exec?command=id",
		"/api/v1/namespaces/ns/pods/p/./exec?command=id",
		"/api/v1/namespaces/ns/pods/p/x/../exec?command=id",
		"/api/v1/namespaces/ns/pods/p/log/../exec?command=id",
		"/api/v1/namespaces/ns/pods/p/%2e%2e/p/exec?command=id",
		"/api/v1/namespaces/ns/pods/p%2Fexec?command=id",
		"/api/v1/namespaces/ns/pods%2Fp%2Fexec?command=id",
		"/api/v1/namespaces/ns/pods/p/%65xec?command=id",
		"/api/v1/namespaces/ns/pods/p/%65%78%65%63?command=id",
		"/api/v1/namespaces/ns/pods/p/%61ttach?stdout=1",
		"/api/v1/namespaces/ns/pods/p/port%66orward?ports=80",
		"/api/v1/namespaces/%6es/pods/p/exec?command=id",
		"/api/v1/%6eamespaces/ns/pods/p/exec?command=id",
		"//api/v1/namespaces/ns/pods/p/exec?command=id",
		"/api//v1/namespaces/ns/pods/p/exec?command=id",
		"/api/v1/namespaces/ns/pods/p/Exec?command=id",
		"/api/v1/namespaces/ns/pods/p/EXEC?command=id",
		"/api/v1/namespaces/ns/pods/p/portForward?ports=80",
		"/api/v1/namespaces/ns/pods/p/exec?",
		"/api/v1/namespaces/ns/pods/p/exec?x=/../log",
		"http://127.0.0.1/api/v1/namespaces/ns/pods/p/exec?command=id",
	)
	return out
}

// outsideKubeletPortTargets spells requests that a pod's or a service's proxy would carry to a
// kubelet's port (10250, or the read-only 10255) and that are not the kubelet's reads: a
// hostNetwork pod's IP is its node's, and a Service such as kube-system/kubelet points at every
// node's 10250.
func outsideKubeletPortTargets() []outsideReq {
	var out []outsideReq
	kubelet := []outsideReq{
		{method: http.MethodPost, target: "run/ns/p/c?cmd=id"},
		{method: http.MethodPost, target: "run/ns/p/uid/c?cmd=id"},
		{method: http.MethodPost, target: "exec/ns/p/c?command=id&output=1"},
		{method: http.MethodPost, target: "attach/ns/p/c?output=1"},
		{method: http.MethodPost, target: "portForward/ns/p"},
		{method: http.MethodPost, target: "cri/exec/token"},
		{method: http.MethodPost, target: "checkpoint/ns/p/c"},
		{method: http.MethodPut, target: "debug/flags/v"},
		{method: http.MethodGet, target: "debug/pprof/profile"},
		{method: http.MethodGet, target: "no-such-endpoint"},
		{method: http.MethodPost, target: "RUN/ns/p/c?cmd=id"},
	}
	proxies := []string{
		"/api/v1/namespaces/kube-system/pods/https:kube-proxy-x7k2p:10250/proxy/",
		"/api/v1/namespaces/kube-system/pods/kube-proxy-x7k2p:10250/proxy/",
		"/api/v1/namespaces/kube-system/pods/http:kube-proxy-x7k2p:10255/proxy/",
		"/api/v1/namespaces/kube-system/pods/kube-proxy-x7k2p:010250/proxy/",
		"/api/v1/namespaces/kube-system/services/https:kubelet:10250/proxy/",
		"/api/v1/namespaces/kube-system/services/kubelet:10250/proxy/",
		"/api/v1/namespaces/kube-system/services/http:kubelet:10255/proxy/",
		"/api/v1/namespaces/kube-system/services/https:kubelet:+10250/proxy/",
		"/api/v1/namespaces/kube-system/Services/HTTPS:kubelet:10250/Proxy/",
		"/api/v1/namespaces/pods/pods/services:10250/proxy/",
		"/api/v1/proxy/namespaces/kube-system/pods/https:kube-proxy-x7k2p:10250/",
		"/api/v1/proxy/namespaces/kube-system/services/https:kubelet:10250/",
	}
	for _, p := range proxies {
		for _, k := range kubelet {
			out = append(out, outsideReq{method: k.method, target: p + k.target})
		}
	}
	return out
}

func TestOutsideGuard(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the kretry-proxy binary")
	}
	bin := outsideBuild(t)
	api := outsideStartAPIServer(t)
	kubeconfig := outsideKubeconfig(t, api)
	env := &outsideEnv{api: api, addr: outsideStartProxy(t, bin, kubeconfig)}

	// DESIGN: pods' exec, attach, portforward refused unless --allow-upgrades, whatever the
	// namespace is called and however the path is spelt.
	t.Run("PodCommandsRefused", func(t *testing.T) {
		for _, target := range outsidePodCommandTargets() {
			for _, m := range []string{http.MethodPost, http.MethodGet} {
				env.refused(t, outsideReq{method: m, target: target})
			}
		}
	})

	// DESIGN: the kubelet endpoints behind nodes/NAME/proxy/ that run commands or open streams
	// are refused; only the kubelet's read endpoints, listed by name, pass; a non-canonical path
	// leading to a proxy subresource is refused.
	t.Run("NodeProxyCommandsRefused", func(t *testing.T) {
		for _, target := range outsideNodeCommandTargets() {
			for _, m := range []string{http.MethodPost, http.MethodGet} {
				env.refused(t, outsideReq{method: m, target: target})
			}
		}
	})

	// A pod's or a service's proxy to a kubelet's port, named by number, whatever the scheme:
	// judged as the node proxy is, only the kubelet's read endpoints pass.
	t.Run("KubeletPortProxiesRefused", func(t *testing.T) {
		for _, r := range outsideKubeletPortTargets() {
			env.refused(t, r)
		}
	})

	// The kubelet's reads through a pod's or a service's proxy to its port pass, and so does
	// everything through a proxy to any other port (an application's own /run).
	t.Run("KubeletPortProxiesReadsAndOtherPortsPass", func(t *testing.T) {
		for _, r := range []outsideReq{
			{method: http.MethodGet, target: "/api/v1/namespaces/kube-system/pods/https:kube-proxy-x7k2p:10250/proxy/metrics"},
			{method: http.MethodGet, target: "/api/v1/namespaces/kube-system/pods/kube-proxy-x7k2p:10250/proxy/stats/summary"},
			{method: http.MethodGet, target: "/api/v1/namespaces/kube-system/pods/http:kube-proxy-x7k2p:10255/proxy/pods"},
			{method: http.MethodGet, target: "/api/v1/namespaces/kube-system/services/https:kubelet:10250/proxy/metrics/cadvisor"},
			{method: http.MethodGet, target: "/api/v1/namespaces/kube-system/services/https:kubelet:10250/proxy/"},
			{method: http.MethodPost, target: "/api/v1/namespaces/ns/pods/web:8080/proxy/run/job"},
			{method: http.MethodPost, target: "/api/v1/namespaces/ns/pods/https:web:102500/proxy/run"},
			{method: http.MethodPost, target: "/api/v1/namespaces/ns/services/https:web:443/proxy/exec"},
			{method: http.MethodGet, target: "/api/v1/namespaces/ns/services/web:1025/proxy/debug/pprof/"},
		} {
			env.passed(t, r)
		}
	})

	// Paths no kube-apiserver since v1.10 routes (the root /proxy prefix was removed, and a
	// subresource "proxy;x=y" is no proxy subresource): refusing them is not required, but if
	// the proxy lets them through it must pass them on exactly as sent, never rewritten into a
	// path that does lead to a kubelet.
	t.Run("UnroutedPathsRefusedOrVerbatim", func(t *testing.T) {
		for _, target := range []string{
			"/api/v1/proxy/nodes/node-1/run/ns/p/c?cmd=id",
			"/api/v1/proxy/nodes/node-1:10250/run/ns/p/c?cmd=id",
			"/api/v1/proxy/nodes/https:node-1:10250/exec/ns/p/c?command=id",
			"/api/v1/proxy/nodes/node-1/%72un/ns/p/c?cmd=id",
			"/api/v1/proxy/namespaces/ns/pods/p/exec?command=id",
			"/api/v1/nodes/node-1/proxy;x=y/run/ns/p/c?cmd=id",
		} {
			id := env.id(t)
			resp := outsideSend(t, env.addr, id, outsideReq{method: http.MethodPost, target: target})
			got := env.api.reached(id)
			switch {
			case len(got) == 0 && (resp.status < 400 || resp.status >= 500):
				t.Errorf("POST %s: not forwarded, but answered %d %q; want a 4xx refusal", target, resp.status, outsideShort(resp.body))
			case len(got) > 0 && got[0].requestURI != target:
				t.Errorf("POST %s: reached the API server rewritten as %s", target, got[0].requestURI)
			case len(got) > 0:
				t.Logf("POST %s: forwarded verbatim (no route behind it)", target)
			}
		}
	})

	// DESIGN: only the kubelet's read endpoints, listed by name, pass behind nodes/NAME/proxy/:
	// a write to a kubelet's debug endpoint or an unknown endpoint is refused.
	t.Run("NodeProxyUnlistedRefused", func(t *testing.T) {
		for _, r := range []outsideReq{
			{method: http.MethodPut, target: "/api/v1/nodes/node-1/proxy/debug/flags/v"},
			{method: http.MethodPost, target: "/api/v1/nodes/node-1/proxy/checkpoint/ns/p/c"},
			{method: http.MethodGet, target: "/api/v1/nodes/node-1/proxy/no-such-endpoint"},
			// Not a kubelet route since v1.21 (cAdvisor's JSON endpoints were removed), so not
			// one of the read endpoints the kubelet's routes give.
			{method: http.MethodGet, target: "/api/v1/nodes/node-1/proxy/spec"},
		} {
			env.refused(t, r)
		}
	})

	// DESIGN: a non-canonical path is refused wherever it leads to a proxy subresource (pods'
	// and services' proxy too), since a router behind may decode it again.
	t.Run("NonCanonicalProxyRefused", func(t *testing.T) {
		for _, target := range []string{
			"/api/v1/namespaces/ns/pods/p/proxy/a/../b",
			"/api/v1/namespaces/ns/pods/p/proxy/a/%2e%2e/b",
			"/api/v1/namespaces/ns/pods/p/proxy/a%2F..%2Fb",
			"/api/v1/namespaces/ns/pods/p/proxy/a%252F..%252Fb",
			"/api/v1/namespaces/ns/pods/p/proxy//b",
			"/api/v1/namespaces/ns/pods/p/proxy/./b",
			"/api/v1/namespaces/ns/pods/p/proxy/a%25b",
			"/api/v1/namespaces/ns/services/https:svc:443/proxy/a/%2e%2e/b",
			"/api/v1/namespaces/ns/services/svc/proxy/a%2Fb",
			"/api/v1/nodes/node-1/proxy/metrics/../stats/summary",
			"/api/v1/nodes/node-1/proxy//metrics",
			"/api/v1/nodes/node-1/proxy/stats%2Fsummary",
			"/api/v1/nodes/node-1/proxy/metrics%252Fcadvisor",
		} {
			env.refused(t, outsideReq{method: http.MethodGet, target: target})
		}
	})

	// DESIGN: CONNECT and TRACE are refused.
	t.Run("ConnectTraceRefused", func(t *testing.T) {
		for _, r := range []outsideReq{
			{method: "CONNECT", target: "/api/v1/namespaces/ns/pods/p/proxy/"},
			{method: "CONNECT", target: "/api/v1/namespaces/ns/services/svc:80/proxy/"},
			{method: "CONNECT", target: "/api/v1/nodes/node-1/proxy/metrics"},
			{method: "CONNECT", target: "/api/v1/namespaces/ns/pods/p/portforward?ports=80"},
			{method: "CONNECT", target: "/api/v1/namespaces"},
			{method: "CONNECT", target: "127.0.0.1:443"},
			{method: "TRACE", target: "/api/v1/namespaces"},
			{method: "TRACE", target: "/version"},
		} {
			env.refused(t, r)
		}
	})

	// DESIGN: every protocol upgrade is refused, detected as httpstream.IsUpgradeRequest does
	// (any Connection value containing "upgrade"), on any path, reads included.
	t.Run("UpgradesRefused", func(t *testing.T) {
		variants := [][]string{
			{"Connection: Upgrade", "Upgrade: websocket"},
			{"Connection: upgrade", "Upgrade: SPDY/3.1"},
			{"Connection: UPGRADE", "Upgrade: websocket"},
			{"Connection: keep-alive, Upgrade", "Upgrade: websocket"},
			{"Connection: keep-alive", "Connection: Upgrade", "Upgrade: websocket"},
			{"Connection: x-upgrade-x", "Upgrade: websocket"},
			{"Connection: Upgrade", "Upgrade: h2c", "HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA"},
			{"Connection: Upgrade"},
		}
		for _, target := range []string{
			"/api/v1/namespaces/ns/pods/p/proxy/",
			"/api/v1/namespaces/ns/pods?watch=true",
			"/api/v1/nodes/node-1/proxy/metrics",
			"/version",
		} {
			for _, h := range variants {
				env.refused(t, outsideReq{method: http.MethodGet, target: target, headers: h})
			}
		}
	})

	// DESIGN: loopback Host and Origin only.
	t.Run("ForeignHostOriginRefused", func(t *testing.T) {
		env.refused(t, outsideReq{method: http.MethodGet, target: "/api/v1/namespaces", host: "evil.example"})
		env.refused(t, outsideReq{method: http.MethodGet, target: "/api/v1/namespaces", headers: []string{"Origin: http://evil.example"}})
	})

	// DESIGN: it acts with its own identity and nobody else's: the client's Authorization,
	// Impersonate-*, cookies and the front-proxy identity headers never reach the API server.
	t.Run("IdentityHeadersDropped", func(t *testing.T) {
		headers := []string{
			"Authorization: Bearer client-token",
			"Impersonate-User: system:admin",
			"Impersonate-Group: system:masters",
			"Impersonate-Uid: 0",
			"Impersonate-Extra-Scopes: all",
			"Cookie: session=abc",
			"X-Remote-User: system:admin",
			"X-Remote-Group: system:masters",
			"X-Remote-Extra-Foo: bar",
			"X-Remote-Uid: 0",
			"x-remote-user: lower-admin",
		}
		dropped := []string{"Impersonate-User", "Impersonate-Group", "Impersonate-Uid", "Impersonate-Extra-Scopes", "Cookie", "X-Remote-User", "X-Remote-Group", "X-Remote-Extra-Foo", "X-Remote-Uid"}
		for _, r := range []outsideReq{
			{method: http.MethodGet, target: "/api/v1/namespaces/ns/pods", headers: headers},
			{method: http.MethodGet, target: "/api/v1/namespaces/ns/pods?watch=true", headers: headers},
			{method: http.MethodPost, target: "/api/v1/namespaces/ns/configmaps", headers: headers},
			{method: http.MethodGet, target: "/api/v1/nodes/node-1/proxy/metrics", headers: headers},
		} {
			for _, rec := range env.passed(t, r) {
				for _, name := range dropped {
					if v := rec.header.Values(name); len(v) > 0 {
						t.Errorf("%s %s: %s: %q reached the API server", r.method, r.target, name, v)
					}
				}
				if got := rec.header.Values("Authorization"); len(got) != 1 || got[0] != "Bearer "+outsideToken {
					t.Errorf("%s %s: Authorization at the API server = %q, want only the proxy's own token", r.method, r.target, got)
				}
			}
		}
	})

	// The API server takes its audit's sourceIPs from X-Forwarded-For and X-Real-Ip: a client's
	// own never reach it, and X-Forwarded-For is the one the proxy sets, the client's loopback
	// address; nor does any other X-Forwarded-* or Forwarded header.
	t.Run("SourceHeadersDropped", func(t *testing.T) {
		for _, r := range []outsideReq{
			{method: http.MethodGet, target: "/api/v1/namespaces/ns/pods"},
			{method: http.MethodGet, target: "/api/v1/namespaces/ns/pods?watch=true"},
			{method: http.MethodPost, target: "/api/v1/namespaces/ns/configmaps"},
		} {
			r.headers = outsideSourceHeaders
			for _, rec := range env.passed(t, r) {
				outsideCheckSource(t, r, rec)
			}
		}
	})

	// --accept-hosts as the flag table spells its default, and as a user spells loopback names,
	// is matched whole: a name that only contains an accepted one is refused, in Host and Origin.
	t.Run("AcceptHostsMatchedWhole", func(t *testing.T) {
		for _, flagValue := range []string{outsideDocumentedDefault(t, "--accept-hosts"), "localhost,127.0.0.1,::1", "localhost, 127.0.0.1, ::1", "localhost"} {
			t.Run(flagValue, func(t *testing.T) {
				hosts := &outsideEnv{api: api, addr: outsideStartProxy(t, bin, kubeconfig, "--accept-hosts="+flagValue)}
				for _, foreign := range []string{"localhost.evil.example", "127.0.0.1.evil.example", "evil-localhost.example", "xlocalhost", "localhostx", "::1.evil.example", "::10"} {
					hosts.refused(t, outsideReq{method: http.MethodGet, target: "/api/v1/namespaces", host: foreign})
					hosts.refused(t, outsideReq{method: http.MethodGet, target: "/api/v1/namespaces", host: foreign + ":8001"})
					hosts.refused(t, outsideReq{method: http.MethodGet, target: "/api/v1/namespaces", headers: []string{"Origin: http://" + foreign}})
				}
				hosts.passed(t, outsideReq{method: http.MethodGet, target: "/api/v1/namespaces", host: "localhost:8001"})
				hosts.passed(t, outsideReq{method: http.MethodGet, target: "/api/v1/namespaces", host: "localhost", headers: []string{"Origin: http://localhost:3000"}})
				if flagValue != "localhost" {
					hosts.passed(t, outsideReq{method: http.MethodGet, target: "/api/v1/namespaces", host: "127.0.0.1:8001"})
					hosts.passed(t, outsideReq{method: http.MethodGet, target: "/api/v1/namespaces", host: "[::1]:8001"})
				}
			})
		}
	})

	// DESIGN: a kubelet's metrics and stats stay reachable (and the read endpoints listed by
	// name pass); reads and watches of kubectl, the Python client and client-node are never
	// refused, whatever their namespaces and objects are called; writes pass through.
	t.Run("LegitimateRequestsPass", func(t *testing.T) {
		for _, r := range []outsideReq{
			{method: http.MethodGet, target: "/api/v1/pods"},
			{method: http.MethodGet, target: "/api/v1/pods?watch=true&resourceVersion=1&allowWatchBookmarks=true"},
			{method: http.MethodGet, target: "/api/v1/namespaces/ns/pods"},
			{method: http.MethodGet, target: "/api/v1/namespaces/ns/pods/p"},
			{method: http.MethodGet, target: "/api/v1/namespaces/ns/pods/p/log?container=c"},
			{method: http.MethodGet, target: "/api/v1/namespaces/pods/pods"},
			{method: http.MethodGet, target: "/api/v1/namespaces/pods/pods?watch=true"},
			{method: http.MethodGet, target: "/api/v1/namespaces/pods/pods?watch=1&timeoutSeconds=300"},
			{method: http.MethodGet, target: "/api/v1/watch/namespaces/exec/pods"},
			{method: http.MethodGet, target: "/api/v1/namespaces/namespaces/pods/p"},
			{method: http.MethodGet, target: "/api/v1/namespaces/exec/pods/exec"},
			{method: http.MethodGet, target: "/api/v1/namespaces/proxy/pods/proxy"},
			{method: http.MethodGet, target: "/api/v1/namespaces/attach/pods/attach/log?container=exec"},
			{method: http.MethodGet, target: "/api/v1/namespaces/portforward/pods/portforward/status"},
			{method: http.MethodGet, target: "/api/v1/namespaces/exec"},
			{method: http.MethodGet, target: "/api/v1/namespaces/ns/configmaps/exec"},
			{method: http.MethodGet, target: "/api/v1/namespaces/ns/pods?fieldSelector=metadata.name%3Dexec"},
			{method: http.MethodGet, target: "/api/v1/namespaces/ns/pods?labelSelector=app%3Dproxy%2Ctier+in+%28run%29"},
			{method: http.MethodGet, target: "/api/v1/nodes"},
			{method: http.MethodGet, target: "/api/v1/nodes?watch=1"},
			{method: http.MethodGet, target: "/api/v1/nodes/run"},
			{method: http.MethodGet, target: "/api/v1/nodes/exec/status"},
			{method: http.MethodGet, target: "/api/v1/nodes/node-1/proxy/metrics"},
			{method: http.MethodGet, target: "/api/v1/nodes/node-1/proxy/metrics?x=1"},
			{method: http.MethodGet, target: "/api/v1/nodes/node-1/proxy/metrics/cadvisor"},
			{method: http.MethodGet, target: "/api/v1/nodes/node-1/proxy/metrics/resource"},
			{method: http.MethodGet, target: "/api/v1/nodes/node-1/proxy/metrics/probes"},
			{method: http.MethodGet, target: "/api/v1/nodes/node-1/proxy/stats/summary"},
			{method: http.MethodGet, target: "/api/v1/nodes/node-1/proxy/stats/summary?only_cpu_and_memory=true"},
			{method: http.MethodGet, target: "/api/v1/nodes/node-1/proxy/healthz"},
			{method: http.MethodGet, target: "/api/v1/nodes/node-1/proxy/pods"},
			{method: http.MethodGet, target: "/api/v1/nodes/node-1/proxy/configz"},
			{method: http.MethodGet, target: "/api/v1/nodes/node-1:10250/proxy/metrics"},
			{method: http.MethodGet, target: "/api/v1/nodes/https:node-1:10250/proxy/stats/summary"},
			{method: http.MethodGet, target: "/api/v1/nodes/run/proxy/metrics"},
			{method: http.MethodGet, target: "/api/v1/nodes/proxy/proxy/stats/summary"},
			{method: http.MethodGet, target: "/apis/apps/v1/deployments?watch=1"},
			{method: http.MethodGet, target: "/apis/apps/v1/namespaces/pods/deployments/exec"},
			{method: http.MethodGet, target: "/apis/apps/v1/namespaces/exec/deployments?watch=true"},
			{method: http.MethodGet, target: "/version"},
			{method: http.MethodGet, target: "/version?timeout=32s"},
			{method: http.MethodGet, target: "/openapi/v2"},
			{method: http.MethodGet, target: "/openapi/v3"},
			{method: http.MethodGet, target: "/api"},
			{method: http.MethodGet, target: "/api/v1"},
			{method: http.MethodGet, target: "/apis"},
			{method: http.MethodGet, target: "/api/v1/namespaces", host: "localhost"},
			{method: http.MethodGet, target: "/api/v1/namespaces", headers: []string{"Origin: http://127.0.0.1"}},
			{method: http.MethodGet, target: "/api/v1/namespaces", headers: []string{"Connection: keep-alive"}},
			{method: http.MethodPost, target: "/api/v1/namespaces/exec/configmaps"},
			{method: http.MethodPost, target: "/api/v1/namespaces/pods/pods"},
			{method: http.MethodPut, target: "/api/v1/namespaces/proxy/configmaps/exec"},
			{method: http.MethodPatch, target: "/api/v1/namespaces/attach/configmaps/run"},
			{method: http.MethodDelete, target: "/api/v1/namespaces/exec"},
		} {
			env.passed(t, r)
		}
	})

	// With --allow-upgrades, the same command paths reach the API server: the refusals above
	// are the guard's, not the harness's.
	t.Run("AllowUpgradesLetsCommandsThrough", func(t *testing.T) {
		allow := &outsideEnv{api: api, addr: outsideStartProxy(t, bin, kubeconfig, "--allow-upgrades")}
		for _, target := range []string{
			"/api/v1/namespaces/ns/pods/p/exec?command=id",
			"/api/v1/namespaces/namespaces/pods/p/attach?stdout=1",
			"/api/v1/nodes/node-1/proxy/run/ns/p/c?cmd=id",
			"/api/v1/nodes/node-1/proxy/exec/ns/p/c?command=id",
		} {
			allow.passed(t, outsideReq{method: http.MethodPost, target: target})
		}
		allow.passed(t, outsideReq{method: http.MethodPost, target: "/api/v1/namespaces/kube-system/services/https:kubelet:10250/proxy/run/ns/p/c?cmd=id"})

		// An upgrade: a bearer token in Sec-WebSocket-Protocol (client-go's and browsers' way
		// to send one over WebSocket) never reaches the API server, the other protocols do;
		// the source headers are the proxy's on this path too.
		for _, protocols := range []string{
			"v5.channel.k8s.io, base64url.bearer.authorization.k8s.io.Y2xpZW50LXRva2Vu, v4.channel.k8s.io",
			"base64url.bearer.authorization.k8s.io.Y2xpZW50LXRva2Vu,v5.channel.k8s.io",
		} {
			r := outsideReq{method: http.MethodGet, target: "/api/v1/namespaces/ns/pods/p/exec?command=id&stdout=1", headers: append([]string{
				"Connection: Upgrade", "Upgrade: websocket", "Sec-WebSocket-Version: 13", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
				"Sec-WebSocket-Protocol: " + protocols,
				"Sec-WebSocket-Protocol: Base64url.Bearer.Authorization.k8s.io.b3RoZXI",
			}, outsideSourceHeaders...)}
			// The fake API server answers 200, not 101, and the proxy then answers 500: what
			// reached the API server is what counts here.
			id := allow.id(t)
			resp := outsideSend(t, allow.addr, id, r)
			reached := api.reached(id)
			if len(reached) == 0 {
				t.Errorf("%s: never reached the API server (proxy answered %d %q)", r, resp.status, outsideShort(resp.body))
			}
			for _, rec := range reached {
				got := strings.Join(rec.header.Values("Sec-WebSocket-Protocol"), ",")
				if strings.Contains(strings.ToLower(got), "bearer") {
					t.Errorf("upgrade: Sec-WebSocket-Protocol %q reached the API server", got)
				}
				for _, want := range []string{"v5.channel.k8s.io"} {
					if !strings.Contains(got, want) {
						t.Errorf("upgrade: Sec-WebSocket-Protocol %q at the API server lost %s", got, want)
					}
				}
				outsideCheckSource(t, r, rec)
			}
		}
	})
}

// outsideSourceHeaders claim another source for a request: the API server's audit reads
// X-Forwarded-For and X-Real-Ip for sourceIPs; the rest are a reverse proxy's to set.
var outsideSourceHeaders = []string{
	"X-Forwarded-For: 203.0.113.7",
	"x-forwarded-for: 198.51.100.9",
	"X-Real-Ip: 203.0.113.7",
	"Forwarded: for=203.0.113.7;proto=https",
	"X-Forwarded-Host: kubernetes.default",
	"X-Forwarded-Proto: https",
	"X-Forwarded-Port: 443",
	"X-Forwarded-Uri: /api",
}

// outsideCheckSource fails unless the only source header rec carries is the proxy's
// X-Forwarded-For with the client's loopback address.
func outsideCheckSource(t *testing.T, r outsideReq, rec outsideRecord) {
	t.Helper()
	for name, values := range rec.header {
		lower := strings.ToLower(name)
		if lower == "x-forwarded-for" {
			if strings.Join(values, ", ") != "127.0.0.1" {
				t.Errorf("%s %s: X-Forwarded-For %q reached the API server, want the proxy's own, 127.0.0.1", r.method, r.target, values)
			}
			continue
		}
		if lower == "forwarded" || lower == "x-real-ip" || strings.HasPrefix(lower, "x-forwarded-") {
			t.Errorf("%s %s: %s: %q reached the API server", r.method, r.target, name, values)
		}
	}
}

// outsideDocumentedDefault is the default docs/kretry-proxy.md's flag table gives flag, as
// spelt there (between backquotes).
func outsideDocumentedDefault(t *testing.T, flag string) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "kretry-proxy.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(doc), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || strings.TrimSpace(cells[1]) != "`"+flag+"`" {
			continue
		}
		value := strings.TrimSpace(cells[2])
		if len(value) < 2 || value[0] != '`' || value[len(value)-1] != '`' || strings.Count(value, "`") != 2 {
			t.Errorf("the flag table's default for %s is %s, not one value between backquotes: a user cannot copy it", flag, value)
			return strings.ReplaceAll(value, "`", "")
		}
		return value[1 : len(value)-1]
	}
	t.Fatalf("docs/kretry-proxy.md has no row for %s in its flag table", flag)
	return ""
}
