//go:build e2e

package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kretry/kretry/internal/harness/apiserver"
	"github.com/kretry/kretry/internal/harness/cmwriter"
	"github.com/kretry/kretry/internal/harness/faultproxy"
	"github.com/kretry/kretry/internal/report"
	"github.com/kretry/kretry/transport"
)

// Knobs of TestSoak (make soak sets them).
// The soak runs soakWarmup, then the length asked for, which is the span judged for leaks.
const (
	soakEnv     = "KRETRY_SOAK"      // how long: a Go duration ("10m"); unset skips the soak
	soakPlotEnv = "KRETRY_SOAK_PLOT" // where the PNG of the samples goes; unset: none
	soakJSONEnv = "KRETRY_SOAK_JSON" // where the samples go as JSON; unset: .apiserver/soak.json
)

// The soak's shape: per namespace a writer, informers and raw watchers, all through kretry.
const (
	soakNamespaces         = 5
	soakInformersPerNS     = 5 // 3 JSON, 2 protobuf
	soakWatchersPerNS      = 6
	soakSampleEvery        = 10 * time.Second
	soakWriteEvery         = 200 * time.Millisecond // per namespace: 25 changes/s in all
	soakWatchTimeout       = 300                    // seconds; a watch that reaches it is renewed
	soakCutMin, soakCutMax = 300 * time.Millisecond, 2500 * time.Millisecond
	// soakWarmup runs before the judged span, faults on. It outlasts client-go's
	// IdleConnTimeout (90 s): net/http keeps an HTTP/2 connection in its idle list after the
	// connection died, until that timeout (it never marks an HTTP/2 connection broken), so
	// with every connection cut every 1.4 s the heap holds the last 90 s of dead connections,
	// ~25 KiB each. That climbs for 90 s, then is flat.
	soakWarmup = 100 * time.Second
	// soakDeadlineSlack is how long before its timeoutSeconds a raw watch may end as asked: the
	// last second, plus a retry wait that would not fit (a few seconds under these faults).
	soakDeadlineSlack = 10 * time.Second
)

// soakSample is one sample of the test process (clients, fault proxy and injector included).
type soakSample struct {
	At         float64 `json:"at"`          // seconds since the soak began
	RSS        int64   `json:"rss"`         // bytes
	Heap       int64   `json:"heap"`        // live Go heap after a GC, bytes
	Goroutines int     `json:"goroutines"`  //
	FDs        int     `json:"fds"`         // open file descriptors
	Sockets    int     `json:"sockets"`     // of which sockets
	ProxyConns int     `json:"proxy_conns"` // connections open through the fault proxy
}

