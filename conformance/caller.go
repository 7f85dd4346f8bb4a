package conformance

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/pager"
)

// quiet is how long a caller that has everything keeps listening, once the server has
// nothing left to send, for events it must not get (duplicates from a wrong splice).
const quiet = 20 * time.Millisecond

// observation is what the caller got.
type observation struct {
	// events are a RawWatch's events, in order.
	events []Event
	// ended: the watch's result channel closed.
	ended bool
	// err is the error the client-go call returned.
	err error
	// items are the LIST items (name and resourceVersion) the caller got.
	items []Event
	// notes are an Informer's handler notifications, in order.
	notes []notification
	// aborted: the server saw a violation and ended the run; timedOut: the run hit its
	// deadline before the caller was done.
	aborted, timedOut bool
}

// clientset builds a typed clientset on the replayed server through wrap, the way a user
// plugs a transport into a rest.Config.
func (r *replay) clientset(wrap func(http.RoundTripper) http.RoundTripper) (*kubernetes.Clientset, error) {
	cfg := &rest.Config{Host: baseURL, Transport: r.mock}
	// The recorded client asked for JSON ("application/json, */*"), for CBOR, or used
	// client-go's protobuf default; the caller asks the same.
	switch accept := r.file.Exchanges[0].Request.Header.Get("Accept"); {
	case prefersCBOR(accept):
		if err := allowCBOR(); err != nil {
			return nil, err
		}
		cfg.ContentType = "application/cbor"
	case !prefersProtobuf(accept):
		cfg.ContentType = "application/json"
	}
	if wrap != nil {
		cfg.Wrap(wrap)
	}
	return kubernetes.NewForConfig(cfg)
}

// listOptions decodes a recorded query into the ListOptions that produce it.
func listOptions(q url.Values) (metav1.ListOptions, error) {
	q = maps.Clone(q) // the recorded query is shared
	q.Del("timeout")
	q.Del("watch")
	var opts metav1.ListOptions
	err := scheme.ParameterCodec.DecodeParameters(q, corev1.SchemeGroupVersion, &opts)
	return opts, err
}

// call runs the scenario's caller against the replayed server until it is done, the server
// aborts, or ctx ends.
func (r *replay) call(ctx context.Context, cs *kubernetes.Clientset) observation {
	switch r.sc.Caller {
	case RawWatch:
		return r.rawWatch(ctx, cs)
	case Pager:
		return r.pagerList(ctx, cs)
	case List:
		return r.listEach(ctx, cs)
	case Informer:
		return r.informer(ctx, cs)
	case Create:
		return r.create(ctx, cs)
	}
	return observation{err: fmt.Errorf("unknown caller %v", r.sc.Caller)}
}

// rawWatch is a typed Watch read until the caller has every event it should get.
func (r *replay) rawWatch(ctx context.Context, cs *kubernetes.Clientset) observation {
	var obs observation
	exp := r.expected
	opts, err := listOptions(r.watch.query)
	if err != nil {
		obs.err = err
		return obs
	}
	w, err := cs.CoreV1().ConfigMaps(r.namespace).Watch(ctx, opts)
	if err != nil {
		obs.err = err
		return obs
	}
	defer w.Stop()
	results := w.ResultChan()
	for {
		aborted, done := r.aborted, ctx.Done()
		var quietEnd <-chan time.Time
		if !exp.ends && len(obs.events) >= len(exp.events) {
			// Everything is here: listen a little longer for what must not come.
			if !r.waitIdle(ctx) {
				obs.aborted = isClosed(r.aborted)
				obs.timedOut = !obs.aborted
				return obs
			}
			aborted, done, quietEnd = nil, nil, time.After(quiet)
		}
		select {
		case ev, ok := <-results:
			if !ok {
				obs.ended = true
				return obs
			}
			obs.events = append(obs.events, watchEvent(ev.Type, ev.Object))
		case <-quietEnd:
			return obs
		case <-aborted:
			obs.aborted = true
			return obs
		case <-done:
			obs.timedOut = true
			return obs
		}
	}
}

