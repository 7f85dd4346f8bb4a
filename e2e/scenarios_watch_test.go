//go:build e2e

package e2e_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/kretry/kretry/internal/harness/apiserver"
	"github.com/kretry/kretry/internal/harness/cmwriter"
	"github.com/kretry/kretry/internal/harness/faultproxy"
)

// rawWatchTimeoutSeconds is the timeoutSeconds of every raw watch: longer than the scenario, so
// that no end of a watch is the intended one.
const rawWatchTimeoutSeconds int64 = 300

// TestRawWatchCuts: the `kubectl get -w` pattern, a raw clientset Watch with no informer and no
// re-watch of its own. The writer changes ConfigMaps for 30s; three watchers start from the
// same LIST resourceVersion: a reference straight to server A (no proxy, no cuts), a stock one
// and a kretry one, each through its own fault proxy that cuts every connection after an
// exponentially distributed time, 30 per minute on average (seeded, as in random-cuts), until
// the test stops the watchers. kretry's ResultChan must stay open until the test stops it and
// deliver every event exactly once and in order: no ERROR event, resourceVersions strictly
// increasing, the same events as the reference, and replaying them on the initial LIST gives a
// consistent LIST taken after the writer stopped (same names, same resourceVersions). The stock
// watcher re-watches from the last resourceVersion it saw whenever its channel closes (what a
// careful hand-written loop does), so that its early closes can be counted; how many events a
// watcher that ends at its first close (kubectl get -w) misses is derived from the reference.
func TestRawWatchCuts(t *testing.T) {
	sharedCluster(t)
	ctx := context.Background()
	const fault = "raw-watch-cuts"
	ns := namespace(t, serverA, "rawwatch", 10)
	w := startWriter(t, serverA, ns, 7, 100*time.Millisecond)
	time.Sleep(time.Second) // the watchers start behind the writer: their first events come from the watch cache

	admin := adminClient(serverA)
	start, gens, listRV := listState(t, serverA, ns)

	began := time.Now()
	ref := startRawWatcher(t, began, admin.CoreV1().ConfigMaps(ns), strconv.FormatUint(listRV, 10), false)
	type path struct {
		name string
		p    *faultproxy.Proxy
		c    *client
		rw   *rawWatcher
	}
	var paths []*path
	for _, withKretry := range []bool{false, true} {
		pa := &path{name: "stock", p: newProxy(t, 7, serverA)}
		if withKretry {
			pa.name = "kretry"
		}
		pa.p.SetRule(faultproxy.Rule{CutsPerMinute: 30})
		pa.c = newClient(pa.p.Addr(), apiserver.Admin, withKretry)
		// stock re-watches after an early close so that its closes can be counted; kretry's
		// watch is opened once, as kubectl does.
		pa.rw = startRawWatcher(t, began, pa.c.kube().CoreV1().ConfigMaps(ns), strconv.FormatUint(listRV, 10), !withKretry)
		paths = append(paths, pa)
	}
	stock, kr := paths[0], paths[1]

	time.Sleep(30 * time.Second)
	w.Stop()
	writerStopped := time.Now()
	final, err := serverState(ctx, serverA, ns)
	if err != nil {
		t.Fatal(err)
	}

	// Wait until every watcher's events, replayed on the initial LIST, give the final LIST
	// (the proxies keep cutting meanwhile), then a little longer for anything late.
	watchers := []*rawWatcher{ref, stock.rw, kr.rw}
	converged := make([]time.Duration, len(watchers))
	for i := range converged {
		converged[i] = -1
	}
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		pending := 0
		for i, rw := range watchers {
			if converged[i] >= 0 {
				continue
			}
			if got, _ := replay(start, gens, listRV, rw.snapshot()); fmt.Sprint(got) == fmt.Sprint(final) {
				converged[i] = time.Since(writerStopped)
			} else {
				pending++
			}
		}
		if pending == 0 {
			break
		}
	}
	time.Sleep(500 * time.Millisecond)
	for _, rw := range watchers {
		rw.stopAndWait()
	}

	refEvents := ref.snapshot()
	if _, problems := replay(start, gens, listRV, refEvents); len(problems) > 0 || converged[0] < 0 || len(ref.closes) > 0 || len(ref.watchErrs) > 0 {
		t.Fatalf("reference watcher (no proxy) is not a valid reference: converged=%v closes=%+v watch errors=%v problems=%v",
			converged[0] >= 0, ref.closes, ref.watchErrs, problems)
	}
	writes, fails, firstErr := w.Stats()
	if fails > 0 {
		t.Logf("writer: %d writes failed, first: %v", fails, firstErr)
	}

	// kretry: the claims.
	krEvents := kr.rw.snapshot()
	krState, krProblems := replay(start, gens, listRV, krEvents)
	if len(kr.rw.watchErrs) > 0 {
		t.Errorf("kretry: Watch returned an error: %v", kr.rw.watchErrs)
	}
	for _, c := range kr.rw.closes {
		t.Errorf("kretry: ResultChan closed at %v, before the test stopped the watch (after %d events, last RV %d)",
			c.At.Round(time.Millisecond), c.Events, c.LastRV)
	}
	if len(kr.rw.closes) == 0 && !kr.rw.stoppedClean {
		t.Errorf("kretry: ResultChan did not close within 10s of Stop")
	}
	if n := errorEvents(krEvents); n > 0 {
		t.Errorf("kretry: %d ERROR events", n)
	}
	for _, p := range krProblems {
		t.Errorf("kretry: %s", p)
	}
	if fmt.Sprint(krState) != fmt.Sprint(final) {
		t.Errorf("kretry: initial LIST + events != final LIST:\nreplayed %v\nfinal    %v", krState, final)
	}
	if d := diffEvents(refEvents, krEvents); d != "" {
		t.Errorf("kretry: events differ from the reference watcher's (%d vs %d): %s", len(krEvents), len(refEvents), d)
	}
	krWire, krCaller := kr.c.wire.snapshot(), kr.c.caller.snapshot()
	if krCaller.Watches != 1 {
		t.Errorf("kretry: the caller sent %d WATCH requests, want 1", krCaller.Watches)
	}
	if krWire.Watches < 2 {
		t.Errorf("kretry: the server saw %d WATCH requests: no resume (%d cuts)", krWire.Watches, kr.p.Stats().Cuts)
	}

	// stock: the figures, and the one claim that is reliable at this cut rate.
	stEvents := stock.rw.snapshot()
	stState, stProblems := replay(start, gens, listRV, stEvents)
	lostAtCloses := 0
	for _, c := range stock.rw.closes {
		for _, e := range refEvents {
			if e.RV > c.LastRV && e.At <= c.At {
				lostAtCloses++
			}
		}
	}
	stockNote := fmt.Sprintf("0 early closes; %d cuts", stock.p.Stats().Cuts)
	if len(stock.rw.closes) > 0 {
		first := stock.rw.closes[0]
		missed := 0
		for _, e := range refEvents {
			if e.RV > first.LastRV {
				missed++
			}
		}
		stockNote = fmt.Sprintf("%d early closes (first at %v), %d ERROR events, %d events lost in flight at the closes; "+
			"a watcher that ends at its first close (kubectl get -w) misses %d of %d events; %d cuts",
			len(stock.rw.closes), first.At.Round(100*time.Millisecond), errorEvents(stEvents), lostAtCloses,
			missed, len(refEvents), stock.p.Stats().Cuts)
	} else {
		t.Errorf("stock: ResultChan never closed early (%d cuts): the scenario did not cut the watch", stock.p.Stats().Cuts)
	}
	if len(stock.rw.watchErrs) > 0 {
		stockNote += fmt.Sprintf("; %d re-watch errors", len(stock.rw.watchErrs))
	}
	if len(stProblems) > 0 {
		stockNote += fmt.Sprintf("; re-watched stream: %d problems", len(stProblems))
		t.Logf("stock (re-watching from its last RV): %d problems, first: %s", len(stProblems), stProblems[0])
	}
	krNote := fmt.Sprintf("%d early closes, %d ERROR events, %d of %d events (%d problems), %d cuts",
		len(kr.rw.closes), errorEvents(krEvents), len(krEvents), len(refEvents), len(krProblems), kr.p.Stats().Cuts)

	for _, f := range []figure{
		{Fault: fault, Client: "stock", Caller: stock.c.caller.snapshot(), Wire: stock.c.wire.snapshot(), Writes: writes,
			Converged: fmt.Sprint(stState) == fmt.Sprint(final) && converged[1] >= 0, Converge: max(converged[1], 0), Note: stockNote},
		{Fault: fault, Client: "kretry", Caller: krCaller, Wire: krWire, Writes: writes,
			Converged: fmt.Sprint(krState) == fmt.Sprint(final) && converged[2] >= 0, Converge: max(converged[2], 0), Note: krNote},
	} {
		if fails > 0 {
			f.Note = fmt.Sprintf("%s; %d writes failed", f.Note, fails)
		}
		record(f)
		t.Logf("%s/%s: wire=%+v writes=%d replay=final %v in %v; %s", f.Fault, f.Client, f.Wire, f.Writes, f.Converged, f.Converge, f.Note)
	}
}

