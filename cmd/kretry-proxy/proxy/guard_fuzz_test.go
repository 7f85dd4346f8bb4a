package proxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
)

// FuzzGuard sends request targets through the whole Server, default options, and follows
// every request that reaches the API server as kube-apiserver, its node, pod and service
// proxies and then the kubelet would read it: it fails when one reaches a pod's exec, attach
// or portforward, a kubelet endpoint that runs a command or opens a stream (through a node's
// proxy, or a pod's or a service's proxy to a kubelet's port), or a proxy by a path that
// means something else once decoded again. Its two inputs are a program that builds a target
// from the words and spellings such attacks are made of (see buildTarget) and a string taken
// as it is: as a target, then as a Host header and as an Origin, which must be refused
// unless they name a loopback host.
func FuzzGuard(f *testing.F) {
	for _, seed := range []string{
		"/api/v1/nodes/node-1/proxy/run/ns/p/x%252F..%252F..%252F..%252F../c?cmd=id",
		"/api/v1/namespaces/namespaces/pods/p/exec?command=id",
		"/api/v1/namespaces/pods/pods/p/attach",
		"/api/v1/nodes/n:10250/proxy/metrics%2F..%2Frun/ns/p/c",
		"/api/v1/nodes/https:n:10250/proxy/%2572un/ns/p/c",
		"/api/v1/proxy/nodes/n/run/ns/p/c",
		"/api/v1/Nodes/n/Proxy/Exec/ns/p/c",
		"/api/v1/nodes/n/proxy/metrics/cadvisor",
		"/api/v1/namespaces/ns/pods/p:8080/proxy/a%2Fb",
		"/api/v1/namespaces/ns/configmaps?watch=1",
		"/api/v1/namespaces/kube-system/pods/https:kube-proxy-x7k2p:10250/proxy/run/ns/p/c?cmd=id",
		"/api/v1/namespaces/kube-system/services/https:kubelet:10250/proxy/attach/ns/p/c",
		"/api/v1/namespaces/kube-system/services/kubelet:+010255/proxy/debug/flags/v",
		"/api/v1/proxy/namespaces/ns/pods/p:10250/checkpoint/ns/p/c",
		"/api/v1/namespaces/kube-system/pods/ws:kube-proxy-x7k2p:10250/proxy/run/ns/p/c?cmd=id",
		"/api/v1/proxy/namespaces/kube-system/services/tcp:kubelet:10255/run/ns/p/c",
		"localhost.evil.example",
		"127.0.0.1.evil.example:8001",
		"[::1]:8001",
		"http://localhost:3000",
		"http://evil-localhost.example",
	} {
		f.Add([]byte{}, seed)
	}
	// Programs: method, prefix, then (word, spelling, separator) triples (see buildTarget).
	f.Add([]byte{1, 0, 7, 0, 0, 9, 0, 0, 10, 0, 0, 11, 0, 0, 4, 0, 0, 6, 0, 0, 36, 0}, "")
	f.Add([]byte{1, 0, 3, 0, 0, 3, 0, 0, 5, 0, 0, 6, 0, 0, 12, 0}, "")
	f.Add([]byte{1, 0, 7, 0, 0, 9, 6, 0, 10, 0, 0, 25, 0, 5, 18, 0, 5, 11, 0, 0, 4, 0, 0, 6, 0, 0, 36, 0}, "")
	f.Add([]byte{1, 0, 7, 0, 0, 9, 0, 0, 10, 0, 0, 11, 0, 0, 4, 0, 0, 6, 0, 0, 38, 0, 5, 18, 0, 5, 18, 0, 5, 18, 0, 5, 18, 0, 0, 36, 0}, "")
	f.Add([]byte{1, 2, 7, 0, 0, 9, 0, 0, 11, 3, 0, 4, 0, 0, 6, 0, 0, 36, 0}, "")
	// A pod's and a service's proxy to a kubelet's port: namespaces/ns/pods/https:p:10250/proxy/run/...
	f.Add([]byte{1, 0, 3, 0, 0, 4, 0, 0, 5, 0, 0, 6, 7, 0, 10, 0, 0, 11, 0, 0, 4, 0, 0, 6, 0, 0, 36, 0}, "")
	f.Add([]byte{1, 0, 3, 0, 0, 4, 0, 0, 20, 0, 0, 21, 12, 0, 10, 0, 0, 13, 0, 0, 36, 0}, "")
	// ... with a scheme kube-apiserver does not take: namespaces/ns/pods/ws:p:10250/proxy/run/...
	f.Add([]byte{1, 0, 3, 0, 0, 4, 0, 0, 5, 0, 0, 6, 14, 0, 10, 0, 0, 11, 0, 0, 4, 0, 0, 6, 0, 0, 36, 0}, "")

	srv, seen := fuzzServer(f)
	f.Fuzz(func(t *testing.T, program []byte, raw string) {
		for _, req := range []string{buildTarget(program), "GET " + raw} {
			method, target, _ := strings.Cut(req, " ")
			checkGuard(t, srv, seen, method, target, "Host: 127.0.0.1:8001")
		}
		checkGuard(t, srv, seen, http.MethodGet, "/api/v1/namespaces", "Host: "+raw)
		checkGuard(t, srv, seen, http.MethodGet, "/api/v1/namespaces", "Host: 127.0.0.1:8001", "Origin: "+raw)
	})
}

