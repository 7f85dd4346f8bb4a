package proxy

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/rest"
)

// ask sends one request to a Server for up through its whole handler and reports the answer
// and the request the API server received, nil if it was not asked.
func ask(t *testing.T, up *upstream, cfg rest.Config, opts Options, req *http.Request) (*httptest.ResponseRecorder, *http.Request) {
	t.Helper()
	cfg.Host = up.URL
	srv, err := New(&cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	if req.Host == "example.com" { // httptest.NewRequest's default
		req.Host = "127.0.0.1:8001"
	}
	before := len(up.seen())
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, req)
	if seen := up.seen(); len(seen) > before {
		return rec, seen[len(seen)-1]
	}
	return rec, nil
}

func okUpstream(t *testing.T) *upstream {
	return newUpstream(t, func(w http.ResponseWriter, r *http.Request) { writeList(w) })
}

// TestCommandEndpointsRefused: the kubelet's endpoints behind nodes/NAME/proxy/ that run a
// command or open a stream (run, exec, attach, portForward, cri), and pods' exec, attach and
// portforward, are refused however the path is spelled, as a plain GET or POST without any
// upgrade; the kubelet's metrics, stats and the rest reach the API server.
func TestCommandEndpointsRefused(t *testing.T) {
	up := okUpstream(t)
	refused := []string{
		"/api/v1/nodes/n/proxy/run/ns/p/c?cmd=id",
		"/api/v1/nodes/n/proxy/run/ns/p/uid/c?cmd=id",
		"/api/v1/nodes/n/proxy/exec/ns/p/c?command=id",
		"/api/v1/nodes/n/proxy/attach/ns/p/c",
		"/api/v1/nodes/n/proxy/portForward/ns/p",
		"/api/v1/nodes/n/proxy/cri/exec/token",
		"/api/v1/nodes/n:10250/proxy/run/ns/p/c",
		"/api/v1/nodes/https:n:10250/proxy/run/ns/p/c",
		// trailing slash, or none after the endpoint
		"/api/v1/nodes/n/proxy/run/",
		"/api/v1/nodes/n/proxy/run",
		// case
		"/api/v1/nodes/n/proxy/RUN/ns/p/c",
		"/api/v1/nodes/n/proxy/portforward/ns/p",
		"/api/v1/Nodes/n/Proxy/Exec/ns/p/c",
		// percent-encoding, once and twice
		"/api/v1/nodes/n/proxy/%72un/ns/p/c",
		"/api/v1/nodes/n/proxy%2Frun/ns/p/c",
		"/api/v1/nodes/n/proxy/%2572un/ns/p/c",
		"/api/v1/nodes/n%2Fproxy%2Frun/ns/p/c",
		// empty segments and dot segments
		"/api/v1/nodes/n/proxy//run/ns/p/c",
		"//api/v1/nodes/n/proxy/run/ns/p/c",
		"/api/v1/nodes/n/proxy/./run/ns/p/c",
		"/api/v1/nodes/n/proxy/metrics/../run/ns/p/c",
		"/api/v1/nodes/n/proxy/metrics/%2e%2e/run/ns/p/c",
		"/api/v1/nodes/n/proxy/metrics%2F..%2Frun/ns/p/c",
		// pods' subresources, spelled likewise
		"/api/v1/namespaces/ns/pods/p/exec?command=id",
		"/api/v1/namespaces/ns/pods/p/EXEC?command=id",
		"/api/v1/namespaces/ns/pods/p/%65xec?command=id",
		"/api/v1/namespaces/ns/pods/p//attach",
		"/api/v1/namespaces/ns/pods/p/portforward/",
		"/api/v1/namespaces/ns/pods/p/log/../exec",
	}
	reachable := []string{
		"/api/v1/nodes/n/proxy/metrics",
		"/api/v1/nodes/n/proxy/metrics/cadvisor",
		"/api/v1/nodes/n/proxy/metrics/resource",
		"/api/v1/nodes/n/proxy/stats/summary",
		"/api/v1/nodes/n/proxy/configz",
		"/api/v1/nodes/n/proxy/containerLogs/ns/p/c",
		"/api/v1/nodes/n/proxy/",
		"/api/v1/nodes/run/proxy/metrics",         // a node named run
		"/api/v1/nodes/n/proxy/metrics/run",       // run below another endpoint
		"/api/v1/nodes/n",                         // the Node object
		"/api/v1/namespaces/ns/configmaps/exec",   // a ConfigMap named exec
		"/api/v1/namespaces/ns/pods/p/log",        // pods' log
		"/api/v1/namespaces/pods/configmaps/exec", // a namespace named pods
	}
	for _, method := range []string{http.MethodPost, http.MethodGet} {
		for _, target := range refused {
			t.Run("refused "+method+" "+target, func(t *testing.T) {
				rec, reached := ask(t, up, rest.Config{}, Options{}, httptest.NewRequest(method, target, nil))
				if reached != nil {
					t.Fatalf("reached the API server as %s (answer %d)", reached.URL.EscapedPath(), rec.Code)
				}
				if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "--allow-upgrades") {
					t.Fatalf("answered %d %q, want 403 naming --allow-upgrades", rec.Code, rec.Body)
				}
			})
			t.Run("allowed "+method+" "+target, func(t *testing.T) {
				rec, reached := ask(t, up, rest.Config{}, Options{AllowUpgrades: true}, httptest.NewRequest(method, target, nil))
				// A path with empty, . or .. segments is answered by the HTTP server's
				// redirect to its clean form; every other one reaches the API server.
				if reached == nil && rec.Code/100 != 3 {
					t.Fatalf("with AllowUpgrades: refused with %d %q", rec.Code, rec.Body)
				}
			})
		}
	}
	for _, target := range reachable {
		t.Run("reachable "+target, func(t *testing.T) {
			rec, reached := ask(t, up, rest.Config{}, Options{}, httptest.NewRequest(http.MethodGet, target, nil))
			if reached == nil {
				t.Fatalf("refused with %d %q", rec.Code, rec.Body)
			}
		})
	}
}

