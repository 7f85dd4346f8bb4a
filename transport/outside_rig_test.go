package transport_test

// The outside-test rig: the one world every transport/outside_* test runs
// in. A rig is a virtual clock that kretry is given as Config.Clock
// (outside_rig_clock_test.go), scripted apiservers on loopback
// (outside_rig_servers_test.go) and balancer fronts before them
// (outside_rig_front_test.go), an observer of kretry (Config.Observer), and
// the clients, watches and informers the test drives through a real
// kubernetes.Clientset (this file).
//
// Nothing on the rig's clock fires by itself: virtual time moves only when
// the test advances it, or when the rig's autopilot does. The autopilot
// moves it while kretry waits on it, and only then:
//   - kretry sleeps (a backoff, the GOAWAY spread, the hold of a 410) with
//     none of its attempts waiting for an answer: time jumps to the end of
//     the earliest sleep;
//   - kretry waits on something the rig holds (a request an apiserver
//     never answers or answers late, a connection the front keeps silent or
//     slow): time jumps to the next thing due, a bound of kretry's (the
//     20 s answer timeout, the 3 s search bound, the caller's deadline) or
//     the end of the rig's own delay.
// Every timer due fires at its own instant, earliest first, so what kretry
// chose to wait, and when each request reached an apiserver, is exact in
// virtual time; real time is only what the machine takes. A test that must
// act during a wait of kretry's (stop a watch in the GOAWAY spread, let a
// fleet's spreads register before any ends) turns the autopilot off and
// advances the clock itself. Tests wait on conditions of the rig (a request
// reached an apiserver, an event reached the caller, kretry sleeps), each
// bounded by rigHang of real time, never on a real sleep.
//
// kretry's sleeps are what it asks of Config.Clock with NewTimer, After or
// Sleep; its bounds, on what it has in flight, what it asks with AfterFunc.
// A sleep asked while one of its attempts is on the wire unanswered
// (rig.inFlight counts them) is left alone like a bound. The autopilot assumes
// one stream or request of kretry's at a time is waiting: several watches
// of one test wait in step only under the test's own hand.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/kretry/kretry/internal/harness/observe"
	"github.com/kretry/kretry/transport"
)

const (
	rigInitialRV = 100 // a watch's own resourceVersion
	rigBreakRV   = 102 // the last event of the first stream
	rigLastRV    = 105 // the last event of a resumed stream
	// rigHang bounds, in real time, every wait for a condition of the rig:
	// far past anything a loaded 2-core machine under -race takes, so that
	// reaching it means a hang.
	rigHang = 60 * time.Second
)

// ---- the rig --------------------------------------------------------------

// rig is one test's world. Build it with newRig; everything it starts ends
// when the test does.
type rig struct {
	t     *testing.T
	clock *rigClock
	obs   *rigObserver
	done  chan struct{} // closed when the test ends: held answers return

	mu      sync.Mutex
	signal  chan struct{} // closed and renewed on every change
	holds   []*rigHold
	dials   []rigDial
	reads   map[string]*atomic.Int64 // bytes a client read, by its address
	servers []*rigServer
	fronts  []*rigFront
	pki     *rigPKI
	pilot   bool
	wg      sync.WaitGroup

	inFlight   observe.InFlight // kretry's attempts waiting for their answers; each end pokes
	requestSeq atomic.Int64     // the requests its apiservers received (rigRequest.seq)
}

// rigHold is something kretry waits on that only the rig's clock moves on:
// a held request or connection.
type rigHold struct {
	seq      int
	what     string
	released bool
}

// rigDial is one connection the client dialed.
type rigDial struct {
	at    time.Duration
	local string
	err   error
}

// newRig builds a rig whose autopilot is on.
func newRig(t *testing.T) *rig {
	r := &rig{t: t, done: make(chan struct{}), signal: make(chan struct{}), reads: map[string]*atomic.Int64{}, pilot: true}
	r.clock = newRigClock(r.poke)
	r.inFlight.OnDone = r.poke
	r.obs = &rigObserver{observe.Recorder{OnEvent: r.poke}}
	r.wg.Add(1)
	go r.fly()
	t.Cleanup(func() {
		close(r.done)
		r.wg.Wait()
		if t.Failed() {
			t.Logf("rig at the end: %s", r.report())
		}
	})
	return r
}

// poke wakes everything waiting for a change of the rig.
func (r *rig) poke() {
	r.mu.Lock()
	close(r.signal)
	r.signal = make(chan struct{})
	r.mu.Unlock()
}

