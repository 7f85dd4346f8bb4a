package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/kretry/kretry/internal/harness/demoserver"
	"github.com/kretry/kretry/internal/policy"
	"github.com/kretry/kretry/transport"
)

// options are the demo's flags.
type options struct {
	duration  time.Duration // how long the writer and the faults run
	settle    time.Duration // bound on the wait for the caches at the end
	objects   int
	faultRate float64
	seed      uint64
	// kubeconfig, when set, watches a real cluster (read-only, no faults) instead.
	kubeconfig string
	namespace  string
}

// The two informers under comparison, named by the User-Agent the server counts them by.
const (
	plainName  = "plain client-go"
	kretryName = "kretry"
)

// clientResult is one column of the final table.
type clientResult struct {
	name       string
	fetches    int64 // initial-state fetches: LISTs + watch-lists answered 200
	expired    int64 // 410 Expired answers the client got
	requests   int64
	bytes      int64
	events     int64 // notifications delivered to the informer's handlers
	faults     int64 // fault scenarios injected into this client
	faultKinds map[demoserver.FaultKind]int64
	retries    int64 // retries and resumes kretry made (kretry column only)
	consistent bool  // cache == server state after the settle wait
	settledIn  time.Duration
	recovery   recoveryStats
}

// result is what a run measured.
type result struct {
	clients []clientResult // plain, kretry
	real    bool           // against a real cluster
	settle  time.Duration  // the bound on the final wait
}

// informerUnderTest is one side of the comparison.
type informerUnderTest struct {
	name     string
	informer cache.SharedIndexInformer
	factory  informers.SharedInformerFactory
	events   atomic.Int64
	retries  atomic.Int64
	counter  *countingTransport // client-side counts, used against a real cluster
	recovery *recoveryTracker
}

// run runs the demo and returns what it measured; progress goes to out once a second.
func run(ctx context.Context, opts options, out io.Writer) (*result, error) {
	var (
		server   *demoserver.Server
		base     func(userAgent string) *rest.Config
		state    func(ctx context.Context) (map[string]demoserver.Object, error)
		trackers = map[string]*recoveryTracker{plainName: newRecoveryTracker(), kretryName: newRecoveryTracker()}
	)
	if opts.kubeconfig == "" {
		server = demoserver.Start(demoserver.Config{
			Objects:   opts.objects,
			Seed:      opts.seed,
			FaultRate: opts.faultRate,
			OnFault: func(f demoserver.Fault) {
				if t := trackers[f.Client]; t != nil {
					t.fault(f.At, f.ResourceVersion)
				}
			},
		})
		defer server.Close()
		opts.namespace = server.Namespace()
		base = server.RESTConfig
		state = func(context.Context) (map[string]demoserver.Object, error) {
			objects := map[string]demoserver.Object{}
			for name, obj := range server.State().Objects {
				objects[server.Namespace()+"/"+name] = obj
			}
			return objects, nil
		}
		fmt.Fprintf(out, "demo server %s: %d ConfigMaps in %q changing every 50ms, %.2g fault scenarios/s per client, seed %d\n",
			server.URL(), opts.objects, opts.namespace, opts.faultRate, opts.seed)
	} else {
		cfg, namespace, err := loadKubeconfig(opts.kubeconfig, opts.namespace)
		if err != nil {
			return nil, err
		}
		opts.namespace = namespace
		base = func(userAgent string) *rest.Config {
			c := rest.CopyConfig(cfg)
			c.UserAgent = userAgent
			return c
		}
		lister, err := kubernetes.NewForConfig(base("kretry-demo (state check)"))
		if err != nil {
			return nil, err
		}
		state = func(ctx context.Context) (map[string]demoserver.Object, error) {
			list, err := lister.CoreV1().ConfigMaps(namespace).List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			objects := make(map[string]demoserver.Object, len(list.Items))
			for i := range list.Items {
				objects[key(&list.Items[i])] = demoserver.ObjectOf(&list.Items[i])
			}
			return objects, nil
		}
		fmt.Fprintf(out, "watching ConfigMaps in %s of %s (read-only, no fault injection)\n", namespaceLabel(namespace), cfg.Host)
	}

	// The informers outlive an interrupted run until the settle wait is over.
	informerCtx, stopInformers := context.WithCancel(context.WithoutCancel(ctx))
	defer stopInformers()
	var sides []*informerUnderTest
	for _, name := range []string{plainName, kretryName} {
		side, err := startInformer(informerCtx, name, base(name), opts.namespace)
		if err != nil {
			return nil, err
		}
		side.recovery = trackers[name]
		sides = append(sides, side)
	}
	defer func() {
		stopInformers()
		for _, side := range sides {
			side.factory.Shutdown()
		}
	}()

	// The run: one progress line a second, recovery sampled in between.
	start := time.Now()
	end := start.Add(opts.duration)
	sample := time.NewTicker(10 * time.Millisecond)
	defer sample.Stop()
	nextLine := start.Add(time.Second)
	for time.Now().Before(end) && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case now := <-sample.C:
			for _, side := range sides {
				side.recovery.observe(now, side.informer.LastSyncResourceVersion())
			}
			if !now.Before(nextLine) {
				nextLine = nextLine.Add(time.Second)
				fmt.Fprintln(out, progressLine(now.Sub(start), server, sides))
			}
		}
	}

	// The ending: no more changes or faults; both caches get a bounded time to settle.
	if server != nil {
		server.StopFaults()
		server.StopWriter()
	}
	settled, consistent := settle(ctx, opts.settle, state, sides)

	res := &result{real: server == nil, settle: opts.settle}
	for i, side := range sides {
		c := clientResult{
			name:       side.name,
			events:     side.events.Load(),
			retries:    side.retries.Load(),
			consistent: consistent[i],
			settledIn:  settled[i],
			recovery:   side.recovery.stats(),
		}
		st := side.stats(server)
		c.fetches, c.expired = st.InitialStateFetches(), st.Expired
		c.requests, c.bytes, c.faults, c.faultKinds = st.Requests, st.BytesSent, st.FaultsInjected(), st.Faults
		res.clients = append(res.clients, c)
	}
	return res, nil
}