// TestUpgradeAsTheHandlerSeesIt: every request the handler behind the guard would treat as a
// protocol upgrade (apimachinery's httpstream.IsUpgradeRequest: a Connection value containing
// "upgrade") is refused, whatever its spelling, and a request it would not is not.
func TestUpgradeAsTheHandlerSeesIt(t *testing.T) {
	up := okUpstream(t)
	tests := []struct {
		connection []string
		upgrade    string
		want       bool // an upgrade to the handler
	}{
		{connection: []string{"Upgrade"}, upgrade: "websocket", want: true},
		{connection: []string{"keep-alive, Upgrade"}, upgrade: "SPDY/3.1", want: true},
		{connection: []string{"keep-alive upgrade"}, upgrade: "websocket", want: true},
		{connection: []string{"UPGRADE"}, want: true},
		{connection: []string{"keep-alive,upgrade"}, want: true},
		{connection: []string{"x-upgraded"}, want: true},
		{connection: []string{"keep-alive", "Upgrade"}, want: true},
		{connection: []string{"keep-alive"}, upgrade: "websocket", want: false},
		{upgrade: "h2c", want: false},
		{want: false},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.connection, "|")+" "+tc.upgrade, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "/api/v1/namespaces/ns/configmaps", nil)
			for _, v := range tc.connection {
				req.Header.Add("Connection", v)
			}
			if tc.upgrade != "" {
				req.Header.Set("Upgrade", tc.upgrade)
			}
			if got := httpstream.IsUpgradeRequest(req); got != tc.want {
				t.Fatalf("httpstream.IsUpgradeRequest = %v, the table says %v", got, tc.want)
			}
			rec, reached := ask(t, up, rest.Config{}, Options{}, req)
			if tc.want && (reached != nil || rec.Code != http.StatusForbidden) {
				t.Fatalf("an upgrade to the handler: answered %d, reached the API server: %v", rec.Code, reached != nil)
			}
			if !tc.want && reached == nil {
				t.Fatalf("not an upgrade to the handler, yet refused with %d %q", rec.Code, rec.Body)
			}
		})
	}
}

