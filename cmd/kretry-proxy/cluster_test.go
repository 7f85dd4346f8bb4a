package main

import (
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// kubeconfigFor writes a kubeconfig with one context per server, the first current.
func kubeconfigFor(t *testing.T, path string, servers ...string) {
	t.Helper()
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: Config\nusers:\n- name: u\n  user: {token: t}\nclusters:\n")
	for i, s := range servers {
		fmt.Fprintf(&b, "- name: c%d\n  cluster: {server: %q}\n", i, s)
	}
	b.WriteString("contexts:\n")
	for i := range servers {
		fmt.Fprintf(&b, "- name: ctx%d\n  context: {cluster: c%d, user: u}\n", i, i)
	}
	b.WriteString("current-context: ctx0\n")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

// serviceAccount writes a service account's files as a pod has them mounted.
func serviceAccount(t *testing.T, token string, ca []byte) string {
	t.Helper()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "token"), []byte(token), 0o600)
	os.WriteFile(filepath.Join(dir, "ca.crt"), ca, 0o644)
	os.WriteFile(filepath.Join(dir, "namespace"), []byte("default"), 0o644)
	return dir
}

// TestFindCluster: --kubeconfig, else $KUBECONFIG, else ~/.kube/config, else in-cluster, as
// kubectl finds its cluster; --context with any kubeconfig; nothing found is an error naming
// everything tried.
func TestFindCluster(t *testing.T) {
	root := t.TempDir()
	explicit := filepath.Join(root, "explicit")
	kubeconfigFor(t, explicit, "https://explicit:6443")
	envA := filepath.Join(root, "env-a")
	kubeconfigFor(t, envA, "https://env-a:6443")
	home := filepath.Join(root, "home")
	kubeconfigFor(t, filepath.Join(home, ".kube", "config"), "https://home:6443", "https://home-other:6443")
	emptyHome := filepath.Join(root, "empty-home")
	sa := serviceAccount(t, "sa-token", []byte("ca"))
	inPod := map[string]string{"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
	with := func(base map[string]string, kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	tests := []struct {
		name      string
		opts      options
		env       map[string]string
		wantHost  string
		wantToken string   // in-cluster: the token file
		wantErr   []string // all of these in the error
	}{
		{name: "--kubeconfig", opts: options{kubeconfig: explicit}, env: with(inPod, "KUBECONFIG", envA, "HOME", home), wantHost: "https://explicit:6443"},
		{name: "--kubeconfig missing", opts: options{kubeconfig: filepath.Join(root, "nope")}, env: with(inPod, "HOME", home),
			wantErr: []string{"--kubeconfig", "nope", "no such file"}},
		{name: "$KUBECONFIG, a list", env: with(inPod, "KUBECONFIG", filepath.Join(root, "missing")+":"+envA, "HOME", home), wantHost: "https://env-a:6443"},
		{name: "~/.kube/config", env: with(inPod, "HOME", home), wantHost: "https://home:6443"},
		{name: "--context", opts: options{context: "ctx1"}, env: map[string]string{"HOME": home}, wantHost: "https://home-other:6443"},
		{name: "--context unknown", opts: options{context: "nope"}, env: map[string]string{"HOME": home}, wantErr: []string{"nope"}},
		{name: "in-cluster", env: with(inPod, "HOME", emptyHome), wantHost: "https://10.96.0.1:443", wantToken: filepath.Join(sa, "token")},
		{name: "in-cluster IPv6", env: map[string]string{"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"},
			wantHost: "https://[fd00::1]:443", wantToken: filepath.Join(sa, "token")},
		{name: "in-cluster with --context", opts: options{context: "ctx0"}, env: with(inPod, "HOME", emptyHome),
			wantErr: []string{`--context "ctx0"`, "in-cluster has no contexts"}},
		{name: "in-cluster without a token", opts: options{serviceAccountDir: root}, env: with(inPod, "HOME", emptyHome),
			wantErr: []string{filepath.Join(root, "token"), "is missing"}},
		{name: "nothing", env: map[string]string{"HOME": emptyHome}, wantErr: []string{
			"no cluster found", "--kubeconfig (not set)", "$KUBECONFIG (not set)",
			filepath.Join(emptyHome, ".kube", "config") + " (no such file)",
			"in-cluster (KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT not set)", "--demo"}},
		{name: "nothing in $KUBECONFIG", env: map[string]string{"KUBECONFIG": filepath.Join(root, "a") + ":" + filepath.Join(root, "b"), "HOME": home},
			wantErr: []string{"no cluster found", "$KUBECONFIG=", "(no such files)", "in-cluster ("}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.opts.serviceAccountDir == "" {
				tc.opts.serviceAccountDir = sa
			}
			c, err := findCluster(tc.opts, func(k string) string { return tc.env[k] })
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("found %s (%s), want an error", c.config.Host, c.found)
				}
				for _, want := range tc.wantErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not say %q", err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.config.Host != tc.wantHost || c.tokenFile != tc.wantToken {
				t.Fatalf("found %s with token file %q (%s), want %s and %q", c.config.Host, c.tokenFile, c.found, tc.wantHost, tc.wantToken)
			}
			if tc.wantToken != "" && (c.config.BearerToken != "" || c.config.CAFile != filepath.Join(sa, "ca.crt")) {
				t.Fatalf("in-cluster config: token set %v, CA file %q; want the token from the file only and the pod's CA", c.config.BearerToken != "", c.config.CAFile)
			}
		})
	}
}

