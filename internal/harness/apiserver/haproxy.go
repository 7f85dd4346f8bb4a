package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// RBACFlags authorize with RBAC instead of AlwaysAllow. kube-apiserver v1.37 turns anonymous
// requests off under AlwaysAllow; under RBAC its default bindings (system:public-info-viewer)
// let an anonymous client read /readyz, which is what a load balancer's health check is.
// [Admin] is in system:masters and may do everything; [Limited] may do nothing under RBAC.
var RBACFlags = []string{"--authorization-mode=RBAC", "--anonymous-auth=true"}

// HAProxyOptions configures a load balancer in front of a cluster's kube-apiservers.
type HAProxyOptions struct {
	// Servers are the backends, "127.0.0.1:port" each (Server.Addr).
	Servers []string
	// Balance is HAProxy's algorithm: "roundrobin" (empty) or "leastconn".
	Balance string
	// Inter is the pace of the /readyz health checks (HAProxy's inter); 0 means 2s.
	Inter time.Duration
	// Fall is how many failed checks in a row take a backend out (0 means 3); Rise how many
	// good ones put it back (0 means 2).
	Fall, Rise int
	// Bin is the haproxy binary; empty means "haproxy" on $PATH, then /usr/sbin/haproxy.
	Bin string
	// Dir receives haproxy.cfg and haproxy.log; empty means a new temporary directory,
	// removed by Close.
	Dir string
}

// HAProxy is a running haproxy in TCP mode in front of kube-apiservers' TLS: clients reach the
// servers' own certificates through it, and which server a new connection reaches is HAProxy's
// choice among the backends whose /readyz answered.
type HAProxy struct {
	addr      string
	dir       string
	removeDir bool
	proc      *process
}

// ErrNoHAProxy is returned (wrapped) by StartHAProxy when the haproxy binary is missing.
var ErrNoHAProxy = errors.New("haproxy not found (run `make e2e-deps`, which installs Debian's haproxy)")

// StartHAProxy writes a config for opts, starts haproxy in the foreground as a child of this
// process (its own process group, stopped by its PID) and waits until its port accepts.
func StartHAProxy(ctx context.Context, opts HAProxyOptions) (_ *HAProxy, err error) {
	bin, err := haproxyBin(opts.Bin)
	if err != nil {
		return nil, err
	}
	if len(opts.Servers) == 0 {
		return nil, errors.New("apiserver: haproxy needs at least one server")
	}
	h := &HAProxy{dir: opts.Dir}
	if h.dir == "" {
		if h.dir, err = os.MkdirTemp("", "kretry-haproxy-"); err != nil {
			return nil, err
		}
		h.removeDir = true
	}
	defer func() {
		if err != nil {
			h.Close()
		}
	}()
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	h.addr = fmt.Sprintf("127.0.0.1:%d", port)
	cfg := filepath.Join(h.dir, "haproxy.cfg")
	if err = os.WriteFile(cfg, []byte(haproxyConfig(h.addr, opts)), 0o600); err != nil {
		return nil, err
	}
	// -db: foreground, no daemon, so the PID started is haproxy's own.
	if h.proc, err = startProcess("haproxy", bin, []string{"-db", "-f", cfg}, filepath.Join(h.dir, "haproxy.log")); err != nil {
		return nil, err
	}
	err = poll(ctx, 10*time.Second, h.proc, func() error {
		conn, err := net.DialTimeout("tcp", h.addr, time.Second)
		if err != nil {
			return err
		}
		return conn.Close()
	})
	return h, err
}

// haproxyConfig is the generated haproxy.cfg: one TCP frontend on addr, one backend per server
// checked with GET /readyz over TLS (anonymous, the certificate not verified: the check asks
// about readiness, the clients verify the certificate themselves).
func haproxyConfig(addr string, opts HAProxyOptions) string {
	balance := opts.Balance
	if balance == "" {
		balance = "roundrobin"
	}
	inter := opts.Inter
	if inter == 0 {
		inter = 2 * time.Second
	}
	fall, rise := opts.Fall, opts.Rise
	if fall == 0 {
		fall = 3
	}
	if rise == 0 {
		rise = 2
	}
	var b strings.Builder
	fmt.Fprintf(&b, `global
	maxconn 2000
	log stderr format short local0 notice

defaults
	mode tcp
	log global
	option tcplog
	timeout connect 2s
	timeout client 1h
	timeout server 1h
	timeout check 2s

frontend apiservers
	bind %s
	default_backend apiservers

backend apiservers
	balance %s
	option httpchk GET /readyz
	http-check expect status 200
	default-server check check-ssl verify none inter %dms fall %d rise %d
`, addr, balance, inter.Milliseconds(), fall, rise)
	for i, s := range opts.Servers {
		fmt.Fprintf(&b, "\tserver apiserver-%d %s\n", i, s)
	}
	return b.String()
}

func haproxyBin(bin string) (string, error) {
	if bin != "" {
		return bin, nil
	}
	if p, err := exec.LookPath("haproxy"); err == nil {
		return p, nil
	}
	if st, err := os.Stat("/usr/sbin/haproxy"); err == nil && st.Mode()&0o111 != 0 {
		return "/usr/sbin/haproxy", nil
	}
	return "", ErrNoHAProxy
}

// Addr is "127.0.0.1:port", where clients connect.
func (h *HAProxy) Addr() string { return h.addr }

// PID is haproxy's process ID, 0 once it has exited.
func (h *HAProxy) PID() int {
	if h.proc == nil || h.proc.exited() {
		return 0
	}
	return h.proc.pid()
}

// Log returns the tail of haproxy's log (its health-check transitions among it).
func (h *HAProxy) Log(n int64) string {
	if h.proc == nil {
		return ""
	}
	return h.proc.logTail(n)
}

// Close stops haproxy (SIGTERM to its process group, SIGKILL after 2s) and removes the
// temporary directory. It is safe to call more than once.
func (h *HAProxy) Close() error {
	var errs []error
	if h.proc != nil {
		errs = append(errs, h.proc.stop(2*time.Second))
	}
	if h.removeDir && h.dir != "" {
		errs = append(errs, os.RemoveAll(h.dir))
		h.removeDir = false
	}
	return errors.Join(errs...)
}