// TestClientIdentityDropped: a client's Authorization, Impersonate-* headers and cookies never
// reach the API server; the kubeconfig's own impersonation (as: viewer) holds.
func TestClientIdentityDropped(t *testing.T) {
	up := okUpstream(t)
	clientHeaders := http.Header{
		"Authorization":           {"Bearer client-token"},
		"Impersonate-User":        {"system:admin"},
		"Impersonate-Group":       {"system:masters", "system:authenticated"},
		"Impersonate-Uid":         {"0"},
		"Impersonate-Extra-Scope": {"all"},
		"Cookie":                  {"session=client"},
	}
	tests := []struct {
		name string
		cfg  rest.Config
		want http.Header // the identity headers the API server must see, and no others
	}{
		{name: "no impersonation", cfg: rest.Config{BearerToken: "proxy-token"},
			want: http.Header{"Authorization": {"Bearer proxy-token"}}},
		{name: "kubeconfig impersonates", cfg: rest.Config{BearerToken: "proxy-token", Impersonate: rest.ImpersonationConfig{UserName: "viewer"}},
			want: http.Header{"Authorization": {"Bearer proxy-token"}, "Impersonate-User": {"viewer"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "/api/v1/namespaces/ns/configmaps", nil)
			for k, vs := range clientHeaders {
				for _, v := range vs {
					req.Header.Add(k, v)
				}
			}
			// A header name as a client may send it, not canonicalised.
			req.Header["impersonate-group"] = []string{"system:masters"}
			rec, reached := ask(t, up, tc.cfg, Options{}, req)
			if reached == nil {
				t.Fatalf("refused with %d %q", rec.Code, rec.Body)
			}
			got := http.Header{}
			for k, vs := range reached.Header {
				if k == "Authorization" || k == "Cookie" || strings.HasPrefix(strings.ToLower(k), "impersonate-") {
					got[k] = vs
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("the API server saw %v, want exactly %v", redact(got), redact(tc.want))
			}
			for k, vs := range tc.want {
				if strings.Join(got[k], ",") != strings.Join(vs, ",") {
					t.Fatalf("the API server saw %v, want exactly %v", redact(got), redact(tc.want))
				}
			}
		})
	}
}

// redact hides tokens, which tests print on failure too.
func redact(h http.Header) http.Header {
	out := h.Clone()
	if v := out.Get("Authorization"); v != "" {
		out.Set("Authorization", strings.SplitN(v, " ", 2)[0]+" …"+v[len(v)-min(len(v), 5):])
	}
	return out
}

// refusedAndAllowed checks that each target is refused with 403 naming --allow-upgrades
// without reaching the API server, and reaches it with AllowUpgrades (or, for a path the HTTP
// server redirects to its clean form, is redirected).
func refusedAndAllowed(t *testing.T, up *upstream, method string, targets []string) {
	t.Helper()
	for _, target := range targets {
		t.Run("refused "+method+" "+target, func(t *testing.T) {
			rec, reached := ask(t, up, rest.Config{}, Options{}, httptest.NewRequest(method, target, nil))
			if reached != nil {
				t.Fatalf("reached the API server as %s (answer %d)", reached.URL.EscapedPath(), rec.Code)
			}
			if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "--allow-upgrades") {
				t.Fatalf("answered %d %q, want 403 naming --allow-upgrades", rec.Code, rec.Body)
			}
		})
		t.Run("allowed "+method+" "+target, func(t *testing.T) {
			rec, reached := ask(t, up, rest.Config{}, Options{AllowUpgrades: true}, httptest.NewRequest(method, target, nil))
			if reached == nil && rec.Code/100 != 3 {
				t.Fatalf("with AllowUpgrades: refused with %d %q", rec.Code, rec.Body)
			}
		})
	}
}

