package main_test

// A trial of kretry-proxy from the outside, by a tester who has not read its implementation: the
// binary is built and run, raw requests are written by hand on loopback, and what reaches a
// recording fake API server (outsideAPIServer, from outside_guard_test.go) is checked against
// the contract (DESIGN's "kretry-proxy" section and docs/kretry-proxy.md).
//
// Whether a request reached the API server is told by counting every request the fake server
// recorded before and after it (the cases run one at a time, each proxy in front of a fake
// server of its own), so a request that lost its correlation header still counts.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	trialBinOnce sync.Once
	trialBinPath string
	trialBinErr  error
)

// trialBin builds the binary once for all the trial's tests.
func trialBin(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the kretry-proxy binary")
	}
	trialBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "kretry-proxy-trial")
		if err != nil {
			trialBinErr = err
			return
		}
		trialBinPath = dir + "/kretry-proxy"
		out, err := exec.Command("go", "build", "-o", trialBinPath, ".").CombinedOutput()
		if err != nil {
			trialBinErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if trialBinErr != nil {
		t.Fatal(trialBinErr)
	}
	return trialBinPath
}

// trialEnv is one proxy in front of one recording fake API server.
type trialEnv struct {
	api  *outsideAPIServer
	addr string
}

func trialStart(t *testing.T, flags ...string) *trialEnv {
	t.Helper()
	bin := trialBin(t)
	api := outsideStartAPIServer(t)
	kc := outsideKubeconfig(t, api)
	return &trialEnv{api: api, addr: outsideStartProxy(t, bin, kc, flags...)}
}

func (e *trialEnv) count() int {
	e.api.mu.Lock()
	defer e.api.mu.Unlock()
	return len(e.api.records)
}

func (e *trialEnv) since(n int) []outsideRecord {
	e.api.mu.Lock()
	defer e.api.mu.Unlock()
	return append([]outsideRecord(nil), e.api.records[n:]...)
}

// trialReq is one hand-written request.
type trialReq struct {
	method  string
	target  string
	host    string   // the Host header's value; the proxy's address when empty; "-" for none, "=" for an empty one
	headers []string // header lines, as written
	proto   string   // HTTP/1.1 when empty
}

func (r trialReq) String() string {
	s := r.method + " " + r.target
	if r.host != "" {
		s += " Host:" + r.host
	}
	if len(r.headers) > 0 {
		s += fmt.Sprintf(" %q", r.headers)
	}
	if r.proto != "" {
		s += " " + r.proto
	}
	return s
}

type trialResp struct {
	status int
	body   string
	header http.Header
	err    error
}

// send writes r on a fresh connection and reads the answer's head and up to 4 KiB of its body.
func (e *trialEnv) send(r trialReq) trialResp {
	return trialSendTo(e.addr, r)
}

// sendRecorded sends r and returns the answer with what reached the API server meanwhile.
func (e *trialEnv) sendRecorded(r trialReq) (trialResp, []outsideRecord) {
	n := e.count()
	resp := e.send(r)
	return resp, e.since(n)
}

