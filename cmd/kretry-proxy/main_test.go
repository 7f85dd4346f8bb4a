package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestParseFlags(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
	}{
		{args: nil},
		{args: []string{"--kubeconfig", "k", "--context", "c", "--port", "0", "--address", "::1"}},
		{args: []string{"--address", "localhost"}},
		{args: []string{"--address", "0.0.0.0"}, wantErr: "not a loopback address"},
		{args: []string{"--address", "192.0.2.1"}, wantErr: "not a loopback address"},
		{args: []string{"--context", "c"}},
		{args: []string{"--demo", "--probe-address", ":0"}},
		{args: []string{"--demo", "--kubeconfig", "k"}, wantErr: "--demo serves the in-process demo API server"},
		{args: []string{"--demo", "--context", "c"}, wantErr: "--demo serves the in-process demo API server"},
		{args: []string{"extra"}, wantErr: "unexpected arguments"},
		{args: []string{"--list-buffer-size", "32Mi"}},
		{args: []string{"--list-buffer-size", "1048576"}},
		{args: []string{"--list-buffer-size", "lots"}, wantErr: "is not a size"},
		{args: []string{"--list-buffer-size", "1.5"}, wantErr: "not a whole number of bytes"},
		{args: []string{"--list-buffer-size", "512Ki"}, wantErr: "under 1Mi"},
		{args: []string{"--list-buffer-size", "-64Mi"}, wantErr: "under 1Mi"},
		{args: []string{"--list-buffer-size", "1048576.5"}, wantErr: "not a whole number of bytes"},
		{args: []string{"--list-buffer-size", "1.0000000001Mi"}, wantErr: "not a whole number of bytes"},
		{args: []string{"--list-buffer-size", "8Ei"}, wantErr: "too large"},
		{args: []string{"--list-buffer-size", "9Ei"}, wantErr: "too large"},
		{args: []string{"--list-buffer-size", "100Ei"}, wantErr: "too large"},
		{args: []string{"--list-buffer-size", "9223372036854775808"}, wantErr: "too large"},
		{args: []string{"--list-buffer-size", "1e19"}, wantErr: "too large"},
		{args: []string{"--list-buffer-size", "10E"}, wantErr: "too large"},
	}
	for _, tc := range tests {
		_, err := parseFlags(tc.args, io.Discard)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%q: %v", tc.args, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%q: error %v, want one with %q", tc.args, err, tc.wantErr)
		}
	}
}

// TestListBufferSizeFlag: --list-buffer-size reads a quantity as a memory limit is written
// (1.5Mi is a whole number of bytes, as is an int64's largest), and its default is kretry's.
func TestListBufferSizeFlag(t *testing.T) {
	for value, want := range map[string]int64{
		"": 128 << 20, "32Mi": 32 << 20, "64M": 64_000_000, "2097152": 2 << 20, "1Gi": 1 << 30,
		// a fraction of a unit that is a whole number of bytes, as in a memory limit
		"1.5Mi": 3 << 19, "1.25Mi": 5 << 18, "1.5Gi": 3 << 29, "2.5M": 2_500_000, "1e7": 10_000_000,
		"7Ei": 7 << 60, "9223372036854775807": math.MaxInt64,
	} {
		args := []string{}
		if value != "" {
			args = append(args, "--list-buffer-size", value)
		}
		o, err := parseFlags(args, io.Discard)
		if err != nil {
			t.Errorf("%q: %v", value, err)
			continue
		}
		if int64(o.listBufferSize) != want {
			t.Errorf("--list-buffer-size %q: %d bytes, want %d", value, o.listBufferSize, want)
		}
	}
	var help bytes.Buffer
	if _, err := parseFlags([]string{"--help"}, &help); !strings.Contains(help.String(), "(default 128Mi)") {
		t.Errorf("--help (%v) does not give the default as 128Mi:\n%s", err, help.String())
	}
}