func reachable(t *testing.T, up *upstream, method string, targets []string) {
	t.Helper()
	for _, target := range targets {
		t.Run("reachable "+method+" "+target, func(t *testing.T) {
			rec, reached := ask(t, up, rest.Config{}, Options{}, httptest.NewRequest(method, target, nil))
			if reached == nil {
				t.Fatalf("refused with %d %q", rec.Code, rec.Body)
			}
		})
	}
}

// TestNamespaceNamedLikeAResource: any DNS label is a namespace name, "namespaces" and "pods"
// among them; a pod's exec, attach and portforward in such a namespace are refused as in any
// other, and the namespace's other objects stay reachable.
func TestNamespaceNamedLikeAResource(t *testing.T) {
	up := okUpstream(t)
	refusedAndAllowed(t, up, http.MethodPost, []string{
		"/api/v1/namespaces/namespaces/pods/p/exec?command=id",
		"/api/v1/namespaces/namespaces/pods/p/attach",
		"/api/v1/namespaces/namespaces/pods/p/portforward",
		"/api/v1/namespaces/pods/pods/p/exec?command=id",
		"/api/v1/namespaces/nodes/pods/p/exec?command=id",
		"/api/v1/namespaces/proxy/pods/p/exec?command=id",
		"/api/v1/namespaces/status/pods/p/exec?command=id",
		"/api/v1/namespaces/exec/pods/exec/exec?command=id",
		"/apis/example.com/v1/namespaces/namespaces/pods/p/exec?command=id",
	})
	reachable(t, up, http.MethodGet, []string{
		"/api/v1/namespaces/namespaces/pods/p/log",
		"/api/v1/namespaces/namespaces/configmaps/exec",
		"/api/v1/namespaces/pods/pods/exec",
		"/api/v1/namespaces/exec/pods",
		"/api/v1/namespaces/namespaces",
		"/api/v1/namespaces/namespaces/status",
	})
}

// TestNodeProxyReadEndpointsOnly: behind nodes/NAME/proxy/ only the kubelet's read endpoints
// pass, by name, whatever follows them; a path that becomes another endpoint once the kubelet
// decodes what the API server decoded once (%252F..%252F) is refused, as is every endpoint
// not on the list.
func TestNodeProxyReadEndpointsOnly(t *testing.T) {
	up := okUpstream(t)
	refusedAndAllowed(t, up, http.MethodPost, []string{
		// run, then dot segments that exist only after a second decoding
		"/api/v1/nodes/node-1/proxy/run/ns/p/x%252F..%252F..%252F..%252F../c?cmd=id",
		"/api/v1/nodes/node-1/proxy/metrics/x%252F..%252F..%252Frun/ns/p/c?cmd=id",
		"/api/v1/nodes/node-1/proxy/metrics%252F..%252Frun/ns/p/c?cmd=id",
		"/api/v1/nodes/node-1/proxy/metrics/%252e%252e/run/ns/p/c",
		"/api/v1/nodes/node-1/proxy/metrics/%2E%2E/run/ns/p/c",
		"/api/v1/nodes/node-1:10250/proxy/metrics%2F..%2Frun/ns/p/c",
		// the legacy form
		"/api/v1/proxy/nodes/node-1/run/ns/p/c?cmd=id",
		"/api/v1/proxy/nodes/node-1/metrics/x%252F..%252F..%252Frun/ns/p/c",
		// endpoints that are not the kubelet's read endpoints
		"/api/v1/nodes/node-1/proxy/checkpoint/ns/p/c",
		"/api/v1/nodes/node-1/proxy/debug/flags/v",
		"/api/v1/nodes/node-1/proxy/debug/pprof/profile",
		"/api/v1/nodes/node-1/proxy/Metrics",
		"/api/v1/nodes/node-1/proxy/not-an-endpoint",
		"/api/v1/nodes/node-1/proxy/%252e%252e",
	})
	reachable(t, up, http.MethodGet, []string{
		"/api/v1/nodes/node-1/proxy",
		"/api/v1/nodes/node-1/proxy/",
		"/api/v1/nodes/node-1/proxy/healthz",
		"/api/v1/nodes/node-1/proxy/healthz/syncloop",
		"/api/v1/nodes/node-1/proxy/pods",
		"/api/v1/nodes/node-1/proxy/runningpods/",
		"/api/v1/nodes/node-1/proxy/stats/summary",
		"/api/v1/nodes/node-1/proxy/metrics/probes",
		"/api/v1/nodes/node-1/proxy/metrics/slis",
		"/api/v1/nodes/node-1/proxy/logs/",
		"/api/v1/nodes/node-1/proxy/logs/syslog",
		"/api/v1/nodes/node-1:10250/proxy/configz",
		"/api/v1/nodes/https:node-1:10250/proxy/statusz",
		"/api/v1/nodes/node-1/proxy/flagz",
		"/api/v1/proxy/nodes/node-1/metrics",
		"/api/v1/nodes/node-1/proxy/stats/summary?only_cpu_and_memory=true",
	})
}