func trialSendTo(addr string, r trialReq) trialResp {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return trialResp{err: err}
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	proto := r.proto
	if proto == "" {
		proto = "HTTP/1.1"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s\r\n", r.method, r.target, proto)
	switch r.host {
	case "":
		fmt.Fprintf(&b, "Host: %s\r\n", addr)
	case "-":
	case "=":
		b.WriteString("Host: \r\n")
	default:
		fmt.Fprintf(&b, "Host: %s\r\n", r.host)
	}
	writeHeadersAndBody(&b, r.method, r.headers)
	if _, err := io.WriteString(conn, b.String()); err != nil {
		return trialResp{err: err}
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: r.method})
	if err != nil {
		return trialResp{err: err}
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return trialResp{status: resp.StatusCode, body: string(body), header: resp.Header}
}

// refused: nothing reached the API server and the proxy answered a 4xx Status.
func (e *trialEnv) refused(t *testing.T, r trialReq) {
	t.Helper()
	resp, got := e.sendRecorded(r)
	if len(got) > 0 {
		t.Errorf("REACHED the API server as %s %s (proxy answered %d): %s", got[0].method, got[0].requestURI, resp.status, r)
		return
	}
	if resp.err != nil {
		t.Errorf("%s: %v", r, resp.err)
		return
	}
	if resp.status < 400 || resp.status > 499 {
		t.Errorf("%s: proxy answered %d %q; want a 4xx refusal", r, resp.status, outsideShort(resp.body))
		return
	}
	if resp.status == http.StatusBadRequest && strings.HasPrefix(resp.body, "400 Bad Request") {
		return // Go's HTTP server refused it before any handler
	}
	if !strings.Contains(resp.body, `"kind":"Status"`) {
		t.Errorf("%s: refused with %d, body not a Status: %q", r, resp.status, outsideShort(resp.body))
	}
}

// notReached: nothing reached the API server, whatever the proxy answered.
func (e *trialEnv) notReached(t *testing.T, r trialReq) trialResp {
	t.Helper()
	resp, got := e.sendRecorded(r)
	if len(got) > 0 {
		t.Errorf("REACHED the API server as %s %s (proxy answered %d): %s", got[0].method, got[0].requestURI, resp.status, r)
	}
	return resp
}

// passed: the request reached the API server (once or more) and the proxy answered 200.
func (e *trialEnv) passed(t *testing.T, r trialReq) []outsideRecord {
	t.Helper()
	resp, got := e.sendRecorded(r)
	if len(got) == 0 {
		t.Errorf("%s: never reached the API server (proxy answered %d %q); want passed", r, resp.status, outsideShort(resp.body))
		return nil
	}
	if resp.status != http.StatusOK {
		t.Errorf("%s: reached the API server, proxy answered %d %q", r, resp.status, outsideShort(resp.body))
	}
	return got
}

// reached: the request reached the API server; the proxy's answer is not looked at (an upgrade
// the fake server answers with 200 rather than 101 ends in an error).
func (e *trialEnv) reached(t *testing.T, r trialReq) []outsideRecord {
	t.Helper()
	resp, got := e.sendRecorded(r)
	if len(got) == 0 {
		t.Errorf("%s: never reached the API server (proxy answered %d %q)", r, resp.status, outsideShort(resp.body))
	}
	return got
}

// kubeletPortSpellings are ways to write 10250 (or 10255) in NAME:PORT that kube-apiserver and
// Go's net.Dial read as that number: pods' ResourceLocation joins the port string into the
// host as it is (net.Dial's parsePort takes a leading "+" and zeros), services' parses it with
// strconv.ParseInt (which takes a leading "+" too); percent-encoding is decoded once before.
var kubeletPortSpellings = []string{
	"10250", "010250", "00000010250", "+10250", "+010250", "10255", "010255", "+10255",
	"1025%30", "%31%30%32%35%30", "%2B10250", "%2b10250", "%2B%30%31%30%32%35%30",
}

// kubeletNames are NAME:PORT ids with a kubelet port, with every scheme prefix kube-apiserver's
// SplitSchemeNamePort takes ("", "http", "https"; an empty scheme with three parts is valid), and
// some it does not (upper case), where a deny-by-default guard refuses too.
func kubeletNames(name string) []string {
	var out []string
	for _, port := range kubeletPortSpellings {
		for _, scheme := range []string{"", "https:", "http:", ":"} {
			out = append(out, scheme+name+":"+port)
		}
	}
	for _, id := range []string{
		"HTTPS:" + name + ":10250", "Https:" + name + ":10250", "HTTP:" + name + ":10255",
		name + "%3A10250", name + "%3a10250", "https%3A" + name + "%3A10250", "https:" + name + "%3A%2B10250",
		"%68ttps:" + name + ":10250", "htt%70:" + name + ":10255",
	} {
		out = append(out, id)
	}
	return out
}

// kubeletCommands are kubelet endpoints that are not among its read endpoints, as method and
// what follows proxy/.
var kubeletCommands = []struct{ method, rest string }{
	{"POST", "run/ns/p/c?cmd=id"},
	{"POST", "run/ns/p/uid/c?cmd=id"},
	{"POST", "run"},
	{"POST", "run/"},
	{"POST", "Run/ns/p/c?cmd=id"},
	{"POST", "RUN/ns/p/c?cmd=id"},
	{"POST", "rUn/ns/p/c"},
	{"GET", "exec/ns/p/c?command=id"},
	{"POST", "exec/ns/p/c?command=id"},
	{"POST", "Exec/ns/p/c?command=id"},
	{"POST", "attach/ns/p/c"},
	{"POST", "portForward/ns/p"},
	{"POST", "portforward/ns/p"},
	{"POST", "PortForward/ns/p"},
	{"POST", "cri/exec/abc"},
	{"GET", "cri/portforward/abc"},
	{"POST", "checkpoint/ns/p/c"},
	{"PUT", "debug/flags/v"},
	{"GET", "debug/pprof/profile"},
	{"GET", "spec/"},
	{"DELETE", "no-such-endpoint"},
	{"PATCH", "run/ns/p/c"},
	{"OPTIONS", "run/ns/p/c"},
	{"POST", "run%2Fns/p/c"},
	{"POST", "%72un/ns/p/c"}, // %72 is r: "run" once decoded
	{"POST", "ru%6E/ns/p/c"},
}

// kubeletProxyPrefixes are pods' and services' proxies, subresource and legacy form, in a few
// namespaces named as resource words.
func kubeletProxyPrefixes() []string {
	var out []string
	for _, ns := range []string{"kube-system", "nodes", "proxy"} {
		for _, id := range kubeletNames("kube-proxy-x7k2p") {
			out = append(out, "/api/v1/namespaces/"+ns+"/pods/"+id+"/proxy/")
		}
		for _, id := range kubeletNames("kubelet") {
			out = append(out, "/api/v1/namespaces/"+ns+"/services/"+id+"/proxy/")
		}
	}
	for _, id := range []string{"https:kube-proxy-x7k2p:10250", "kube-proxy-x7k2p:+10250", "kube-proxy-x7k2p:010255", ":kube-proxy-x7k2p:10250", "kube-proxy-x7k2p%3A10250"} {
		out = append(out, "/api/v1/proxy/namespaces/kube-system/pods/"+id+"/")
	}
	for _, id := range []string{"https:kubelet:10250", "kubelet:+10250", "http:kubelet:010255", ":kubelet:10250", "kubelet%3A10250"} {
		out = append(out, "/api/v1/proxy/namespaces/kube-system/services/"+id+"/")
	}
	return out
}

// TestTrialKubeletPortProxies: DESIGN and the docs ("A kubelet behind a pod's or a service's
// proxy"): a pod's or a service's proxy to port 10250 or 10255, as a number, with or without a
// scheme, is judged as a node's proxy: only the kubelet's read endpoints pass. Every spelling
// kube-apiserver reads as that number must be judged so.
func TestTrialKubeletPortProxies(t *testing.T) {
	e := trialStart(t)
	prefixes := kubeletProxyPrefixes()
	t.Run("CommandsRefused", func(t *testing.T) {
		for _, p := range prefixes {
			for _, c := range kubeletCommands {
				e.refused(t, trialReq{method: c.method, target: p + c.rest})
			}
		}
	})
	// "whatever the scheme prefix": a scheme kube-apiserver v1.37 does not take (its
	// SplitSchemeNamePort takes "", http and https only, and answers 400 to any other) is
	// refused as HTTPS: is, deny-by-default, rather than let through as not-a-kubelet.
	t.Run("UnknownSchemeRefused", func(t *testing.T) {
		for _, scheme := range []string{"ws:", "wss:", "tcp:", "h2c:"} {
			for _, p := range []string{
				"/api/v1/namespaces/kube-system/pods/" + scheme + "kube-proxy-x7k2p:10250/proxy/",
				"/api/v1/namespaces/kube-system/services/" + scheme + "kubelet:10250/proxy/",
				"/api/v1/proxy/namespaces/kube-system/pods/" + scheme + "kube-proxy-x7k2p:10255/",
			} {
				e.refused(t, trialReq{method: "POST", target: p + "run/ns/p/c?cmd=id"})
			}
		}
		// four parts is no id kube-apiserver takes; logged only
		for _, target := range []string{"/api/v1/namespaces/kube-system/pods/https:x:kube-proxy-x7k2p:10250/proxy/run/ns/p/c"} {
			resp, got := e.sendRecorded(trialReq{method: "POST", target: target})
			t.Logf("POST %s -> %d, reached: %v", target, resp.status, len(got) > 0)
		}
	})
	// Non-canonical spellings that lead to a proxy are refused anyway.
	t.Run("NonCanonicalRefused", func(t *testing.T) {
		for _, target := range []string{
			"/api/v1/namespaces/kube-system/pods/kube-proxy-x7k2p:10250/proxy//run/ns/p/c",
			"/api/v1/namespaces/kube-system/pods/kube-proxy-x7k2p:10250/proxy/metrics/../run/ns/p/c",
			"/api/v1/namespaces/kube-system/pods/kube-proxy-x7k2p:10250/proxy/./run/ns/p/c",
			"/api/v1/namespaces/kube-system/pods/kube-proxy-x7k2p:10250/proxy/metrics/%2E%2E/run/ns/p/c",
			"/api/v1/namespaces/kube-system/pods/kube-proxy-x7k2p:10250/proxy/metrics%2F..%2Frun/ns/p/c",
			"/api/v1/namespaces/kube-system/pods/kube-proxy-x7k2p:8080/proxy/metrics%252F..%252F..%252Frun/ns/p/c",
			"/api/v1/namespaces/kube-system/pods/x/../kube-proxy-x7k2p:10250/proxy/run/ns/p/c",
			"/api/v1/namespaces/kube-system//pods/kube-proxy-x7k2p:10250/proxy/run/ns/p/c",
			"//api/v1/namespaces/kube-system/pods/kube-proxy-x7k2p:10250/proxy/run/ns/p/c",
			"/api/v1/namespaces/kube-system/services/kubelet:10250/proxy/healthz/../../run/ns/p/c",
			"/api/v1/namespaces/kube-system/services/kubelet:10250/proxy/healthz/%2e%2e/run/ns/p/c",
			// the docs' own example
			"/api/v1/nodes/n/proxy/run/ns/p/x%252F..%252F..%252F..%252F../c",
		} {
			e.refused(t, trialReq{method: "POST", target: target})
		}
	})
	// An absolute-form request target (RFC 9112 3.2.2) is a request too; Go sets r.Host and
	// r.URL from it.
	t.Run("AbsoluteFormRefused", func(t *testing.T) {
		for _, target := range []string{
			"http://" + e.addr + "/api/v1/namespaces/kube-system/pods/https:kube-proxy-x7k2p:10250/proxy/run/ns/p/c",
			"http://" + e.addr + "/api/v1/namespaces/kube-system/services/kubelet:+10250/proxy/run/ns/p/c",
			"http://" + e.addr + "/api/v1/nodes/n/proxy/run/ns/p/c",
			"http://" + e.addr + "/api/v1/namespaces/ns/pods/p/exec?command=id",
			"http://localhost:8001/api/v1/nodes/n/proxy/run/ns/p/c",
		} {
			e.refused(t, trialReq{method: "POST", target: target})
		}
	})
	// The kubelet's read endpoints still pass on its port, and any endpoint on another port.
	t.Run("ReadsPass", func(t *testing.T) {
		for _, p := range []string{
			"/api/v1/namespaces/kube-system/pods/https:kube-proxy-x7k2p:10250/proxy/",
			"/api/v1/namespaces/kube-system/pods/kube-proxy-x7k2p:+10250/proxy/",
			"/api/v1/namespaces/kube-system/services/https:kubelet:10250/proxy/",
			"/api/v1/namespaces/kube-system/services/http:kubelet:010255/proxy/",
		} {
			for _, rest := range []string{"", "healthz", "healthz/ping", "metrics", "metrics/cadvisor", "metrics/resource", "stats/summary", "pods", "runningpods/", "configz", "statusz", "flagz", "logs/", "containerLogs/ns/p/c"} {
				e.passed(t, trialReq{method: "GET", target: p + rest})
			}
		}
		for _, target := range []string{
			"/api/v1/namespaces/app/pods/web:8080/proxy/run/ns/p/c",
			"/api/v1/namespaces/app/services/https:web:8443/proxy/exec/x",
			"/api/v1/namespaces/app/pods/web:102500/proxy/run",
			"/api/v1/namespaces/app/pods/web:1025/proxy/run",
			"/api/v1/namespaces/kube-system/services/https:kubelet:https-metrics/proxy/run/ns/p/c", // documented: a named port cannot be told
		} {
			e.passed(t, trialReq{method: "POST", target: target})
		}
	})
	// A kubelet's read endpoint name in another case is not the endpoint (the kubelet's router
	// tells case): under deny-by-default it is refused, or passes harmlessly; logged only.
	t.Run("ReadEndpointCase", func(t *testing.T) {
		for _, rest := range []string{"Metrics", "HEALTHZ", "containerlogs/ns/p/c", "Stats/summary"} {
			r := trialReq{method: "GET", target: "/api/v1/namespaces/kube-system/pods/kube-proxy-x7k2p:10250/proxy/" + rest}
			resp, got := e.sendRecorded(r)
			t.Logf("%s -> %d, reached API server: %v", r, resp.status, len(got) > 0)
		}
	})
}

// TestTrialNodeProxySpellings: behind nodes/NAME/proxy/ (and NAME:PORT, https:NAME:PORT, the
// legacy form) everything but the kubelet's read endpoints is refused.
func TestTrialNodeProxySpellings(t *testing.T) {
	e := trialStart(t)
	var prefixes []string
	for _, id := range []string{"n", "n:10250", "https:n:10250", "http:n:10255", ":n:10250", "n:+10250", "n:8080", "n%3A10250", "HTTPS:n:10250", "n:", "https:n:", "ws:n:10250", "x:https:n:10250"} {
		prefixes = append(prefixes, "/api/v1/nodes/"+id+"/proxy/", "/api/v1/proxy/nodes/"+id+"/")
	}
	for _, p := range prefixes {
		for _, c := range kubeletCommands {
			e.refused(t, trialReq{method: c.method, target: p + c.rest})
		}
	}
	for _, target := range []string{"/api/v1/nodes/n/proxy/metrics/cadvisor", "/api/v1/nodes/n/proxy/stats/summary", "/api/v1/proxy/nodes/n/healthz", "/api/v1/nodes/https:n:10250/proxy/pods"} {
		e.passed(t, trialReq{method: "GET", target: target})
	}
}

// TestTrialMethods: CONNECT and TRACE are refused with 405 whatever the flags; --read-only
// refuses every method but GET.
func TestTrialMethods(t *testing.T) {
	e := trialStart(t, "--allow-upgrades")
	for _, r := range []trialReq{
		{method: "CONNECT", target: e.addr},
		{method: "CONNECT", target: "/api/v1/namespaces/ns/pods/p/proxy"},
		{method: "CONNECT", target: "/api/v1/namespaces/ns/pods/p/exec", headers: []string{"Connection: Upgrade", "Upgrade: websocket"}},
		{method: "TRACE", target: "/api/v1/namespaces"},
		{method: "TRACE", target: "*"},
	} {
		resp := e.notReached(t, r)
		if resp.status != http.StatusMethodNotAllowed {
			t.Errorf("%s: answered %d %v; want 405", r, resp.status, resp.err)
		}
	}
	// An authority-form CONNECT names its own host, which Go takes as r.Host: the Host check
	// comes first (package proxy's doc: "Checks, in this order"), so a 403, and nothing reaches.
	for _, r := range []trialReq{{method: "CONNECT", target: "kubernetes.default.svc:443"}} {
		if resp := e.notReached(t, r); resp.status != http.StatusForbidden && resp.status != http.StatusMethodNotAllowed {
			t.Errorf("%s: answered %d %v; want 403 or 405", r, resp.status, resp.err)
		}
	}
	ro := trialStart(t, "--read-only")
	for _, m := range []string{"POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD", "get", "Get", "CONNECT", "TRACE", "PROPFIND"} {
		r := trialReq{method: m, target: "/api/v1/namespaces/ns/configmaps"}
		resp := ro.notReached(t, r)
		if resp.err == nil && (resp.status < 400 || resp.status > 499) {
			t.Errorf("--read-only: %s answered %d; want a 4xx refusal", r, resp.status)
		}
	}
	ro.passed(t, trialReq{method: "GET", target: "/api/v1/namespaces/ns/configmaps"})
	// a GET that is an upgrade is refused without --allow-upgrades, read-only or not
	for _, h := range [][]string{
		{"Connection: Upgrade", "Upgrade: websocket"},
		{"Connection: keep-alive", "Connection: xUPGRADEx", "Upgrade: websocket"},
	} {
		ro.refused(t, trialReq{method: "GET", target: "/api/v1/namespaces/ns/configmaps?watch=1", headers: h})
	}
}

// TestTrialHosts: only loopback Host names and Origins, as --accept-hosts says, each expression
// matched against the whole name.
func TestTrialHosts(t *testing.T) {
	const target = "/api/v1/namespaces/ns/configmaps"
	check := func(t *testing.T, e *trialEnv, goodHosts, badHosts, goodOrigins, badOrigins []string) {
		t.Helper()
		for _, h := range goodHosts {
			e.passed(t, trialReq{method: "GET", target: target, host: h})
		}
		for _, h := range badHosts {
			e.refused(t, trialReq{method: "GET", target: target, host: h})
			e.refused(t, trialReq{method: "GET", target: "/healthz", host: h})
			e.refused(t, trialReq{method: "GET", target: "/metrics", host: h})
		}
		for _, o := range goodOrigins {
			e.passed(t, trialReq{method: "POST", target: target, headers: []string{"Origin: " + o}})
		}
		for _, o := range badOrigins {
			e.refused(t, trialReq{method: "POST", target: target, headers: []string{"Origin: " + o}})
			e.refused(t, trialReq{method: "GET", target: target, headers: []string{"Origin: " + o}})
			e.refused(t, trialReq{method: "OPTIONS", target: target, headers: []string{"Origin: " + o, "Access-Control-Request-Method: DELETE"}})
		}
	}
	port := func(e *trialEnv) string { _, p, _ := net.SplitHostPort(e.addr); return p }

	badHosts := []string{
		"evil.example", "evil.example:8001", "localhost.evil.example", "localhost.evil.example:8001",
		"evillocalhost", "127.0.0.1.evil.example", "127.0.0.1.nip.io:8001", "x127.0.0.1", "127.0.0.10",
		"127.0.0.2", "[::2]:8001", "[::1]x", "::1.evil", "[::1.evil]:8001", "1::1",
		"localhost:8001@evil.example", "evil.example@localhost", "evil.example:8001#@localhost",
	}
	badOrigins := []string{
		"http://evil.example", "http://localhost.evil.example:8001", "http://127.0.0.1.evil.example",
		"https://evillocalhost", "null", "http://[::1].evil.example", "http://evil.example:8001",
		"file://", "http://evil.example/localhost", "http://evil.example?localhost",
	}

	t.Run("Default", func(t *testing.T) {
		e := trialStart(t)
		p := port(e)
		check(t, e,
			[]string{"localhost:" + p, "127.0.0.1:" + p, "[::1]:" + p, "localhost", "127.0.0.1", "[::1]"},
			badHosts,
			[]string{"http://localhost:3000", "http://127.0.0.1:" + p, "http://[::1]:" + p, "https://localhost"},
			badOrigins)
	})
	// The docs' table spells the default as the flag takes it; passed explicitly it means the same.
	t.Run("DocumentedDefaultSpelling", func(t *testing.T) {
		e := trialStart(t, "--accept-hosts", `localhost,127\.0\.0\.1,::1`)
		p := port(e)
		check(t, e, []string{"localhost:" + p, "127.0.0.1:" + p, "[::1]:" + p}, badHosts, []string{"http://localhost:3000"}, badOrigins)
	})
	// An expression with an alternation is matched whole too: anchoring "a|b" as "^a|b$" would
	// accept localhost.evil.example.
	t.Run("Alternation", func(t *testing.T) {
		e := trialStart(t, "--accept-hosts", `localhost|127\.0\.0\.1`)
		p := port(e)
		check(t, e, []string{"localhost:" + p, "127.0.0.1:" + p},
			[]string{"localhost.evil.example", "evil.127.0.0.1", "evil127.0.0.1:" + p, "localhostx", "[::1]:" + p},
			[]string{"http://localhost"},
			[]string{"http://localhost.evil.example", "http://evil.127.0.0.1"})
	})
	// kubectl proxy's own --accept-hosts spelling, with anchors, still works and still anchors.
	t.Run("KubectlSpelling", func(t *testing.T) {
		e := trialStart(t, "--accept-hosts", `^localhost$,^127\.0\.0\.1$`)
		p := port(e)
		check(t, e, []string{"localhost:" + p, "127.0.0.1:" + p}, []string{"localhost.evil.example", "evil.example"}, nil, []string{"http://evil.example"})
	})
	t.Run("Unclear", func(t *testing.T) {
		// The contract does not say; logged for the report.
		e := trialStart(t)
		p := port(e)
		for _, r := range []trialReq{
			{method: "GET", target: target, host: "LOCALHOST:" + p},
			{method: "GET", target: target, host: "localhost.:" + p},
			{method: "GET", target: target, host: "127.0.0.1:" + p + ".evil"},
			{method: "GET", target: target, host: "127.0.0.1:evil"},
			{method: "GET", target: target, host: "::1"},
			{method: "GET", target: target, host: "[::1"},
			{method: "GET", target: target, host: "[0:0:0:0:0:0:0:1]:" + p},
			{method: "GET", target: target, host: "[::ffff:127.0.0.1]:" + p},
			{method: "GET", target: target, host: "-", proto: "HTTP/1.0"},
			{method: "GET", target: target, host: "="},
			{method: "GET", target: target, host: " "},
			{method: "GET", target: "http://evil.example/api/v1/namespaces/ns/configmaps", host: "localhost:" + p},
			{method: "GET", target: "http://localhost:" + p + "/api/v1/namespaces/ns/configmaps", host: "evil.example"},
			{method: "POST", target: target, headers: []string{"Origin: "}},
			{method: "POST", target: target, headers: []string{"Origin: http://localhost", "Origin: http://evil.example"}},
			{method: "POST", target: target, headers: []string{"Origin: http://evil.example", "Origin: http://localhost"}},
			{method: "POST", target: target, headers: []string{"Origin: HTTP://LOCALHOST"}},
			{method: "POST", target: target, headers: []string{"Origin: http://localhost."}},
			{method: "POST", target: target, headers: []string{"Origin: localhost"}},
			{method: "POST", target: target, headers: []string{"Origin: http://user@localhost"}},
			{method: "POST", target: target, headers: []string{"Origin: http://localhost@evil.example"}},
		} {
			resp, got := e.sendRecorded(r)
			t.Logf("%s -> %d %v, reached: %v", r, resp.status, resp.err, len(got) > 0)
		}
	})
}

// A host with the empty name (an HTTP/1.0 request without Host) is not a loopback name; an
// absolute-form target names its own host, which Go uses as r.Host.
func TestTrialHostAbsentOrAbsolute(t *testing.T) {
	e := trialStart(t)
	e.refused(t, trialReq{method: "GET", target: "/api/v1/namespaces/ns/configmaps", host: "-", proto: "HTTP/1.0"})
	e.refused(t, trialReq{method: "GET", target: "http://evil.example/api/v1/namespaces/ns/configmaps", host: "localhost"})
}

// TestTrialSourceHeaders: a client names no other source: X-Forwarded-*, Forwarded and
// X-Real-Ip are dropped and the API server's X-Forwarded-For is the client's loopback address;
// nor does any identity header reach it. On the plain path and on an upgrade's.
func TestTrialSourceHeaders(t *testing.T) {
	spoof := []string{
		"X-Forwarded-For: 10.1.2.3",
		"x-forwarded-for: 10.1.2.4",
		"X-FORWARDED-FOR: 10.1.2.5",
		"X-Forwarded-For: 10.1.2.6, 10.1.2.7",
		"X-Forwarded-Host: evil.example",
		"x-forwarded-proto: https",
		"X-Forwarded-Port: 443",
		"X-Forwarded-Prefix: /evil",
		"X-Forwarded-Uri: /evil",
		"X-Forwarded-Server: evil",
		"X-Forwarded-Client-Cert: Hash=abc",
		"Forwarded: for=10.9.9.9;proto=https",
		"FORWARDED: for=\"[2001:db8::1]\"",
		"forwarded: for=10.9.9.8",
		"X-Real-Ip: 10.8.8.8",
		"X-REAL-IP: 10.8.8.7",
		"x-real-ip: 10.8.8.6",
		"Authorization: Bearer client-token",
		"authorization: Basic YWRtaW46YWRtaW4=",
		"Impersonate-User: system:admin",
		"impersonate-group: system:masters",
		"Impersonate-Uid: 1",
		"Impersonate-Extra-Scopes: x",
		"X-Remote-User: system:admin",
		"x-remote-group: system:masters",
		"X-Remote-Extra-Scopes: x",
		"X-Remote-Uid: 1",
		"Cookie: session=abc",
	}
	check := func(t *testing.T, rec outsideRecord, what string) {
		t.Helper()
		for name, vals := range rec.header {
			l := strings.ToLower(name)
			if strings.HasPrefix(l, "x-forwarded-") && l != "x-forwarded-for" || l == "forwarded" || l == "x-real-ip" ||
				strings.HasPrefix(l, "impersonate-") || strings.HasPrefix(l, "x-remote-") || l == "cookie" {
				t.Errorf("%s: %s reached the API server: %q", what, name, vals)
			}
		}
		if got := rec.header.Values("X-Forwarded-For"); len(got) != 1 || got[0] != "127.0.0.1" {
			t.Errorf("%s: API server got X-Forwarded-For %q; want the client's loopback address alone", what, got)
		}
		if got := rec.header.Values("Authorization"); len(got) != 1 || got[0] != "Bearer "+outsideToken {
			t.Errorf("%s: API server got Authorization %q; want the proxy's own token", what, got)
		}
	}
	t.Run("Plain", func(t *testing.T) {
		e := trialStart(t)
		for _, extra := range [][]string{
			nil,
			{"Connection: close, X-Forwarded-For"}, // a hop-by-hop name listed by the client
			{"Connection: close, X-Real-Ip"},
		} {
			h := append(append([]string(nil), spoof...), extra...)
			for _, m := range []string{"GET", "POST", "DELETE"} {
				r := trialReq{method: m, target: "/api/v1/namespaces/ns/configmaps", headers: h}
				for _, rec := range e.passed(t, r) {
					check(t, rec, r.method+" "+fmt.Sprint(extra))
				}
			}
		}
		// a watch, resumed by kretry or not, carries the same
		r := trialReq{method: "GET", target: "/api/v1/namespaces/ns/configmaps?watch=1", headers: spoof}
		_, got := e.sendRecorded(r)
		for _, rec := range got {
			check(t, rec, "watch")
		}
	})
	t.Run("Upgrade", func(t *testing.T) {
		e := trialStart(t, "--allow-upgrades")
		h := append([]string{
			"Connection: Upgrade", "Upgrade: websocket", "Sec-WebSocket-Version: 13",
			"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Protocol: v5.channel.k8s.io",
		}, spoof...)
		for _, target := range []string{"/api/v1/namespaces/ns/pods/p/exec?command=id&stdout=1", "/api/v1/namespaces/ns/configmaps?watch=1"} {
			r := trialReq{method: "GET", target: target, headers: h}
			for _, rec := range e.reached(t, r) {
				check(t, rec, "upgrade "+target)
			}
		}
	})
}

// TestTrialWebSocketBearer: an upgrade's Sec-WebSocket-Protocol bearer entry
// (base64url.bearer.authorization.k8s.io.*) is removed, the other protocols kept. The API
// server's reader (apiserver's websocket ProtocolAuthenticator) splits every
// Sec-WebSocket-Protocol line on "," and trims spaces and tabs, and takes an entry with that
// prefix, case-sensitively, on any request whose Upgrade is websocket in any case.
func TestTrialWebSocketBearer(t *testing.T) {
	e := trialStart(t, "--allow-upgrades")
	const bearer = "base64url.bearer.authorization.k8s.io.Y2xpZW50LXRva2Vu"
	const target = "/api/v1/namespaces/ns/pods/p/exec?command=id&stdout=1"
	base := func(upgrade string) []string {
		return []string{"Connection: Upgrade", "Upgrade: " + upgrade, "Sec-WebSocket-Version: 13", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=="}
	}
	cases := []struct {
		upgrade string
		lines   []string
		keep    []string // protocols that must reach the API server
	}{
		{"websocket", []string{"Sec-WebSocket-Protocol: " + bearer + ", v5.channel.k8s.io"}, []string{"v5.channel.k8s.io"}},
		{"websocket", []string{"Sec-WebSocket-Protocol: v5.channel.k8s.io, " + bearer}, []string{"v5.channel.k8s.io"}},
		{"websocket", []string{"Sec-WebSocket-Protocol: v5.channel.k8s.io," + bearer + ",v4.channel.k8s.io"}, []string{"v5.channel.k8s.io", "v4.channel.k8s.io"}},
		{"websocket", []string{"Sec-WebSocket-Protocol: v5.channel.k8s.io,\t" + bearer + "\t"}, []string{"v5.channel.k8s.io"}},
		{"websocket", []string{"Sec-WebSocket-Protocol: " + bearer}, nil},
		{"websocket", []string{"Sec-WebSocket-Protocol: base64url.bearer.authorization.k8s.io."}, nil},
		{"websocket", []string{"Sec-WebSocket-Protocol: v5.channel.k8s.io", "Sec-WebSocket-Protocol: " + bearer}, []string{"v5.channel.k8s.io"}},
		{"websocket", []string{"sec-websocket-protocol: " + bearer, "SEC-WEBSOCKET-PROTOCOL: v4.channel.k8s.io"}, []string{"v4.channel.k8s.io"}},
		{"websocket", []string{"Sec-WebSocket-Protocol: ,," + bearer + ",,v5.channel.k8s.io"}, []string{"v5.channel.k8s.io"}},
		{"WebSocket", []string{"Sec-WebSocket-Protocol: " + bearer + ", v5.channel.k8s.io"}, []string{"v5.channel.k8s.io"}},
		{"WEBSOCKET", []string{"Sec-WebSocket-Protocol: " + bearer}, nil},
		{"SPDY/3.1", []string{"Sec-WebSocket-Protocol: " + bearer}, nil},
		// the API server takes an upgrade as IsUpgradeRequest does: "upgrade" anywhere in a
		// Connection value
		{"websocket", []string{"Connection: keep-alive, x-upgrade-x", "Sec-WebSocket-Protocol: " + bearer + ", v5.channel.k8s.io"}, []string{"v5.channel.k8s.io"}},
		{"websocket", []string{"Connection: keep-alive", "Connection: UPGRADE", "Sec-WebSocket-Protocol: " + bearer}, nil},
		// the API server reads the first Upgrade line
		{"websocket", []string{"Upgrade: h2c", "Sec-WebSocket-Protocol: " + bearer + ", v5.channel.k8s.io"}, []string{"v5.channel.k8s.io"}},
	}
	for _, c := range cases {
		h := base(c.upgrade)
		if strings.HasPrefix(c.lines[0], "Connection:") {
			h = h[1:]
		}
		r := trialReq{method: "GET", target: target, headers: append(h, c.lines...)}
		recs := e.reached(t, r)
		for _, rec := range recs {
			var got []string
			for _, line := range rec.header.Values("Sec-WebSocket-Protocol") {
				for _, p := range strings.Split(line, ",") {
					if p = strings.TrimSpace(p); p != "" {
						got = append(got, p)
					}
				}
			}
			for _, p := range got {
				if strings.HasPrefix(p, "base64url.bearer.authorization.k8s.io.") {
					t.Errorf("%s: the bearer entry reached the API server: %q", r, rec.header.Values("Sec-WebSocket-Protocol"))
				}
			}
			for _, k := range c.keep {
				found := false
				for _, p := range got {
					found = found || p == k
				}
				if !found {
					t.Errorf("%s: protocol %s did not reach the API server (got %q)", r, k, rec.header.Values("Sec-WebSocket-Protocol"))
				}
			}
		}
	}
	// A case variant is not the bearer entry to the API server; logged only.
	for _, p := range []string{"Base64url.Bearer.Authorization.K8s.Io.eA", "BASE64URL.BEARER.AUTHORIZATION.K8S.IO.eA"} {
		r := trialReq{method: "GET", target: target, headers: append(base("websocket"), "Sec-WebSocket-Protocol: v5.channel.k8s.io, "+p)}
		for _, rec := range e.reached(t, r) {
			t.Logf("%s -> API server got Sec-WebSocket-Protocol %q", r, rec.header.Values("Sec-WebSocket-Protocol"))
		}
	}
}

// TestTrialUpgradeOrigin: with --allow-upgrades, a browser's WebSocket from another origin is
// still refused (browsers send Origin on every WebSocket).
func TestTrialUpgradeOrigin(t *testing.T) {
	e := trialStart(t, "--allow-upgrades")
	for _, o := range []string{"http://evil.example", "null", "http://localhost.evil.example"} {
		e.refused(t, trialReq{method: "GET", target: "/api/v1/namespaces/ns/pods/p/exec?command=sh&stdin=1", headers: []string{
			"Connection: Upgrade", "Upgrade: websocket", "Sec-WebSocket-Version: 13", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
			"Sec-WebSocket-Protocol: v5.channel.k8s.io", "Origin: " + o,
		}})
	}
}

// TestTrialProbeAddress: --probe-address serves /healthz and /metrics and nothing else.
func TestTrialProbeAddress(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	probe := l.Addr().String()
	l.Close()
	e := trialStart(t, "--probe-address", probe)
	for _, target := range []string{
		"/api/v1/namespaces/ns/configmaps", "/api", "/healthz/../api/v1/namespaces", "//api/v1/namespaces",
		"/metrics/../api/v1/nodes/n/proxy/run", "/healthz/x", "/api/v1/nodes/n/proxy/metrics", "http://" + e.addr + "/api/v1/namespaces",
	} {
		n := e.count()
		resp := trialSendTo(probe, trialReq{method: "GET", target: target, host: probe})
		if got := e.since(n); len(got) > 0 {
			t.Errorf("probe address: GET %s reached the API server as %s", target, got[0].requestURI)
		}
		if resp.status == http.StatusOK {
			t.Errorf("probe address: GET %s answered 200", target)
		}
	}
	for _, target := range []string{"/healthz", "/metrics"} {
		if resp := trialSendTo(probe, trialReq{method: "GET", target: target, host: "evil.example"}); resp.status != http.StatusOK {
			t.Errorf("probe address: GET %s: %d %v", target, resp.status, resp.err)
		}
	}
}

var trialServeLine = regexp.MustCompile(`Starting to serve on (\S+)`)

// trialRun runs the binary with args against a kubeconfig for a fake server and returns whether
// it came up serving (and where), or its exit code and output.
func trialRun(t *testing.T, args ...string) (serving string, code int, out string) {
	t.Helper()
	bin := trialBin(t)
	api := outsideStartAPIServer(t)
	kc := outsideKubeconfig(t, api)
	cmd := exec.Command(bin, append([]string{"--kubeconfig", kc}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG=", "KUBERNETES_SERVICE_HOST=", "KUBERNETES_SERVICE_PORT=")
	var buf outsideSyncBuffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case err := <-done:
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				return "", ee.ExitCode(), buf.String()
			}
			return "", 0, buf.String()
		case <-deadline:
			_ = cmd.Process.Kill()
			<-done
			return "", -1, buf.String()
		case <-time.After(20 * time.Millisecond): // polling for the startup line
			if m := trialServeLine.FindStringSubmatch(buf.String()); m != nil {
				_ = cmd.Process.Kill()
				<-done
				return m[1], 0, buf.String()
			}
		}
	}
}

// TestTrialAddress: it binds loopback addresses only.
func TestTrialAddress(t *testing.T) {
	for _, a := range []string{"0.0.0.0", "", "::", "0", "[::]", "0.0.0.0.", "localhost.evil.example", "127.0.0.1.nip.io"} {
		if serving, code, out := trialRun(t, "--address", a, "--port", "0"); serving != "" {
			t.Errorf("--address %q: serving on %s; want refused", a, serving)
		} else {
			t.Logf("--address %q: exit %d: %s", a, code, lastLine(out))
		}
	}
	for _, a := range []string{"127.0.0.1", "::1", "localhost", "127.0.0.2"} {
		serving, code, out := trialRun(t, "--address", a, "--port", "0")
		t.Logf("--address %q: serving %q exit %d: %s", a, serving, code, lastLine(out))
	}
}

// TestTrialListBufferSize: --list-buffer-size is at least 1Mi; a smaller value, 0 among them,
// is refused at start (docs and --help).
func TestTrialListBufferSize(t *testing.T) {
	for _, v := range []string{"0", "1048575", "1M", "1e6", "-1", "-1Mi", "1Ki", "512Ki", "0.5Mi", "1048575.5", "8Ei", "9Ei", "100Ei", "x", ""} {
		if serving, code, out := trialRun(t, "--list-buffer-size", v, "--port", "0", "--address", "127.0.0.1"); serving != "" {
			t.Errorf("--list-buffer-size %q: started; want refused", v)
		} else if code == 0 {
			t.Errorf("--list-buffer-size %q: exit 0; want an error exit", v)
		} else {
			t.Logf("--list-buffer-size %q: exit %d: %s", v, code, lastLine(out))
		}
	}
	// A quantity that is a whole number of bytes is one, whatever its spelling: 1.5Mi is
	// 1572864 bytes, as 1.5Gi in a container's memory limit is.
	for _, v := range []string{"1Mi", "1048576", "128Mi", "2M", "1Gi", "1500Ki", "1.5Mi", "1.5Gi", "1.25Mi", "2.5M", "1e7"} {
		if serving, code, out := trialRun(t, "--list-buffer-size", v, "--port", "0", "--address", "127.0.0.1"); serving == "" {
			t.Errorf("--list-buffer-size %q: did not start: exit %d: %s", v, code, lastLine(out))
		}
	}
}

// TestTrialHelp: --help prints the usage on stdout and exits 0, and says what the docs' flag
// table says.
func TestTrialHelp(t *testing.T) {
	bin := trialBin(t)
	for _, args := range [][]string{{"--help"}, {"-h"}, {"-help"}, {"--demo", "--help"}, {"--help", "--port", "x"}} {
		cmd := exec.Command(bin, args...)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Errorf("%q: exit %d; want 0 (stderr %q)", args, ee.ExitCode(), stderr.String())
		}
		if !strings.HasPrefix(stdout.String(), "Usage: kretry-proxy") {
			t.Errorf("%q: stdout does not start with the usage: %q", args, outsideShort(stdout.String()))
		}
	}
	out, _ := exec.Command(bin, "--help").Output()
	help := string(out)
	doc, err := os.ReadFile("../../docs/kretry-proxy.md")
	if err != nil {
		t.Fatal(err)
	}
	// every flag in --help is in the docs' flag table and the other way round
	helpFlags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z-]+)`).FindAllStringSubmatch(help, -1) {
		helpFlags[m[1]] = true
	}
	docFlags := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `--([a-z-]+)`").FindAllStringSubmatch(string(doc), -1) {
		docFlags[m[1]] = true
	}
	for f := range helpFlags {
		if !docFlags[f] {
			t.Errorf("--%s is in --help but not in docs/kretry-proxy.md's flag table", f)
		}
	}
	for f := range docFlags {
		if !helpFlags[f] {
			t.Errorf("--%s is in the docs' flag table but not in --help", f)
		}
	}
	// what --allow-upgrades admits: the same words in both
	norm := func(s string) string {
		return strings.Join(strings.Fields(strings.NewReplacer(" ([locked down](#locked-down))", "", "`", "", "(", "", ")", "").Replace(s)), " ")
	}
	helpAllow := regexp.MustCompile(`(?s)-allow-upgrades\n(.*?)\n  -`).FindStringSubmatch(help)
	docAllow := regexp.MustCompile("(?m)^\\| `--allow-upgrades` \\| off \\| (.*) \\|$").FindStringSubmatch(string(doc))
	if helpAllow == nil || docAllow == nil {
		t.Fatalf("--allow-upgrades: not found in --help (%v) or the docs (%v)", helpAllow != nil, docAllow != nil)
	}
	if h, d := norm(helpAllow[1]), norm(docAllow[1]); h != d {
		t.Errorf("--allow-upgrades differs:\n--help: %s\ndocs:   %s", h, d)
	}
	if !strings.Contains(help, "at least 1Mi") || !strings.Contains(string(doc), "at least `1Mi`") {
		t.Errorf("--list-buffer-size's minimum: not 1Mi in both")
	}
}