func (r *rig) changes() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.signal
}

// await waits until cond holds, at most rigHang; it reports whether it does.
func (r *rig) await(cond func() bool) bool {
	hang := time.NewTimer(rigHang)
	defer hang.Stop()
	// The poll is a safety net for a condition no poke announces (a
	// client-go informer's store); the pokes are what is waited on.
	poll := time.NewTicker(25 * time.Millisecond)
	defer poll.Stop()
	for {
		changed := r.changes()
		if cond() {
			return true
		}
		select {
		case <-changed:
		case <-poll.C:
		case <-hang.C:
			return cond()
		}
	}
}

// waitFor waits until cond holds, and fails the test as hung if it does not
// within rigHang. Only the test's goroutine may call it.
func (r *rig) waitFor(what string, cond func() bool) {
	r.t.Helper()
	if !r.await(cond) {
		r.t.Fatalf("rig: no %s after %v of real time: %s", what, rigHang, r.report())
	}
}

// autopilot turns the autopilot on or off.
func (r *rig) autopilot(on bool) {
	r.mu.Lock()
	r.pilot = on
	r.mu.Unlock()
	r.poke()
}

// fly is the autopilot (see the top of this file).
func (r *rig) fly() {
	defer r.wg.Done()
	handled := map[int]bool{} // the holds it moved the clock for, by sequence number
	for {
		changed := r.changes()
		r.mu.Lock()
		on := r.pilot
		var fresh []int
		for _, h := range r.holds {
			if !h.released && !handled[h.seq] {
				fresh = append(fresh, h.seq)
			}
		}
		r.mu.Unlock()
		// Holds that came together are one wait of kretry's: one step.
		if on && len(fresh) > 0 && r.stepForHold() {
			for _, seq := range fresh {
				handled[seq] = true
			}
			continue
		}
		// A sleep is kretry's own only while none of its attempts is on
		// the wire unanswered (and not held, which the step above took).
		if on && r.inFlight.Load() == 0 {
			if t := r.clock.next(timerSleep); t != nil {
				r.clock.advanceTo(t.at)
				continue
			}
		}
		select {
		case <-changed:
		case <-r.done:
			return
		}
	}
}

// stepForHold moves the clock to what ends a hold: kretry's next bound or
// the rig's next delay, past any change the rig makes at a set time on the
// way. It reports whether there was one.
func (r *rig) stepForHold() bool {
	for {
		t := r.clock.advanceToNext(timerBound, timerDelay, timerHook)
		if t == nil || t.kind != timerHook {
			return t != nil
		}
	}
}

// delay holds what (a request, a connection) for d of virtual time,
// unless stop or ctx ends first; it reports whether d ran its course. The
// hold is made after the delay's timer, so that the autopilot finds it.
func (r *rig) delay(ctx context.Context, stop <-chan struct{}, d time.Duration, what string) bool {
	t := r.clock.add(timerDelay, d, make(chan time.Time, 1), nil)
	defer r.hold(what)()
	select {
	case <-t.ch:
		return true
	case <-stop:
	case <-ctx.Done():
	}
	t.Stop()
	return false
}

// hold records that kretry now waits on what; release ends it.
func (r *rig) hold(what string) (release func()) {
	r.mu.Lock()
	h := &rigHold{seq: len(r.holds) + 1, what: what}
	r.holds = append(r.holds, h)
	r.mu.Unlock()
	r.poke()
	return func() {
		r.mu.Lock()
		h.released = true
		r.mu.Unlock()
		r.poke()
	}
}

// ctx is a context for one call of the test's: it ends after rigHang of
// real time (a hang) or with the test.
func (r *rig) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), rigHang)
	r.t.Cleanup(cancel)
	return ctx
}

// dial is the client's dialer: it records every dial and counts what each
// connection reads. Being the client's own, it also keeps client-go from
// sharing one cached transport between tests.
func (r *rig) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	rec := rigDial{at: r.clock.elapsed(), err: err}
	if err == nil {
		rec.local = c.LocalAddr().String()
		n := &atomic.Int64{}
		r.mu.Lock()
		r.reads[rec.local] = n
		r.mu.Unlock()
		c = &readCounter{Conn: c, n: n, poke: r.poke}
	}
	r.mu.Lock()
	r.dials = append(r.dials, rec)
	r.mu.Unlock()
	r.poke()
	return c, err
}

