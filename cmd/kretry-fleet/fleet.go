package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/kretry/kretry/transport"
)

// clientKind is one way of building the fleet's clients.
type clientKind struct {
	name string
	// config returns the kretry Config, or nil for stock client-go.
	config func(counters *kretryCounters) *transport.Config
}

// kretryCounters counts what kretry's transports did across the fleet.
type kretryCounters struct {
	retries        atomic.Int64
	budgetRefusals atomic.Int64
}

// scenario is one fault the fleet rides out.
type scenario struct {
	name  string
	fault func(s *server)
}

// options are the run's knobs.
type options struct {
	clients       int
	objects       int
	listCost      time.Duration
	inflight      int
	writeInterval time.Duration
	warmup        time.Duration
	settle        time.Duration // how long a run may take to catch up after its fault
}

// result is one run's figures.
type result struct {
	Scenario       string    `json:"scenario"`
	Kind           string    `json:"kind"`
	Clients        int       `json:"clients"`
	PeakRPS        float64   `json:"peak_rps"`   // requests in the busiest one-second window from the fault on
	P99RPS         float64   `json:"p99_rps"`    // the 99th percentile of those windows
	PeakBurst      float64   `json:"peak_burst"` // the busiest 100 ms bin, as requests per second
	Requests       int64     `json:"requests"`
	Fetches        int64     `json:"fetches"`
	BytesServed    int64     `json:"bytes_served"`
	Throttled      int64     `json:"throttled"`
	Expired        int64     `json:"expired"`
	CatchUp        float64   `json:"catch_up_seconds"`      // -1: not every cache caught up in time
	CatchUpHalf    float64   `json:"catch_up_half_seconds"` // until half the caches had caught up; -1: never
	CachesEqual    int       `json:"caches_equal"`
	Retries        int64     `json:"retries"`
	BudgetRefusals int64     `json:"budget_refusals"`
	FaultAt        float64   `json:"fault_at"`
	FaultEnd       float64   `json:"fault_end"`
	RPS            []float64 `json:"rps"`       // per 100 ms bin from the start of the run, as requests per second
	FetchRPS       []float64 `json:"fetch_rps"` // the initial-state fetches among them
}

// member is one client of the fleet: an informer and what it has seen.
type member struct {
	informer cache.SharedIndexInformer
	seen     atomic.Uint64 // the highest resourceVersion delivered to its handlers
}

func (m *member) saw(obj any) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return
	}
	rv, _ := strconv.ParseUint(cm.ResourceVersion, 10, 64)
	for {
		old := m.seen.Load()
		if rv <= old || m.seen.CompareAndSwap(old, rv) {
			return
		}
	}
}