// rawEvent is one event as a raw watcher received it.
type rawEvent struct {
	Type watch.EventType
	Name string
	RV   uint64
	Gen  string
	At   time.Duration // since the scenario's start
	Err  string        // an ERROR event's status, or what was wrong with the object
	Gone bool          // an ERROR event 410
}

// rawClose is an end of a raw watcher's ResultChan before the test stopped it.
type rawClose struct {
	At     time.Duration
	Events int    // events delivered before it
	LastRV uint64 // of the last event delivered before it (0: none)
}

// rawWatcher consumes clientset Watches on ConfigMaps; with reopen it re-watches from the last
// resourceVersion it saw whenever its channel closes early.
type rawWatcher struct {
	began    time.Time
	cms      typedcorev1.ConfigMapInterface
	reopen   bool
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}

	mu           sync.Mutex
	events       []rawEvent
	closes       []rawClose
	watchErrs    []string // Watch calls that returned an error
	stoppedClean bool     // the channel closed after the test's Stop
}

func startRawWatcher(t *testing.T, began time.Time, cms typedcorev1.ConfigMapInterface, rv string, reopen bool) *rawWatcher {
	rw := &rawWatcher{began: began, cms: cms, reopen: reopen, stop: make(chan struct{}), done: make(chan struct{})}
	go rw.run(rv)
	t.Cleanup(rw.stopAndWait)
	return rw
}