// refusedDials is how many dials were refused (nothing listened).
func (r *rig) refusedDials() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, d := range r.dials {
		if errors.Is(d.err, syscall.ECONNREFUSED) {
			n++
		}
	}
	return n
}

// clientRead is how many bytes the client has read of the connection an
// apiserver sees from remote (through a front, or directly).
func (r *rig) clientRead(remote string) int64 {
	r.mu.Lock()
	fronts := slices.Clone(r.fronts)
	r.mu.Unlock()
	for _, f := range fronts {
		if client, ok := f.clientOf(remote); ok {
			remote = client
			break
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := r.reads[remote]; n != nil {
		return n.Load()
	}
	return 0
}

type readCounter struct {
	net.Conn
	n    *atomic.Int64
	poke func()
}

func (c *readCounter) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.n.Add(int64(n))
		c.poke()
	}
	return n, err
}

// restConfig is a rest.Config to host (an apiserver's or a front's URL)
// through kretry configured by kc, to which the rig gives its clock and its
// observer; media is the content type ("": JSON).
func (r *rig) restConfig(host string, kc transport.Config, media string) *rest.Config {
	if media == "" {
		media = "application/json"
	}
	cfg := &rest.Config{Host: host, QPS: 1000, Burst: 1000}
	cfg.ContentType = media
	if strings.HasPrefix(host, "https://") {
		cfg.TLSClientConfig.CAData = r.certs().caPEM
	}
	cfg.Dial = r.dial
	kc.Clock, kc.Observer = r.clock, r.obs
	cfg.Wrap(r.inFlight.Wrap)
	cfg.Wrap(transport.Wrapper(kc))
	return cfg
}

// clientset is a Clientset over restConfig.
func (r *rig) clientset(host string, kc transport.Config, media string) *kubernetes.Clientset {
	r.t.Helper()
	cs, err := kubernetes.NewForConfig(r.restConfig(host, kc, media))
	if err != nil {
		r.t.Fatal(err)
	}
	return cs
}

// report says what the rig saw, for a failure.
func (r *rig) report() string {
	r.mu.Lock()
	servers, fronts := slices.Clone(r.servers), slices.Clone(r.fronts)
	var held []string
	for _, h := range r.holds {
		if !h.released {
			held = append(held, h.what)
		}
	}
	dials := len(r.dials)
	r.mu.Unlock()
	s := r.clock.String() + "; holds " + fmt.Sprint(held) + fmt.Sprintf("; %d dials, %d refused", dials, r.refusedDials())
	for _, a := range servers {
		s += "; " + a.String()
	}
	for _, f := range fronts {
		s += "; front routed " + fmt.Sprint(f.routed())
	}
	return s + "; " + r.obs.String()
}

// ---- the observer -------------------------------------------------------

// rigObserver records everything kretry tells its Observer, and pokes the
// rig on each event.
type rigObserver struct{ observe.Recorder }

var (
	_ transport.ListResumeObserver   = (*rigObserver)(nil)
	_ transport.InitialStateObserver = (*rigObserver)(nil)
)

// retried is how many retries and resumes were for reason ("": any).
func (o *rigObserver) retried(reason transport.Reason) int {
	n := 0
	for _, e := range o.Events().Retries {
		if reason == "" || e.Reason == reason {
			n++
		}
	}
	return n
}

// expired is how many retries searched for an apiserver that holds a
// watch's resume point.
func (o *rigObserver) expired() int { return o.retried(transport.ReasonExpiredResume) }

// initialFetches is how many initial-state fetches of verb were heard.
func (o *rigObserver) initialFetches(verb transport.Verb) int {
	n := 0
	for _, e := range o.Events().Initial {
		if e.Verb == verb {
			n++
		}
	}
	return n
}

// total is how many events of any kind were heard.
func (o *rigObserver) total() int {
	ev := o.Events()
	return len(ev.Attempts) + len(ev.Retries) + len(ev.GiveUps) + len(ev.Refusals) + len(ev.ListResumes) + len(ev.Initial)
}

func (o *rigObserver) String() string {
	ev := o.Events()
	s := "retries ["
	for _, e := range ev.Retries {
		s += fmt.Sprintf(" %s/%s/%d wait %v", e.Verb, e.Reason, e.Code, e.Wait)
	}
	s += " ] give-ups ["
	for _, g := range ev.GiveUps {
		s += fmt.Sprintf(" %s/%s after %d attempts, %v", g.Reason, g.Verb, g.Attempts, g.Elapsed)
	}
	s += fmt.Sprintf(" ] budget refusals %d, list resumes [", len(ev.Refusals))
	for _, e := range ev.ListResumes {
		s += fmt.Sprintf(" %s(requests=%d,skipped=%d)", e.Outcome, e.Requests, e.SkippedBytes)
	}
	return s + " ]"
}