// TestInClusterMode: with nothing but a pod's environment the proxy serves the pod's cluster
// with its service account's token, verified against the pod's CA, and a rotated token is
// the one the next request carries.
func TestInClusterMode(t *testing.T) {
	apiServer, gotAuth := fakeAPIServer(t)
	u, _ := url.Parse(apiServer.URL)
	sa := serviceAccount(t, "first", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: apiServer.Certificate().Raw}))
	t.Setenv("KUBECONFIG", "")
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBERNETES_SERVICE_HOST", u.Hostname())
	t.Setenv("KUBERNETES_SERVICE_PORT", u.Port())
	addr, stdout := start(t, "--service-account-dir", sa)
	if out := stdout.String(); !strings.Contains(out, "Serving the cluster at "+apiServer.URL+" (in-cluster") {
		t.Errorf("stdout %q does not say the cluster was found in-cluster", out)
	}
	for _, token := range []string{"first", "second"} {
		os.WriteFile(filepath.Join(sa, "token.new"), []byte(token), 0o600)
		os.Rename(filepath.Join(sa, "token.new"), filepath.Join(sa, "token"))
		resp, err := http.Get("http://" + addr + "/api/v1/namespaces/default/configmaps")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s", resp.Status)
		}
		if auth := <-gotAuth; auth != "Bearer "+token {
			t.Fatalf("the API server was asked with %q, want the service account's token %q", auth, token)
		}
	}
}

// TestNoCluster: with no cluster to be found and no --demo, the command fails, naming what it
// tried, and serves nothing.
func TestNoCluster(t *testing.T) {
	home := t.TempDir()
	t.Setenv("KUBECONFIG", "")
	t.Setenv("HOME", home)
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	err := run(context.Background(), []string{"--port", "0"}, io.Discard, io.Discard, func(string) { t.Error("served") })
	if err == nil || !strings.Contains(err.Error(), "no cluster found: tried") || !strings.Contains(err.Error(), filepath.Join(home, ".kube", "config")) {
		t.Fatalf("error %v, want one naming what was tried", err)
	}
}

// TestProbeAddress: --probe-address serves /healthz and /metrics to any Host (the kubelet
// probes the pod's IP), and nothing of the API.
func TestProbeAddress(t *testing.T) {
	_, stdout := start(t, "--demo", "--demo-fault-rate", "0", "--probe-address", "127.0.0.1:0")
	var probe string
	for _, line := range strings.Split(stdout.String(), "\n") {
		if a, ok := strings.CutPrefix(line, "Serving /healthz and /metrics on "); ok {
			probe = a
		}
	}
	if probe == "" {
		t.Fatalf("stdout %q names no probe address", stdout)
	}
	for path, want := range map[string]int{"/healthz": 200, "/metrics": 200, "/api/v1/namespaces/demo/configmaps": 404} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+probe+path, nil)
		req.Host = "10.0.0.7:8081"
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s on the probe address: %s, want %d", path, resp.Status, want)
		}
	}
}

// TestNoHarnessLinked: the binary a user deploys links no test harness.
func TestNoHarnessLinked(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.Contains(pkg, "/internal/harness/") || strings.HasSuffix(pkg, "/internal/harness") {
			t.Errorf("kretry-proxy links %s", pkg)
		}
	}
}
