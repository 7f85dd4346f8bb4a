package transport_test

// The rig's balancer fronts (see outside_rig_test.go): loopback TCP proxies
// that route each new connection by a script.

import (
	"context"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"net"
	"slices"
	"sync"
	"time"
)

// rigHop is where a front sends one new connection.
type rigHop struct {
	to    *rigServer    // the apiserver it reaches
	eof   bool          // accepted and closed at once
	hang  bool          // accepted and never answered
	after time.Duration // with to: held this long (virtual) before it is connected
}

func hopTo(a *rigServer) rigHop                    { return rigHop{to: a} }
func hopSlow(a *rigServer, d time.Duration) rigHop { return rigHop{to: a, after: d} }

var (
	hopEOF  = rigHop{eof: true}
	hopHang = rigHop{hang: true}
)

func (h rigHop) String() string {
	switch {
	case h.eof:
		return "eof"
	case h.hang:
		return "hang"
	case h.after > 0:
		return fmt.Sprintf("%s after %v", h.to.name, h.after)
	}
	return h.to.name
}

func always(h rigHop) func(int) rigHop { return func(int) rigHop { return h } }

// roundRobin sends the n-th new connection to hops[(n-1) % len(hops)].
func roundRobin(hops ...rigHop) func(int) rigHop {
	return func(n int) rigHop { return hops[(n-1)%len(hops)] }
}

// rigFront is a TCP balancer in front of the rig's apiservers (TLS passes
// through, so the client sees each apiserver's own certificate and GOAWAY).
// The n-th connection it accepts since its route was set goes where the
// route says.
type rigFront struct {
	r    *rig
	tls  bool
	addr string

	mu     sync.Mutex
	ln     net.Listener
	route  func(n int) rigHop
	n      int
	hops   []string // where each connection since the route was set went
	conns  map[net.Conn]*rigServer
	pairs  map[string]string // an apiserver's view of a connection -> the client's
	closed bool
	wg     sync.WaitGroup
	stopCh chan struct{} // closed by stop
}

// front starts a front that sends every connection to first until told
// otherwise; it speaks first's scheme.
func (r *rig) front(first *rigServer) *rigFront {
	f := &rigFront{r: r, tls: !first.opts.plain, route: always(hopTo(first)), conns: map[net.Conn]*rigServer{}, pairs: map[string]string{}, stopCh: make(chan struct{})}
	ln := listenFront(r)
	f.addr = ln.Addr().String()
	f.mu.Lock()
	f.serve(ln)
	f.mu.Unlock()
	r.mu.Lock()
	r.fronts = append(r.fronts, f)
	r.mu.Unlock()
	r.t.Cleanup(f.stop)
	return f
}

// frontPorts are the ports fronts took. A front listens outside the
// ephemeral range (32768-60999 on Linux), so that a port it gives up to
// refuse connections is not taken meanwhile by a client's connection, and
// never on another front's port.
var frontPorts struct {
	sync.Mutex
	used map[int]bool
}

func listenFront(r *rig) net.Listener {
	frontPorts.Lock()
	defer frontPorts.Unlock()
	if frontPorts.used == nil {
		frontPorts.used = map[int]bool{}
	}
	for range 100 {
		port := 20000 + mathrand.IntN(12000)
		if frontPorts.used[port] {
			continue
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		frontPorts.used[port] = true
		return ln
	}
	r.t.Fatal("rig: no free port for a front")
	return nil
}

func (f *rigFront) url() string {
	if f.tls {
		return "https://" + f.addr
	}
	return "http://" + f.addr
}

// serve accepts on ln; f.mu is held.
func (f *rigFront) serve(ln net.Listener) {
	f.ln = ln
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.mu.Lock()
			f.n++
			h := f.route(f.n)
			f.hops = append(f.hops, h.String())
			f.conns[c] = h.to
			f.wg.Add(1)
			f.mu.Unlock()
			f.r.poke()
			go f.handle(c, h)
		}
	}()
}

func (f *rigFront) handle(c net.Conn, h rigHop) {
	defer f.wg.Done()
	defer func() {
		c.Close()
		f.mu.Lock()
		delete(f.conns, c)
		f.mu.Unlock()
	}()
	switch {
	case h.eof:
		return
	case h.hang:
		release := f.r.hold("the front holds a connection silent")
		defer release()
		_, _ = io.Copy(io.Discard, c)
		return
	case h.after > 0:
		if !f.r.delay(context.Background(), f.stopCh, h.after, fmt.Sprintf("the front holds a connection %v", h.after)) {
			return
		}
	}
	up, err := net.Dial("tcp", h.to.srv.Listener.Addr().String())
	if err != nil {
		return
	}
	f.mu.Lock()
	f.pairs[up.LocalAddr().String()] = c.RemoteAddr().String()
	f.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
	c.Close()
	up.Close()
	<-done
}

// clientOf is the client's address of the connection an apiserver sees
// from remote, if it came through this front.
func (f *rigFront) clientOf(remote string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.pairs[remote]
	return c, ok
}

// setRoute routes the connections accepted from now on: route(1) is the
// first of them.
func (f *rigFront) setRoute(route func(n int) rigHop) {
	f.mu.Lock()
	f.route, f.n, f.hops = route, 0, nil
	f.mu.Unlock()
}

// routed is where each connection since the route was set went.
func (f *rigFront) routed() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.hops)
}

// cut ends the client connections to a (nil: every one): with reset by a
// TCP RST, else by a FIN (the client reads an unexpected EOF).
func (f *rigFront) cut(a *rigServer, reset bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for c, to := range f.conns {
		if a != nil && to != a {
			continue
		}
		if tc, ok := c.(*net.TCPConn); ok && reset {
			_ = tc.SetLinger(0)
		}
		c.Close()
	}
}

// refuse stops listening (new connections are refused) and listens again
// on the same address d of virtual time from now.
func (f *rigFront) refuse(d time.Duration) {
	f.mu.Lock()
	f.ln.Close()
	f.mu.Unlock()
	f.r.clock.hook(d, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.closed {
			return
		}
		ln, err := net.Listen("tcp", f.addr)
		if err != nil {
			f.r.t.Errorf("rig: the front cannot listen again: %v", err)
			return
		}
		f.serve(ln)
	})
}

// lose is the loss of the apiserver behind: every connection is cut, the
// connections from now on go by route, and with refused > 0 nothing
// listens for that long.
func (f *rigFront) lose(route func(n int) rigHop, refused time.Duration) {
	f.setRoute(route)
	if refused > 0 {
		// Before the cut: a reopen must not find the listener still open.
		f.refuse(refused)
	}
	f.cut(nil, false)
}

func (f *rigFront) stop() {
	f.mu.Lock()
	f.closed = true
	close(f.stopCh)
	f.ln.Close()
	for c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}
