package transport_test

// Outside tests of the first reopen after an HTTP/2 GOAWAY (docs/behaviour.md,
// "WATCH stream breaks" and "Resume answered 410"): an established watch
// that had delivered events and is broken by the server's GOAWAY (an
// apiserver shutting down gracefully) reopens after a draw from [0, 3 s);
// every other break still reopens at once; the 410 search's cut-off counts
// from the end of that spread; timeoutSeconds still bounds it all. Written
// from the docs and `go doc` only, through a real kubernetes.Clientset over
// TLS with HTTP/2 against loopback servers. Helpers are prefixed "ga".
//
// The GOAWAY is a real one: http.Server.Shutdown makes net/http's HTTP/2
// server send GOAWAY (NO_ERROR) on every connection; the watches it still
// serves are then cut by closing the connections (the process going away),
// so client-go's HTTP/2 transport reports "server sent GOAWAY and closed
// the connection" on each stream. Every apiserver is reached through a TCP
// front (gaFront) that routes each NEW connection, so a reopen can land
// elsewhere, be refused, or be reset. Real time, generous slack.

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kretry/kretry/transport"
)

const (
	gaNS        = "goaway"
	gaInitialRV = 100 // the watch's own resourceVersion
	gaBreakRV   = 102 // the last event before the break
	gaLastRV    = 105 // the last event after the resume
	gaS         = 200 // the oldest RV a restarted apiserver's watch cache holds
	gaSpread    = 3 * time.Second
	gaSlack     = 1500 * time.Millisecond
	gaAtOnce    = time.Second // "immediate", with room for a loaded machine
	// gaGoAwayLead is how long the GOAWAY precedes the connection's close:
	// long enough for the frame to be written and read on a loaded machine.
	gaGoAwayLead = 300 * time.Millisecond
)

// gaReq is one watch request an apiserver received.
type gaReq struct {
	rv      string
	timeout string
	at      time.Time
}

// gaBackend is one apiserver: it serves a watch from rv with the events
// after it (up to gaBreakRV for the initial watch, gaLastRV for a resume)
// and holds it until timeoutSeconds, its quit channel or the connection
// ends. A fresh one answers every watch 410 `too old resource version`.
type gaBackend struct {
	srv   *httptest.Server
	fresh bool
	mu    sync.Mutex
	quit  chan struct{} // closed and renewed by endWatches
	abort chan struct{} // closed and renewed by abortWatches
	reqs  []gaReq
}

func gaNewBackend(t *testing.T, fresh bool) *gaBackend {
	b := &gaBackend{fresh: fresh, quit: make(chan struct{}), abort: make(chan struct{})}
	b.srv = httptest.NewUnstartedServer(b)
	b.srv.EnableHTTP2 = true
	b.srv.StartTLS()
	t.Cleanup(b.srv.Close)
	return b
}

func (b *gaBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("watch") != "true" {
		http.Error(w, "watch only", http.StatusBadRequest)
		return
	}
	if r.ProtoMajor != 2 {
		http.Error(w, "want HTTP/2", http.StatusHTTPVersionNotSupported)
		return
	}
	rv := q.Get("resourceVersion")
	b.mu.Lock()
	b.reqs = append(b.reqs, gaReq{rv: rv, timeout: q.Get("timeoutSeconds"), at: time.Now()})
	quit, abort := b.quit, b.abort
	b.mu.Unlock()
	if b.fresh {
		st, _ := json.Marshal(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
			Status: metav1.StatusFailure, Reason: metav1.StatusReasonExpired, Code: http.StatusGone,
			Message: fmt.Sprintf("too old resource version: %s (%d)", rv, gaS)})
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusGone)
		w.Write(st)
		return
	}
	from, err := strconv.Atoi(rv)
	if err != nil {
		http.Error(w, "bad rv", http.StatusBadRequest)
		return
	}
	last := gaLastRV
	if from == gaInitialRV {
		last = gaBreakRV
	}
	writeAddedSince(w, gaNS, from, last)
	var end <-chan time.Time
	if s, err := strconv.Atoi(q.Get("timeoutSeconds")); err == nil && s > 0 {
		tm := time.NewTimer(time.Duration(s) * time.Second)
		defer tm.Stop()
		end = tm.C
	}
	select {
	case <-r.Context().Done():
	case <-quit:
	case <-end:
	case <-abort:
		panic(http.ErrAbortHandler) // HTTP/2: RST_STREAM INTERNAL_ERROR
	}
}

