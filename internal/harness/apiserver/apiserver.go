package apiserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// User picks one of the two identities configured in every cluster.
type User int

const (
	// Admin is in system:masters: exempt from max-requests-inflight and priority-and-fairness.
	Admin User = iota
	// Limited is an ordinary authenticated user (AlwaysAllow authorizes it for everything), so
	// request limits and 429s apply to it.
	Limited
)

// String names the user as the token file does.
func (u User) String() string {
	if u == Admin {
		return "kretry-admin"
	}
	return "kretry-limited"
}

// ServerOptions configures one kube-apiserver of a cluster.
type ServerOptions struct {
	// ExtraFlags are appended to the standard flags, e.g. RequestLimitFlags or
	// "--watch-cache-sizes=configmaps#0".
	ExtraFlags []string
	// EtcdVia, if set, maps etcd's client URL to the one this server uses, e.g. a fault proxy
	// in front of etcd to make this server's watch cache lag. Called at every (re)start.
	EtcdVia func(etcdURL string) string
}

// RequestLimitFlags put a kube-apiserver in request-limit mode: one request in flight for users
// outside system:masters, everything else gets 429 with Retry-After: 1 (watches are exempt).
var RequestLimitFlags = []string{
	"--max-requests-inflight=1",
	"--max-mutating-requests-inflight=1",
	"--enable-priority-and-fairness=false",
}

// CBORFlags make a kube-apiserver serve CBOR (application/cbor, and application/cbor-seq for
// watches) to clients that accept it; the gate is alpha in v1.37, off by default.
var CBORFlags = []string{"--feature-gates=CBORServingAndStorage=true"}

// Options configures a cluster. The zero value starts one etcd and one kube-apiserver.
type Options struct {
	// Servers lists the kube-apiservers to start on the shared etcd; empty means one with
	// default flags.
	Servers []ServerOptions
	// BinDir holds kube-apiserver and etcd; empty means FindBinDir().
	BinDir string
	// Dir is where data, certificates and logs go; empty means a new temporary directory,
	// removed by Close.
	Dir string
	// ReadyTimeout bounds the wait for etcd and each /readyz; 0 means 60s.
	ReadyTimeout time.Duration
	// ServingKey is the key type of each apiserver's serving certificate: "" or "rsa-2048"
	// (kubeadm's default), or "ecdsa-p256" (kubeadm's ClusterConfiguration
	// encryptionAlgorithm: ECDSA-P256), whose handshakes cost the apiserver far less CPU.
	ServingKey string
}

// Serving key types of Options.ServingKey.
const (
	ServingKeyRSA2048   = "rsa-2048"
	ServingKeyECDSAP256 = "ecdsa-p256"
)

// Cluster is one etcd and the kube-apiservers started against it.
type Cluster struct {
	dir       string
	removeDir bool
	binDir    string
	timeout   time.Duration
	pki       *pki
	tokens    map[User]string

	etcd    *process
	etcdURL string

	mu      sync.Mutex
	servers []*Server
}

// Server is one kube-apiserver of a Cluster. It keeps its port across Stop/Kill and Start.
type Server struct {
	cluster *Cluster
	index   int
	port    int
	flags   []string
	etcdVia func(string) string

	mu   sync.Mutex
	proc *process
}