// variant is one way the apiservers of a test speak: plain HTTP/1.1, TLS
// with HTTP/2 or HTTP/1.1, a 410 answer or an ERROR event.
type variant struct {
	name string
	opts serverOpts
}

// eachVariant runs f as a parallel subtest for each variant.
func eachVariant(t *testing.T, vs []variant, f func(t *testing.T, opts serverOpts)) {
	for _, v := range vs {
		t.Run(v.name, func(t *testing.T) { t.Parallel(); f(t, v.opts) })
	}
}

// ---- a watch, as its caller sees it --------------------------------------

// rigEvent is one event a caller got, at a virtual time.
type rigEvent struct {
	typ  watch.EventType
	rv   string
	code int32
	msg  string
	at   time.Duration
}

// rigWatch follows one typed watch of ConfigMaps from rigInitialRV,
// recording what its caller got.
type rigWatch struct {
	r        *rig
	w        watch.Interface
	deadline time.Duration // virtual: when its timeoutSeconds ends
	done     chan struct{}
	mu       sync.Mutex
	seen     []rigEvent
	closedAt time.Duration
}

// watch starts a watch through cs in namespace ns with timeoutSeconds.
func (r *rig) watch(cs kubernetes.Interface, ns string, timeoutSeconds int64) *rigWatch {
	r.t.Helper()
	c := &rigWatch{r: r, deadline: r.clock.elapsed() + time.Duration(timeoutSeconds)*time.Second, done: make(chan struct{})}
	w, err := cs.CoreV1().ConfigMaps(ns).Watch(context.Background(), metav1.ListOptions{ResourceVersion: strconv.Itoa(rigInitialRV), TimeoutSeconds: &timeoutSeconds})
	if err != nil {
		r.t.Fatal(err)
	}
	c.w = w
	go func() {
		defer close(c.done)
		for e := range w.ResultChan() {
			s := rigEvent{typ: e.Type, at: r.clock.elapsed()}
			if st, ok := e.Object.(*metav1.Status); ok {
				s.code, s.msg = st.Code, st.Message
			} else if m, ok := e.Object.(metav1.Object); ok {
				s.rv = m.GetResourceVersion()
			}
			c.mu.Lock()
			c.seen = append(c.seen, s)
			c.mu.Unlock()
			r.poke()
		}
		c.mu.Lock()
		c.closedAt = r.clock.elapsed()
		c.mu.Unlock()
		r.poke()
	}()
	r.t.Cleanup(func() { w.Stop(); <-c.done })
	return c
}

func (c *rigWatch) events() []rigEvent {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.seen)
}

func (c *rigWatch) has(rv int) bool {
	return slices.ContainsFunc(c.events(), func(e rigEvent) bool { return e.rv == strconv.Itoa(rv) })
}

// closed reports whether the result channel closed, and when.
func (c *rigWatch) closed() (time.Duration, bool) {
	select {
	case <-c.done:
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.closedAt, true
	default:
		return 0, false
	}
}

func (c *rigWatch) isClosed() bool { _, ok := c.closed(); return ok }

func (c *rigWatch) waitHas(rv int) {
	c.r.t.Helper()
	c.r.waitFor(fmt.Sprintf("event at rv %d (caller saw %v)", rv, c), func() bool { return c.has(rv) })
}

func (c *rigWatch) waitClosed() {
	c.r.t.Helper()
	c.r.waitFor(fmt.Sprintf("end of the watch (caller saw %v)", c), c.isClosed)
}

// waitSettled waits until the watch has ended, or delivered the last
// event of a resumed stream and then been ended by its timeoutSeconds
// (end): either way everything its apiservers sent has reached the caller.
func (c *rigWatch) waitSettled() {
	c.r.t.Helper()
	c.r.waitFor(fmt.Sprintf("end of the watch or its rv %d (caller saw %v)", rigLastRV, c), func() bool { return c.isClosed() || c.has(rigLastRV) })
	if !c.isClosed() {
		c.end()
	}
}

// end runs the clock past the watch's timeoutSeconds, so that the
// apiserver serving it ends it and kretry hands that end to the caller,
// and waits for it.
func (c *rigWatch) end() {
	c.r.t.Helper()
	c.r.clock.advanceTo(c.r.clock.start.Add(c.deadline + time.Second))
	c.waitClosed()
}