// endWatches ends every watch it serves now cleanly (a clean end before
// timeoutSeconds); later ones are served as usual.
func (b *gaBackend) endWatches() {
	b.mu.Lock()
	close(b.quit)
	b.quit = make(chan struct{})
	b.mu.Unlock()
}

// abortWatches resets every watch it serves now (an HTTP/2 stream error:
// RST_STREAM); later ones are served as usual.
func (b *gaBackend) abortWatches() {
	b.mu.Lock()
	close(b.abort)
	b.abort = make(chan struct{})
	b.mu.Unlock()
}

func (b *gaBackend) requests() []gaReq {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]gaReq(nil), b.reqs...)
}

// resumes are the watch requests that are not the initial watch.
func (b *gaBackend) resumes() []gaReq {
	var out []gaReq
	for _, r := range b.requests() {
		if r.rv != strconv.Itoa(gaInitialRV) {
			out = append(out, r)
		}
	}
	return out
}

// goAway shuts the apiserver down as kube-apiserver's process does: the
// HTTP/2 server sends GOAWAY on every connection (http.Server.Shutdown),
// then, its watches still open, the connections are closed. It returns the
// moment of the close: the break the clients see.
func (b *gaBackend) goAway() time.Time {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { b.srv.Config.Shutdown(ctx); close(done) }()
	time.Sleep(gaGoAwayLead)
	at := time.Now()
	b.srv.CloseClientConnections()
	cancel()
	<-done
	return at
}

// gaFront is a TCP balancer in front of the apiservers (TLS passes
// through, so the GOAWAY reaches the client as the apiserver sent it). The
// n-th connection it accepts goes where route says; nil closes it at once.
type gaFront struct {
	addr    string
	mu      sync.Mutex
	ln      net.Listener
	route   func(n int) *gaBackend
	n       int
	conns   map[net.Conn]struct{}
	stopped chan struct{}
	wg      sync.WaitGroup
}

func gaNewFront(t *testing.T, to *gaBackend) *gaFront {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &gaFront{addr: ln.Addr().String(), conns: map[net.Conn]struct{}{}, stopped: make(chan struct{}),
		route: func(int) *gaBackend { return to }}
	f.serve(ln)
	t.Cleanup(f.stop)
	return f
}

func (f *gaFront) serve(ln net.Listener) {
	f.mu.Lock()
	f.ln = ln
	f.mu.Unlock()
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
			be := f.route(f.n)
			f.conns[c] = struct{}{}
			f.mu.Unlock()
			f.wg.Add(1)
			go f.handle(c, be)
		}
	}()
}

func (f *gaFront) handle(c net.Conn, be *gaBackend) {
	defer f.wg.Done()
	defer func() {
		c.Close()
		f.mu.Lock()
		delete(f.conns, c)
		f.mu.Unlock()
	}()
	if be == nil {
		return
	}
	bc, err := net.Dial("tcp", be.srv.Listener.Addr().String())
	if err != nil {
		return
	}
	done := make(chan struct{}, 2)
	go func() { copyConn(bc, c); done <- struct{}{} }()
	go func() { copyConn(c, bc); done <- struct{}{} }()
	<-done
	c.Close()
	bc.Close()
	<-done
}

func copyConn(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// setRoute routes the connections accepted from now on: route(1) is the
// first of them.
func (f *gaFront) setRoute(route func(i int) *gaBackend) {
	f.mu.Lock()
	base := f.n
	f.route = func(n int) *gaBackend { return route(n - base) }
	f.mu.Unlock()
}

func gaAlways(b *gaBackend) func(int) *gaBackend { return func(int) *gaBackend { return b } }

// cut ends every client connection: with reset, by a TCP RST, else by a
// FIN (the client reads an unexpected EOF).
func (f *gaFront) cut(reset bool) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	at := time.Now()
	for c := range f.conns {
		if tc, ok := c.(*net.TCPConn); ok && reset {
			tc.SetLinger(0)
		}
		c.Close()
	}
	return at
}