// Start launches etcd and the kube-apiservers and waits until each answers /readyz. On error
// everything already started is stopped again.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	if opts.BinDir == "" {
		if opts.BinDir, err = FindBinDir(); err != nil {
			return nil, err
		}
	}
	c := &Cluster{binDir: opts.BinDir, timeout: opts.ReadyTimeout, dir: opts.Dir}
	if c.timeout == 0 {
		c.timeout = 60 * time.Second
	}
	if c.dir == "" {
		if c.dir, err = os.MkdirTemp("", "kretry-apiserver-"); err != nil {
			return nil, err
		}
		c.removeDir = true
	}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	if c.pki, err = writePKI(c.dir, opts.ServingKey); err != nil {
		return nil, err
	}
	if err = c.writeTokens(); err != nil {
		return nil, err
	}
	if err = c.startEtcd(ctx); err != nil {
		return nil, err
	}
	servers := opts.Servers
	if len(servers) == 0 {
		servers = []ServerOptions{{}}
	}
	for i, so := range servers {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s := &Server{cluster: c, index: i, port: port, flags: append([]string(nil), so.ExtraFlags...), etcdVia: so.EtcdVia}
		c.servers = append(c.servers, s)
	}
	// Start all, then wait for all: the servers boot in parallel.
	for _, s := range c.servers {
		if err = s.launch(); err != nil {
			return nil, err
		}
	}
	for _, s := range c.servers {
		if err = s.waitReady(ctx); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Dir is the directory holding the cluster's data, certificates and logs.
func (c *Cluster) Dir() string { return c.dir }

// EtcdURL is etcd's client URL (plain HTTP on loopback), which also serves the gRPC gateway
// (e.g. POST /v3/kv/compaction).
func (c *Cluster) EtcdURL() string { return c.etcdURL }

// CAData is the PEM CA that signed every server's serving certificate.
func (c *Cluster) CAData() []byte { return append([]byte(nil), c.pki.caPEM...) }

// Servers returns the kube-apiservers in the order of Options.Servers.
func (c *Cluster) Servers() []*Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Server(nil), c.servers...)
}

// Server returns the i-th kube-apiserver.
func (c *Cluster) Server(i int) *Server { return c.Servers()[i] }

// Config returns a fresh *rest.Config for user against the first server.
func (c *Cluster) Config(u User) *rest.Config { return c.ConfigFor(c.Server(0).Addr(), u) }

// ConfigFor returns a fresh *rest.Config for user against addr ("127.0.0.1:port"), which may be
// a proxy in front of any of the servers: the serving certificate is valid for 127.0.0.1.
// Rate limiting on the client side is off so that tests measure the transport, not client-go's
// token bucket.
func (c *Cluster) ConfigFor(addr string, u User) *rest.Config {
	return &rest.Config{
		Host:            "https://" + addr,
		BearerToken:     c.tokens[u],
		TLSClientConfig: rest.TLSClientConfig{CAData: c.CAData()},
		QPS:             -1,
		UserAgent:       "kretry-e2e",
	}
}

// Token returns the bearer token of user. Never log it.
func (c *Cluster) Token(u User) string { return c.tokens[u] }

// HTTPClient returns a plain HTTP client trusting the cluster CA, for raw requests in tests.
func (c *Cluster) HTTPClient() *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.pki.caPEM)
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}

// CompactEtcd compacts etcd's history up to (excluding) revision, through the gRPC gateway.
func (c *Cluster) CompactEtcd(ctx context.Context, revision int64) error {
	body, _ := json.Marshal(map[string]any{"revision": strconv.FormatInt(revision, 10), "physical": true})
	_, err := c.etcdPost(ctx, "/v3/kv/compaction", body)
	return err
}

// PutEtcd writes value at key in etcd directly, through the gRPC gateway, and returns the
// revision the write made: a way to move etcd's revision on while no kube-apiserver runs.
func (c *Cluster) PutEtcd(ctx context.Context, key, value string) (int64, error) {
	body, _ := json.Marshal(map[string]string{
		"key":   base64.StdEncoding.EncodeToString([]byte(key)),
		"value": base64.StdEncoding.EncodeToString([]byte(value)),
	})
	out, err := c.etcdPost(ctx, "/v3/kv/put", body)
	if err != nil {
		return 0, err
	}
	return headerRevision(out)
}

// EtcdRevision returns etcd's current revision.
func (c *Cluster) EtcdRevision(ctx context.Context) (int64, error) {
	out, err := c.etcdPost(ctx, "/v3/kv/range", []byte(`{"key":"AA==","limit":1,"keys_only":true}`))
	if err != nil {
		return 0, err
	}
	return headerRevision(out)
}