func (c *rigWatch) String() string {
	var s string
	for _, e := range c.events() {
		if e.typ == watch.Error {
			s += fmt.Sprintf(" ERROR:%d@%v", e.code, e.at)
		} else {
			s += fmt.Sprintf(" %s:%s@%v", e.typ, e.rv, e.at)
		}
	}
	at, ok := c.closed()
	if !ok {
		return "[" + s + " ] open"
	}
	return fmt.Sprintf("[%s ] closed@%v", s, at)
}

// wantEvents: exactly ADDED from..to once each, in order, and no ERROR.
func (c *rigWatch) wantEvents(t *testing.T, from, to int, report string) {
	t.Helper()
	ev := c.events()
	ok := len(ev) == to-from+1
	for i, e := range ev {
		if e.typ != watch.Added || e.rv != strconv.Itoa(from+i) {
			ok = false
		}
	}
	if !ok {
		t.Errorf("want events %d..%d once each, in order, no ERROR; caller saw %v; %s", from, to, c, report)
	}
}

// wantResumed: every event of both streams once each, in order, no ERROR.
func (c *rigWatch) wantResumed(t *testing.T, report string) {
	t.Helper()
	c.wantEvents(t, rigInitialRV+1, rigLastRV, report)
}

// wantGone: ADDED rigInitialRV+1..upTo once each, then one ERROR 410, then
// the end; it returns when the ERROR came (virtual time), 0 if it did not.
func (c *rigWatch) wantGone(t *testing.T, upTo int, report string) time.Duration {
	t.Helper()
	ev := c.events()
	n := upTo - rigInitialRV
	ok := len(ev) == n+1 && c.isClosed()
	for i := 0; ok && i < n; i++ {
		ok = ev[i].typ == watch.Added && ev[i].rv == strconv.Itoa(rigInitialRV+1+i)
	}
	if !ok || ev[n].typ != watch.Error || ev[n].code != 410 {
		t.Errorf("want events %d..%d, one ERROR 410, then the end; caller saw %v; %s", rigInitialRV+1, upTo, c, report)
		return 0
	}
	return ev[n].at
}

// ---- an informer ------------------------------------------------------------

// rigInformer is a ConfigMap informer through a Clientset, counting the
// adds of each object.
type rigInformer struct {
	r    *rig
	inf  cache.SharedIndexInformer
	mu   sync.Mutex
	adds map[string]int
}

// informer runs a ConfigMap informer of namespace ns through cs until the
// test ends.
func (r *rig) informer(cs kubernetes.Interface, ns string) *rigInformer {
	i := &rigInformer{r: r, adds: map[string]int{}}
	i.inf = informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns)).Core().V1().ConfigMaps().Informer()
	if _, err := i.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(o interface{}) {
		i.mu.Lock()
		i.adds[o.(metav1.Object).GetName()]++
		i.mu.Unlock()
		r.poke()
	}}); err != nil {
		r.t.Fatal(err)
	}
	stop, ran := make(chan struct{}), make(chan struct{})
	go func() { defer close(ran); i.inf.Run(stop) }()
	r.t.Cleanup(func() {
		close(stop)
		select {
		case <-ran:
		case <-time.After(rigHang):
			r.t.Error("the informer did not stop")
		}
	})
	return i
}

func (i *rigInformer) objects() int {
	i.mu.Lock()
	defer i.mu.Unlock()
	return len(i.adds)
}

func (i *rigInformer) waitObjects(n int) {
	i.r.t.Helper()
	i.r.waitFor(fmt.Sprintf("%d objects in the informer (%v)", n, i), func() bool { return i.objects() >= n })
}

// wantAddedOnce: n objects, each added once.
func (i *rigInformer) wantAddedOnce(t *testing.T, n int) {
	t.Helper()
	i.mu.Lock()
	defer i.mu.Unlock()
	for name, c := range i.adds {
		if c != 1 {
			t.Errorf("%s added %d times", name, c)
		}
	}
	if len(i.adds) != n {
		t.Errorf("want %d objects: %v", n, i.adds)
	}
}

func (i *rigInformer) String() string {
	i.mu.Lock()
	defer i.mu.Unlock()
	names := make([]string, 0, len(i.adds))
	for n, c := range i.adds {
		names = append(names, fmt.Sprintf("%s:%d", n, c))
	}
	sort.Strings(names)
	return fmt.Sprint(names)
}