// TestSoak: kretry under a long run of faults. 25 informers (JSON and protobuf) and 30 raw
// watchers, all through kretry, on five namespaces with a writer each (25 changes/s), reach
// kube-apiserver through the TCP fault proxy, which cuts every connection at random intervals
// of 0.3-2.5 s, and the HTTP injector behind it, which ends a JSON watch with an ERROR 500
// event every 1-5 s. Every 10 s it samples the process: RSS, live Go heap, goroutines, open
// file descriptors, sockets and connections through the proxy. It fails on
//   - a leak: a series whose median over the last third of the run (after a warm-up of 100 s,
//     see soakWarmup) is above its median over the first third by more than a noise floor (see
//     leakVerdicts); one high sample, or a step that falls back, is not a leak;
//   - a raw watcher whose events are missed, repeated or out of order (resourceVersions
//     increasing, every ConfigMap's gen +1 per MODIFIED), that ends early or sees an ERROR;
//   - an informer that fetched its initial state more than once, whose handlers saw an update
//     not one generation on, or whose cache at the end differs from a consistent LIST.
//
// KRETRY_SOAK=10m (make soak) sets the length; KRETRY_SOAK_PLOT=file.png draws the samples.
func TestSoak(t *testing.T) {
	length := os.Getenv(soakEnv)
	if length == "" {
		t.Skipf("%s unset (make soak runs it)", soakEnv)
	}
	duration, err := time.ParseDuration(length)
	if err != nil || duration < time.Minute {
		t.Fatalf("%s=%q: want a duration of a minute or more", soakEnv, length)
	}
	sharedCluster(t)
	ctx := context.Background()
	faults := newAPIFaults(t, serverA)
	proxy, err := faultproxy.New(22, faults.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })

	began := time.Now()
	rng := rand.New(rand.NewPCG(22, 22))
	var (
		namespaces []string
		writers    []*cmwriter.Writer
		informers  []*soakInformer
		watchers   []*soakWatcher
	)
	for i := range soakNamespaces {
		ns := namespace(t, serverA, fmt.Sprintf("soak%d", i), 10)
		namespaces = append(namespaces, ns)
		writers = append(writers, startWriter(t, serverA, ns, uint64(100+i), soakWriteEvery))
		for j := range soakInformersPerNS {
			cfg := ownConnections(cluster.ConfigFor(proxy.Addr(), apiserver.Admin))
			withContentType(cfg, j >= 3)
			informers = append(informers, startSoakInformer(t, newClientOf(cfg, true), ns))
		}
		for range soakWatchersPerNS {
			cfg := ownConnections(cluster.ConfigFor(proxy.Addr(), apiserver.Admin))
			withContentType(cfg, false) // the injector's ERROR events go into JSON streams
			giveUps := &kretryLog{began: began}
			c := newClientWith(cfg, &transport.Config{Observer: giveUps})
			sw, err := startSoakWatcher(ctx, t, began, ns, c.kube().CoreV1().ConfigMaps(ns), giveUps)
			if err != nil {
				t.Fatal(err)
			}
			watchers = append(watchers, sw)
		}
	}

	// Faults until the end: cuts, ERROR 500 events.
	faultsDone := make(chan struct{})
	stopFaults := make(chan struct{})
	var cuts, injected int
	go func() {
		defer close(faultsDone)
		nextCut := time.After(soakCutMin + time.Duration(rng.Int64N(int64(soakCutMax-soakCutMin))))
		nextError := time.After(time.Second + time.Duration(rng.Int64N(int64(4*time.Second))))
		for {
			select {
			case <-stopFaults:
				return
			case <-nextCut:
				proxy.CutAll()
				cuts++
				nextCut = time.After(soakCutMin + time.Duration(rng.Int64N(int64(soakCutMax-soakCutMin))))
			case <-nextError:
				faults.InternalError()
				injected++
				nextError = time.After(time.Second + time.Duration(rng.Int64N(int64(4*time.Second))))
			}
		}
	}()

	var samples []soakSample
	tick := time.NewTicker(soakSampleEvery)
	for end := began.Add(soakWarmup + duration); time.Now().Before(end); {
		<-tick.C
		s := sampleProcess(time.Since(began), proxy.Open())
		samples = append(samples, s)
		t.Logf("soak %v: rss %s heap %s goroutines %d fds %d sockets %d proxy conns %d", time.Duration(s.At*float64(time.Second)).Round(time.Second),
			report.Bytes(s.RSS), report.Bytes(s.Heap), s.Goroutines, s.FDs, s.Sockets, s.ProxyConns)
	}
	tick.Stop()
	close(stopFaults)
	<-faultsDone
	for _, w := range writers {
		w.Stop()
	}

	// Correctness at the end: every cache and every watcher's replayed state == the server's.
	finals := map[string]state{}
	for _, ns := range namespaces {
		if finals[ns], err = serverState(ctx, serverA, ns); err != nil {
			t.Fatal(err)
		}
	}
	for _, inf := range informers {
		ns := inf.ns
		if _, err := convergeTo(ctx, inf.informer, func(context.Context) (state, error) { return finals[ns], nil }, 30*time.Second); err != nil {
			t.Errorf("informer on %s: %v", ns, err)
		}
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if !slices.ContainsFunc(watchers, func(w *soakWatcher) bool { return fmt.Sprint(w.current()) != fmt.Sprint(finals[w.ns]) }) {
			break
		}
	}
	var events, renewals int
	for i, w := range watchers {
		w.stopAndWait()
		r := w.result()
		events += r.events
		renewals += r.renewals
		if got := w.current(); fmt.Sprint(got) != fmt.Sprint(finals[w.ns]) {
			t.Errorf("raw watcher %d on %s: replayed state != server:\nreplayed %v\nserver   %v", i, w.ns, got, finals[w.ns])
		}
		for _, p := range r.problems {
			t.Errorf("raw watcher %d on %s: %s", i, w.ns, p)
		}
	}
	var fetches []int
	for i, inf := range informers {
		inf.informer.close()
		n := inf.client.caller.snapshot().InitialFetches()
		fetches = append(fetches, n)
		if n != 1 {
			t.Errorf("informer %d on %s fetched its initial state %d times, want 1", i, inf.ns, n)
		}
		for _, p := range inf.problems() {
			t.Errorf("informer %d on %s: %s", i, inf.ns, p)
		}
	}

	verdicts := leakVerdicts(samples, soakWarmup)
	writeHeapProfile(t)
	var writes, fails int
	for _, w := range writers {
		n, f, _ := w.Stats()
		writes, fails = writes+n, fails+f
	}
	summary := fmt.Sprintf("soak %v after a warm-up of %v: %d informers (%d initial-state fetches in all), %d raw watchers (%d events, %d renewals at timeoutSeconds=%d), "+
		"%d writes (%d failed), %d cuts (all connections each), %d ERROR 500 injected; faults every %v-%v",
		duration, soakWarmup, len(informers), sum(fetches), len(watchers), events, renewals, soakWatchTimeout, writes, fails, cuts, faults.counts().InternalErrors,
		soakCutMin, soakCutMax)
	t.Log(summary)
	t.Logf("at the injector: %v; %d injections asked", faults.counts(), injected)
	var table strings.Builder
	table.WriteString(summary + "\n")
	for _, v := range verdicts {
		table.WriteString(v.String() + "\n")
		if v.Leak {
			t.Errorf("leak: %s", v)
		}
	}
	t.Log("\n" + table.String())
	writeSoakFiles(t, samples, table.String(), duration)
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// sampleProcess samples this process.
func sampleProcess(at time.Duration, proxyConns int) soakSample {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s := soakSample{At: at.Seconds(), Heap: int64(ms.HeapAlloc), Goroutines: runtime.NumGoroutine(), ProxyConns: proxyConns}
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 1 {
			pages, _ := strconv.ParseInt(f[1], 10, 64)
			s.RSS = pages * int64(os.Getpagesize())
		}
	}
	if entries, err := os.ReadDir("/proc/self/fd"); err == nil {
		s.FDs = len(entries)
		for _, e := range entries {
			if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && strings.HasPrefix(target, "socket:") {
				s.Sockets++
			}
		}
	}
	return s
}