// refuseFor closes the listening socket (new connections are refused)
// and listens again on the same address after d.
func (f *gaFront) refuseFor(t *testing.T, d time.Duration) {
	f.mu.Lock()
	f.ln.Close()
	f.mu.Unlock()
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		select {
		case <-time.After(d):
		case <-f.stopped:
			return
		}
		ln, err := net.Listen("tcp", f.addr)
		if err != nil {
			t.Errorf("relisten: %v", err)
			return
		}
		f.serve(ln)
	}()
}

func (f *gaFront) stop() {
	close(f.stopped)
	f.mu.Lock()
	f.ln.Close()
	for c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
	f.mu.Lock() // a relisten racing stop
	f.ln.Close()
	f.mu.Unlock()
}

// gaObserver records every retry, watch resume and give-up.
type gaObserver struct {
	mu      sync.Mutex
	retries []transport.RetryEvent
	causes  []string
	giveups []transport.GiveUpEvent
}

func (o *gaObserver) ObserveAttempt(transport.AttemptEvent) {}
func (o *gaObserver) ObserveRetry(e transport.RetryEvent) {
	o.mu.Lock()
	o.retries = append(o.retries, e)
	o.causes = append(o.causes, fmt.Sprintf("%s/%s code %d wait %v", e.Verb, e.Reason, e.Code, e.Wait.Round(time.Millisecond)))
	o.mu.Unlock()
}
func (o *gaObserver) ObserveGiveUp(e transport.GiveUpEvent) {
	o.mu.Lock()
	o.giveups = append(o.giveups, e)
	o.mu.Unlock()
}
func (o *gaObserver) ObserveBudgetRefusal(transport.BudgetEvent) {}
func (o *gaObserver) expired() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, e := range o.retries {
		if e.Reason == transport.ReasonExpiredResume {
			n++
		}
	}
	return n
}

func (o *gaObserver) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := "retries ["
	for _, c := range o.causes {
		s += " {" + c + "}"
	}
	s += " ] give-ups ["
	for _, g := range o.giveups {
		s += fmt.Sprintf(" %s/%s after %d attempts, %.2fs", g.Reason, g.Verb, g.Attempts, g.Elapsed.Seconds())
	}
	return s + " ]"
}

// gaClientset is a Clientset through kretry (rand nil: the default jitter)
// to the front over TLS with HTTP/2.
func gaClientset(t *testing.T, f *gaFront, be *gaBackend, rand func() float64, obs *gaObserver) *kubernetes.Clientset {
	cfg := &rest.Config{Host: "https://" + f.addr, QPS: 1000, Burst: 1000}
	cfg.ContentType = "application/json"
	cfg.AcceptContentTypes = "application/json"
	cfg.TLSClientConfig.CAData = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: be.srv.Certificate().Raw})
	// An own dialer keeps client-go from sharing one cached transport
	// between tests.
	cfg.Dial = (&net.Dialer{}).DialContext
	tc := transport.Config{Rand: rand}
	if obs != nil {
		tc.Observer = obs
	}
	cfg.Wrap(transport.Wrapper(tc))
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func gaRand(v float64) func() float64 { return func() float64 { return v } }

type gaSeen struct {
	typ  watch.EventType
	rv   string
	code int32
	msg  string
	at   time.Time
}

// gaCollector reads one watch's result channel into a record.
type gaCollector struct {
	w        watch.Interface
	mu       sync.Mutex
	seen     []gaSeen
	closedAt time.Time
	done     chan struct{}
}

func gaWatch(t *testing.T, ctx context.Context, cs *kubernetes.Clientset, timeoutSeconds int64) *gaCollector {
	t.Helper()
	w, err := cs.CoreV1().ConfigMaps(gaNS).Watch(ctx, metav1.ListOptions{ResourceVersion: strconv.Itoa(gaInitialRV), TimeoutSeconds: &timeoutSeconds})
	if err != nil {
		t.Fatal(err)
	}
	c := &gaCollector{w: w, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for e := range w.ResultChan() {
			s := gaSeen{typ: e.Type, at: time.Now()}
			if st, ok := e.Object.(*metav1.Status); ok {
				s.code, s.msg = st.Code, st.Message
			} else if m, ok := e.Object.(metav1.Object); ok {
				s.rv = m.GetResourceVersion()
			}
			c.mu.Lock()
			c.seen = append(c.seen, s)
			c.mu.Unlock()
		}
		c.mu.Lock()
		c.closedAt = time.Now()
		c.mu.Unlock()
	}()
	t.Cleanup(func() { w.Stop(); <-c.done })
	return c
}