// TestHelp: --help and -h print the usage on stdout, and run returns no error (the command
// exits 0).
func TestHelp(t *testing.T) {
	for _, arg := range []string{"--help", "-h"} {
		var stdout, stderr bytes.Buffer
		if err := run(context.Background(), []string{arg}, &stdout, &stderr, nil); err != nil {
			t.Errorf("%s: %v", arg, err)
		}
		if !strings.HasPrefix(stdout.String(), "Usage: kretry-proxy") || !strings.Contains(stdout.String(), "-allow-upgrades") {
			t.Errorf("%s: stdout %q, want the usage", arg, stdout.String())
		}
		if stderr.Len() > 0 {
			t.Errorf("%s: stderr %q", arg, stderr.String())
		}
	}
	if _, err := parseFlags([]string{"--no-such-flag"}, io.Discard); err == nil || !strings.Contains(err.Error(), "--help lists the flags") {
		t.Errorf("an unknown flag: %v, want an error that points at --help", err)
	}
}

// TestHelpAndDocsAgree: --help and the flag table of docs/kretry-proxy.md say the same about
// what --allow-upgrades lets through, the --accept-hosts default and --list-buffer-size's least
// value.
func TestHelpAndDocsAgree(t *testing.T) {
	var help bytes.Buffer
	parseFlags([]string{"--help"}, &help)
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "kretry-proxy.md"))
	if err != nil {
		t.Fatal(err)
	}
	for flag, phrases := range map[string][]string{
		"--allow-upgrades": {"every protocol upgrade", "pods' exec, attach and portforward", "behind a node's proxy",
			"behind a pod's or a service's proxy to port 10250 or 10255", "whatever is not one of the kubelet's read endpoints",
			"run, exec, attach, portforward, cri, checkpoint, debug", "not in canonical form", "connect and trace stay refused"},
		"--accept-hosts":     {`localhost,127\.0\.0\.1,::1`, "matched against the whole name", "host and origin"},
		"--list-buffer-size": {"128mi", "at least 1mi"},
	} {
		usage := flagUsage(t, help.String(), flag)
		row := docsFlagRow(t, string(doc), flag)
		for _, phrase := range phrases {
			if !strings.Contains(usage, phrase) {
				t.Errorf("--help on %s does not say %q:\n%s", flag, phrase, usage)
			}
			if !strings.Contains(row, phrase) {
				t.Errorf("the docs' flag table on %s does not say %q:\n%s", flag, phrase, row)
			}
		}
	}
}

// flagUsage is what --help prints for flag, its default included, normalised by plain.
func flagUsage(t *testing.T, help, flag string) string {
	t.Helper()
	_, after, ok := strings.Cut(help, "\n  "+flag[1:]+" ")
	if !ok {
		_, after, ok = strings.Cut(help, "\n  "+flag[1:]+"\n")
	}
	if !ok {
		t.Fatalf("--help has no %s:\n%s", flag, help)
	}
	if end := strings.Index(after, "\n  -"); end >= 0 {
		after = after[:end]
	}
	return plain(after)
}

// docsFlagRow is the row of docs/kretry-proxy.md's flag table for flag, normalised by plain.
func docsFlagRow(t *testing.T, doc, flag string) string {
	t.Helper()
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(line, "| `"+flag+"` |") {
			return plain(line)
		}
	}
	t.Fatalf("docs/kretry-proxy.md's flag table has no row for %s", flag)
	return ""
}

// plain is s in lower case, without backquotes, its white space folded.
func plain(s string) string {
	return strings.ToLower(strings.Join(strings.Fields(strings.ReplaceAll(s, "`", "")), " "))
}

// syncBuffer is an io.Writer safe for the command and the test at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// start runs the command until the test ends; it returns the address it serves on.
func start(t *testing.T, args ...string) (addr string, stdout *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stdout = &syncBuffer{}
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"--port", "0"}, args...), stdout, io.Discard, func(a string) { ready <- a })
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("run ended before serving: %v", err)
	}
	return addr, stdout
}

// TestDemoMode: with --demo the proxy serves the demo server and says so (its faults off
// here, so that nothing but the proxy is tested), and a watch through it delivers events line
// by line.
func TestDemoMode(t *testing.T) {
	addr, stdout := start(t, "--demo", "--demo-fault-rate", "0")
	if out := stdout.String(); !strings.Contains(out, "--demo: serving an in-process demo API server, not a cluster") || !strings.Contains(out, "Starting to serve on "+addr) {
		t.Errorf("stdout %q", out)
	}
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz: %s", resp.Status)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/api/v1/namespaces/demo/configmaps?watch=true&resourceVersion=0", nil)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, `{"type":"ADDED"`) {
		t.Fatalf("first event %q, %v", line, err)
	}
}