func (rw *rawWatcher) stopAndWait() {
	rw.stopOnce.Do(func() { close(rw.stop) })
	<-rw.done
}

func (rw *rawWatcher) snapshot() []rawEvent {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	return append([]rawEvent(nil), rw.events...)
}

func (rw *rawWatcher) run(rv string) {
	defer close(rw.done)
	timeout := rawWatchTimeoutSeconds
	for {
		w, err := rw.cms.Watch(context.Background(), metav1.ListOptions{ResourceVersion: rv, TimeoutSeconds: &timeout})
		if err != nil {
			rw.mu.Lock()
			rw.watchErrs = append(rw.watchErrs, err.Error())
			rw.mu.Unlock()
			if !rw.reopen {
				return
			}
			select {
			case <-rw.stop:
				return
			case <-time.After(100 * time.Millisecond):
				continue
			}
		}
		gone := false
	stream:
		for {
			select {
			case <-rw.stop:
				rw.stopWatch(w)
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					if lastRV := rw.recordClose(); lastRV > 0 {
						rv = strconv.FormatUint(lastRV, 10)
					}
					break stream
				}
				gone = rw.recordEvent(ev) || gone
			}
		}
		if !rw.reopen || gone { // a 410 would come back on every re-watch from the same RV
			<-rw.stop
			return
		}
	}
}

// stopWatch stops w and waits up to 10s for its channel to close (noted as stoppedClean).
func (rw *rawWatcher) stopWatch(w watch.Interface) {
	w.Stop()
	for deadline := time.After(10 * time.Second); ; {
		select {
		case _, ok := <-w.ResultChan():
			if !ok {
				rw.mu.Lock()
				rw.stoppedClean = true
				rw.mu.Unlock()
				return
			}
		case <-deadline:
			return
		}
	}
}

// recordClose notes an early close of the channel and returns the RV of the last event with
// one (0: none).
func (rw *rawWatcher) recordClose() uint64 {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	c := rawClose{At: time.Since(rw.began), Events: len(rw.events)}
	for i := len(rw.events) - 1; i >= 0; i-- {
		if rw.events[i].RV > 0 {
			c.LastRV = rw.events[i].RV
			break
		}
	}
	rw.closes = append(rw.closes, c)
	return c.LastRV
}

// recordEvent appends ev and reports whether it is an ERROR event 410.
func (rw *rawWatcher) recordEvent(ev watch.Event) (gone bool) {
	e := toRawEvent(ev, time.Since(rw.began))
	rw.mu.Lock()
	rw.events = append(rw.events, e)
	rw.mu.Unlock()
	return e.Gone
}