func (c *gaCollector) events() []gaSeen {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]gaSeen(nil), c.seen...)
}

func (c *gaCollector) has(rv int) bool {
	for _, e := range c.events() {
		if e.rv == strconv.Itoa(rv) {
			return true
		}
	}
	return false
}

func (c *gaCollector) closed() (time.Time, bool) {
	select {
	case <-c.done:
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.closedAt, true
	default:
		return time.Time{}, false
	}
}

func (c *gaCollector) String() string {
	var s string
	for _, e := range c.events() {
		if e.typ == watch.Error {
			s += fmt.Sprintf(" ERROR:%d", e.code)
		} else {
			s += fmt.Sprintf(" %s:%s", e.typ, e.rv)
		}
	}
	at, ok := c.closed()
	return fmt.Sprintf("[%s ] closed=%v %s", s, ok, at.Format("15:04:05.000"))
}

// wantEvents: exactly from..to once each, in order, and no ERROR.
func (c *gaCollector) wantEvents(t *testing.T, from, to int, ctx string) {
	t.Helper()
	ev := c.events()
	ok := len(ev) == to-from+1
	for i, e := range ev {
		if e.typ != watch.Added || e.rv != strconv.Itoa(from+i) {
			ok = false
		}
	}
	if !ok {
		t.Errorf("want events %d..%d once each, in order, no ERROR; caller saw %v; %s", from, to, c, ctx)
	}
}

func gaWaitFor(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); ; time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(end) {
			return false
		}
	}
}

func gaReport(a, b *gaBackend, c *gaCollector, obs *gaObserver, broke time.Time) string {
	var rs []string
	for _, r := range b.resumes() {
		rs = append(rs, fmt.Sprintf("rv=%s timeoutSeconds=%s at +%.2fs", r.rv, r.timeout, r.at.Sub(broke).Seconds()))
	}
	s := fmt.Sprintf("resumes at B %v", rs)
	if c != nil {
		s += "; caller " + c.String()
	}
	if obs != nil {
		s += "; " + obs.String()
	}
	return s
}

// (1) A GOAWAY break resumes at the last event's resourceVersion, with
// nothing lost or duplicated, and the reopen reaches the other apiserver
// within the spread (plus slack). With Rand pinned near 1 (Config.Rand is
// "uniform jitter in [0,1)"), the reopen does wait: the spread is there.
func TestOutsideGoAwayResumesAtLastRV(t *testing.T) {
	t.Parallel()
	for _, v := range []struct {
		name string
		rand func() float64
	}{{"default-rand", nil}, {"rand=0.99", gaRand(0.99)}, {"rand=0", gaRand(0)}} {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			a, b := gaNewBackend(t, false), gaNewBackend(t, false)
			f := gaNewFront(t, a)
			obs := &gaObserver{}
			cs := gaClientset(t, f, a, v.rand, obs)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c := gaWatch(t, ctx, cs, 60)
			if !gaWaitFor(5*time.Second, func() bool { return c.has(gaBreakRV) }) {
				t.Fatalf("the watch never delivered %d: %v", gaBreakRV, c)
			}
			f.setRoute(gaAlways(b))
			broke := a.goAway()
			gaWaitFor(gaSpread+gaSlack+time.Second, func() bool { return c.has(gaLastRV) })
			time.Sleep(200 * time.Millisecond) // a duplicate would show by now
			rep := gaReport(a, b, c, obs, broke)
			c.wantEvents(t, gaInitialRV+1, gaLastRV, rep)
			res := b.resumes()
			if len(res) != 1 {
				t.Fatalf("want exactly one resume at B: %s", rep)
			}
			r := res[0]
			if r.rv != strconv.Itoa(gaBreakRV) {
				t.Errorf("want the resume at rv %d: %s", gaBreakRV, rep)
			}
			if s, err := strconv.Atoi(r.timeout); err != nil || s < 50 || s > 60 {
				t.Errorf("want the resume to carry what remains of timeoutSeconds=60: %s", rep)
			}
			delay := r.at.Sub(broke)
			if delay > gaSpread+gaSlack {
				t.Errorf("reopen %v after the GOAWAY break, want within %v+%v: %s", delay, gaSpread, gaSlack, rep)
			}
			if v.name == "rand=0.99" && delay < 2*time.Second {
				t.Errorf("with Rand 0.99 the reopen came %v after the GOAWAY break: want the draw from [0, 3 s) near its top (>= 2 s): %s", delay, rep)
			}
			t.Logf("reopen %v after the break; %s", delay.Round(time.Millisecond), rep)
		})
	}
}