// leakVerdict is the trend of one sampled series.
type leakVerdict struct {
	Series        string
	First, Last   float64 // medians of the first and last third after the warm-up
	Floor         float64 // the growth allowed as noise
	Leak          bool
	Unit          string
	Samples, Kept int
}

func (v leakVerdict) String() string {
	f := func(x float64) string {
		if v.Unit == "bytes" {
			return report.Bytes(int64(x))
		}
		return strconv.FormatFloat(x, 'f', 0, 64)
	}
	verdict := "no leak"
	if v.Leak {
		verdict = "LEAK"
	}
	return fmt.Sprintf("%-12s first third %10s  last third %10s  growth %10s  (noise floor %s)  %s",
		v.Series, f(v.First), f(v.Last), f(v.Last-v.First), f(v.Floor), verdict)
}

// leakVerdicts decides, per series, whether it grew over the run. The samples of the warm-up
// (caches fill, connections open, net/http's idle list fills with the dead connections of the
// last 90 s) are dropped; the rest is cut in thirds and the median of the last third compared
// with the median of the first. Medians ignore a few high samples (a GC late, a burst of
// resumes right at a sample); thirds make it a trend over the run, not a last-moment blip.
// Growth is a leak when it exceeds the noise floor: a fraction of the first median and an
// absolute minimum per series (a 2-minute run of 55 watches moves goroutines by a few and the
// heap by a few MiB). A leak of one goroutine, descriptor or 25 KiB buffer per cut is hundreds
// per minute here: far above every floor.
func leakVerdicts(samples []soakSample, warmup time.Duration) []leakVerdict {
	var kept []soakSample
	for _, s := range samples {
		if s.At > warmup.Seconds() {
			kept = append(kept, s)
		}
	}
	series := []struct {
		name     string
		unit     string
		value    func(soakSample) float64
		fraction float64
		minimum  float64
	}{
		{"rss", "bytes", func(s soakSample) float64 { return float64(s.RSS) }, 0.25, 32 << 20},
		{"heap", "bytes", func(s soakSample) float64 { return float64(s.Heap) }, 0.25, 8 << 20},
		{"goroutines", "", func(s soakSample) float64 { return float64(s.Goroutines) }, 0.10, 20},
		{"fds", "", func(s soakSample) float64 { return float64(s.FDs) }, 0.10, 10},
		{"sockets", "", func(s soakSample) float64 { return float64(s.Sockets) }, 0.10, 10},
		{"proxy conns", "", func(s soakSample) float64 { return float64(s.ProxyConns) }, 0.10, 10},
	}
	var out []leakVerdict
	third := len(kept) / 3
	for _, sr := range series {
		v := leakVerdict{Series: sr.name, Unit: sr.unit, Samples: len(samples), Kept: len(kept)}
		if third == 0 {
			out = append(out, v)
			continue
		}
		var first, last []float64
		for _, s := range kept[:third] {
			first = append(first, sr.value(s))
		}
		for _, s := range kept[len(kept)-third:] {
			last = append(last, sr.value(s))
		}
		v.First, v.Last = median(first), median(last)
		v.Floor = max(sr.minimum, sr.fraction*v.First)
		v.Leak = v.Last-v.First > v.Floor
		out = append(out, v)
	}
	return out
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// writeHeapProfile writes the live heap at the end to .apiserver/soak-heap.pprof, for `go tool
// pprof` when the heap grew.
func writeHeapProfile(t *testing.T) {
	root, _ := os.Getwd()
	path := filepath.Join(filepath.Dir(root), ".apiserver", "soak-heap.pprof")
	f, err := os.Create(path)
	if err != nil {
		t.Logf("heap profile: %v", err)
		return
	}
	defer f.Close()
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		t.Logf("heap profile: %v", err)
	}
}