// TestTrialExplore logs what happens to requests the contract says little about.
func TestTrialExplore(t *testing.T) {
	e := trialStart(t, "--allow-upgrades")
	for _, r := range []trialReq{
		{method: "GET", target: "/api/v1/namespaces/ns/configmaps/../secrets"},
		{method: "GET", target: "/api//v1/namespaces"},
		{method: "GET", target: "/api/v1/namespaces/ns/configmaps/%2E%2E/secrets"},
		{method: "GET", target: "/metrics/"},
		{method: "GET", target: "/metrics?x=1"},
		{method: "GET", target: "//metrics"},
		{method: "GET", target: "/./metrics"},
		{method: "GET", target: "/Metrics"},
		{method: "GET", target: "/healthz/"},
		{method: "GET", target: "/healthz/etcd"},
		{method: "GET", target: "/livez"},
		{method: "GET", target: "/%6Detrics"},
		{method: "connect", target: "/api/v1/namespaces"},
		{method: "trace", target: "/api/v1/namespaces"},
		{method: "PRI", target: "*", proto: "HTTP/2.0"},
		{method: "GET", target: "/api/v1/namespaces", headers: []string{"Connection: Upgrade, HTTP2-Settings", "Upgrade: h2c", "HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA"}},
	} {
		resp, records := e.sendRecorded(r)
		var got []string
		for _, rec := range records {
			got = append(got, rec.method+" "+rec.requestURI)
		}
		t.Logf("%s -> %d %v loc=%q reached=%q body=%q", r, resp.status, resp.err, resp.header.Get("Location"), got, outsideShort(resp.body))
	}
}

