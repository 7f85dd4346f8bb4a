package faultproxy

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Rule says which faults one connection gets. The zero Rule forwards faithfully.
type Rule struct {
	// CutAfterBytes cuts the connection once this many response bytes were forwarded
	// (0: never). The client receives exactly this many bytes.
	CutAfterBytes int64
	// CutAfterRandomBytes, if Max > 0, cuts after a number of response bytes drawn uniformly
	// from [Min, Max] with the proxy's seeded source. Ignored when CutAfterBytes is set.
	CutAfterRandomBytes ByteRange
	// CutsPerMinute, if > 0, cuts the connection after an exponentially distributed time with
	// this rate, drawn from the proxy's seeded source.
	CutsPerMinute float64
	// StallAfterBytes and StallFor stop forwarding the response for StallFor once this
	// many response bytes were forwarded. StallFor 0 disables it.
	StallAfterBytes int64
	// StallFor is how long the stall lasts.
	StallFor time.Duration
	// Reset makes cuts send an RST to the client instead of a FIN.
	Reset bool
}

// ByteRange is an inclusive range of byte counts.
type ByteRange struct{ Min, Max int64 }

// Routing says how a new connection picks its backend.
type Routing int

const (
	// Failover tries the backends in order and uses the first that is not down and accepts.
	Failover Routing = iota
	// RoundRobin starts at the next backend on every connection, then fails over in order.
	RoundRobin
)

// Stats are counters since the proxy started.
type Stats struct {
	Accepted      int64 // connections accepted
	DialFailures  int64 // backend dials that failed (each counted, including failovers)
	Cuts          int64 // connections cut by a rule or by CutAll
	BytesUp       int64 // client to backend
	BytesDown     int64 // backend to client
	PerBackendHit []int64
}

// Proxy is a running fault proxy. Its methods are safe for concurrent use.
type Proxy struct {
	addr string

	mu       sync.Mutex
	ln       net.Listener
	backends []string
	down     []bool
	routing  Routing
	next     int
	ruleFor  func(n int64) Rule
	rng      *rand.Rand
	conns    map[*conn]struct{}
	stallEnd time.Time
	closed   bool
	hits     []int64

	accepted, dialFailures, cuts, bytesUp, bytesDown atomic.Int64
	wg                                               sync.WaitGroup
}

// New starts a proxy on a free loopback port in front of backends ("host:port"). seed makes
// every random fault reproducible for a given order of connections.
func New(seed uint64, backends ...string) (*Proxy, error) {
	return Listen("127.0.0.1:0", seed, backends...)
}

// Listen is New on a given address.
func Listen(addr string, seed uint64, backends ...string) (*Proxy, error) {
	if len(backends) == 0 {
		return nil, errors.New("faultproxy: no backend")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	p := &Proxy{
		addr:     ln.Addr().String(),
		ln:       ln,
		backends: append([]string(nil), backends...),
		down:     make([]bool, len(backends)),
		hits:     make([]int64, len(backends)),
		ruleFor:  func(int64) Rule { return Rule{} },
		rng:      rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		conns:    map[*conn]struct{}{},
	}
	p.wg.Add(1)
	go p.acceptLoop(ln)
	return p, nil
}

// Addr is the proxy's "127.0.0.1:port"; it stays the same across Refuse/Accept.
func (p *Proxy) Addr() string { return p.addr }

// SetRule applies r to every connection accepted from now on.
func (p *Proxy) SetRule(r Rule) { p.SetRuleFunc(func(int64) Rule { return r }) }

// SetRuleFunc decides the rule of each new connection from its sequence number (1, 2, ...).
func (p *Proxy) SetRuleFunc(f func(n int64) Rule) {
	p.mu.Lock()
	p.ruleFor = f
	p.mu.Unlock()
}

// SetRouting changes how new connections pick a backend.
func (p *Proxy) SetRouting(r Routing) {
	p.mu.Lock()
	p.routing = r
	p.mu.Unlock()
}

// SetDown marks backend i down (new connections skip it) or up again.
func (p *Proxy) SetDown(i int, down bool) {
	p.mu.Lock()
	p.down[i] = down
	p.mu.Unlock()
}

// Refuse closes the listener: new connections get ECONNREFUSED until Accept. Established
// connections are left alone.
func (p *Proxy) Refuse() error {
	p.mu.Lock()
	ln := p.ln
	p.ln = nil
	p.mu.Unlock()
	if ln == nil {
		return nil
	}
	return ln.Close()
}

// Accept listens again on the same address after Refuse.
func (p *Proxy) Accept() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil || p.closed {
		return nil
	}
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		return fmt.Errorf("faultproxy: relisten on %s: %w", p.addr, err)
	}
	p.ln = ln
	p.wg.Add(1)
	go p.acceptLoop(ln)
	return nil
}

