package reflector

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/pager"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// fetch is stepFetch: get the whole collection at s.from and Replace the store with it.
func (r *Reflector) fetch(ctx context.Context, s state) outcome {
	r.lists.Add(1)
	if s.byWatchList() {
		return r.fetchByWatchList(ctx, s.from)
	}
	return r.fetchByList(ctx, s.from)
}

// fetchByList LISTs page by page with client-go's pager, which falls back to one full LIST
// when a continue token expires.
func (r *Reflector) fetchByList(ctx context.Context, from string) outcome {
	opts := metav1.ListOptions{ResourceVersion: from}
	if isSpecific(from) {
		// Said out loud: with a limit and no match, a specific RV would mean Exact, which a
		// compacted RV fails; NotOlderThan is what a relist needs.
		opts.ResourceVersionMatch = metav1.ResourceVersionMatchNotOlderThan
	}
	p := pager.New(r.lw.ListWithContext)
	p.PageSize = r.cfg.PageSize

	type listed struct {
		list runtime.Object
		err  error
	}
	res, err := await(ctx, r, func() listed {
		list, _, err := p.ListWithAlloc(ctx, opts)
		return listed{list, err}
	}, func(listed) {})
	switch {
	case err != nil:
		return outcome{result: failed, err: err}
	case res.err != nil:
		return failure(res.err)
	}

	listMeta, err := meta.ListAccessor(res.list)
	if err != nil {
		return outcome{result: failed, err: fmt.Errorf("LIST returned %T, not a list: %w", res.list, err)}
	}
	objs, err := meta.ExtractListWithAlloc(res.list)
	if err != nil {
		return outcome{result: failed, err: fmt.Errorf("extracting LIST items: %w", err)}
	}
	items := make([]any, len(objs))
	for i, obj := range objs {
		items[i] = obj
	}
	return r.replace(items, listMeta.GetResourceVersion())
}

// errNoInitialEventsEnd: the server ended a watch-list at its timeout before saying the
// initial state was complete. That says the collection did not stream in time, not that
// the server does not do watch-lists (one that does not answers 422), so it costs one LIST.
var errNoInitialEventsEnd = errors.New("watch-list reached its timeout before the " + metav1.InitialEventsAnnotationKey + " bookmark")

// fetchByWatchList streams the initial state as ADDED events until the bookmark annotated
// k8s.io/initial-events-end, then Replaces the store at the bookmark's RV in one go. The
// open stream goes on to stepWatch.
func (r *Reflector) fetchByWatchList(ctx context.Context, from string) outcome {
	st, err := r.openWatch(ctx, metav1.ListOptions{
		ResourceVersion:      from,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		SendInitialEvents:    ptr.To(true),
	})
	if err != nil {
		o := failure(err)
		switch {
		case o.result != failed || ctx.Err() != nil || isTransient(o):
			// a 410, a cancel or a transient failure: as with any fetch
		case refusesWatchList(err):
			o.result = unsupported
		default:
			o.result = listInstead
		}
		return o
	}

	var initial initialEvents
	for {
		ev, ok, err := r.nextEvent(ctx, st)
		switch {
		case err != nil:
			st.stop()
			return outcome{result: failed, err: err}
		case !ok && st.endedEarly(r.cfg.Clock):
			st.stop()
			return outcome{result: broke, err: st.brokeError(r.cfg.Clock)}
		case !ok:
			st.stop()
			return outcome{result: listInstead, err: errNoInitialEventsEnd}
		case ev.Type == watch.Error:
			st.stop()
			return failure(errorEvent(ev))
		case !r.accepts(ctx, ev.Object):
			continue
		}
		if ev.Type != watch.Bookmark {
			if err := initial.apply(ev); err != nil {
				klog.FromContext(ctx).Error(err, "Dropping initial event", "event", ev.Type)
			}
			continue
		}
		m, err := meta.Accessor(ev.Object)
		if err != nil || m.GetAnnotations()[metav1.InitialEventsAnnotationKey] != "true" {
			continue // an ordinary bookmark: the initial state is not complete yet
		}
		o := r.replace(initial.list(), m.GetResourceVersion())
		if o.result != fetched {
			st.stop()
			return o
		}
		o.stream = st
		return o
	}
}

// replace swaps the store's contents for items at rv and restarts the resync schedule.
func (r *Reflector) replace(items []any, rv string) outcome {
	if err := r.store.Replace(items, rv); err != nil {
		return outcome{result: failed, err: fmt.Errorf("replacing the store: %w", err)}
	}
	r.synced(rv)
	r.resync.restart()
	return outcome{result: fetched, rv: rv}
}

// initialEvents collects a watch-list's initial state, in arrival order.
type initialEvents struct {
	index map[string]int // key → position in objs
	objs  []any          // nil where an object was deleted
}

func (c *initialEvents) apply(ev watch.Event) error {
	key, err := cache.MetaNamespaceKeyFunc(ev.Object)
	if err != nil {
		return err
	}
	if c.index == nil {
		c.index = map[string]int{}
	}
	i, seen := c.index[key]
	switch {
	case ev.Type == watch.Deleted && seen:
		c.objs[i] = nil
		delete(c.index, key)
	case ev.Type == watch.Deleted:
	case seen:
		c.objs[i] = ev.Object
	default:
		c.index[key] = len(c.objs)
		c.objs = append(c.objs, ev.Object)
	}
	return nil
}

func (c *initialEvents) list() []any {
	out := make([]any, 0, len(c.index))
	for _, obj := range c.objs {
		if obj != nil {
			out = append(out, obj)
		}
	}
	return out
}