// gaRig is an apiserver A that serves the watch, another B that holds the
// resume point, a front that routes to A until told otherwise, and a
// Clientset through kretry with the given Rand.
type gaRig struct {
	a, b *gaBackend
	f    *gaFront
	obs  *gaObserver
	cs   *kubernetes.Clientset
	ctx  context.Context
}

func gaNewRig(t *testing.T, rand func() float64) *gaRig {
	r := &gaRig{a: gaNewBackend(t, false), b: gaNewBackend(t, false), obs: &gaObserver{}}
	r.f = gaNewFront(t, r.a)
	r.cs = gaClientset(t, r.f, r.a, rand, r.obs)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	r.ctx = ctx
	return r
}

// established starts a watch and waits for the events before the break.
func (r *gaRig) established(t *testing.T, timeoutSeconds int64) *gaCollector {
	t.Helper()
	c := gaWatch(t, r.ctx, r.cs, timeoutSeconds)
	if !gaWaitFor(5*time.Second, func() bool { return c.has(gaBreakRV) }) {
		t.Fatalf("the watch never delivered %d: %v", gaBreakRV, c)
	}
	return c
}

// (2) Every other break of a stream that had delivered events reopens at
// once, even with Rand pinned where a GOAWAY's draw would wait ~3 s: a TCP
// reset, a FIN (unexpected EOF), an HTTP/2 stream reset (RST_STREAM), and
// a clean end before timeoutSeconds.
func TestOutsideGoAwayOtherBreaksAtOnce(t *testing.T) {
	t.Parallel()
	for _, v := range []struct {
		name string
		cut  func(r *gaRig) time.Time
	}{
		{"tcp-reset", func(r *gaRig) time.Time { return r.f.cut(true) }},
		{"tcp-fin", func(r *gaRig) time.Time { return r.f.cut(false) }},
		{"h2-rst-stream", func(r *gaRig) time.Time { at := time.Now(); r.a.abortWatches(); return at }},
		{"clean-end", func(r *gaRig) time.Time { at := time.Now(); r.a.endWatches(); return at }},
	} {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			r := gaNewRig(t, gaRand(0.99))
			c := r.established(t, 60)
			r.f.setRoute(gaAlways(r.b))
			broke := v.cut(r)
			gaWaitFor(gaSpread+gaSlack, func() bool { return c.has(gaLastRV) })
			time.Sleep(200 * time.Millisecond)
			rep := gaReport(r.a, r.b, c, r.obs, broke)
			c.wantEvents(t, gaInitialRV+1, gaLastRV, rep)
			// A cut connection's reopen dials anew (to B); a stream that
			// ended on a live HTTP/2 connection reopens on it (to A).
			res := append(r.a.resumes(), r.b.resumes()...)
			rep += fmt.Sprintf("; resumes at A %d", len(r.a.resumes()))
			if len(res) != 1 || res[0].rv != strconv.Itoa(gaBreakRV) {
				t.Fatalf("want exactly one resume, at rv %d: %s", gaBreakRV, rep)
			}
			if d := res[0].at.Sub(broke); d > gaAtOnce {
				t.Errorf("reopen %v after a %s break, want at once (< %v): %s", d, v.name, gaAtOnce, rep)
			}
			t.Logf("%s", rep)
		})
	}
}