// TestTrialStreamsAndWords: pods' exec, attach and portforward are refused in every spelling
// kube-apiserver routes to them (it decodes the path once: %65xec is exec), and the proxy
// resources spelt with percent-encoded letters are still judged as what they are.
func TestTrialStreamsAndWords(t *testing.T) {
	e := trialStart(t)
	for _, target := range []string{
		"/api/v1/namespaces/ns/pods/p/exec?command=id&stdout=1",
		"/api/v1/namespaces/ns/pods/p/%65xec?command=id&stdout=1",
		"/api/v1/namespaces/ns/pods/p/exe%63?command=id&stdout=1",
		"/api/v1/namespaces/ns/pods/p/exec/?command=id",
		"/api/v1/namespaces/ns/pods/p/attach?stdout=1",
		"/api/v1/namespaces/ns/pods/p/%61ttach?stdout=1",
		"/api/v1/namespaces/ns/pods/p/portforward?ports=22",
		"/api/v1/namespaces/ns/%70ods/p/exec?command=id",
		"/api/v1/namespaces/ns/pods/%70/exec?command=id",
		"/api/v1/%6Eamespaces/ns/pods/p/exec?command=id",
		"/%61pi/v1/namespaces/ns/pods/p/exec?command=id",
		"/api/v1/namespaces/n%73/pods/p/exec?command=id",
		"/api/v1/namespaces/exec/pods/exec/exec?command=id",
		"/api/v1/namespaces/ns/pods/p:10250/exec?command=id",
		"/api/v1/namespaces/ns/%70ods/p:10250/proxy/run/ns/p/c",
		"/api/v1/namespaces/ns/pods/p:10250/pro%78y/run/ns/p/c",
		"/api/v1/namespaces/ns/services/s:10250/pro%78y/run/ns/p/c",
		"/api/v1/namespaces/ns/%73ervices/s:10250/proxy/run/ns/p/c",
		"/api/v1/node%73/n/proxy/run/ns/p/c",
		"/api/v1/nodes/n/pro%78y/run/ns/p/c",
		"/api/v1/%70roxy/nodes/n/run/ns/p/c",
		"/api/%761/nodes/n/proxy/run/ns/p/c",
	} {
		for _, m := range []string{"GET", "POST"} {
			e.refused(t, trialReq{method: m, target: target})
		}
	}
	// logged: writes that start a process pass by design (DESIGN: "Writes pass through")
	for _, r := range []trialReq{
		{method: "PATCH", target: "/api/v1/namespaces/ns/pods/p/ephemeralcontainers"},
		{method: "POST", target: "/api/v1/namespaces/ns/pods"},
		{method: "GET", target: "http://" + e.addr + "/api/v1/nodes/n/proxy/metrics"},
		{method: "POST", target: "/api/v1/nodes/n:9091/proxy/metrics/job/x"},
	} {
		resp, got := e.sendRecorded(r)
		t.Logf("%s -> %d, reached: %v", r, resp.status, len(got) > 0)
	}
}

