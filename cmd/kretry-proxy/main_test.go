package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
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
