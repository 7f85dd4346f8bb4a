package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"reflect"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/kretry/kretry/internal/demoserver"
)

// options are the demo's flags.
type options struct {
	duration  time.Duration // how long the writer and the faults run
	settle    time.Duration // bound on the wait for the clients at the end
	objects   int
	faultRate float64
	rollouts  int           // waves of the rolling upgrade
	rollout   time.Duration // how long each wave answers 503
	throttle  time.Duration // how long a 429 burst lasts
	seed      uint64
	// kubeconfig, when set, watches a real cluster (read-only, no faults) instead.
	kubeconfig string
	namespace  string
	retryLog   io.Writer // with -v: every request on the wire and every kretry retry, as they happen
}

// faultMix is what each client's own schedule draws from, by weight: the faults of a
// real cluster, squeezed into a short run. The rollout and the compaction come on top, at
// fixed points of the run (see usage).
var faultMix = []struct {
	kind   demoserver.FaultKind
	weight int
	what   string
}{
	{demoserver.TornFrame, 4, "mid-event: load balancer idle timeout, NAT or node reset"},
	{demoserver.EarlyClose, 3, "the stream ends cleanly long before its timeout"},
	{demoserver.InternalErrorEvent, 2, `InternalError "etcdserver: leader changed"`},
	{demoserver.ThrottleBurst, 1, "the stream closes, then --throttle of 429 + Retry-After: 1\n" +
		"on every LIST and watch (API Priority and Fairness)"},
}

// faultKinds is faultMix as a schedule's list: each kind as often as its weight.
func faultKinds() []demoserver.FaultKind {
	var kinds []demoserver.FaultKind
	for _, f := range faultMix {
		for range f.weight {
			kinds = append(kinds, f.kind)
		}
	}
	return kinds
}

// maxExtension bounds the extension of a run whose informers have not all had their
// compaction when it ends (see run).
const maxExtension = 5 * time.Second

// schedule is when the faults for several clients come: the waves of the rolling
// upgrade, evenly spread, then the informers' compaction, in a run of n+2 equal parts.
func (o options) schedule() (rollouts []time.Duration, compaction time.Duration) {
	part := o.duration / time.Duration(o.rollouts+2)
	for i := 1; i <= o.rollouts; i++ {
		rollouts = append(rollouts, time.Duration(i)*part)
	}
	return rollouts, time.Duration(o.rollouts+1) * part
}

// clientResult is one column of the final table.
type clientResult struct {
	name        string
	raw, kretry bool
	fetches     int64 // initial-state fetches: LISTs + watch-lists answered 200
	fetchBytes  int64 // what they cost
	watchEnds   int   // informer: watch streams that ended under client-go
	endedAt     time.Duration
	ended       bool // raw: its channel closed before the demo stopped it
	missed      int  // changes never delivered; -1 unknown (real cluster)
	outOfOrder  int  // raw: events at or below an RV already seen
	errorEvents int  // raw: ERROR events
	recovery    recoveryStats
	consistent  bool // cache == server (informer), caught up with the server (raw)
	settledIn   time.Duration
	expired     int64 // 410 Expired answers the client got
	requests    int64
	rejected    int64 // 429 and 503 answers
	bytes       int64
	retries     int64 // retries and resumes kretry made (kretry columns only)
	faults      int64
	faultKinds  map[demoserver.FaultKind]int64
}

// result is what a run measured.
type result struct {
	clients  []clientResult // in sideNames order
	real     bool           // against a real cluster
	settle   time.Duration  // the bound on the final wait
	seed     uint64
	duration time.Duration
	changes  int // writes during the run; 0 for a real cluster
	timeline *timeline
}

// client returns the column of that name.
func (r *result) client(name string) clientResult {
	for _, c := range r.clients {
		if c.name == name {
			return c
		}
	}
	return clientResult{}
}

// target is what the run talks to: the demo server, or a real cluster.
type target struct {
	server    *demoserver.Server // nil for a real cluster
	namespace string
	config    func(userAgent string) *rest.Config
	state     func(ctx context.Context) (map[string]demoserver.Object, error)
}

