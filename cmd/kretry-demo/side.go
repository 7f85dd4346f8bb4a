package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/kretry/kretry/transport"
)

// The four clients under comparison, named by the User-Agent the server counts them by.
const (
	stockInformer  = "stock informer"
	kretryInformer = "kretry informer"
	stockRawWatch  = "stock raw watch"
	kretryRawWatch = "kretry raw watch"
)

// sideNames is the order of the table's columns.
var sideNames = []string{stockInformer, kretryInformer, stockRawWatch, kretryRawWatch}

// side is one client under comparison: a SharedInformerFactory ConfigMap informer, or a raw
// watcher (LIST, then Watch from its RV until the channel closes: kubectl get -w), with or
// without kretry.
type side struct {
	name     string
	raw      bool
	kretry   bool
	wire     *wireCounter // below kretry: what reached the server
	ends     *watchEnds   // above kretry: what client-go saw end
	retries  atomic.Int64 // kretry's retries and resumes
	recovery *recoveryTracker
	seen     *seenChanges

	informer cache.SharedIndexInformer
	factory  informers.SharedInformerFactory

	watcher  watch.Interface
	watchEnd chan struct{} // closed when the raw watcher's channel closed
	endedAt  atomic.Int64  // raw: UnixNano when its channel closed by itself; 0 while open
	stopped  atomic.Bool   // raw: the demo stopped it
}

// newSide wires the transports onto cfg: the wire counter below everything, kretry for a
// kretry side, the watch-end observer on top (client-go's user agent and auth wrappers
// stay above all of them).
func newSide(name string, cfg *rest.Config, retryLog io.Writer) (*side, *kubernetes.Clientset, error) {
	s := &side{
		name:     name,
		raw:      name == stockRawWatch || name == kretryRawWatch,
		kretry:   name == kretryInformer || name == kretryRawWatch,
		wire:     &wireCounter{name: name, log: retryLog},
		ends:     &watchEnds{},
		recovery: &recoveryTracker{},
		seen:     &seenChanges{rvs: map[uint64]bool{}},
		watchEnd: make(chan struct{}),
	}
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper { s.wire.next = next; return s.wire })
	if s.kretry {
		cfg.Wrap(transport.Wrapper(transport.Config{Observer: retryNotes{s, retryLog}}))
	}
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper { s.ends.next = next; return s.ends })
	clientset, err := kubernetes.NewForConfig(cfg)
	return s, clientset, err
}

// retryNotes is the transport.Observer of a kretry side: it counts the
// side's retries and, with -v, logs each.
type retryNotes struct {
	side *side
	log  io.Writer
}

func (n retryNotes) ObserveRetry(e transport.RetryEvent) {
	n.side.retries.Add(1)
	if n.log == nil {
		return
	}
	cause := "a break"
	if e.Code != 0 {
		cause = fmt.Sprintf("code %d", e.Code)
	}
	fmt.Fprintf(n.log, "%s %s: kretry retries a %s (%s: %s) in %s\n", time.Now().Format("15:04:05.000"), n.side.name,
		e.Verb, e.Reason, cause, e.Wait.Round(time.Millisecond))
}

func (retryNotes) ObserveAttempt(transport.AttemptEvent)      {}
func (retryNotes) ObserveGiveUp(transport.GiveUpEvent)        {}
func (retryNotes) ObserveBudgetRefusal(transport.BudgetEvent) {}

// startInformer starts an informer side; its handlers note every change they are told of.
func startInformer(ctx context.Context, name string, cfg *rest.Config, namespace string, retryLog io.Writer) (*side, error) {
	s, clientset, err := newSide(name, cfg, retryLog)
	if err != nil {
		return nil, err
	}
	s.factory = informers.NewSharedInformerFactoryWithOptions(clientset, 0, informers.WithNamespace(namespace))
	s.informer = s.factory.Core().V1().ConfigMaps().Informer()
	note := func(obj any) {
		if cm, ok := obj.(*corev1.ConfigMap); ok { // not a DeletedFinalStateUnknown: its delete was missed
			s.seen.note(cm.ResourceVersion, false)
		}
	}
	if _, err := s.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    note,
		UpdateFunc: func(_, obj any) { note(obj) },
		DeleteFunc: note,
	}); err != nil {
		return nil, err
	}
	s.factory.Start(ctx.Done())
	return s, nil
}