// startInformer starts one side: a SharedInformerFactory ConfigMap informer on cfg, with
// kretry's transport for the kretry side, and a counting transport below everything.
func startInformer(ctx context.Context, name string, cfg *rest.Config, namespace string) (*informerUnderTest, error) {
	side := &informerUnderTest{name: name, counter: &countingTransport{}}
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper { side.counter.next = next; return side.counter })
	if name == kretryName {
		cfg.Wrap(transport.Wrapper(transport.Config{OnRetry: func(policy.Retry) { side.retries.Add(1) }}))
	}
	clientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	side.factory = informers.NewSharedInformerFactoryWithOptions(clientset, 0, informers.WithNamespace(namespace))
	side.informer = side.factory.Core().V1().ConfigMaps().Informer()
	count := func(any) { side.events.Add(1) }
	if _, err := side.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    count,
		UpdateFunc: func(_, obj any) { count(obj) },
		DeleteFunc: count,
	}); err != nil {
		return nil, err
	}
	side.factory.Start(ctx.Done())
	return side, nil
}

// stats is what the demo server counted for side or, against a real cluster (server nil),
// what side's counting transport saw: its fetches as Lists, its requests and its bytes.
func (side *informerUnderTest) stats(server *demoserver.Server) demoserver.Stats {
	if server != nil {
		return server.Stats(side.name)
	}
	return demoserver.Stats{
		Lists:     side.counter.fetches.Load(),
		Requests:  side.counter.requests.Load(),
		BytesSent: side.counter.bytes.Load(),
	}
}

// settle waits, at most bound, until every side's cache equals the server's state, and
// returns how long each took and whether it got there. It goes on for the bound even when
// ctx has ended (an interrupted run still gets its table).
func settle(ctx context.Context, bound time.Duration, state func(context.Context) (map[string]demoserver.Object, error),
	sides []*informerUnderTest) (settled []time.Duration, consistent []bool) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bound)
	defer cancel()
	settled = make([]time.Duration, len(sides))
	consistent = make([]bool, len(sides))
	for remaining := len(sides); remaining > 0 && ctx.Err() == nil; {
		if want, err := state(ctx); err == nil {
			for i, side := range sides {
				if consistent[i] {
					continue
				}
				side.recovery.observe(time.Now(), side.informer.LastSyncResourceVersion())
				if side.informer.HasSynced() && equalState(cacheState(side.informer), want) {
					consistent[i], settled[i] = true, time.Since(start)
					remaining--
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
	return settled, consistent
}

// progressLine is the once-a-second status: per client, the full-state fetches, requests,
// faults, and how many changes its cache is behind the server (lag).
func progressLine(elapsed time.Duration, server *demoserver.Server, sides []*informerUnderTest) string {
	line := fmt.Sprintf("%4.0fs", elapsed.Seconds())
	var current uint64
	if server != nil {
		state := server.State()
		current, _ = strconv.ParseUint(state.ResourceVersion, 10, 64)
		line += fmt.Sprintf("  server rv %-6d %3d objects", current, len(state.Objects))
	}
	for _, side := range sides {
		st := side.stats(server)
		line += fmt.Sprintf("  | %s: %2d fetches %4d req", side.name, st.InitialStateFetches(), st.Requests)
		if server != nil {
			line += fmt.Sprintf(" %3d faults", st.FaultsInjected())
			lag := "-"
			if rv, err := strconv.ParseUint(side.informer.LastSyncResourceVersion(), 10, 64); err == nil {
				lag = strconv.FormatUint(current-min(rv, current), 10)
			}
			line += fmt.Sprintf(" lag %4s", lag)
		}
	}
	return line
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

// recoveryTracker measures, per fault, how long the client took to see the server's state
// as of the fault: the time until the informer's last synced RV reached the server's RV at
// the moment of the fault.
type recoveryTracker struct {
	mu        sync.Mutex
	pending   []pendingFault
	recovered []time.Duration
}

type pendingFault struct {
	at time.Time
	rv uint64
}

func newRecoveryTracker() *recoveryTracker { return &recoveryTracker{} }

func (t *recoveryTracker) fault(at time.Time, rv uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pending = append(t.pending, pendingFault{at, rv})
}

func (t *recoveryTracker) observe(now time.Time, lastSynced string) {
	rv, err := strconv.ParseUint(lastSynced, 10, 64)
	if err != nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	kept := t.pending[:0]
	for _, p := range t.pending {
		if rv >= p.rv {
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