// writeSoakFiles writes the samples as JSON (with the verdict table) and, if asked, the PNG.
func writeSoakFiles(t *testing.T, samples []soakSample, table string, duration time.Duration) {
	path := os.Getenv(soakJSONEnv)
	if path == "" {
		root, _ := os.Getwd()
		path = filepath.Join(filepath.Dir(root), ".apiserver", "soak.json")
	}
	data, _ := json.MarshalIndent(struct {
		Duration string       `json:"duration"`
		Summary  string       `json:"summary"`
		Samples  []soakSample `json:"samples"`
	}{duration.String(), table, samples}, "", " ")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err == nil {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Errorf("soak samples: %v", err)
		}
	}
	png := os.Getenv(soakPlotEnv)
	if png == "" {
		return
	}
	_, source, _, _ := runtime.Caller(0)
	dir, err := report.PlotModule(source)
	if err != nil {
		t.Errorf("soak plot: %v", err)
		return
	}
	if err := report.Plot(context.Background(), dir, path, png, "kretry soak, "+duration.String(), os.Stderr); err != nil {
		t.Errorf("soak plot: %v", err)
	}
}

// soakInformer is an informer through kretry whose handlers check every update is one
// generation on from the object it replaces.
type soakInformer struct {
	ns       string
	client   *client
	informer *informer

	mu      sync.Mutex
	issues  []string
	dropped int
}

func startSoakInformer(t *testing.T, c *client, ns string) *soakInformer {
	si := &soakInformer{ns: ns, client: c, informer: startInformer(t, c, ns)}
	si.informer.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			o, n := oldObj.(*corev1.ConfigMap), newObj.(*corev1.ConfigMap)
			og, ng := cmwriter.Gen(o.Data["gen"]), cmwriter.Gen(n.Data["gen"])
			orv, _ := strconv.ParseUint(o.ResourceVersion, 10, 64)
			nrv, _ := strconv.ParseUint(n.ResourceVersion, 10, 64)
			if ng != og+1 || nrv <= orv {
				si.issue(fmt.Sprintf("update %s@%d gen %d after @%d gen %d", n.Name, nrv, ng, orv, og))
			}
		},
	})
	return si
}