// TestKubeletPortProxiesReadEndpointsOnly: a pod's or a service's proxy to a kubelet's port
// (10250, or the read-only 10255), named by number with any scheme or none, is judged as the
// node proxy is: only the kubelet's read endpoints pass. Through any other port everything
// passes, an application's own /run among it; a port named, or left out, cannot be told from
// the kubelet's, and passes too (docs/kretry-proxy.md says what closes that road).
func TestKubeletPortProxiesReadEndpointsOnly(t *testing.T) {
	up := okUpstream(t)
	refusedAndAllowed(t, up, http.MethodPost, []string{
		"/api/v1/namespaces/kube-system/pods/https:kube-proxy-x7k2p:10250/proxy/run/ns/p/c?cmd=id",
		"/api/v1/namespaces/kube-system/pods/kube-proxy-x7k2p:10250/proxy/run/ns/p/c?cmd=id",
		"/api/v1/namespaces/kube-system/pods/http:kube-proxy-x7k2p:10255/proxy/run/ns/p/c",
		"/api/v1/namespaces/kube-system/pods/kube-proxy-x7k2p:10250/proxy/checkpoint/ns/p/c",
		"/api/v1/namespaces/kube-system/pods/kube-proxy-x7k2p:10250/proxy/cri/exec/token",
		"/api/v1/namespaces/kube-system/pods/kube-proxy-x7k2p:10250/proxy/portForward/ns/p",
		"/api/v1/namespaces/kube-system/pods/kube-proxy-x7k2p:010250/proxy/run/ns/p/c",
		"/api/v1/namespaces/kube-system/services/https:kubelet:10250/proxy/run/ns/p/c?cmd=id",
		"/api/v1/namespaces/kube-system/services/https:kubelet:10250/proxy/attach/ns/p/c",
		"/api/v1/namespaces/kube-system/services/kubelet:10250/proxy/exec/ns/p/c",
		"/api/v1/namespaces/kube-system/services/https:kubelet:+10250/proxy/run/ns/p/c",
		"/api/v1/namespaces/kube-system/services/https:kubelet:10250/proxy/debug/flags/v",
		"/api/v1/namespaces/kube-system/services/https:kubelet:10250/proxy/not-an-endpoint",
		"/api/v1/namespaces/kube-system/services/HTTPS:kubelet:10250/proxy/run/ns/p/c",
		"/api/v1/namespaces/kube-system/services/Https:kubelet:10250/proxy/run/ns/p/c",
		// a scheme kube-apiserver does not take (it answers 400): refused all the same
		"/api/v1/namespaces/kube-system/pods/ws:kube-proxy-x7k2p:10250/proxy/run/ns/p/c",
		"/api/v1/namespaces/kube-system/services/wss:kubelet:10250/proxy/run/ns/p/c",
		"/api/v1/namespaces/kube-system/pods/tcp:kube-proxy-x7k2p:10255/proxy/run/ns/p/c",
		"/api/v1/namespaces/kube-system/services/h2c:kubelet:10250/proxy/run/ns/p/c",
		"/api/v1/namespaces/kube-system/pods/https:x:kube-proxy-x7k2p:10250/proxy/run/ns/p/c",
		"/api/v1/proxy/namespaces/kube-system/pods/ws:kube-proxy-x7k2p:10255/run/ns/p/c",
		"/api/v1/proxy/namespaces/kube-system/services/tcp:kubelet:10250/run/ns/p/c",
		"/api/v1/namespaces/kube-system/services/https:kubelet:10250/proxy/Run/ns/p/c",
		"/api/v1/proxy/namespaces/kube-system/pods/kube-proxy-x7k2p:10250/run/ns/p/c",
		"/api/v1/proxy/namespaces/kube-system/services/https:kubelet:10250/run/ns/p/c",
		"/apis/example.com/v1/namespaces/ns/pods/p:10250/proxy/run/ns/p/c",
	})
	refusedAndAllowed(t, up, http.MethodPut, []string{
		"/api/v1/namespaces/kube-system/pods/https:kube-proxy-x7k2p:10250/proxy/debug/flags/v",
	})
	reachable(t, up, http.MethodGet, []string{
		"/api/v1/namespaces/kube-system/pods/https:kube-proxy-x7k2p:10250/proxy/metrics",
		"/api/v1/namespaces/kube-system/pods/kube-proxy-x7k2p:10250/proxy/",
		"/api/v1/namespaces/kube-system/pods/http:kube-proxy-x7k2p:10255/proxy/stats/summary",
		"/api/v1/namespaces/kube-system/services/https:kubelet:10250/proxy/metrics/cadvisor",
		"/api/v1/namespaces/kube-system/services/https:kubelet:10250/proxy",
		"/api/v1/proxy/namespaces/kube-system/services/https:kubelet:10250/healthz",
	})
	reachable(t, up, http.MethodPost, []string{
		"/api/v1/namespaces/ns/pods/web:8080/proxy/run/job",
		"/api/v1/namespaces/ns/pods/web:102500/proxy/run",
		"/api/v1/namespaces/ns/pods/web:1025/proxy/exec",
		"/api/v1/namespaces/ns/services/https:web:443/proxy/run",
		"/api/v1/namespaces/ns/services/web/proxy/run",                                    // no port: the service's only one
		"/api/v1/namespaces/kube-system/services/https:kubelet:https-metrics/proxy/run/x", // a named port
		"/api/v1/namespaces/ns/pods/10250/proxy/run",                                      // a pod named 10250, no port
		"/api/v1/namespaces/ns/configmaps/kubelet:10250",                                  // no proxy at all
	})
}

