package apiserver

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestKillReachesGrandchildren: a kill by the PID we started takes the whole group down, so a
// child that forks (as etcd and kube-apiserver never do, but a wrapper script might) leaves nothing.
func TestKillReachesGrandchildren(t *testing.T) {
	for _, tc := range []struct {
		name string
		stop func(*process) error
	}{
		{"kill", (*process).kill},
		{"stop", func(p *process) error { return p.stop(2 * time.Second) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logPath := filepath.Join(t.TempDir(), "log")
			// The trap makes SIGTERM ineffective for the parent shell, so "stop" must escalate.
			p, err := startProcess("sh", "/bin/sh", []string{"-c", "trap '' TERM; sleep 300 & echo $!; wait"}, logPath)
			if err != nil {
				t.Fatal(err)
			}
			var child int
			deadline := time.Now().Add(5 * time.Second)
			for child == 0 && time.Now().Before(deadline) {
				b, _ := os.ReadFile(logPath)
				child, _ = strconv.Atoi(strings.TrimSpace(string(b)))
				time.Sleep(10 * time.Millisecond)
			}
			if child == 0 {
				t.Fatal("grandchild pid never written")
			}
			if err := tc.stop(p); err != nil {
				t.Fatal(err)
			}
			if !p.exited() {
				t.Fatal("process still running")
			}
			// The grandchild is reparented and reaped by init; give it a moment.
			for i := 0; i < 100 && alive(child); i++ {
				time.Sleep(20 * time.Millisecond)
			}
			if alive(child) {
				t.Fatalf("grandchild %d survived", child)
			}
			registry.mu.Lock()
			_, still := registry.procs[p.pid()]
			registry.mu.Unlock()
			if still {
				t.Fatal("process still registered")
			}
		})
	}
}

func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	// A zombie is dead for our purpose.
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	fields := strings.Fields(string(b))
	return len(fields) > 2 && fields[2] != "Z"
}

func TestFindBinDirMissing(t *testing.T) {
	t.Setenv(BinDirEnv, t.TempDir())
	if _, err := FindBinDir(); err == nil {
		t.Fatal("want ErrNoBinaries for an empty directory")
	}
}

func TestWritePKI(t *testing.T) {
	p, err := writePKI(t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	cert0, key0, err := p.servingPair(0)
	if err != nil {
		t.Fatal(err)
	}
	cert1, key1, err := p.servingPair(1)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{cert0, key0, cert1, key1, p.saKey, p.saPublicKey} {
		if st, err := os.Stat(f); err != nil || st.Size() == 0 {
			t.Fatalf("%s: %v", f, err)
		}
	}
	if again, _, err := p.servingPair(0); err != nil || again != cert0 {
		t.Errorf("servingPair(0) again = %s, %v; want %s: a restarted apiserver keeps its certificate", again, err, cert0)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.caPEM)
	var leaves [][]byte
	for _, pair := range [][2]string{{cert0, key0}, {cert1, key1}} {
		kp, err := tls.LoadX509KeyPair(pair[0], pair[1])
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := x509.ParseCertificate(kp.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "127.0.0.1"}); err != nil {
			t.Errorf("%s: %v", pair[0], err)
		}
		leaves = append(leaves, kp.Certificate[0])
	}
	if bytes.Equal(leaves[0], leaves[1]) {
		t.Error("two apiservers serve the same certificate, want one each")
	}
}