// watchEvent reduces a client-go watch event; an object the suite cannot read becomes an
// event that matches nothing.
func watchEvent[T ~string](typ T, obj runtime.Object) Event {
	ev, err := eventOf(string(typ), obj)
	if err != nil {
		return Event{Type: string(typ), Name: "<" + err.Error() + ">"}
	}
	return ev
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// pagerList lists through client-go's pager with the recorded page size.
func (r *replay) pagerList(ctx context.Context, cs *kubernetes.Clientset) observation {
	var obs observation
	opts, err := listOptions(r.lists[0].Request.Query())
	if err != nil {
		obs.err = err
		return obs
	}
	p := pager.New(pager.SimplePageFunc(func(opts metav1.ListOptions) (runtime.Object, error) {
		return cs.CoreV1().ConfigMaps(r.namespace).List(ctx, opts)
	}))
	p.PageSize = opts.Limit
	list, _, err := p.List(ctx, opts)
	obs.err = err
	if err == nil {
		obs.items, obs.err = itemsOf(list)
	}
	obs.aborted = isClosed(r.aborted)
	// A LIST that returned only when the run's deadline ended it hung: whatever it got.
	obs.timedOut = ctx.Err() != nil && !obs.aborted
	return obs
}

// listEach makes the recorded LISTs one after the other, each with its recorded options, and
// stops at the first error.
func (r *replay) listEach(ctx context.Context, cs *kubernetes.Clientset) observation {
	var obs observation
	for _, ex := range r.lists {
		opts, err := listOptions(ex.Request.Query())
		if err != nil {
			obs.err = err
			return obs
		}
		list, err := cs.CoreV1().ConfigMaps(r.namespace).List(ctx, opts)
		if err != nil {
			obs.err = err
			break
		}
		items, err := itemsOf(list)
		if err != nil {
			obs.err = err
			break
		}
		obs.items = append(obs.items, items...)
	}
	obs.aborted = isClosed(r.aborted)
	// A LIST that returned only when the run's deadline ended it hung: whatever it got.
	obs.timedOut = ctx.Err() != nil && !obs.aborted
	return obs
}

// itemsOf lists the items of a LIST result as name@resourceVersion.
func itemsOf(list runtime.Object) ([]Event, error) {
	var items []Event
	err := meta.EachListItem(list, func(obj runtime.Object) error {
		m, err := meta.Accessor(obj)
		if err != nil {
			return err
		}
		items = append(items, Event{Type: "ITEM", Name: m.GetName(), ResourceVersion: m.GetResourceVersion()})
		return nil
	})
	return items, err
}

// create POSTs one ConfigMap.
func (r *replay) create(ctx context.Context, cs *kubernetes.Clientset) observation {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "conformance"}, Data: map[string]string{"value": "v1"}}
	_, err := cs.CoreV1().ConfigMaps(r.namespace).Create(ctx, cm, metav1.CreateOptions{})
	return observation{err: err, aborted: isClosed(r.aborted)}
}

// informer runs a SharedIndexInformer until its handler has every notification it should
// get.
func (r *replay) informer(ctx context.Context, cs *kubernetes.Clientset) observation {
	var obs observation
	want := len(r.expectedNotes())
	var mu sync.Mutex
	arrived := make(chan struct{}, 1)
	note := func(typ string, obj any, initial bool) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		n := notification{Event: Event{Type: typ}, initial: initial}
		if m, err := meta.Accessor(obj); err == nil {
			n.Name, n.ResourceVersion = m.GetName(), m.GetResourceVersion()
		}
		mu.Lock()
		obs.notes = append(obs.notes, n)
		mu.Unlock()
		select {
		case arrived <- struct{}{}:
		default:
		}
	}
	var inf cache.SharedIndexInformer
	var start func(stop chan struct{})
	var shutdown func()
	if r.listStart() {
		inf = cache.NewSharedIndexInformer(r.listStartWatcher(ctx, cs), &corev1.ConfigMap{}, 0, cache.Indexers{})
		var wg sync.WaitGroup
		start = func(stop chan struct{}) {
			wg.Add(1)
			go func() { defer wg.Done(); inf.Run(stop) }()
		}
		shutdown = wg.Wait
	} else {
		factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(r.namespace))
		inf = factory.Core().V1().ConfigMaps().Informer()
		start, shutdown = func(stop chan struct{}) { factory.Start(stop) }, factory.Shutdown
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    func(obj any, initial bool) { note("ADDED", obj, initial) },
		UpdateFunc: func(_, obj any) { note("MODIFIED", obj, false) },
		DeleteFunc: func(obj any) { note("DELETED", obj, false) },
	}); err != nil {
		obs.err = err
		return obs
	}
	stop := make(chan struct{})
	start(stop)
	defer func() {
		close(stop)
		shutdown()
	}()
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(obs.notes)
	}
	for count() < want {
		select {
		case <-arrived:
		case <-r.aborted:
			obs.aborted = true
			return snapshot(&mu, obs)
		case <-ctx.Done():
			obs.timedOut = true
			return snapshot(&mu, obs)
		}
	}
	if !r.waitIdle(ctx) {
		obs.aborted = isClosed(r.aborted)
		obs.timedOut = !obs.aborted
	} else {
		select {
		case <-time.After(quiet):
		case <-r.aborted:
			obs.aborted = true
		}
	}
	return snapshot(&mu, obs)
}

func snapshot(mu *sync.Mutex, obs observation) observation {
	mu.Lock()
	defer mu.Unlock()
	obs.notes = append([]notification(nil), obs.notes...)
	return obs
}