// TestTrialKubeconfigAs: "a kubeconfig's as: holds": with as: bob, a client's Impersonate-*
// headers never reach the API server beside the proxy's (client-go's impersonation adds the
// user alone and leaves a client's Impersonate-Group in place, which would put bob in
// system:masters), on the plain path and on an upgrade's.
func TestTrialKubeconfigAs(t *testing.T) {
	bin := trialBin(t)
	api := outsideStartAPIServer(t)
	kc := outsideKubeconfig(t, api)
	b, err := os.ReadFile(kc)
	if err != nil {
		t.Fatal(err)
	}
	withAs := strings.Replace(string(b), "    token: "+outsideToken+"\n", "    token: "+outsideToken+"\n    as: bob\n", 1)
	if withAs == string(b) {
		t.Fatal("kubeconfig: no token line to add as: to")
	}
	if err := os.WriteFile(kc, []byte(withAs), 0o600); err != nil {
		t.Fatal(err)
	}
	e := &trialEnv{api: api, addr: outsideStartProxy(t, bin, kc, "--allow-upgrades")}
	spoof := []string{"Impersonate-Group: system:masters", "impersonate-extra-scopes: all", "Impersonate-Uid: 0"}
	upgrade := []string{"Connection: Upgrade", "Upgrade: websocket", "Sec-WebSocket-Version: 13", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=="}
	for _, r := range []trialReq{
		{method: "GET", target: "/api/v1/namespaces/ns/configmaps", headers: spoof},
		{method: "POST", target: "/api/v1/namespaces/ns/configmaps", headers: append([]string{"Impersonate-User: system:admin"}, spoof...)},
		{method: "GET", target: "/api/v1/namespaces/ns/pods/p/exec?command=id&stdout=1", headers: append(append([]string(nil), upgrade...), spoof...)},
		{method: "GET", target: "/api/v1/namespaces/ns/pods/p/exec?command=id&stdout=1", headers: append(append([]string{"Impersonate-User: system:admin"}, upgrade...), spoof...)},
	} {
		for _, rec := range e.reached(t, r) {
			for name, vals := range rec.header {
				if l := strings.ToLower(name); strings.HasPrefix(l, "impersonate-") && !(l == "impersonate-user" && len(vals) == 1 && vals[0] == "bob") {
					t.Errorf("%s: API server got %s: %q; want Impersonate-User: bob alone", r, name, vals)
				}
			}
			if got := rec.header.Values("Impersonate-User"); len(got) != 1 || got[0] != "bob" {
				t.Errorf("%s: API server got Impersonate-User %q; want bob", r, got)
			}
		}
	}
}

// TestTrialPipelined: each request on a kept-alive connection is judged on its own: a refused one
// after a passed one, and a passed one after a refused one.
func TestTrialPipelined(t *testing.T) {
	e := trialStart(t)
	ok := "GET /api/v1/namespaces/ns/configmaps HTTP/1.1\r\nHost: " + e.addr + "\r\n\r\n"
	bad := "POST /api/v1/nodes/n/proxy/run/ns/p/c?cmd=id HTTP/1.1\r\nHost: " + e.addr + "\r\nContent-Length: 0\r\n\r\n"
	badUp := "GET /api/v1/namespaces/ns/pods/p/exec?command=id HTTP/1.1\r\nHost: " + e.addr + "\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"
	for _, seq := range [][]string{{ok, bad}, {ok, badUp}, {ok, ok, bad, ok}} {
		conn, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
		n := e.count()
		if _, err := io.WriteString(conn, strings.Join(seq, "")); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(conn)
		for i := range seq {
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				break // the proxy may close the connection after a refusal
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			_ = i
		}
		conn.Close()
		want := 0
		for _, s := range seq {
			if s == ok {
				want++
			}
		}
		got := e.since(n)
		for _, rec := range got {
			if rec.method != "GET" || !strings.HasPrefix(rec.requestURI, "/api/v1/namespaces/ns/configmaps") {
				t.Errorf("pipelined: %s %s reached the API server", rec.method, rec.requestURI)
			}
		}
		if len(got) > want {
			t.Errorf("pipelined: %d requests reached the API server; want at most %d", len(got), want)
		}
	}
}
