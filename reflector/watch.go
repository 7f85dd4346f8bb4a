package reflector

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"
)

// watch is stepWatch: WATCH from s.rv (or keep reading s.stream), apply every event to the
// store and move the RV with it, until the stream ends.
func (r *Reflector) watch(ctx context.Context, s state) outcome {
	st := s.stream
	if st == nil {
		var err error
		if st, err = r.openWatch(ctx, metav1.ListOptions{ResourceVersion: s.rv}); err != nil {
			return failure(err)
		}
	}
	defer st.stop()

	// A watch from "" or "0" starts with synthetic ADDED events in no RV order: only the
	// first other event says they are over and RVs can be trusted as resume points.
	trackRV := s.stream != nil || isSpecific(s.rv)
	seen := outcome{rv: s.rv} // what the stream delivered so far
	end := func(o outcome) outcome {
		o.rv, o.progressed, o.bookmarked = seen.rv, seen.progressed, seen.bookmarked
		return o
	}
	for {
		ev, ok, err := r.nextEvent(ctx, st)
		switch {
		case err != nil:
			return end(outcome{result: failed, err: err})
		case !ok && st.endedEarly(r.cfg.Clock):
			return end(outcome{result: broke, err: st.brokeError(r.cfg.Clock)})
		case !ok:
			return end(outcome{result: ended})
		case ev.Type == watch.Error:
			return end(failure(errorEvent(ev)))
		}
		if ev.Type != watch.Added {
			trackRV = true
		}
		eventRV, applied := r.apply(ctx, ev)
		switch {
		case ev.Type == watch.Bookmark:
			seen.bookmarked = true
		case applied:
			seen.progressed = true
		}
		if applied && trackRV && eventRV != "" {
			seen.rv = eventRV
			r.synced(eventRV)
		}
	}
}

// apply applies one watch event to the store and returns its RV; applied is false for an
// object the store must not see.
func (r *Reflector) apply(ctx context.Context, ev watch.Event) (rv string, applied bool) {
	logger := klog.FromContext(ctx)
	if !r.accepts(ctx, ev.Object) {
		return "", false
	}
	m, err := meta.Accessor(ev.Object)
	if err != nil {
		logger.Error(err, "Dropping watch event without object metadata", "event", ev.Type)
		return "", false
	}
	switch ev.Type {
	case watch.Added:
		err = r.store.Add(ev.Object)
	case watch.Modified:
		err = r.store.Update(ev.Object)
	case watch.Deleted:
		err = r.store.Delete(ev.Object)
	case watch.Bookmark:
		if b, ok := r.store.(bookmarkStore); ok {
			err = b.Bookmark(m.GetResourceVersion())
		}
	default:
		logger.Error(nil, "Dropping watch event of unknown type", "event", ev.Type)
		return "", false
	}
	if err != nil {
		logger.Error(err, "Store rejected a watch event", "event", ev.Type, "object", klog.KObj(m))
	}
	return m.GetResourceVersion(), true
}