// headerRevision is the revision in the header of an etcd gateway answer.
func headerRevision(out []byte) (int64, error) {
	var resp struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
	}
	if err := json.Unmarshal(out, &resp); err != nil {
		return 0, fmt.Errorf("apiserver: etcd answer: %w", err)
	}
	return strconv.ParseInt(resp.Header.Revision, 10, 64)
}

func (c *Cluster) etcdPost(ctx context.Context, path string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.etcdURL+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("apiserver: etcd %s: %s: %s", path, resp.Status, bytes.TrimSpace(out))
	}
	return out, nil
}

// Close stops every kube-apiserver, then etcd, and removes the temporary directory. It is safe
// to call more than once.
func (c *Cluster) Close() error {
	var errs []error
	c.mu.Lock()
	servers := append([]*Server(nil), c.servers...)
	c.mu.Unlock()
	for _, s := range servers {
		errs = append(errs, s.Kill())
	}
	if c.etcd != nil {
		errs = append(errs, c.etcd.kill())
	}
	if c.removeDir && c.dir != "" {
		errs = append(errs, os.RemoveAll(c.dir))
		c.removeDir = false
	}
	return errors.Join(errs...)
}

// Logs returns the tail of every process's log, for failure reports.
func (c *Cluster) Logs(perProcess int64) string {
	var b strings.Builder
	if c.etcd != nil {
		fmt.Fprintf(&b, "--- etcd ---\n%s\n", c.etcd.logTail(perProcess))
	}
	for _, s := range c.Servers() {
		s.mu.Lock()
		p := s.proc
		s.mu.Unlock()
		if p != nil {
			fmt.Fprintf(&b, "--- kube-apiserver %d ---\n%s\n", s.index, p.logTail(perProcess))
		}
	}
	return b.String()
}

func (c *Cluster) writeTokens() error {
	c.tokens = map[User]string{Admin: randomToken(), Limited: randomToken()}
	// token,user,uid,"group1,group2"
	content := fmt.Sprintf("%s,%s,uid-admin,\"system:masters\"\n%s,%s,uid-limited\n",
		c.tokens[Admin], Admin, c.tokens[Limited], Limited)
	return os.WriteFile(filepath.Join(c.dir, "tokens.csv"), []byte(content), 0o600)
}

func (c *Cluster) startEtcd(ctx context.Context) error {
	clientPort, err := freePort()
	if err != nil {
		return err
	}
	peerPort, err := freePort()
	if err != nil {
		return err
	}
	c.etcdURL = fmt.Sprintf("http://127.0.0.1:%d", clientPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	args := []string{
		"--name=kretry",
		"--data-dir=" + filepath.Join(c.dir, "etcd-data"),
		"--listen-client-urls=" + c.etcdURL,
		"--advertise-client-urls=" + c.etcdURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=kretry=" + peerURL,
		"--unsafe-no-fsync",
		"--log-level=warn",
	}
	c.etcd, err = startProcess("etcd", filepath.Join(c.binDir, "etcd"), args, filepath.Join(c.dir, "etcd.log"))
	if err != nil {
		return err
	}
	return poll(ctx, c.timeout, c.etcd, func() error {
		resp, err := http.Get(c.etcdURL + "/health")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return errors.New(resp.Status)
		}
		return nil
	})
}

// Index is the server's position in Options.Servers.
func (s *Server) Index() int { return s.index }

// Addr is "127.0.0.1:port"; the port stays the same across restarts.
func (s *Server) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.port) }

// Running reports whether the server's process is alive.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc != nil && !s.proc.exited()
}

// PID is the process ID of the running server, 0 if none.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil || s.proc.exited() {
		return 0
	}
	return s.proc.pid()
}