// Stall stops forwarding on every connection, current and new, for d.
func (p *Proxy) Stall(d time.Duration) {
	p.mu.Lock()
	p.stallEnd = time.Now().Add(d)
	p.mu.Unlock()
}

// CutAll cuts every established connection and returns how many.
func (p *Proxy) CutAll() int { return p.cutWhere(func(*conn) bool { return true }) }

// CutBackend cuts every established connection to backend i.
func (p *Proxy) CutBackend(i int) int {
	return p.cutWhere(func(c *conn) bool { return c.backend == i })
}

func (p *Proxy) cutWhere(match func(*conn) bool) int {
	p.mu.Lock()
	var victims []*conn
	for c := range p.conns {
		if match(c) {
			victims = append(victims, c)
		}
	}
	p.mu.Unlock()
	for _, c := range victims {
		c.cut()
	}
	return len(victims)
}

// Open is the number of established connections.
func (p *Proxy) Open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// Stats returns the counters.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	hits := append([]int64(nil), p.hits...)
	p.mu.Unlock()
	return Stats{
		Accepted:      p.accepted.Load(),
		DialFailures:  p.dialFailures.Load(),
		Cuts:          p.cuts.Load(),
		BytesUp:       p.bytesUp.Load(),
		BytesDown:     p.bytesDown.Load(),
		PerBackendHit: hits,
	}
}

// Close stops listening, closes every connection and waits for the proxy's goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	ln := p.ln
	p.ln = nil
	p.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
	p.mu.Lock()
	var all []*conn
	for c := range p.conns {
		all = append(all, c)
	}
	p.mu.Unlock()
	for _, c := range all {
		c.close(false)
	}
	p.wg.Wait()
	return nil
}

func (p *Proxy) acceptLoop(ln net.Listener) {
	defer p.wg.Done()
	for {
		client, err := ln.Accept()
		if err != nil {
			return // closed by Refuse or Close
		}
		n := p.accepted.Add(1)
		p.wg.Add(1)
		go p.serve(n, client)
	}
}

// plan turns the rule into concrete numbers, drawing from the seeded source under the lock so
// that the draws follow the accept order.
func (p *Proxy) plan(n int64) (Rule, int64, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.ruleFor(n)
	cutAt := r.CutAfterBytes
	if cutAt == 0 && r.CutAfterRandomBytes.Max > 0 {
		lo, hi := r.CutAfterRandomBytes.Min, r.CutAfterRandomBytes.Max
		if lo < 1 {
			lo = 1
		}
		if hi >= lo {
			cutAt = lo + p.rng.Int64N(hi-lo+1)
		}
	}
	var cutAfter time.Duration
	if r.CutsPerMinute > 0 {
		minutes := p.rng.ExpFloat64() / r.CutsPerMinute
		cutAfter = time.Duration(math.Min(minutes*float64(time.Minute), float64(24*time.Hour)))
		if cutAfter < time.Millisecond {
			cutAfter = time.Millisecond
		}
	}
	return r, cutAt, cutAfter
}

func (p *Proxy) dial() (net.Conn, int, error) {
	p.mu.Lock()
	order := make([]int, 0, len(p.backends))
	start := 0
	if p.routing == RoundRobin {
		start = p.next % len(p.backends)
		p.next++
	}
	for k := range p.backends {
		i := (start + k) % len(p.backends)
		if !p.down[i] {
			order = append(order, i)
		}
	}
	backends := append([]string(nil), p.backends...)
	p.mu.Unlock()
	var lastErr error = errors.New("faultproxy: every backend is down")
	for _, i := range order {
		c, err := net.DialTimeout("tcp", backends[i], 5*time.Second)
		if err == nil {
			p.mu.Lock()
			p.hits[i]++
			p.mu.Unlock()
			return c, i, nil
		}
		p.dialFailures.Add(1)
		lastErr = err
	}
	return nil, -1, lastErr
}