// fuzzServer is a Server whose API server is a RoundTripper recording the request line each
// request reached it with, and answering 403 (which nothing retries).
func fuzzServer(f *testing.F) (*Server, *requestLines) {
	seen := &requestLines{}
	cfg := &rest.Config{Host: "https://api.invalid", Transport: seen}
	srv, err := New(cfg, Options{})
	if err != nil {
		f.Fatal(err)
	}
	return srv, seen
}

// requestLines is a fake API server's transport: it records what it is asked for.
type requestLines struct {
	mu    sync.Mutex
	lines []string // "METHOD request-uri", as on the wire
}

func (rl *requestLines) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		r.Body.Close()
	}
	rl.mu.Lock()
	rl.lines = append(rl.lines, r.Method+" "+r.URL.RequestURI())
	rl.mu.Unlock()
	body := `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403}`
	return &http.Response{
		StatusCode: http.StatusForbidden,
		Header:     http.Header{"Content-Type": {"application/json"}},
		Body:       io.NopCloser(strings.NewReader(body)),
		Request:    r,
	}, nil
}

func (rl *requestLines) take() []string {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	lines := rl.lines
	rl.lines = nil
	return lines
}

// checkGuard sends one request through srv, as the HTTP server would parse it, and judges
// what reached the API server, and whether the request's Host and Origin could.
func checkGuard(t *testing.T, srv *Server, seen *requestLines, method, target string, headers ...string) {
	t.Helper()
	head := method + " " + target + " HTTP/1.1\r\n" + strings.Join(headers, "\r\n") + "\r\n\r\n"
	req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(head)))
	if err != nil {
		return // the HTTP server answers 400
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	req.RemoteAddr = "127.0.0.1:40000"
	seen.take()
	srv.Handler().ServeHTTP(httptest.NewRecorder(), req.WithContext(ctx))
	lines := seen.take()
	for _, line := range lines {
		if finding := judge(line); finding != "" {
			t.Fatalf("%s %s reached the API server as %q: %s", method, target, line, finding)
		}
	}
	if len(lines) > 0 && !loopbackHost(req.Host) {
		t.Fatalf("%s %s with Host %q reached the API server: not a loopback host", method, target, req.Host)
	}
	if origin := req.Header.Get("Origin"); len(lines) > 0 && origin != "" && !loopbackOrigin(origin) {
		t.Fatalf("%s %s with Origin %q reached the API server: not a loopback origin", method, target, origin)
	}
}

// loopbackHost says whether a Host header names a loopback host by one of its default names,
// with or without a port: what a page served from another name (a DNS rebinding) never sends.
func loopbackHost(host string) bool {
	for _, name := range []string{"localhost", "127.0.0.1", "[::1]"} {
		if host == name || strings.HasPrefix(host, name+":") {
			return true
		}
	}
	return host == "::1"
}

// loopbackOrigin says whether an Origin header is a URL on a loopback host.
func loopbackOrigin(origin string) bool {
	u, err := url.Parse(origin)
	if err != nil {
		return false
	}
	switch u.Hostname() {
	case "localhost", "127.0.0.1", "::1":
		return true
	}
	return false
}

// kubeletCommands are the kubelet's endpoints that run a command, open a stream or change
// the kubelet, in lower case (pkg/kubelet/server/server.go).
var kubeletCommands = map[string]bool{"run": true, "exec": true, "attach": true, "portforward": true, "cri": true, "checkpoint": true, "debug": true}