// startRawWatch starts a raw watcher side: LIST, then Watch from the list's RV, and a
// goroutine that reads the channel until it closes. It returns once the watch is open.
func startRawWatch(ctx context.Context, name string, cfg *rest.Config, namespace string, retryLog io.Writer) (*side, error) {
	s, clientset, err := newSide(name, cfg, retryLog)
	if err != nil {
		return nil, err
	}
	configMaps := clientset.CoreV1().ConfigMaps(namespace)
	list, err := configMaps.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	s.seen.note(list.ResourceVersion, true)
	if s.watcher, err = configMaps.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion}); err != nil {
		return nil, err
	}
	go func() {
		defer close(s.watchEnd)
		for ev := range s.watcher.ResultChan() {
			if ev.Type == watch.Error {
				s.seen.errorEvent()
				continue // kubectl would print it; the channel closes next
			}
			if cm, ok := ev.Object.(*corev1.ConfigMap); ok {
				s.seen.note(cm.ResourceVersion, true)
			}
		}
		if !s.stopped.Load() {
			s.endedAt.Store(time.Now().UnixNano())
		}
	}()
	return s, nil
}

// synced reports whether the side holds its initial state (a raw watcher does from the
// start).
func (s *side) synced() bool { return s.raw || s.informer.HasSynced() }

// lastRV is the newest state the side has seen: the informer's last synced RV, or the
// raw watcher's last event.
func (s *side) lastRV() (uint64, bool) {
	if s.raw {
		return s.seen.latest()
	}
	rv, err := strconv.ParseUint(s.informer.LastSyncResourceVersion(), 10, 64)
	return rv, err == nil
}

// ended returns when the raw watcher's channel closed by itself, if it did.
func (s *side) ended() (time.Time, bool) {
	if n := s.endedAt.Load(); n != 0 {
		return time.Unix(0, n), true
	}
	return time.Time{}, false
}

// stop ends the side.
func (s *side) stop() {
	if s.raw {
		s.stopped.Store(true)
		s.watcher.Stop()
		<-s.watchEnd
		return
	}
	s.factory.Shutdown()
}

// seenChanges is what a side was told of: the RVs of the changes delivered to it, and for
// a raw watcher, whether they came in order and how many ERROR events came.
type seenChanges struct {
	mu          sync.Mutex
	rvs         map[uint64]bool
	last        uint64
	outOfOrder  int // raw: events at or below an RV already seen
	errorEvents int
}

func (c *seenChanges) note(resourceVersion string, ordered bool) {
	rv, err := strconv.ParseUint(resourceVersion, 10, 64)
	if err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if ordered && rv <= c.last {
		c.outOfOrder++
	}
	c.rvs[rv] = true
	c.last = max(c.last, rv)
}

func (c *seenChanges) errorEvent() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errorEvents++
}

func (c *seenChanges) latest() (uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last, c.last != 0
}

// missed counts the changes (by RV) the side was never told of.
func (c *seenChanges) missed(changes []uint64) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, rv := range changes {
		if !c.rvs[rv] {
			n++
		}
	}
	return n
}

// recoveryTracker measures, per fault, how long the client took to be back in step: the
// time until it had seen a change made after the fault (an RV above the server's at the
// moment of the fault), or, once the writer has stopped, the server's final state. A
// client that was caught up when the fault struck has not recovered by that alone.
type recoveryTracker struct {
	mu        sync.Mutex
	pending   []pendingFault
	recovered []time.Duration
}

type pendingFault struct {
	at time.Time
	rv uint64
}

func (t *recoveryTracker) fault(at time.Time, rv uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pending = append(t.pending, pendingFault{at, rv})
}

// observe notes that the client has seen rv by now; final is the server's last RV once
// the writer has stopped, else 0.
func (t *recoveryTracker) observe(now time.Time, rv, final uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	kept := t.pending[:0]
	for _, p := range t.pending {
		if rv > p.rv || final != 0 && rv >= final {
			t.recovered = append(t.recovered, now.Sub(p.at))
		} else {
			kept = append(kept, p)
		}
	}
	t.pending = kept
}

// recoveryStats summarises a tracker: faults recovered from, mean and max time, and how
// many never recovered.
type recoveryStats struct {
	count, unrecovered int
	mean, max          time.Duration
}

func (t *recoveryTracker) stats() recoveryStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := recoveryStats{count: len(t.recovered), unrecovered: len(t.pending)}
	var total time.Duration
	for _, d := range t.recovered {
		total += d
		s.max = max(s.max, d)
	}
	if s.count > 0 {
		s.mean = total / time.Duration(s.count)
	}
	return s
}