// (3) A GOAWAY break with the caller's timeoutSeconds (3 s) nearly spent:
// with a draw that would end past the deadline, or less than a second
// before it, the wait is not made and the watch ends cleanly at once (no
// reopen, no ERROR, no hang until the deadline); with a draw that leaves
// more than a second, the reopen is made with what remains (1 or 2 s) and
// the watch ends by the deadline.
func TestOutsideGoAwayNearDeadline(t *testing.T) {
	t.Parallel()
	const timeout = 3 * time.Second
	for _, rnd := range []float64{0.99, 0.4, 0} {
		t.Run(fmt.Sprintf("rand=%v", rnd), func(t *testing.T) {
			t.Parallel()
			r := gaNewRig(t, gaRand(rnd))
			sent := time.Now()
			c := r.established(t, int64(timeout/time.Second))
			deadline := sent.Add(timeout)
			time.Sleep(time.Until(sent.Add(time.Second)))
			r.f.setRoute(gaAlways(r.b))
			broke := r.a.goAway()
			wait := time.Duration(rnd * float64(gaSpread)) // the draw, as test (1) saw it
			left := deadline.Sub(broke.Add(wait))          // what the wait would leave
			if !gaWaitFor(timeout+gaSlack, func() bool { _, ok := c.closed(); return ok }) {
				t.Fatalf("the watch still runs %v after its timeoutSeconds: %s", gaSlack, gaReport(r.a, r.b, c, r.obs, broke))
			}
			closedAt, _ := c.closed()
			time.Sleep(time.Until(broke.Add(gaSpread + 300*time.Millisecond))) // a late reopen would show by now
			rep := gaReport(r.a, r.b, c, r.obs, broke) + fmt.Sprintf("; broke %.2fs after the watch was sent, closed %.2fs after the break, the draw would leave %v",
				broke.Sub(sent).Seconds(), closedAt.Sub(broke).Seconds(), left.Round(time.Millisecond))
			switch {
			case left < 700*time.Millisecond: // not waited
				c.wantEvents(t, gaInitialRV+1, gaBreakRV, rep)
				if n := len(r.b.resumes()); n != 0 {
					t.Errorf("want no reopen when the wait would end less than a second before the deadline: %s", rep)
				}
				if d := closedAt.Sub(broke); d > gaAtOnce {
					t.Errorf("want the watch to end cleanly at once, it ended %v after the break: %s", d, rep)
				}
			case left > 1300*time.Millisecond: // waited, reopened with what remains
				c.wantEvents(t, gaInitialRV+1, gaLastRV, rep)
				res := r.b.resumes()
				if len(res) != 1 || res[0].rv != strconv.Itoa(gaBreakRV) || (res[0].timeout != "1" && res[0].timeout != "2") {
					t.Errorf("want one reopen at rv %d with timeoutSeconds 1 or 2: %s", gaBreakRV, rep)
				}
				if closedAt.After(deadline.Add(gaSlack)) {
					t.Errorf("want the watch ended by its deadline (+%v): %s", gaSlack, rep)
				}
			default:
				t.Logf("too close to the one-second rule to judge: %s", rep)
			}
			t.Logf("%s", rep)
		})
	}
}

// (6) The caller stops the watch during the GOAWAY wait: the result
// channel closes at once and no reopen is sent later (goleak in TestMain
// checks that nothing of it outlives the test).
func TestOutsideGoAwayStopDuringSpread(t *testing.T) {
	t.Parallel()
	r := gaNewRig(t, gaRand(0.99))
	c := r.established(t, 60)
	r.f.setRoute(gaAlways(r.b))
	broke := r.a.goAway()
	time.Sleep(300 * time.Millisecond)
	stopped := time.Now()
	c.w.Stop()
	if !gaWaitFor(gaAtOnce, func() bool { _, ok := c.closed(); return ok }) {
		t.Errorf("the result channel is still open %v after Stop during the GOAWAY wait: %s", gaAtOnce, gaReport(r.a, r.b, c, r.obs, broke))
	}
	time.Sleep(time.Until(broke.Add(gaSpread + 500*time.Millisecond)))
	rep := gaReport(r.a, r.b, c, r.obs, broke)
	if n := len(r.b.resumes()); n != 0 {
		t.Errorf("want no reopen after Stop (%.2fs after the break): %s", stopped.Sub(broke).Seconds(), rep)
	}
	c.wantEvents(t, gaInitialRV+1, gaBreakRV, rep)
}