// judge reads a request line as kube-apiserver would, then the node proxy and the kubelet,
// and says what is wrong with it having reached the API server, or "". Every reader is read
// as loosely as it could be (lower case, decoded again, dot segments resolved), so that
// the oracle errs on the side of a finding.
func judge(line string) string {
	method, uri, _ := strings.Cut(line, " ")
	if method == http.MethodConnect || method == http.MethodTrace {
		return "a " + method + " reached the API server"
	}
	apiReq, err := http.ReadRequest(bufio.NewReader(strings.NewReader(method + " " + uri + " HTTP/1.1\r\nHost: api\r\n\r\n")))
	if err != nil {
		return "" // kube-apiserver answers 400
	}
	apiPath := apiReq.URL.Path // decoded once, as kube-apiserver's HTTP server does
	for _, reading := range []string{apiPath, path.Clean("/" + apiPath)} {
		for _, lower := range []bool{false, true} {
			r := reading
			if lower {
				r = strings.ToLower(reading)
			}
			if finding := judgeAPIPath(r, strings.HasSuffix(apiPath, "/"), !lower); finding != "" {
				return finding
			}
		}
	}
	return ""
}

// judgeAPIPath judges one reading of the decoded path kube-apiserver routes on. exact says
// the reading keeps the path's case and dots, which the agreement checks need.
func judgeAPIPath(apiPath string, trailingSlash, exact bool) string {
	tokens := strings.Split(strings.Trim(apiPath, "/"), "/") // go-restful's tokens
	var rest []string
	switch {
	case len(tokens) >= 2 && tokens[0] == "api":
		rest = tokens[2:]
	case len(tokens) >= 3 && tokens[0] == "apis":
		rest = tokens[3:]
	default:
		return ""
	}
	legacy := len(rest) > 0 && rest[0] == "proxy"
	if legacy {
		rest = rest[1:]
	}
	candidates := [][]string{rest} // a cluster-scoped resource
	if len(rest) >= 3 && rest[0] == "namespaces" {
		candidates = append(candidates, rest[2:]) // a namespaced one
	}
	for _, res := range candidates {
		if len(res) < 2 {
			continue
		}
		sub := res[2:]
		if !legacy {
			if len(sub) == 0 || (sub[0] != "proxy" && !(res[0] == "pods" && streamSubresources[sub[0]])) {
				continue
			}
			if res[0] == "pods" && streamSubresources[sub[0]] {
				return "a pod's " + sub[0]
			}
			sub = sub[1:]
		} else if res[0] == "pods" && len(sub) > 0 && streamSubresources[sub[0]] {
			return "a pod's " + sub[0] + " (legacy form)"
		}
		// A proxy: what follows proxy/ goes on, decoded once, to a node, pod or service, and
		// to a kubelet through a pod's or a service's proxy to a kubelet's port.
		if res[0] == "nodes" || ((res[0] == "pods" || res[0] == "services") && kubeletPort(res[1])) {
			if finding := judgeKubeletPath(strings.Join(sub, "/"), trailingSlash, exact); finding != "" {
				return finding
			}
		}
		if exact && !stableReading(apiPath) {
			return "a proxy reached by a path that reads otherwise once decoded again or cleaned"
		}
	}
	return ""
}

// kubeletPort says whether a pod's or a service's proxy name, [scheme:]name[:port], names a
// kubelet's port, 10250 or 10255, as a number (leading zeros and a plus sign allowed, as a
// service's proxy reads it), whatever comes before it: the contract is deny-by-default
// whatever the scheme, so a scheme or a part kube-apiserver would answer 400 to counts too.
func kubeletPort(name string) bool {
	parts := strings.Split(name, ":")
	if len(parts) < 2 {
		return false
	}
	digits := strings.TrimLeft(strings.TrimPrefix(parts[len(parts)-1], "+"), "0")
	return digits == "10250" || digits == "10255"
}

// judgeKubeletPath follows the node proxy's subpath to the kubelet: the node proxy joins it
// to "/" (path.Join, keeping a trailing slash) and sends it percent-encoded; the kubelet's HTTP
// server decodes it, and a router behind may decode it again and clean it.
func judgeKubeletPath(subpath string, trailingSlash, exact bool) string {
	location := path.Join("/", subpath)
	if trailingSlash && !strings.HasSuffix(location, "/") {
		location += "/"
	}
	wire := (&url.URL{Path: location}).EscapedPath()
	received, err := url.ParseRequestURI(wire)
	if err != nil {
		return ""
	}
	firsts := map[string]bool{}
	for _, reading := range decodings(received.Path) {
		first := firstSegment(reading)
		if kubeletCommands[strings.ToLower(first)] {
			return fmt.Sprintf("the kubelet's %s (read as %q)", first, reading)
		}
		firsts[first] = true
	}
	if !exact {
		return ""
	}
	if len(firsts) != 1 {
		return fmt.Sprintf("the kubelet's endpoint reads as any of %v", firsts)
	}
	for first := range firsts {
		if !kubeletReadEndpoints[first] {
			return fmt.Sprintf("the kubelet's %q, not a read endpoint", first)
		}
	}
	return ""
}