// run runs the demo and returns what it measured; progress goes to out once a second.
func run(ctx context.Context, opts options, out io.Writer) (*result, error) {
	tl := newTimeline(sideNames)
	trackers := map[string]*recoveryTracker{}
	for _, name := range sideNames {
		trackers[name] = &recoveryTracker{}
	}
	tgt, err := openTarget(opts, out, func(f demoserver.Fault) {
		if opts.retryLog != nil {
			fmt.Fprintf(opts.retryLog, "%s %s: fault: %s\n", f.At.Format("15:04:05.000"), f.Client, f.Kind)
		}
		if t := trackers[f.Client]; t != nil {
			t.fault(f.At, f.ResourceVersion)
			tl.fault(f.At, f.Client, f.Kind.String())
		}
	})
	if err != nil {
		return nil, err
	}
	if tgt.server != nil {
		defer tgt.server.Close()
	}

	// The clients outlive an interrupted run until the settle wait is over.
	clientCtx, stopClients := context.WithCancel(context.WithoutCancel(ctx))
	defer stopClients()
	var sides []*side
	defer func() {
		stopClients()
		for _, s := range sides {
			s.stop()
		}
	}()
	for _, name := range sideNames {
		start := startInformer
		if name == stockRawWatch || name == kretryRawWatch {
			start = startRawWatch
		}
		s, err := start(clientCtx, name, tgt.config(name), tgt.namespace, opts.retryLog)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		s.recovery = trackers[name]
		sides = append(sides, s)
	}
	if err := waitSynced(ctx, sides); err != nil {
		return nil, err
	}

	// Every client holds the same state; now the writer and the faults begin.
	var baseline uint64
	if tgt.server != nil {
		baseline = tgt.server.Begin()
	}
	start := time.Now()
	tl.begin(start)
	end := start.Add(opts.duration)
	rollouts, compactionAt := opts.schedule()
	compaction := start.Add(compactionAt)
	var compactionRV uint64
	wave := 0                            // rollout waves so far
	compactPending := map[*side]uint64{} // informers not compacted yet: the RV each was caught up at
	sample := time.NewTicker(100 * time.Millisecond)
	defer sample.Stop()
	nextLine := start.Add(time.Second)
	// An informer still recovering from a fault when the run ends has not had its
	// compaction yet: the writer goes on, without new faults, until each has had it,
	// for at most maxExtension.
	extendUntil := end.Add(maxExtension)
	extended := false
	compacting := func() bool { return tgt.server != nil && (!compaction.IsZero() || len(compactPending) > 0) }
	for now := start; ctx.Err() == nil && (now.Before(end) || compacting() && now.Before(extendUntil)); {
		if !extended && !now.Before(end) {
			extended = true
			tgt.server.StopFaults()
			fmt.Fprintf(out, "  %s: faults stop; the writer goes on until every informer has had its compaction (at most %s)\n",
				opts.duration, extendUntil.Sub(end))
		}
		select {
		case <-ctx.Done():
		case now = <-sample.C:
			if tgt.server != nil && wave < len(rollouts) && now.Sub(start) >= rollouts[wave] {
				wave++
				tgt.server.Rollout(opts.rollout)
				tl.span(now, now.Add(opts.rollout), fmt.Sprintf("rollout %d: 503s", wave))
			}
			if tgt.server != nil && !compaction.IsZero() && !now.Before(compaction) {
				compaction = time.Time{}
				compactionRV, _ = strconv.ParseUint(tgt.server.State().ResourceVersion, 10, 64)
				for _, s := range sides {
					if !s.raw {
						compactPending[s] = 0
					}
				}
			}
			// Each informer is compacted once it has caught up with the server as of the
			// compaction's moment and is getting changes on a live watch again, not while
			// it recovers from an earlier fault: the compaction would hit the first frame
			// of a new watch, which client-go takes for a "very short watch", an error.
			for s, seen := range compactPending {
				rv, ok := s.lastRV()
				switch {
				case !ok || rv < compactionRV:
				case seen != 0 && rv > seen:
					tgt.server.InjectFault(s.name, demoserver.Compaction)
					delete(compactPending, s)
				default:
					compactPending[s] = rv
				}
			}
			observe(now, tgt.server, 0, sides, tl)
			if !now.Before(nextLine) {
				nextLine = nextLine.Add(time.Second)
				fmt.Fprintln(out, progressLine(now.Sub(start), tgt.server, sides))
			}
		}
	}

	// The ending: no more changes or faults; every client gets a bounded time to settle.
	tl.stop(time.Now())
	var changes []uint64
	if tgt.server != nil {
		tgt.server.StopFaults()
		tgt.server.StopWriter()
		for _, ch := range tgt.server.ChangesAfter(baseline) {
			changes = append(changes, ch.ResourceVersion)
		}
	}
	settled, consistent := settle(ctx, opts.settle, tgt, sides, tl)

	res := &result{real: tgt.server == nil, settle: opts.settle, seed: opts.seed, duration: opts.duration, changes: len(changes), timeline: tl}
	for i, s := range sides {
		c := measure(s, tgt.server, start, changes, consistent[i], settled[i])
		if at, ended := s.ended(); ended {
			text := "channel closed"
			if c.missed >= 0 {
				text += fmt.Sprintf(": %d of %d changes missed", c.missed, len(changes))
			}
			tl.note(at, s.name, text)
		}
		res.clients = append(res.clients, c)
	}
	tl.end(time.Now())
	return res, nil
}

