package reflector

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// Reflector keeps a store in step with a collection on the API server: it fetches the
// collection, watches it from there, and refetches only when the server says the
// resourceVersion it watches from is gone (410). Create it with New, start it with Run.
type Reflector struct {
	lw           cache.ListerWatcherWithContext
	store        cache.ReflectorStore
	expectedType reflect.Type
	expectedGVK  *schema.GroupVersionKind
	cfg          Config
	policy       policy
	watchList    bool // cfg.WatchList, unless the ListerWatcher cannot do it

	running atomic.Bool

	lastSyncMu sync.RWMutex
	lastSyncRV string

	lists, watches, relists410, resyncs, transientFailures atomic.Int64

	// Owned by the Run goroutine.
	resync            resyncSchedule
	warnedUnprotected bool
}

// Stats counts what a Reflector has done since it was created.
type Stats struct {
	// Lists counts initial-state fetches: one per paged LIST (however many pages it took)
	// or watch-list. A relist that falls back from the last RV to "" counts twice, and so
	// does a watch-list replaced by a LIST.
	Lists int64
	// Watches counts WATCH requests, watch-lists included.
	Watches int64
	// Relists410 counts the initial-state fetches that a 410 (Gone/Expired) caused.
	Relists410 int64
	// Resyncs counts calls to store.Resync.
	Resyncs int64
	// TransientFailures counts failures that a kretry transport would have absorbed:
	// 429s, 5xx, connection errors, and watches that broke before their timeout.
	TransientFailures int64
}

// New returns a Reflector that keeps store in step with what lw lists and watches.
// expectedType, when not nil, is an example of the objects to accept (for
// *unstructured.Unstructured with apiVersion and kind set, those must match too); others
// are logged and dropped. store is usually a cache.Store, cache.Indexer or an informer's
// queue; stores with client-go's optional Bookmark(resourceVersion string) error method
// (cache.ReflectorBookmarkStore from client-go v0.36 on) or cache.ResourceVersionUpdater
// are told about bookmarks and resourceVersion changes as with client-go's Reflector.
func New(lw cache.ListerWatcher, expectedType runtime.Object, store cache.ReflectorStore, cfg Config) *Reflector {
	cfg = cfg.withDefaults()
	r := &Reflector{
		lw:        cache.ToListerWatcherWithContext(lw),
		store:     store,
		cfg:       cfg,
		policy:    newPolicy(cfg),
		watchList: cfg.WatchList && supportsWatchList(lw),
		resync:    resyncSchedule{clock: cfg.Clock, period: cfg.ResyncPeriod},
	}
	if expectedType != nil {
		r.expectedType = reflect.TypeOf(expectedType)
		if u, ok := expectedType.(*unstructured.Unstructured); ok {
			if gvk := u.GroupVersionKind(); !gvk.Empty() {
				r.expectedGVK = &gvk
			}
		}
	}
	return r
}

// errRunning is returned by a second concurrent call to Run.
var errRunning = errors.New("reflector: Run is already running")

// Run keeps the store in step until ctx ends, then returns ctx.Err() promptly, even from
// the middle of a LIST, a watch or a backoff wait. It retries on its own whatever fails,
// so it returns no other error (but for a second call while one is running).
func (r *Reflector) Run(ctx context.Context) error {
	if !r.running.CompareAndSwap(false, true) {
		return errRunning
	}
	defer r.running.Store(false)
	defer r.resync.stop()

	logger := klog.FromContext(ctx)
	logger.V(3).Info("Starting reflector", "type", r.typeName(), "watchList", r.watchList)
	defer logger.V(3).Info("Stopping reflector", "type", r.typeName())

	s := initial(r.watchList)
	for {
		if err := r.sleep(ctx, s.delay); err != nil {
			return err
		}
		var o outcome
		switch s.step {
		case stepFetch:
			o = r.fetch(ctx, s)
		case stepWatch:
			o = r.watch(ctx, s)
		}
		if err := ctx.Err(); err != nil {
			o.stream.stop()
			return err
		}
		next := r.policy.next(s, o)
		r.observe(ctx, s, o, next)
		s = next
	}
}

