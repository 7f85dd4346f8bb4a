package contract_test

import (
	"context"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// front is a TCP balancer: each new connection goes to the current backend.
type front struct {
	ln      net.Listener
	mu      sync.Mutex
	backend string
	conns   []net.Conn
	down    atomic.Int64 // bytes from backends to clients
}

type countWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	return n, err
}

func newFront(t *testing.T, backend string) *front {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &front{ln: ln, backend: backend}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.mu.Lock()
			to := f.backend
			f.mu.Unlock()
			b, err := net.Dial("tcp", to)
			if err != nil {
				c.Close()
				continue
			}
			f.mu.Lock()
			f.conns = append(f.conns, c, b)
			f.mu.Unlock()
			go func() { io.Copy(b, c); b.Close() }()
			go func() { io.Copy(countWriter{c, &f.down}, b); c.Close() }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		f.mu.Lock()
		for _, c := range f.conns {
			c.Close()
		}
		f.mu.Unlock()
	})
	return f
}

func (f *front) route(backend string) {
	f.mu.Lock()
	f.backend = backend
	f.mu.Unlock()
}

// TestWatchGoAwaySpread: an apiserver shutting down sends GOAWAY, then its
// connection closes under a watch: the watch resumes at its last RV on the
// apiserver the balancer now routes to, after a draw from [0, 3 s) (Rand
// 0.5: 1.5 s), with no event lost or repeated.
func TestWatchGoAwaySpread(t *testing.T) {
	w := newWorld(t)
	w.kc.Rand = func() float64 { return 0.5 }
	script := func(q h2Req) watchAnswer {
		if q.q("resourceVersion") == "100" {
			return openStream(mediaJSON, 100, 102)
		}
		return openStream(mediaJSON, 102, 104)
	}
	a := h2WatchServer(t, mediaJSON, script, nil)
	b := h2WatchServer(t, mediaJSON, script, nil)
	f := newFront(t, a.srv.Listener.Addr().String())
	c := watchPods(t, w.clientset("https://"+f.ln.Addr().String(), a.caPEM, mediaJSON), metav1.ListOptions{ResourceVersion: "100"})
	c.waitCount(t, 2)
	f.route(b.srv.Listener.Addr().String())
	start := w.clk.Now()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	before := f.down.Load()
	go a.srv.Config.Shutdown(ctx) // GOAWAY
	eventually(t, "the GOAWAY through the front", func() bool { return f.down.Load() > before })
	a.srv.CloseClientConnections()
	eventually(t, "4 events", func() bool { return c.count() == 4 })
	evs, _ := c.snapshot()
	if got := rvs(evs); !slices.Equal(got, seq(101, 104)) {
		t.Errorf("caller saw %s", describe(evs))
	}
	rb := b.requests()
	if len(rb) != 1 || rb[0].q("resourceVersion") != "102" {
		t.Fatalf("B's requests %v", rb)
	}
	t.Logf("sleeps %v; %s", w.clk.sleepLog(), w.obs)
	if d := w.clk.Now().Sub(start); d != 1500*time.Millisecond {
		t.Errorf("the resume after the GOAWAY came %v after it, want the draw 1.5s (Rand 0.5 of [0, 3s))", d)
	}
}