// Start starts a stopped server again on the same port and etcd and waits for /readyz.
func (s *Server) Start(ctx context.Context) error {
	if s.Running() {
		return fmt.Errorf("apiserver: server %d already running", s.index)
	}
	if err := s.launch(); err != nil {
		return err
	}
	return s.waitReady(ctx)
}

// Stop terminates the server: SIGTERM, then SIGKILL after 5s. kube-apiserver does not end open
// watches on SIGTERM (it waits for them), so with a watch open the SIGKILL is what ends them.
func (s *Server) Stop() error {
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p == nil {
		return nil
	}
	return p.stop(5 * time.Second)
}

// Terminate sends SIGTERM, as a rolling upgrade does, and waits up to grace for the server to
// exit on its own (kube-apiserver's graceful shutdown: --shutdown-delay-duration, then draining);
// then it kills what is left. It reports whether the server exited within grace.
func (s *Server) Terminate(grace time.Duration) (exited bool, err error) {
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p == nil {
		return true, nil
	}
	return p.terminate(grace)
}

// Kill kills the server at once (SIGKILL): its connections reset mid-stream.
func (s *Server) Kill() error {
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p == nil {
		return nil
	}
	return p.kill()
}

// Restart stops the server gracefully and starts it again.
func (s *Server) Restart(ctx context.Context) error {
	if err := s.Stop(); err != nil {
		return err
	}
	return s.Start(ctx)
}

func (s *Server) launch() error {
	c := s.cluster
	certDir := filepath.Join(c.dir, fmt.Sprintf("apiserver-%d", s.index))
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return err
	}
	servingCert, servingKey, err := c.pki.servingPair(s.index)
	if err != nil {
		return err
	}
	etcdURL := c.etcdURL
	if s.etcdVia != nil {
		etcdURL = s.etcdVia(etcdURL)
	}
	args := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", s.port),
		"--cert-dir=" + certDir,
		"--tls-cert-file=" + servingCert,
		"--tls-private-key-file=" + servingKey,
		"--token-auth-file=" + filepath.Join(c.dir, "tokens.csv"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + c.pki.saPublicKey,
		"--service-account-signing-key-file=" + c.pki.saKey,
		"--service-cluster-ip-range=10.96.0.0/24",
		"--endpoint-reconciler-type=none",
		"--v=1",
	}
	// --authorization-mode is a list that a second flag appends to, so AlwaysAllow only goes in
	// when ExtraFlags choose no mode of their own (RBACFlags).
	if !slices.ContainsFunc(s.flags, func(f string) bool { return strings.HasPrefix(f, "--authorization-mode=") }) {
		args = append(args, "--authorization-mode=AlwaysAllow")
	}
	args = append(args, s.flags...)
	p, err := startProcess(fmt.Sprintf("kube-apiserver-%d", s.index), filepath.Join(c.binDir, "kube-apiserver"), args,
		filepath.Join(c.dir, fmt.Sprintf("kube-apiserver-%d.log", s.index)))
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
	return nil
}

func (s *Server) waitReady(ctx context.Context) error {
	c := s.cluster
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	client := c.HTTPClient()
	defer client.CloseIdleConnections()
	err := poll(ctx, c.timeout, p, func() error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+s.Addr()+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+c.tokens[Admin])
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return errors.New(resp.Status)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("apiserver: kube-apiserver %d not ready: %w\n%s", s.index, err, p.logTail(4096))
	}
	return nil
}

// poll calls check every 100ms until it succeeds, the process exits, or timeout passes.
func poll(ctx context.Context, timeout time.Duration, p *process, check func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if last = check(); last == nil {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited (%v); last check: %v; log:\n%s", p.name, p.waitErr, last, p.logTail(4096))
		case <-ctx.Done():
			return fmt.Errorf("%s: %w; last check: %v", p.name, ctx.Err(), last)
		case <-tick.C:
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func randomToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