// LastSyncResourceVersion is the resourceVersion the store was last synced to: that of the
// last fetch, event or bookmark. It is safe to call at any time.
func (r *Reflector) LastSyncResourceVersion() string {
	r.lastSyncMu.RLock()
	defer r.lastSyncMu.RUnlock()
	return r.lastSyncRV
}

// Stats returns what the Reflector has done so far. It is safe to call at any time.
func (r *Reflector) Stats() Stats {
	return Stats{
		Lists:             r.lists.Load(),
		Watches:           r.watches.Load(),
		Relists410:        r.relists410.Load(),
		Resyncs:           r.resyncs.Load(),
		TransientFailures: r.transientFailures.Load(),
	}
}

// synced records that the store now holds the collection at rv.
func (r *Reflector) synced(rv string) {
	r.lastSyncMu.Lock()
	r.lastSyncRV = rv
	r.lastSyncMu.Unlock()
	if u, ok := r.store.(cache.ResourceVersionUpdater); ok {
		u.UpdateResourceVersion(rv)
	}
}

// observe logs a step's outcome and counts it.
func (r *Reflector) observe(ctx context.Context, s state, o outcome, next state) {
	logger := klog.FromContext(ctx).WithValues("type", r.typeName())
	switch o.result {
	case gone:
		r.relists410.Add(1)
		logger.V(2).Info("Resource version is gone, relisting", "step", s.step, "rv", s.rv, "from", next.from, "wait", next.delay, "err", o.err)
	case unsupported:
		logger.Info("Watch-list is not supported here, using LIST from now on", "err", o.err)
	case listInstead:
		logger.Info("Watch-list did not deliver the initial state, using LIST this time", "err", o.err)
	case broke, failed:
		if !isTransient(o) {
			logger.Error(o.err, "Reflector step failed, backing off", "step", s.step, "wait", next.delay)
			return
		}
		r.transientFailures.Add(1)
		if !r.warnedUnprotected {
			r.warnedUnprotected = true
			logger.Info("The kretry transport is not absorbing transient failures (is it installed?); the reflector retries on its own",
				"step", s.step, "err", o.err)
		}
		logger.V(2).Info("Transient failure, backing off", "step", s.step, "rv", s.rv, "wait", next.delay, "err", o.err)
	}
}

// sleep waits d, resyncing the store when due, and returns early with ctx.Err().
func (r *Reflector) sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil || d <= 0 {
		return err
	}
	t := r.cfg.Clock.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-r.resync.C():
			r.resyncNow(ctx)
		case <-t.C():
			return nil
		}
	}
}

// await runs call on its own goroutine and waits for its result, resyncing the store when
// due. A ListerWatcher that ignores its context then cannot hold Run past a cancel; discard
// disposes of a result that arrives after Run stopped waiting for it.
func await[T any](ctx context.Context, r *Reflector, call func() T, discard func(T)) (T, error) {
	done := make(chan T, 1)
	go func() { done <- call() }()
	for {
		select {
		case v := <-done:
			return v, nil
		case <-r.resync.C():
			r.resyncNow(ctx)
		case <-ctx.Done():
			go func() { discard(<-done) }()
			var zero T
			return zero, ctx.Err()
		}
	}
}

// accepts reports whether obj is of the expected type, logging it when it is not.
func (r *Reflector) accepts(ctx context.Context, obj runtime.Object) bool {
	if r.expectedType != nil && reflect.TypeOf(obj) != r.expectedType {
		klog.FromContext(ctx).Error(nil, "Dropping object of unexpected type", "expected", r.expectedType, "actual", reflect.TypeOf(obj))
		return false
	}
	if r.expectedGVK != nil && obj.GetObjectKind().GroupVersionKind() != *r.expectedGVK {
		klog.FromContext(ctx).Error(nil, "Dropping object of unexpected kind", "expected", *r.expectedGVK, "actual", obj.GetObjectKind().GroupVersionKind())
		return false
	}
	return true
}

func (r *Reflector) typeName() string {
	switch {
	case r.expectedGVK != nil:
		return r.expectedGVK.String()
	case r.expectedType != nil:
		return r.expectedType.String()
	}
	return "<unspecified>"
}