// notification is one call of an informer's event handler: the event type it stands for
// (ADDED for OnAdd, MODIFIED for OnUpdate, DELETED for OnDelete) and the object.
type notification struct {
	Event
	// initial is OnAdd's isInInitialList.
	initial bool
}

// String is the compact form used in failure messages.
func (n notification) String() string {
	s := fmt.Sprintf("%s %s@%s", n.Type, n.Name, n.ResourceVersion)
	if n.initial {
		s += " (initial list)"
	}
	return s
}

// listStart reports whether the fixture records an informer that starts with a LIST (the
// pages, then a watch from the list's resourceVersion) rather than a streaming list.
func (r *replay) listStart() bool {
	return len(r.lists) > 0 && r.watch != nil && !r.watch.sendsInitial
}

// listStartWatcher is the ListerWatcher of an informer that starts with a LIST, paged as
// recorded. It tells client-go v0.35+ not to try a streaming list (v0.33 and v0.34 never do
// unless their WatchListClient gate is on), so that the informer starts with the pages
// client-go <= v0.34 and v0.35+ with WatchListClient=false send.
func (r *replay) listStartWatcher(ctx context.Context, cs *kubernetes.Clientset) cache.ListerWatcher {
	limit, _ := strconv.ParseInt(r.lists[0].Request.Query().Get("limit"), 10, 64)
	configMaps := cs.CoreV1().ConfigMaps(r.namespace)
	return listStartWatcher{&cache.ListWatch{
		ListFunc: func(opts metav1.ListOptions) (runtime.Object, error) {
			opts.Limit = limit // the reflector's pager asks for 500 a page
			return configMaps.List(ctx, opts)
		},
		WatchFunc: func(opts metav1.ListOptions) (watch.Interface, error) {
			return configMaps.Watch(ctx, opts)
		},
	}}
}

// listStartWatcher is a ListerWatcher that does not support the streaming list, the opt-out
// client-go's reflector honours from v0.35 on (watchlist.DoesClientNotSupportWatchListSemantics).
type listStartWatcher struct{ *cache.ListWatch }

// IsWatchListSemanticsUnSupported is client-go's opt-out of the streaming list.
func (listStartWatcher) IsWatchListSemanticsUnSupported() bool { return true }

// expectedNotes are the notifications an informer's handler gets from the recorded
// initial state (the LIST pages, or the streaming list's ADDED events): an add for each
// object, then one per later event of the watch.
func (r *replay) expectedNotes() []notification {
	var notes []notification
	if r.listStart() {
		items, _ := r.recordedItems() // newReplay checked that they decode
		for _, it := range items {
			notes = append(notes, notification{Event: Event{Type: "ADDED", Name: it.Name, ResourceVersion: it.ResourceVersion}, initial: true})
		}
	}
	for _, f := range r.watch.frames {
		switch f.event.Type {
		case "ADDED", "MODIFIED", "DELETED":
			notes = append(notes, notification{Event: f.event, initial: f.initial})
		}
	}
	return notes
}

// checkInformerStart makes sure the fixture can serve an informer: a LIST start (pages, then
// a watch from the list's resourceVersion) or a streaming list. The streaming list needs
// client-go's WatchListClient gate, on by default from client-go v0.35 (off by default in
// v0.33 and v0.34, whose informers start with a LIST): informerStartsHere.
func (r *replay) checkInformerStart() error {
	switch {
	case r.watch == nil:
		return fmt.Errorf("fixture %s: an informer needs a recorded watch", r.sc.Fixture)
	case r.listStart():
		if _, err := r.recordedItems(); err != nil {
			return fmt.Errorf("fixture %s: %w", r.sc.Fixture, err)
		}
	case !r.watch.sendsInitial:
		return fmt.Errorf("fixture %s: an informer starts with a LIST or a streaming list, and it records neither", r.sc.Fixture)
	}
	return nil
}

// informerStartsHere reports, before an informer scenario runs, whether this client-go's
// informer starts as the fixture records: a streaming list needs the WatchListClient gate.
func (r *replay) informerStartsHere() error {
	if r.sc.Caller == Informer && !r.listStart() && !clientfeatures.FeatureGates().Enabled(clientfeatures.WatchListClient) {
		return errSkip{WatchListOff}
	}
	return nil
}

// WatchListOff is the Result.Reason of an informer scenario on a streaming list skipped
// because client-go's WatchListClient gate is off (client-go v0.33 and v0.34 by default;
// KUBE_FEATURE_WatchListClient=true turns it on): such informers start with a LIST, which
// the informer-list scenarios cover.
const WatchListOff = "client-go's WatchListClient gate is off: its informers start with a LIST (the informer-list scenarios)"