// TestProxyPathsInCanonicalFormOnly: a path with an encoded /, . or % (either case of hex
// digit) is refused where it leads to a pod's or a service's proxy too, and passes where it
// leads to no proxy (a Node's or a ConfigMap's name).
func TestProxyPathsInCanonicalFormOnly(t *testing.T) {
	up := okUpstream(t)
	refusedAndAllowed(t, up, http.MethodGet, []string{
		"/api/v1/namespaces/ns/pods/p/proxy/a%2Fb",
		"/api/v1/namespaces/ns/pods/p:8080/proxy/a%2fb",
		"/api/v1/namespaces/ns/services/s/proxy/%2e%2e/x",
		"/api/v1/namespaces/ns/services/https:s:443/proxy/a%25b",
		"/api/v1/namespaces/ns/services/s%2Fproxy/x",
		"/api/v1/namespaces/ns/pods/p/log%2F..%2Fexec",
		"/api/v1/namespaces/ns/pods/p/%2565xec",
		"/api/v1/proxy/namespaces/ns/services/s/a%2Fb",
	})
	reachable(t, up, http.MethodGet, []string{
		"/api/v1/namespaces/ns/pods/p/proxy/",
		"/api/v1/namespaces/ns/pods/p:8080/proxy/healthz?x=a%2Fb",
		"/api/v1/namespaces/ns/services/https:s:443/proxy/a/b.c/d",
		"/api/v1/namespaces/ns/services/s/proxy/run",
		"/api/v1/namespaces/ns/configmaps/a%2Fb",
		"/api/v1/namespaces/ns/configmaps?fieldSelector=metadata.name%3Da%2Fb",
	})
}

