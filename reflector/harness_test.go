package reflector

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
)

// guard bounds every wait of a test for the reflector; it is never slept.
const guard = 10 * time.Second

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// fakeServer is a ListerWatcher that the test answers request by request: every call the
// reflector makes is seen, and every answer is chosen.
type fakeServer struct {
	lists   chan *listCall
	watches chan *watchCall
}

type listCall struct {
	opts  metav1.ListOptions
	reply chan listReply
}

type listReply struct {
	obj runtime.Object
	err error
}

type watchCall struct {
	opts  metav1.ListOptions
	reply chan watchReply
}

type watchReply struct {
	w   watch.Interface
	err error
}

func newFakeServer() *fakeServer {
	return &fakeServer{lists: make(chan *listCall), watches: make(chan *watchCall)}
}

func (f *fakeServer) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	c := &listCall{opts: opts, reply: make(chan listReply, 1)}
	select {
	case f.lists <- c:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case r := <-c.reply:
		return r.obj, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (f *fakeServer) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	c := &watchCall{opts: opts, reply: make(chan watchReply, 1)}
	select {
	case f.watches <- c:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case r := <-c.reply:
		return r.w, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (f *fakeServer) List(opts metav1.ListOptions) (runtime.Object, error) {
	return f.ListWithContext(context.Background(), opts)
}

func (f *fakeServer) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return f.WatchWithContext(context.Background(), opts)
}

func (c *listCall) answer(list runtime.Object, err error) { c.reply <- listReply{list, err} }

// stream answers the WATCH with an open stream the test feeds (unbuffered: each send
// returns once the reflector has taken the event).
func (c *watchCall) stream() *watch.FakeWatcher {
	w := watch.NewFake()
	c.reply <- watchReply{w: w}
	return w
}

func (c *watchCall) fail(err error) { c.reply <- watchReply{err: err} }

// armedTimer is one timer the reflector started: when, and for how long.
type armedTimer struct {
	at time.Time
	d  time.Duration
}

// recordingClock is a FakeClock that tells the test about every timer the reflector
// starts, so the test steps time only once the reflector is waiting.
type recordingClock struct {
	*testingclock.FakeClock
	armed chan armedTimer
}

func (c *recordingClock) NewTimer(d time.Duration) clock.Timer {
	t := c.FakeClock.NewTimer(d)
	c.armed <- armedTimer{at: c.Now(), d: d}
	return t
}

// recordingStore is a cache.Store that logs every call the reflector makes to it.
type recordingStore struct {
	cache.Store
	clock   clock.PassiveClock
	mu      sync.Mutex
	ops     []string
	resyncs chan time.Time
}

func newRecordingStore(c clock.PassiveClock) *recordingStore {
	return &recordingStore{Store: cache.NewStore(cache.MetaNamespaceKeyFunc), clock: c, resyncs: make(chan time.Time, 100)}
}

func (s *recordingStore) record(op string, obj any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cm, ok := obj.(*corev1.ConfigMap); ok {
		op += " " + cm.Name + "@" + cm.ResourceVersion
	}
	s.ops = append(s.ops, op)
}

func (s *recordingStore) Add(obj any) error    { s.record("add", obj); return s.Store.Add(obj) }
func (s *recordingStore) Update(obj any) error { s.record("update", obj); return s.Store.Update(obj) }
func (s *recordingStore) Delete(obj any) error { s.record("delete", obj); return s.Store.Delete(obj) }
func (s *recordingStore) Replace(items []any, rv string) error {
	names := make([]string, len(items))
	for i, item := range items {
		names[i] = item.(*corev1.ConfigMap).Name
	}
	s.record(fmt.Sprintf("replace [%s]@%s", strings.Join(names, " "), rv), nil)
	return s.Store.Replace(items, rv)
}
func (s *recordingStore) Resync() error {
	s.record("resync", nil)
	s.resyncs <- s.clock.Now()
	return s.Store.Resync()
}

func (s *recordingStore) takeOps() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ops := s.ops
	s.ops = nil
	return ops
}

// logSink collects the reflector's log lines at verbosity 0.
type logSink struct {
	mu    sync.Mutex
	lines []string
}

func (l *logSink) count(substr string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, substr) {
			n++
		}
	}
	return n
}

// harness runs one Reflector against a fakeServer, a recordingClock and a recordingStore.
type harness struct {
	t      *testing.T
	srv    *fakeServer
	clock  *recordingClock
	store  *recordingStore
	logs   *logSink
	r      *Reflector
	cancel context.CancelFunc
	done   chan error
}