// (5) A fleet: 50 watches broken by one apiserver's GOAWAY reopen spread
// over the draw's [0, 3 s), not in step: every one resumes at its last
// resourceVersion within the spread (+slack), nothing lost or duplicated,
// the reopens span a second or more and no 100 ms holds half of them.
// (Default Rand; for uniform draws either failing is beyond astronomically
// unlikely.) Control: the same fleet cut by a TCP reset reopens at once.
func TestOutsideGoAwayFleetSpreads(t *testing.T) {
	t.Parallel()
	const n = 50
	for _, goaway := range []bool{true, false} {
		name := "goaway"
		if !goaway {
			name = "tcp-reset-control"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := gaNewRig(t, nil)
			cs := make([]*gaCollector, n)
			for i := range cs {
				cs[i] = gaWatch(t, r.ctx, r.cs, 60)
			}
			if !gaWaitFor(10*time.Second, func() bool {
				for _, c := range cs {
					if !c.has(gaBreakRV) {
						return false
					}
				}
				return true
			}) {
				t.Fatalf("the fleet never got its first events")
			}
			r.f.setRoute(gaAlways(r.b))
			var broke time.Time
			if goaway {
				broke = r.a.goAway()
			} else {
				broke = r.f.cut(true)
			}
			gaWaitFor(gaSpread+gaSlack+time.Second, func() bool {
				for _, c := range cs {
					if !c.has(gaLastRV) {
						return false
					}
				}
				return true
			})
			time.Sleep(300 * time.Millisecond)
			for i, c := range cs {
				c.wantEvents(t, gaInitialRV+1, gaLastRV, fmt.Sprintf("watch %d", i))
			}
			res := r.b.resumes()
			var at []time.Duration
			for _, q := range res {
				if q.rv != strconv.Itoa(gaBreakRV) {
					t.Errorf("a resume at rv %s, want %d", q.rv, gaBreakRV)
				}
				at = append(at, q.at.Sub(broke))
			}
			sortDurations(at)
			if len(at) != n {
				t.Fatalf("want %d resumes at B, got %d: %v; %s", n, len(at), at, r.obs)
			}
			first, last := at[0], at[len(at)-1]
			most := 0 // the most reopens within any 100 ms
			for i := range at {
				j := i
				for j < len(at) && at[j]-at[i] < 100*time.Millisecond {
					j++
				}
				most = max(most, j-i)
			}
			t.Logf("reopens from +%v to +%v after the break, at most %d within 100 ms", first.Round(time.Millisecond), last.Round(time.Millisecond), most)
			if goaway {
				if last > gaSpread+gaSlack {
					t.Errorf("last reopen %v after the GOAWAY, want within %v+%v", last, gaSpread, gaSlack)
				}
				if last-first < time.Second || most > n/2 {
					t.Errorf("want the fleet's reopens spread over the draw: from +%v to +%v, %d of %d within one 100 ms", first, last, most, n)
				}
			} else if last > gaAtOnce+500*time.Millisecond {
				t.Errorf("after a TCP reset the fleet reopened until +%v, want at once", last)
			}
		})
	}
}

func sortDurations(d []time.Duration) { sort.Slice(d, func(i, j int) bool { return d[i] < d[j] }) }