// toRawEvent is what a raw watcher records of ev, received at at.
func toRawEvent(ev watch.Event, at time.Duration) rawEvent {
	e := rawEvent{Type: ev.Type, At: at}
	switch o := ev.Object.(type) {
	case *corev1.ConfigMap:
		e.Name, e.Gen = o.Name, o.Data["gen"]
		var err error
		if e.RV, err = strconv.ParseUint(o.ResourceVersion, 10, 64); err != nil {
			e.Err = fmt.Sprintf("resourceVersion %q", o.ResourceVersion)
		}
	case *metav1.Status:
		e.Err = fmt.Sprintf("%d %s: %s", o.Code, o.Reason, o.Message)
		e.Gone = o.Code == 410
	default:
		e.Err = fmt.Sprintf("object %T", ev.Object)
	}
	return e
}

func errorEvents(evs []rawEvent) int {
	n := 0
	for _, e := range evs {
		if e.Type == watch.Error {
			n++
		}
	}
	return n
}

// replay applies events to the initial LIST (name -> RV, and the writer's "gen" per name) and
// returns the resulting state and every problem it saw: an ERROR or unexpected event, an RV not
// above the previous one (or the LIST's), an ADDED for an object that exists (duplicate or missed
// DELETED), a MODIFIED or DELETED for one that does not (missed ADDED), a MODIFIED whose gen is
// not the previous + 1 (a MODIFIED missed or repeated: the writer bumps gen by one per update).
func replay(start state, gens map[string]int, listRV uint64, evs []rawEvent) (state, []string) {
	r := newReplayer(start, gens, listRV)
	var problems []string
	for i, e := range evs {
		for _, p := range r.apply(e) {
			problems = append(problems, fmt.Sprintf("event %d: %s", i, p))
		}
	}
	return r.state, problems
}

// replayer is replay one event at a time, holding only the state (a watcher that runs for an
// hour keeps no history).
type replayer struct {
	state state
	gens  map[string]int
	prev  uint64
}

func newReplayer(start state, gens map[string]int, listRV uint64) *replayer {
	r := &replayer{state: state{}, gens: map[string]int{}, prev: listRV}
	for n, rv := range start {
		r.state[n] = rv
	}
	for n, v := range gens {
		r.gens[n] = v
	}
	return r
}

// apply applies e and returns what was wrong with it (nothing for a good event).
func (r *replayer) apply(e rawEvent) []string {
	if e.Type != watch.Added && e.Type != watch.Modified && e.Type != watch.Deleted || e.Err != "" {
		return []string{fmt.Sprintf("%s %s", e.Type, e.Err)}
	}
	var problems []string
	if e.RV <= r.prev {
		problems = append(problems, fmt.Sprintf("%s %s RV %d after RV %d", e.Type, e.Name, e.RV, r.prev))
	}
	r.prev = max(r.prev, e.RV)
	s, g := r.state, r.gens
	_, exists := s[e.Name]
	gen := cmwriter.Gen(e.Gen)
	switch e.Type {
	case watch.Added:
		if exists {
			problems = append(problems, fmt.Sprintf("ADDED %s@%d, which exists@%s", e.Name, e.RV, s[e.Name]))
		}
		if gen != 0 {
			problems = append(problems, fmt.Sprintf("ADDED %s@%d with gen %d", e.Name, e.RV, gen))
		}
		s[e.Name], g[e.Name] = strconv.FormatUint(e.RV, 10), gen
	case watch.Modified:
		if !exists {
			problems = append(problems, fmt.Sprintf("MODIFIED %s@%d, which does not exist", e.Name, e.RV))
		} else if gen != g[e.Name]+1 {
			problems = append(problems, fmt.Sprintf("MODIFIED %s@%d gen %d after gen %d", e.Name, e.RV, gen, g[e.Name]))
		}
		s[e.Name], g[e.Name] = strconv.FormatUint(e.RV, 10), gen
	case watch.Deleted:
		if !exists {
			problems = append(problems, fmt.Sprintf("DELETED %s@%d, which does not exist", e.Name, e.RV))
		}
		delete(s, e.Name)
		delete(g, e.Name)
	}
	return problems
}

// diffEvents is "" when got has the same events (type, name, RV) in the same order as want, or
// where they first differ.
func diffEvents(want, got []rawEvent) string {
	for i := range max(len(want), len(got)) {
		var w, g string
		if i < len(want) {
			w = fmt.Sprintf("%s %s@%d", want[i].Type, want[i].Name, want[i].RV)
		}
		if i < len(got) {
			g = fmt.Sprintf("%s %s@%d", got[i].Type, got[i].Name, got[i].RV)
		}
		if w != g {
			return fmt.Sprintf("event %d: got %q, want %q", i, g, w)
		}
	}
	return ""
}