// start runs a reflector. cfg.Rand defaults to 0: the shortest timeout and half waits.
func start(t *testing.T, cfg Config) *harness {
	t.Helper()
	h := &harness{
		t:     t,
		srv:   newFakeServer(),
		clock: &recordingClock{FakeClock: testingclock.NewFakeClock(t0), armed: make(chan armedTimer, 1000)},
		logs:  &logSink{},
		done:  make(chan error, 1),
	}
	h.store = newRecordingStore(h.clock)
	cfg.Clock = h.clock
	if cfg.Rand == nil {
		cfg.Rand = func() float64 { return 0 }
	}
	h.r = New(h.srv, &corev1.ConfigMap{}, h.store, cfg)

	logger := funcr.New(func(prefix, args string) {
		h.logs.mu.Lock()
		h.logs.lines = append(h.logs.lines, prefix+" "+args)
		h.logs.mu.Unlock()
	}, funcr.Options{})
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	h.cancel = cancel
	go func() { h.done <- h.r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-h.done:
		case <-time.After(guard):
			t.Errorf("Run did not return after cancel")
		}
	})
	return h
}

func (h *harness) expectList() *listCall {
	h.t.Helper()
	select {
	case c := <-h.srv.lists:
		return c
	case err := <-h.done:
		h.t.Fatalf("Run returned %v while a LIST was expected", err)
	case <-time.After(guard):
		h.t.Fatalf("no LIST")
	}
	return nil
}

func (h *harness) expectWatch() *watchCall {
	h.t.Helper()
	select {
	case c := <-h.srv.watches:
		return c
	case err := <-h.done:
		h.t.Fatalf("Run returned %v while a WATCH was expected", err)
	case <-time.After(guard):
		h.t.Fatalf("no WATCH")
	}
	return nil
}

// expectTimer returns the next timer the reflector started.
func (h *harness) expectTimer() armedTimer {
	h.t.Helper()
	select {
	case a := <-h.clock.armed:
		return a
	case <-time.After(guard):
		h.t.Fatalf("no timer started")
	}
	return armedTimer{}
}

// expectNoTimer checks that no timer was started so far. It is exact only at a barrier:
// right after the reflector made a call that it makes after any wait.
func (h *harness) expectNoTimer() {
	h.t.Helper()
	select {
	case a := <-h.clock.armed:
		h.t.Fatalf("unexpected wait of %v at %v", a.d, a.at.Sub(t0))
	default:
	}
}

// wait takes the next timer, checks its duration, and lets it expire.
func (h *harness) wait(want time.Duration) {
	h.t.Helper()
	if got := h.expectTimer(); got.d != want {
		h.t.Fatalf("wait = %v, want %v", got.d, want)
	}
	h.clock.Step(want)
}

// stop cancels Run and checks that it returns ctx.Err() promptly.
func (h *harness) stop() {
	h.t.Helper()
	h.cancel()
	select {
	case err := <-h.done:
		if err != context.Canceled {
			h.t.Fatalf("Run returned %v, want context.Canceled", err)
		}
		h.done <- err // for Cleanup
	case <-time.After(guard):
		h.t.Fatalf("Run did not return after cancel")
	}
}

// endCleanly ends a watch the way the server does: once its timeout has elapsed.
func (h *harness) endCleanly(w *watch.FakeWatcher, timeout time.Duration) {
	h.clock.Step(timeout)
	w.Stop()
}

func cm(name, rv string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", ResourceVersion: rv}}
}

func cmList(rv, cont string, items ...*corev1.ConfigMap) *corev1.ConfigMapList {
	l := &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: rv, Continue: cont}}
	for _, item := range items {
		l.Items = append(l.Items, *item)
	}
	return l
}

func bookmark(rv string, initialEventsEnd bool) *corev1.ConfigMap {
	b := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: rv}}
	if initialEventsEnd {
		b.Annotations = map[string]string{metav1.InitialEventsAnnotationKey: "true"}
	}
	return b
}

var configMaps = schema.GroupResource{Resource: "configmaps"}

func errGone() *apierrors.StatusError {
	return apierrors.NewResourceExpired("too old resource version: 10 (30)")
}

func statusOf(err *apierrors.StatusError) *metav1.Status {
	s := err.Status()
	return &s
}

// defaultTimeout is the watch timeout with Rand = 0.
const defaultTimeout = 5 * time.Minute

// Bookmark makes recordingStore a cache.ReflectorBookmarkStore, like client-go's RealFIFO.
func (s *recordingStore) Bookmark(rv string) error {
	s.record("bookmark@"+rv, nil)
	return nil
}