// fakeAPIServer is an HTTPS stand-in for an API server that answers every request with an
// empty ConfigMapList and tells the Authorization header of each.
func fakeAPIServer(t *testing.T) (*httptest.Server, <-chan string) {
	gotAuth := make(chan string, 8)
	apiServer := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth <- r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{},"items":[]}`)
	}))
	t.Cleanup(apiServer.Close)
	return apiServer, gotAuth
}

// TestKubeconfigMode: with --kubeconfig and --context the proxy uses that context's server and
// credentials.
func TestKubeconfigMode(t *testing.T) {
	apiServer, gotAuth := fakeAPIServer(t)
	// HTTPS: clientcmd sends a kubeconfig's credentials to TLS servers only.
	ca := base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: apiServer.Certificate().Raw}))
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	err := os.WriteFile(kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: %q, certificate-authority-data: %q}
users:
- name: u
  user: {token: the-token}
- name: other
  user: {token: not-this-one}
contexts:
- name: chosen
  context: {cluster: c, user: u}
- name: default
  context: {cluster: c, user: other}
current-context: default
`, apiServer.URL, ca)), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := start(t, "--kubeconfig", kubeconfig, "--context", "chosen", "--read-only")
	resp, err := http.Get("http://" + addr + "/api/v1/namespaces/default/configmaps")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if auth := <-gotAuth; auth != "Bearer the-token" {
		t.Errorf("the API server was asked with %q, want the chosen context's token", auth)
	}
	resp, err = http.Post("http://"+addr+"/api/v1/namespaces/default/configmaps", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST with --read-only: %s", resp.Status)
	}
}

// TestListBufferSizeApplied: --list-buffer-size is the bound of the LIST bodies kretry holds
// whole. A custom resource's 2 MiB JSON list breaks half-way the first time it is served: with
// a 4Mi buffer kretry holds it and asks again, and the client gets it whole; with 1Mi it
// streams unprotected and the client gets the break.
func TestListBufferSizeApplied(t *testing.T) {
	item := `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","namespace":"default"},"spec":{"pad":"` + strings.Repeat("x", 1000) + `"}}`
	items := make([]string, 2048)
	for i := range items {
		items[i] = item
	}
	// Keys sorted, as kube-apiserver writes a custom resource's list: metadata after items.
	body := `{"apiVersion":"example.com/v1","items":[` + strings.Join(items, ",") + `],"kind":"WidgetList","metadata":{"resourceVersion":"7"}}`
	for _, tc := range []struct {
		size      string
		wantWhole bool
	}{{"4Mi", true}, {"1Mi", false}} {
		t.Run(tc.size, func(t *testing.T) {
			var mu sync.Mutex
			served := 0
			apiServer := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				served++
				first := served == 1
				mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Content-Length", fmt.Sprint(len(body)))
				if first {
					io.WriteString(w, body[:len(body)/2])
					http.NewResponseController(w).Flush()
					panic(http.ErrAbortHandler) // the connection cut half-way
				}
				io.WriteString(w, body)
			}))
			t.Cleanup(apiServer.Close)
			addr, _ := start(t, "--kubeconfig", writeKubeconfig(t, apiServer), "--list-buffer-size", tc.size)
			resp, err := http.Get("http://" + addr + "/apis/example.com/v1/namespaces/default/widgets")
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			whole := err == nil && string(got) == body
			if whole != tc.wantWhole {
				t.Errorf("--list-buffer-size %s: %d of %d bytes, read error %v; want whole: %v", tc.size, len(got), len(body), err, tc.wantWhole)
			}
			mu.Lock()
			defer mu.Unlock()
			if want := map[bool]int{true: 2, false: 1}[tc.wantWhole]; served != want {
				t.Errorf("--list-buffer-size %s: the API server was asked %d times, want %d", tc.size, served, want)
			}
		})
	}
}

// writeKubeconfig writes a kubeconfig for apiServer (HTTPS, its certificate trusted, a token).
func writeKubeconfig(t *testing.T, apiServer *httptest.Server) string {
	t.Helper()
	ca := base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: apiServer.Certificate().Raw}))
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	err := os.WriteFile(kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: %q, certificate-authority-data: %q}
users:
- name: u
  user: {token: a-token}
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
`, apiServer.URL, ca)), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	return kubeconfig
}