// decodings are p, p percent-decoded again until nothing changes, and each of them cleaned.
func decodings(p string) []string {
	out := []string{p, path.Clean("/" + p)}
	for range 4 {
		next, err := url.PathUnescape(p)
		if err != nil || next == p {
			break
		}
		p = next
		out = append(out, p, path.Clean("/"+p))
	}
	return out
}

// stableReading says whether decoding p again and cleaning it leave it as it is (a trailing
// slash aside).
func stableReading(p string) bool {
	for _, reading := range decodings(p) {
		if strings.TrimSuffix(reading, "/") != strings.TrimSuffix(p, "/") {
			return false
		}
	}
	return true
}

// firstSegment is the first non-empty segment of p.
func firstSegment(p string) string {
	for _, segment := range strings.Split(p, "/") {
		if segment != "" {
			return segment
		}
	}
	return ""
}

// Words, spellings and separators buildTarget draws from.
var (
	fuzzMethods  = []string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "CONNECT", "TRACE"}
	fuzzPrefixes = []string{"/api/v1", "/apis/example.com/v1", "/api/v1/proxy", "", "/API/v1", "/api/v1/", "/apis/v1"}
	fuzzWords    = []string{
		"api", "v1", "apis", "namespaces", "ns", "pods", "p", "nodes", "n", "node-1", // 0-9
		"proxy", "run", "exec", "attach", "portforward", "portForward", "cri", ".", "..", "", // 10-19
		"services", "s", "status", "finalize", "watch", "metrics", "stats", "summary", "cadvisor", "containerLogs", // 20-29
		"logs", "healthz", "configz", "checkpoint", "debug", "flags", "c", "uid", "x", "pprof", // 30-39
	}
	fuzzSeparators = []string{"/", "/", "/", "%2F", "%2f", "%252F", "//", "/./", "/../", "%2E%2E/", "%252e%252e/", "/%2e/", "%25252F", "\\", ";/", "/?"}
)

// buildTarget turns a program into "METHOD target": the method, then a prefix, then
// (word, spelling, separator) triples, each byte indexing its table (modulo its length); the
// separator goes between a word and the next.
func buildTarget(program []byte) string {
	next := func() int {
		if len(program) == 0 {
			return 0
		}
		b := program[0]
		program = program[1:]
		return int(b)
	}
	method := fuzzMethods[next()%len(fuzzMethods)]
	var b strings.Builder
	b.WriteString(fuzzPrefixes[next()%len(fuzzPrefixes)])
	separator := "/"
	for len(program) > 0 && b.Len() < 512 {
		word := fuzzWords[next()%len(fuzzWords)]
		b.WriteString(separator)
		b.WriteString(spell(word, next()))
		separator = fuzzSeparators[next()%len(fuzzSeparators)]
	}
	if b.Len() == 0 {
		b.WriteString("/")
	}
	return method + " " + b.String()
}

// spell writes word one of the ways a client could: as it is, a letter percent-encoded once
// or twice (either case of hex digit), every letter encoded, in other case, with a port or a
// scheme and port (a kubelet's, by number or spelt otherwise, or by name; a scheme
// kube-apiserver takes or one it does not).
func spell(word string, how int) string {
	if word == "" {
		return word
	}
	at := (how / 16) % len(word)
	switch how % 16 {
	case 1:
		return word[:at] + fmt.Sprintf("%%%02X", word[at]) + word[at+1:]
	case 2:
		return word[:at] + fmt.Sprintf("%%%02x", word[at]) + word[at+1:]
	case 3:
		return word[:at] + fmt.Sprintf("%%25%02X", word[at]) + word[at+1:]
	case 4:
		return word[:at] + fmt.Sprintf("%%2525%02x", word[at]) + word[at+1:]
	case 5:
		var all strings.Builder
		for i := range len(word) {
			fmt.Fprintf(&all, "%%%02X", word[i])
		}
		return all.String()
	case 6:
		return word + ":10250"
	case 7:
		return "https:" + word + ":10250"
	case 8:
		return strings.ToUpper(word)
	case 9:
		return strings.ToUpper(word[:1]) + word[1:]
	case 10:
		return word + "?cmd=id"
	case 11:
		return "http:" + word + ":10255"
	case 12:
		return word + ":+010250"
	case 13:
		return word + ":https-metrics"
	case 14:
		return "ws:" + word + ":10250" // a scheme kube-apiserver does not take
	}
	return word
}