// (4) After a GOAWAY, the reopen reaches a restarted apiserver A2 (same
// certificate as A, as an apiserver restarted on its node) whose watch
// cache answers 410 `too old resource version: 102 (200)`, and the next
// new connection reaches B, which holds the resume point. The search must
// find B: with no failed reopening at all, and when the reopens were
// refused past the end of the spread but the 410 came less than 3 s after
// it (the cut-off counts from the end of the first reopen's spread, not
// from the lost connection, so this client is not cut off). Control: the
// 410 comes 3 s or more after the spread's end and every failed reopening
// was refused: cut off, the 410 is handed over with no retry. Which of the
// two is expected is decided from when A2 was actually reached.
func TestOutsideGoAwaySearchAfterSpread(t *testing.T) {
	t.Parallel()
	for _, v := range []struct {
		name   string
		rand   float64
		refuse time.Duration // from the break: nothing listens at the front
	}{
		{"fresh-then-holder", 0.5, 0},
		{"refused-past-spread-end", 0.9, 3300 * time.Millisecond},
		{"refused-long-cut-off", 0.3, 6200 * time.Millisecond},
	} {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			r := gaNewRig(t, gaRand(v.rand))
			a2 := gaNewBackend(t, true)
			c := r.established(t, 60)
			r.f.setRoute(func(i int) *gaBackend {
				if i == 1 {
					return a2
				}
				return r.b
			})
			if v.refuse > 0 {
				r.f.refuseFor(t, v.refuse+gaGoAwayLead)
			}
			broke := r.a.goAway()
			gaWaitFor(9*time.Second, func() bool { _, ok := c.closed(); return ok || c.has(gaLastRV) })
			time.Sleep(300 * time.Millisecond)
			a2reqs := a2.resumes()
			rep := gaReport(r.a, r.b, c, r.obs, broke)
			var tA2 time.Duration
			if len(a2reqs) > 0 {
				tA2 = a2reqs[0].at.Sub(broke)
			}
			rep += fmt.Sprintf("; A2 resumes %d, first at +%.2fs; expired-resume retries %d", len(a2reqs), tA2.Seconds(), r.obs.expired())
			t.Logf("%s", rep)
			if len(a2reqs) == 0 {
				t.Fatalf("the reopen never reached the restarted apiserver: %s", rep)
			}
			if v.refuse > 0 && !strings.Contains(r.obs.String(), "refused") {
				t.Errorf("want a refused reopening first: %s", rep)
			}
			const cutOff = gaSpread + 3*time.Second // 3 s after the end of the spread
			switch {
			case tA2 < cutOff-500*time.Millisecond:
				c.wantEvents(t, gaInitialRV+1, gaLastRV, rep)
				if len(r.b.resumes()) != 1 || len(a2reqs) != 1 || r.obs.expired() < 1 {
					t.Errorf("want one 410 at A2, then the search's retry resumed at B: %s", rep)
				}
			case tA2 > cutOff+500*time.Millisecond:
				ev := c.events()
				_, closed := c.closed()
				n := gaBreakRV - gaInitialRV
				if len(ev) != n+1 || ev[n].typ != watch.Error || ev[n].code != http.StatusGone || !closed {
					t.Errorf("cut off and only refused: want %d events, one ERROR 410, the end: %s", n, rep)
				}
				if len(r.b.resumes()) != 0 || len(a2reqs) != 1 || r.obs.expired() != 0 {
					t.Errorf("cut off and only refused: want the 410 handed over with no retry: %s", rep)
				}
			default:
				t.Logf("A2 reached too close to the cut-off to judge")
			}
		})
	}
}

// (7) Two GOAWAYs in a row: A's, then, after the resume at B delivered
// 103..105 (progress), B's. The reopen after B's is again the first reopen
// after progress, so it waits the GOAWAY draw (Rand pinned at 0.99: near
// 3 s, well above the ~2 s the backoff of a later reopen would give), not
// the backoff, and reaches C at 105; nothing is lost or duplicated.
func TestOutsideGoAwayTwiceInARow(t *testing.T) {
	t.Parallel()
	r := gaNewRig(t, gaRand(0.99))
	cb := gaNewBackend(t, false)
	c := r.established(t, 60)
	r.f.setRoute(gaAlways(r.b))
	broke := r.a.goAway()
	if !gaWaitFor(gaSpread+gaSlack, func() bool { return c.has(gaLastRV) }) {
		t.Fatalf("no resume at B after A's GOAWAY: %s", gaReport(r.a, r.b, c, r.obs, broke))
	}
	r.f.setRoute(gaAlways(cb))
	broke2 := r.b.goAway()
	gaWaitFor(gaSpread+gaSlack, func() bool { return len(cb.resumes()) > 0 })
	time.Sleep(300 * time.Millisecond)
	rep := gaReport(r.a, r.b, c, r.obs, broke)
	for _, q := range cb.resumes() {
		rep += fmt.Sprintf("; resume at C rv=%s timeoutSeconds=%s at +%.2fs after B's GOAWAY", q.rv, q.timeout, q.at.Sub(broke2).Seconds())
	}
	c.wantEvents(t, gaInitialRV+1, gaLastRV, rep)
	res := cb.resumes()
	if len(res) != 1 || res[0].rv != strconv.Itoa(gaLastRV) {
		t.Fatalf("want one resume at C at rv %d: %s", gaLastRV, rep)
	}
	d := res[0].at.Sub(broke2)
	t.Logf("second reopen %v after B's GOAWAY: %s", d.Round(time.Millisecond), rep)
	if d < 2500*time.Millisecond || d > gaSpread+gaSlack {
		t.Errorf("second reopen %v after B's GOAWAY, want the GOAWAY draw with Rand 0.99 (2.5 s .. %v): %s", d, gaSpread+gaSlack, rep)
	}
}