// openTarget starts the demo server (held until Begin), or connects to a real cluster.
func openTarget(opts options, out io.Writer, onFault func(demoserver.Fault)) (*target, error) {
	if opts.kubeconfig == "" {
		server := demoserver.Start(demoserver.Config{
			Objects:       opts.objects,
			Seed:          opts.seed,
			FaultRate:     opts.faultRate,
			FaultKinds:    faultKinds(),
			ThrottleBurst: opts.throttle,
			Hold:          true,
			OnFault:       onFault,
		})
		rollouts, compaction := opts.schedule()
		fmt.Fprintf(out, "demo server %s: %d ConfigMaps changing every 50ms; per client %.2g faults/s, seed %d; rollout waves at %v, compaction at %s\n",
			server.URL(), opts.objects, opts.faultRate, opts.seed, rollouts, compaction)
		return &target{
			server:    server,
			namespace: server.Namespace(),
			config:    server.RESTConfig,
			state: func(context.Context) (map[string]demoserver.Object, error) {
				objects := map[string]demoserver.Object{}
				for name, obj := range server.State().Objects {
					objects[server.Namespace()+"/"+name] = obj
				}
				return objects, nil
			},
		}, nil
	}
	cfg, namespace, err := loadKubeconfig(opts.kubeconfig, opts.namespace)
	if err != nil {
		return nil, err
	}
	config := func(userAgent string) *rest.Config {
		c := rest.CopyConfig(cfg)
		c.UserAgent = userAgent
		return c
	}
	lister, err := kubernetes.NewForConfig(config("kretry-demo (state check)"))
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "watching ConfigMaps in %s of %s (read-only, no fault injection)\n", namespaceLabel(namespace), cfg.Host)
	return &target{
		namespace: namespace,
		config:    config,
		state: func(ctx context.Context) (map[string]demoserver.Object, error) {
			list, err := lister.CoreV1().ConfigMaps(namespace).List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			objects := make(map[string]demoserver.Object, len(list.Items))
			for i := range list.Items {
				objects[key(&list.Items[i])] = demoserver.ObjectOf(&list.Items[i])
			}
			return objects, nil
		},
	}, nil
}

// waitSynced waits until every side holds its initial state.
func waitSynced(ctx context.Context, sides []*side) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for _, s := range sides {
		if s.raw {
			continue
		}
		if !cache.WaitForCacheSync(ctx.Done(), s.informer.HasSynced) {
			return fmt.Errorf("%s: no initial state within a minute", s.name)
		}
	}
	return nil
}

// observe samples every side: recovery from its faults and, for the timeline, its
// requests, fetches and lag behind the server; final is the server's last RV once the
// writer has stopped, else 0.
func observe(now time.Time, server *demoserver.Server, final uint64, sides []*side, tl *timeline) {
	var current uint64
	if server != nil {
		current, _ = strconv.ParseUint(server.State().ResourceVersion, 10, 64)
	}
	point := make([]clientPoint, len(sides))
	for i, s := range sides {
		st := s.stats(server)
		point[i] = clientPoint{Requests: st.Requests, Fetches: st.InitialStateFetches(), Lag: -1}
		rv, ok := s.lastRV()
		if !ok {
			continue
		}
		s.recovery.observe(now, rv, final)
		if _, ended := s.ended(); server != nil && !ended {
			point[i].Lag = int64(current - min(rv, current))
		}
	}
	tl.sample(now, point)
}

// stats is what the demo server counted for s or, against a real cluster (server nil),
// what its wire counter saw.
func (s *side) stats(server *demoserver.Server) demoserver.Stats {
	if server != nil {
		return server.Stats(s.name)
	}
	return demoserver.Stats{
		Lists:      s.wire.fetches.Load(),
		Requests:   s.wire.requests.Load(),
		BytesSent:  s.wire.bytes.Load(),
		FetchBytes: s.wire.fetchBytes.Load(),
	}
}