// TestFrontProxyHeadersDropped: the front-proxy identity headers (the API server believes them
// from a front-proxy client certificate, which the proxy's credential may be) never reach the
// API server, in whatever case a client spells them.
func TestFrontProxyHeadersDropped(t *testing.T) {
	up := okUpstream(t)
	req := httptest.NewRequest(http.MethodGet, "/api/v1/namespaces/ns/configmaps", nil)
	req.Header.Set("X-Remote-User", "system:admin")
	req.Header.Add("X-Remote-Group", "system:masters")
	req.Header.Set("X-Remote-Uid", "0")
	req.Header.Set("X-Remote-Extra-Scopes", "all")
	req.Header["x-remote-user"] = []string{"system:admin"}
	req.Header["X-REMOTE-EXTRA-ACME.IO%2FTEAM"] = []string{"root"}
	req.Header.Set("X-Kept", "yes")
	rec, reached := ask(t, up, rest.Config{BearerToken: "proxy-token"}, Options{}, req)
	if reached == nil {
		t.Fatalf("refused with %d %q", rec.Code, rec.Body)
	}
	for name := range reached.Header {
		if strings.HasPrefix(strings.ToLower(name), "x-remote-") {
			t.Errorf("the API server saw %s", name)
		}
	}
	if reached.Header.Get("X-Kept") != "yes" {
		t.Errorf("another header was dropped too: %v", reached.Header)
	}
}

// TestSourceHeadersDropped: a client's X-Forwarded-*, Forwarded and X-Real-Ip never reach the
// API server, whose audit takes its sourceIPs from X-Forwarded-For and X-Real-Ip; the
// X-Forwarded-For it sees is the one the handler behind sets, the client's own address. On
// upgrades too, and a bearer token among the WebSocket subprotocols goes with them.
func TestSourceHeadersDropped(t *testing.T) {
	up := okUpstream(t)
	for _, tc := range []struct {
		name string
		opts Options
		req  *http.Request
	}{
		{name: "LIST", req: httptest.NewRequest(http.MethodGet, "/api/v1/namespaces/ns/configmaps", nil)},
		{name: "POST", req: httptest.NewRequest(http.MethodPost, "/api/v1/namespaces/ns/configmaps", strings.NewReader("{}"))},
		{name: "upgrade", opts: Options{AllowUpgrades: true}, req: httptest.NewRequest(http.MethodGet, "/api/v1/namespaces/ns/pods/p/exec?command=id", nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			req.RemoteAddr = "127.0.0.1:40000"
			req.Header.Add("X-Forwarded-For", "203.0.113.7")
			req.Header.Add("X-Forwarded-For", "198.51.100.9")
			req.Header.Set("X-Real-Ip", "203.0.113.7")
			req.Header.Set("Forwarded", "for=203.0.113.7")
			req.Header.Set("X-Forwarded-Host", "kubernetes.default")
			req.Header["x-forwarded-proto"] = []string{"https"}
			req.Header.Set("X-Kept", "yes")
			if tc.opts.AllowUpgrades {
				req.Header.Set("Connection", "Upgrade")
				req.Header.Set("Upgrade", "websocket")
				req.Header.Set("Sec-WebSocket-Protocol", "v5.channel.k8s.io, base64url.bearer.authorization.k8s.io.dG9rZW4")
			}
			rec, reached := ask(t, up, rest.Config{}, tc.opts, req)
			if reached == nil {
				t.Fatalf("refused with %d %q", rec.Code, rec.Body)
			}
			for name, values := range reached.Header {
				lower := strings.ToLower(name)
				switch {
				case lower == "x-forwarded-for":
					if strings.Join(values, ", ") != "127.0.0.1" {
						t.Errorf("X-Forwarded-For %q reached the API server, want the client's own address", values)
					}
				case lower == "forwarded", lower == "x-real-ip", strings.HasPrefix(lower, "x-forwarded-"):
					t.Errorf("%s %q reached the API server", name, values)
				}
			}
			if reached.Header.Get("X-Kept") != "yes" {
				t.Errorf("another header was dropped too: %v", reached.Header)
			}
			if tc.opts.AllowUpgrades {
				if got := reached.Header.Values("Sec-WebSocket-Protocol"); len(got) != 1 || got[0] != "v5.channel.k8s.io" {
					t.Errorf("Sec-WebSocket-Protocol at the API server: %q, want only v5.channel.k8s.io", got)
				}
			}
		})
	}
}