func (si *soakInformer) issue(s string) {
	si.mu.Lock()
	defer si.mu.Unlock()
	if len(si.issues) < 10 {
		si.issues = append(si.issues, s)
	} else {
		si.dropped++
	}
}

func (si *soakInformer) problems() []string {
	si.mu.Lock()
	defer si.mu.Unlock()
	out := slices.Clone(si.issues)
	if si.dropped > 0 {
		out = append(out, fmt.Sprintf("and %d more", si.dropped))
	}
	return out
}

// soakWatcher is a raw watcher through kretry that checks its events as they come and keeps
// only the replayed state. A watch that reaches its timeoutSeconds is renewed from its last
// resourceVersion (the end asked for); any other end is a failure.
type soakWatcher struct {
	ns      string
	giveUps *kretryLog // what its transport handed over, named when it ends early
	cms     typedcorev1.ConfigMapInterface
	stop    chan struct{}
	done    chan struct{}

	mu     sync.Mutex
	replay *replayer
	res    soakWatchResult
}

type soakWatchResult struct {
	events, renewals int
	problems         []string
}

func startSoakWatcher(ctx context.Context, t *testing.T, began time.Time, ns string, cms typedcorev1.ConfigMapInterface, giveUps *kretryLog) (*soakWatcher, error) {
	ls, err := listStart(ctx, cms)
	if err != nil {
		return nil, err
	}
	sw := &soakWatcher{ns: ns, giveUps: giveUps, cms: cms, stop: make(chan struct{}), done: make(chan struct{}),
		replay: newReplayer(ls.state, ls.gens, ls.rv)}
	go sw.run(began, ls.resourceVersion)
	t.Cleanup(sw.stopAndWait)
	return sw, nil
}

func (sw *soakWatcher) run(began time.Time, rv string) {
	defer close(sw.done)
	for {
		timeout := int64(soakWatchTimeout)
		opened := time.Now()
		w, err := sw.cms.Watch(context.Background(), metav1.ListOptions{ResourceVersion: rv, TimeoutSeconds: &timeout})
		if err != nil {
			sw.problem(fmt.Sprintf("watch from %s: %v", rv, err))
			return
		}
		for ended := false; !ended; {
			select {
			case <-sw.stop:
				w.Stop()
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					ended = true
					break
				}
				sw.apply(toRawEvent(ev, time.Since(began)))
			}
		}
		// kretry ends a watch before its deadline rather than start a wait that would end less
		// than a second before it (DESIGN, the caller's deadline): an end within
		// soakDeadlineSlack of timeoutSeconds is the end asked for.
		if time.Since(opened) < time.Duration(soakWatchTimeout)*time.Second-soakDeadlineSlack {
			sw.problem(fmt.Sprintf("ResultChan closed after %v, before its timeoutSeconds=%d; kretry's give-ups: %s",
				time.Since(opened).Round(time.Millisecond), soakWatchTimeout, sw.giveUps))
			return
		}
		sw.mu.Lock()
		sw.res.renewals++
		rv = strconv.FormatUint(sw.replay.prev, 10)
		sw.mu.Unlock()
	}
}

func (sw *soakWatcher) apply(e rawEvent) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	sw.res.events++
	for _, p := range sw.replay.apply(e) {
		sw.problemLocked(p)
	}
}

func (sw *soakWatcher) problem(p string) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	sw.problemLocked(p)
}

func (sw *soakWatcher) problemLocked(p string) {
	if len(sw.res.problems) < 10 {
		sw.res.problems = append(sw.res.problems, p)
	}
}

func (sw *soakWatcher) current() state {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return maps.Clone(sw.replay.state)
}

func (sw *soakWatcher) result() soakWatchResult {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return sw.res
}

func (sw *soakWatcher) stopAndWait() {
	select {
	case <-sw.stop:
	default:
		close(sw.stop)
	}
	<-sw.done
}