// runOne runs one scenario with one kind of client and returns its figures.
func runOne(ctx context.Context, sc scenario, kind clientKind, opts options) (result, error) {
	srv, err := newServer(opts.objects, opts.listCost, opts.inflight)
	if err != nil {
		return result{}, err
	}
	defer srv.Close()
	counters := &kretryCounters{}
	stop := make(chan struct{})
	var stopOnce sync.Once
	stopAll := func() { stopOnce.Do(func() { close(stop) }) }
	defer stopAll()

	members := make([]*member, opts.clients)
	var transports []*http.Transport
	defer func() {
		stopAll()
		for _, t := range transports {
			t.CloseIdleConnections()
		}
	}()
	for i := range members {
		cfg := &rest.Config{
			Host:      srv.URL(),
			QPS:       5, // client-go's defaults, per client as in separate processes
			Burst:     10,
			UserAgent: fmt.Sprintf("fleet-%s-%d", kind.name, i),
			Transport: newTransport(&transports),
			Timeout:   0,
		}
		cfg.ContentType = "application/json"
		cfg.AcceptContentTypes = "application/json"
		if kc := kind.config(counters); kc != nil {
			cfg.Wrap(transport.Wrapper(*kc))
		}
		clients, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return result{}, err
		}
		factory := informers.NewSharedInformerFactoryWithOptions(clients, 0, informers.WithNamespace(srv.namespace))
		m := &member{informer: factory.Core().V1().ConfigMaps().Informer()}
		_, _ = m.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    m.saw,
			UpdateFunc: func(_, obj any) { m.saw(obj) },
		})
		members[i] = m
		go m.informer.Run(stop)
	}
	syncCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for i, m := range members {
		if !cache.WaitForCacheSync(syncCtx.Done(), m.informer.HasSynced) {
			st := srv.snapshot()
			return result{}, fmt.Errorf("%s/%s: %d of %d informers synced in 2m (server: %d requests, %d fetches, %d 429s)",
				sc.name, kind.name, i, len(members), st.requests, st.fetches, st.throttled)
		}
	}

	// The run's clock starts once the fleet is in its steady state.
	start := time.Now()
	counts := newBins(start, opts.warmup+5*time.Minute)
	srv.bins.Store(counts)
	before := srv.snapshot()
	writerDone := make(chan struct{})
	writerStop := make(chan struct{})
	go func() {
		defer close(writerDone)
		ticker := time.NewTicker(opts.writeInterval)
		defer ticker.Stop()
		for i := 0; ; i++ {
			select {
			case <-writerStop:
				return
			case <-ticker.C:
				srv.Write(i)
			}
		}
	}()

	time.Sleep(opts.warmup)
	faultAt := time.Since(start)
	sc.fault(srv)
	faultEnd := time.Since(start)
	target := srv.Write(0) // the first change after the fault: every cache must see it

	catchUp, half := -1.0, -1.0
	deadline := time.Now().Add(opts.settle)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		behind := 0
		for _, m := range members {
			if m.seen.Load() < target {
				behind++
			}
		}
		if half < 0 && behind <= len(members)/2 {
			half = (time.Since(start) - faultEnd).Seconds()
		}
		if behind == 0 {
			catchUp = (time.Since(start) - faultEnd).Seconds()
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(2 * time.Second) // the tail of the curve
	end := time.Since(start)
	close(writerStop)
	<-writerDone
	equal := waitCachesEqual(srv, members, 10*time.Second)
	after := srv.snapshot()

	r := result{
		Scenario: sc.name, Kind: kind.name, Clients: opts.clients,
		Requests:       after.requests - before.requests,
		Fetches:        after.fetches - before.fetches,
		BytesServed:    after.bytesServed - before.bytesServed,
		Throttled:      after.throttled - before.throttled,
		Expired:        after.expired - before.expired,
		CatchUp:        catchUp,
		CatchUpHalf:    half,
		CachesEqual:    equal,
		Retries:        counters.retries.Load(),
		BudgetRefusals: counters.budgetRefusals.Load(),
		FaultAt:        faultAt.Seconds(),
		FaultEnd:       faultEnd.Seconds(),
	}
	bins := int(end/binWidth) + 1
	for i := 0; i < bins && i < len(counts.counts); i++ {
		r.RPS = append(r.RPS, float64(counts.counts[i].Load())*float64(time.Second/binWidth))
		r.FetchRPS = append(r.FetchRPS, float64(counts.fetches[i].Load())*float64(time.Second/binWidth))
	}
	// Peak and p99 from the fault on: the herd, not the fleet's start.
	from := int(faultAt / binWidth)
	if from < len(r.RPS) {
		perSecond := perSecondWindows(counts, from, bins)
		slices.Sort(perSecond)
		r.PeakRPS = perSecond[len(perSecond)-1]
		r.P99RPS = perSecond[(len(perSecond)*99)/100]
		r.PeakBurst = slices.Max(r.RPS[from:])
	}
	return r, nil
}

// perSecondWindows returns the requests of every one-second window that
// starts at a bin in [from, to), sliding by one bin: requests per second,
// as a server's rate limit counts them. (A single 100 ms bin holds a few
// dozen requests at most here; its maximum is mostly counting noise, and is
// reported apart, as PeakBurst.)
func perSecondWindows(counts *bins, from, to int) []float64 {
	width := int(time.Second / binWidth)
	var windows []float64
	for start := from; start < to; start++ {
		var n int64
		for i := start; i < start+width && i < len(counts.counts); i++ {
			n += counts.counts[i].Load()
		}
		windows = append(windows, float64(n))
	}
	return windows
}

// waitCachesEqual waits up to d for every cache to hold exactly the
// server's objects at their resourceVersions, and returns how many do.
func waitCachesEqual(srv *server, members []*member, d time.Duration) int {
	srv.mu.Lock()
	want := map[string]string{}
	for name, cm := range srv.objects {
		want[name] = cm.ResourceVersion
	}
	srv.mu.Unlock()
	deadline := time.Now().Add(d)
	for {
		equal := 0
		for _, m := range members {
			if cacheEquals(m.informer.GetStore(), want) {
				equal++
			}
		}
		if equal == len(members) || time.Now().After(deadline) {
			return equal
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func cacheEquals(store cache.Store, want map[string]string) bool {
	items := store.List()
	if len(items) != len(want) {
		return false
	}
	for _, item := range items {
		cm := item.(*corev1.ConfigMap)
		if want[cm.Name] != cm.ResourceVersion {
			return false
		}
	}
	return true
}

// statsSnapshot is serverStats at one moment.
type statsSnapshot struct {
	requests, fetches, bytesServed, throttled, expired int64
}

func (s *server) snapshot() statsSnapshot {
	return statsSnapshot{
		requests:    s.stats.requests.Load(),
		fetches:     s.stats.fetches.Load(),
		bytesServed: s.stats.bytesServed.Load(),
		throttled:   s.stats.throttled.Load(),
		expired:     s.stats.expired.Load(),
	}
}

// newTransport is one client's own connection pool, kept for closing.
func newTransport(all *[]*http.Transport) *http.Transport {
	t := &http.Transport{MaxIdleConnsPerHost: 25, IdleConnTimeout: 90 * time.Second}
	*all = append(*all, t)
	return t
}