// TestWithoutBearerProtocol: the subprotocols that carry a bearer token are taken out of a
// Sec-WebSocket-Protocol header, in any case and any place among the others, which are kept.
func TestWithoutBearerProtocol(t *testing.T) {
	for _, tc := range []struct{ in, want []string }{
		{in: []string{"v5.channel.k8s.io"}, want: []string{"v5.channel.k8s.io"}},
		{in: []string{"v5.channel.k8s.io, base64url.bearer.authorization.k8s.io.dG9rZW4, v4.channel.k8s.io"}, want: []string{"v5.channel.k8s.io, v4.channel.k8s.io"}},
		{in: []string{"base64url.bearer.authorization.k8s.io.dG9rZW4,v5.channel.k8s.io"}, want: []string{"v5.channel.k8s.io"}},
		{in: []string{"BASE64URL.Bearer.Authorization.K8S.IO.dG9rZW4", "v4.channel.k8s.io"}, want: []string{"v4.channel.k8s.io"}},
		{in: []string{"base64url.bearer.authorization.k8s.io.dG9rZW4"}, want: nil},
		{in: []string{" , "}, want: nil},
	} {
		if got := withoutBearerProtocol(tc.in); strings.Join(got, "|") != strings.Join(tc.want, "|") || len(got) != len(tc.want) {
			t.Errorf("withoutBearerProtocol(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestConnectAndTraceRefused: CONNECT (a tunnel through the API server) and TRACE never reach
// it, with or without AllowUpgrades; OPTIONS and HEAD do.
func TestConnectAndTraceRefused(t *testing.T) {
	up := okUpstream(t)
	for _, opts := range []Options{{}, {AllowUpgrades: true}} {
		for _, method := range []string{http.MethodConnect, http.MethodTrace} {
			for _, target := range []string{"/api/v1/namespaces/ns/configmaps", "/api/v1/namespaces/ns/pods/p/proxy/"} {
				t.Run(fmt.Sprintf("%s %s AllowUpgrades=%v", method, target, opts.AllowUpgrades), func(t *testing.T) {
					rec, reached := ask(t, up, rest.Config{}, opts, httptest.NewRequest(method, target, nil))
					if reached != nil {
						t.Fatalf("reached the API server as %s %s", reached.Method, reached.URL)
					}
					if rec.Code != http.StatusMethodNotAllowed {
						t.Fatalf("answered %d %q, want 405", rec.Code, rec.Body)
					}
				})
			}
		}
	}
	reachable(t, up, http.MethodOptions, []string{"/api/v1/namespaces/ns/configmaps"})
	reachable(t, up, http.MethodHead, []string{"/api/v1/namespaces/ns/configmaps"})
}