// settle waits, at most bound, until every informer's cache equals the server's state and
// every raw watcher that is still open has seen the server's last change; it returns how
// long each took and whether it got there. It goes on for the bound even when ctx has
// ended (an interrupted run still gets its table).
func settle(ctx context.Context, bound time.Duration, tgt *target, sides []*side, tl *timeline) (settled []time.Duration, consistent []bool) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bound)
	defer cancel()
	settled = make([]time.Duration, len(sides))
	consistent = make([]bool, len(sides))
	var final uint64
	if tgt.server != nil {
		final, _ = strconv.ParseUint(tgt.server.State().ResourceVersion, 10, 64)
	}
	done := make([]bool, len(sides))
	for remaining := len(sides); ctx.Err() == nil && remaining > 0; {
		want, err := tgt.state(ctx)
		now := time.Now()
		observe(now, tgt.server, final, sides, tl)
		for i, s := range sides {
			if done[i] {
				continue
			}
			switch _, ended := s.ended(); {
			case s.raw && ended:
				done[i] = true // it cannot catch up
			case s.raw:
				rv, _ := s.lastRV()
				consistent[i] = tgt.server == nil || rv >= final
			default:
				consistent[i] = err == nil && s.informer.HasSynced() && equalState(cacheState(s.informer), want)
			}
			if consistent[i] {
				done[i], settled[i] = true, now.Sub(start)
			}
			if done[i] {
				remaining--
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
	return settled, consistent
}

// measure fills a column of the table.
func measure(s *side, server *demoserver.Server, start time.Time, changes []uint64, consistent bool, settledIn time.Duration) clientResult {
	st := s.stats(server)
	c := clientResult{
		name:       s.name,
		raw:        s.raw,
		kretry:     s.kretry,
		fetches:    st.InitialStateFetches(),
		fetchBytes: st.FetchBytes,
		watchEnds:  s.ends.count(),
		missed:     -1,
		recovery:   s.recovery.stats(),
		consistent: consistent,
		settledIn:  settledIn,
		expired:    st.Expired,
		requests:   st.Requests,
		rejected:   st.Rejected,
		bytes:      st.BytesSent,
		retries:    s.retries.Load(),
		faults:     st.FaultsInjected(),
		faultKinds: st.Faults,
	}
	if at, ended := s.ended(); ended {
		c.ended, c.endedAt = true, at.Sub(start)
	}
	if server != nil {
		c.missed = s.seen.missed(changes)
	}
	s.seen.mu.Lock()
	c.outOfOrder, c.errorEvents = s.seen.outOfOrder, s.seen.errorEvents
	s.seen.mu.Unlock()
	return c
}

// progressLine is the once-a-second status: per client, its initial-state fetches and how
// many changes it is behind the server (lag), or when a raw watch ended.
func progressLine(elapsed time.Duration, server *demoserver.Server, sides []*side) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%3.0fs", elapsed.Seconds())
	var current uint64
	if server != nil {
		current, _ = strconv.ParseUint(server.State().ResourceVersion, 10, 64)
		fmt.Fprintf(&b, " rv %-5d", current)
	}
	for _, s := range sides {
		st := s.stats(server)
		fmt.Fprintf(&b, " | %s: %d fetch", s.name, st.InitialStateFetches())
		if at, ended := s.ended(); ended {
			fmt.Fprintf(&b, ", ENDED %.1fs ago", time.Since(at).Seconds())
			continue
		}
		if rv, ok := s.lastRV(); ok && server != nil {
			fmt.Fprintf(&b, ", lag %d", current-min(rv, current))
		}
	}
	return b.String()
}

// cacheState is an informer's cache in the form the server state is kept.
func cacheState(informer cache.SharedIndexInformer) map[string]demoserver.Object {
	objects := map[string]demoserver.Object{}
	for _, obj := range informer.GetStore().List() {
		if cm, ok := obj.(*corev1.ConfigMap); ok {
			objects[key(cm)] = demoserver.ObjectOf(cm)
		}
	}
	return objects
}

// key names an object in the server state and the caches alike.
func key(cm *corev1.ConfigMap) string { return cm.Namespace + "/" + cm.Name }

func equalState(a, b map[string]demoserver.Object) bool {
	return maps.EqualFunc(a, b, func(x, y demoserver.Object) bool {
		return x.ResourceVersion == y.ResourceVersion && reflect.DeepEqual(x.Data, y.Data)
	})
}