func (p *Proxy) serve(n int64, client net.Conn) {
	defer p.wg.Done()
	rule, cutAt, cutAfter := p.plan(n)
	backend, idx, err := p.dial()
	if err != nil {
		// Nothing to route to: the client sees a reset, as from a dead host behind a balancer.
		if tc, ok := client.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		client.Close()
		return
	}
	c := &conn{proxy: p, client: client, server: backend, backend: idx, rule: rule, cutAt: cutAt, done: make(chan struct{})}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		c.close(false)
		return
	}
	p.conns[c] = struct{}{}
	p.mu.Unlock()
	if cutAfter > 0 {
		timer := time.AfterFunc(cutAfter, c.cut)
		defer timer.Stop()
	}
	var both sync.WaitGroup
	both.Add(2)
	go func() { defer both.Done(); c.pump(c.server, c.client, true) }()
	go func() { defer both.Done(); c.pump(c.client, c.server, false) }()
	both.Wait()
	c.close(false)
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// conn is one proxied connection.
type conn struct {
	proxy          *Proxy
	client, server net.Conn
	backend        int
	rule           Rule
	cutAt          int64 // response bytes after which to cut; 0: never

	down      int64 // response bytes forwarded, only touched by the response pump
	stalled   bool
	closeOnce sync.Once
	done      chan struct{}
}

// cut ends the connection as a fault.
func (c *conn) cut() {
	c.proxy.cuts.Add(1)
	c.close(c.rule.Reset)
}

func (c *conn) close(reset bool) {
	c.closeOnce.Do(func() {
		if tc, ok := c.client.(*net.TCPConn); ok && reset {
			tc.SetLinger(0)
		}
		close(c.done)
		c.client.Close()
		c.server.Close()
	})
}

// pump copies src to dst; response is true for backend to client, where byte rules apply.
func (c *conn) pump(src, dst net.Conn, response bool) {
	buf := make([]byte, 32<<10)
	for {
		limit := len(buf)
		if response {
			if c.cutAt > 0 {
				left := c.cutAt - c.down
				if left <= 0 {
					c.cut()
					return
				}
				limit = int(min(int64(limit), left))
			}
			if c.rule.StallFor > 0 && !c.stalled && c.rule.StallAfterBytes > c.down {
				limit = int(min(int64(limit), c.rule.StallAfterBytes-c.down))
			}
		}
		nr, rerr := src.Read(buf[:limit])
		if nr > 0 {
			if !c.waitStall() {
				return
			}
			nw, werr := dst.Write(buf[:nr])
			if response {
				c.proxy.bytesDown.Add(int64(nw))
				c.down += int64(nw)
				if c.rule.StallFor > 0 && !c.stalled && c.down >= c.rule.StallAfterBytes {
					c.stalled = true
					if !c.sleep(c.rule.StallFor) {
						return
					}
				}
			} else {
				c.proxy.bytesUp.Add(int64(nw))
			}
			if werr != nil {
				c.close(false)
				return
			}
		}
		if rerr != nil {
			if response && c.cutAt > 0 && c.down >= c.cutAt {
				c.cut()
				return
			}
			if errors.Is(rerr, io.EOF) {
				// Half-close so the other direction can finish (HTTP/1.1 rarely relies on it).
				if tc, ok := dst.(*net.TCPConn); ok {
					tc.CloseWrite()
					return
				}
			}
			c.close(false)
			return
		}
		if response && c.cutAt > 0 && c.down >= c.cutAt {
			c.cut()
			return
		}
	}
}

// waitStall holds forwarding while a proxy-wide Stall is in effect; false if the conn closed.
func (c *conn) waitStall() bool {
	for {
		c.proxy.mu.Lock()
		left := time.Until(c.proxy.stallEnd)
		c.proxy.mu.Unlock()
		if left <= 0 {
			return true
		}
		if !c.sleep(left) {
			return false
		}
	}
}

func (c *conn) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-c.done:
		return false
	}
}
