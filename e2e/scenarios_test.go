//go:build e2e

package e2e_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/client-go/kubernetes"

	"github.com/kretry/kretry/internal/harness/apiserver"
	"github.com/kretry/kretry/internal/harness/cmwriter"
	"github.com/kretry/kretry/internal/harness/faultproxy"
)

const convergeTimeout = 60 * time.Second

// finish stops the writer, waits for the cache to match the server and fills the figure.
func finish(t *testing.T, fault string, c *client, inf *informer, w *cmwriter.Writer, server int, ns string, note string) figure {
	t.Helper()
	w.Stop()
	d, err := converge(context.Background(), inf, server, ns, convergeTimeout)
	if err != nil {
		t.Errorf("%s: %v", fault, err)
	}
	writes, fails, firstErr := w.Stats()
	if fails > 0 {
		note = fmt.Sprintf("%s; %d writes failed", note, fails)
		t.Logf("writer: %d writes failed, first: %v", fails, firstErr)
	}
	return figure{Fault: fault, Caller: c.caller.snapshot(), Wire: c.wire.snapshot(), Writes: writes,
		Converged: err == nil, Converge: d, Note: note}
}

// wantFetches is the kretry claim for a fault: how many initial-state fetches are correct.
func wantFetches(t *testing.T, withKretry bool, f figure, want int, why string) {
	t.Helper()
	if withKretry && f.Caller.InitialFetches() != want {
		t.Errorf("kretry, %s: %d initial-state fetches, want %d (%s)", f.Fault, f.Caller.InitialFetches(), want, why)
	}
}

// TestRandomCuts: every connection through the proxy is cut after an exponentially distributed
// time, 30 per minute on average (client-go multiplexes everything over one HTTP/2 connection,
// so each cut breaks the watch and any request in flight).
func TestRandomCuts(t *testing.T) {
	sharedCluster(t)
	stockAndKretry(t, func(t *testing.T, withKretry bool) figure {
		ns := namespace(t, serverA, "cuts", 40)
		p := newProxy(t, 1, serverA)
		p.SetRule(faultproxy.Rule{CutsPerMinute: 30})
		w := startWriter(t, serverA, ns, 1, 100*time.Millisecond)
		c := newClient(p.Addr(), apiserver.Admin, withKretry)
		inf := startInformer(t, c, ns)
		time.Sleep(40 * time.Second)
		p.SetRule(faultproxy.Rule{})
		f := finish(t, "random-cuts", c, inf, w, serverA, ns, fmt.Sprintf("%d cuts in 40s", p.Stats().Cuts))
		wantFetches(t, withKretry, f, 1, "every cut is resumable from the last RV")
		return f
	})
}

// TestListBodyCuts: the informer starts with a LIST (watch-list off, see Test429Burst) of 60
// ConfigMaps of 1 KiB, and its first three connections are cut after a seeded random 5-40 KB
// of response bytes: mid-LIST body. Deterministic for a given seed: byte counts, not timing.
func TestListBodyCuts(t *testing.T) {
	sharedCluster(t)
	disableWatchList(t)
	stockAndKretry(t, func(t *testing.T, withKretry bool) figure {
		ns := namespace(t, serverA, "listcuts", 60)
		p := newProxy(t, 6, serverA)
		p.SetRuleFunc(func(n int64) faultproxy.Rule {
			if n <= 3 {
				return faultproxy.Rule{CutAfterRandomBytes: faultproxy.ByteRange{Min: 5_000, Max: 40_000}}
			}
			return faultproxy.Rule{}
		})
		w := startWriter(t, serverA, ns, 6, 100*time.Millisecond)
		c := newClient(p.Addr(), apiserver.Admin, withKretry)
		inf := startInformer(t, c, ns)
		time.Sleep(10 * time.Second)
		f := finish(t, "list-body-cuts", c, inf, w, serverA, ns, fmt.Sprintf("first 3 connections cut mid-response, %d cuts", p.Stats().Cuts))
		wantFetches(t, withKretry, f, 1, "a LIST broken mid-body is retried inside kretry")
		return f
	})
}

// disableWatchList turns client-go's WatchListClient gate off for the test: informers start
// with a LIST.
func disableWatchList(t *testing.T) {
	prev := clientfeatures.FeatureGates()
	clientfeatures.ReplaceFeatureGates(watchListGate{Gates: prev, enabled: false})
	t.Cleanup(func() { clientfeatures.ReplaceFeatureGates(prev) })
}

// watchListGate overrides client-go's WatchListClient feature gate.
type watchListGate struct {
	clientfeatures.Gates
	enabled bool
}

func (g watchListGate) Enabled(f clientfeatures.Feature) bool {
	if f == clientfeatures.WatchListClient {
		return g.enabled
	}
	return g.Gates.Enabled(f)
}

// holdSlot keeps the only request slot of the request-limit server busy: n goroutines loop
// LISTs at a too-large RV as the limited user (each takes about 3s, then 504).
func holdSlot(n int) (stop func() int) {
	ctx, cancel := context.WithCancel(context.Background())
	cs := kubernetes.NewForConfigOrDie(cluster.ConfigFor(cluster.Server(serverLimited).Addr(), apiserver.Limited))
	var wg sync.WaitGroup
	var mu sync.Mutex
	held := 0
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				err := cs.CoreV1().RESTClient().Get().Namespace("default").Resource("configmaps").
					Param("resourceVersion", "99999999").Param("resourceVersionMatch", "NotOlderThan").
					MaxRetries(0).Do(ctx).Error()
				if apierrors.IsTimeout(err) {
					mu.Lock()
					held++
					mu.Unlock()
				} else {
					time.Sleep(20 * time.Millisecond) // 429: the other holder has the slot
				}
			}
		}()
	}
	return func() int {
		cancel()
		wg.Wait()
		return held
	}
}

// Test429Burst: request-limit mode (one request in flight for users outside system:masters);
// holders keep the slot busy for 15s while the informer, as the limited user, starts. Watches
// are exempt from the limit, so a watch-list informer never meets the 429: this scenario turns
// client-go's WatchListClient gate off so that the informer starts with a LIST, as informers
// before v0.35 and those that disable watch-list do.
func Test429Burst(t *testing.T) {
	sharedCluster(t)
	disableWatchList(t)
	stockAndKretry(t, func(t *testing.T, withKretry bool) figure {
		ns := namespace(t, serverA, "burst", 40)
		p := newProxy(t, 2, serverLimited)
		w := startWriter(t, serverA, ns, 2, 100*time.Millisecond)
		stopHolders := holdSlot(2)
		time.Sleep(time.Second)
		c := newClient(p.Addr(), apiserver.Limited, withKretry)
		inf := startInformer(t, c, ns)
		time.Sleep(15 * time.Second)
		held := stopHolders()
		time.Sleep(5 * time.Second)
		f := finish(t, "429-burst", c, inf, w, serverA, ns, fmt.Sprintf("15s burst, %d holder LISTs; informer LIST+WATCH (watch-list off)", held))
		wantFetches(t, withKretry, f, 1, "a 429 is retried inside kretry, the informer's one LIST just waits")
		return f
	})
}

// Test504TooLarge: read-your-writes across API servers. A ConfigMap is written through server
// A; then a LIST at that resourceVersion (NotOlderThan) goes to server "lagging", whose link to
// etcd is stalled for 5s so its watch cache is behind: the server waits 3s and answers 504
// Timeout, cause ResourceVersionTooLarge, Retry-After: 1. Three rounds; every LIST must succeed
// for the caller. (An informer never asks for an RV it has not seen from its own server except
// on a relist after failover, so the consumer here is a plain LIST.)
func Test504TooLarge(t *testing.T) {
	sharedCluster(t)
	stockAndKretry(t, func(t *testing.T, withKretry bool) figure {
		ctx := context.Background()
		ns := namespace(t, serverA, "toolarge", 5)
		p := newProxy(t, 3, serverLagging)
		c := newClient(p.Addr(), apiserver.Admin, withKretry)
		adminA := adminClient(serverA)
		failed := 0
		var slowest time.Duration
		for round := range 3 {
			etcdProxy.Stall(5 * time.Second)
			cm, err := adminA.CoreV1().ConfigMaps(ns).Create(ctx, cmwriter.ConfigMap(fmt.Sprintf("rw-%d", round), 0), metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			list, err := c.kube().CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{ResourceVersion: cm.ResourceVersion})
			slowest = max(slowest, time.Since(start))
			if err != nil {
				failed++
				t.Logf("round %d: LIST at RV %s: %v", round, cm.ResourceVersion, err)
			} else if len(list.Items) != 6+round {
				t.Errorf("round %d: %d items, want %d", round, len(list.Items), 6+round)
			}
			time.Sleep(5 * time.Second) // let the stall end before the next round
		}
		f := figure{Fault: "504-too-large", Caller: c.caller.snapshot(), Wire: c.wire.snapshot(), Writes: 3, Converged: failed == 0,
			Note: fmt.Sprintf("3 read-after-write LISTs on a lagging server: %d failed, slowest %v", failed, slowest.Round(100*time.Millisecond))}
		if withKretry && failed > 0 {
			t.Errorf("kretry: %d of 3 LISTs failed on 504 TooLarge with Retry-After", failed)
		}
		return f
	})
}

// serverARestartedAtCleanup is server A, started again when the test ends if it left A down.
func serverARestartedAtCleanup(t *testing.T) *apiserver.Server {
	a := cluster.Server(serverA)
	t.Cleanup(func() {
		if !a.Running() {
			if err := a.Start(context.Background()); err != nil {
				t.Errorf("restart A: %v", err)
			}
		}
	})
	return a
}

// TestFailover: the proxy routes to A and fails over to C; A is killed (SIGKILL) mid-watch,
// its connections reset, and the informer's next connection lands on C.
func TestFailover(t *testing.T) {
	sharedCluster(t)
	stockAndKretry(t, func(t *testing.T, withKretry bool) figure {
		ctx := context.Background()
		a := serverARestartedAtCleanup(t)
		ns := namespace(t, serverC, "failover", 40)
		p := newProxy(t, 4, serverA, serverC)
		w := startWriter(t, serverC, ns, 4, 100*time.Millisecond)
		c := newClient(p.Addr(), apiserver.Admin, withKretry)
		inf := startInformer(t, c, ns)
		time.Sleep(8 * time.Second)
		if err := a.Kill(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(12 * time.Second)
		s := p.Stats()
		f := finish(t, "failover", c, inf, w, serverC, ns, fmt.Sprintf("A killed at 8s; connections A/C %d/%d", s.PerBackendHit[0], s.PerBackendHit[1]))
		if err := a.Start(ctx); err != nil {
			t.Fatalf("restart A: %v", err)
		}
		wantFetches(t, withKretry, f, 1, "C's watch cache serves the resume RV")
		return f
	})
}

// TestRestart410: A is stopped (the proxy refuses connections meanwhile), writes go on through
// C, A restarts on the same etcd with a fresh watch cache; the informer's resume RV is now too
// old: the server answers 410 Expired in the stream, and exactly one relist is correct.
func TestRestart410(t *testing.T) {
	sharedCluster(t)
	stockAndKretry(t, func(t *testing.T, withKretry bool) figure {
		ctx := context.Background()
		a := serverARestartedAtCleanup(t)
		ns := namespace(t, serverA, "restart", 40)
		p := newProxy(t, 5, serverA)
		w := startWriter(t, serverC, ns, 5, 100*time.Millisecond)
		c := newClient(p.Addr(), apiserver.Admin, withKretry)
		inf := startInformer(t, c, ns)
		time.Sleep(6 * time.Second)
		if err := p.Refuse(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := a.Stop(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		if err := a.Start(ctx); err != nil {
			t.Fatal(err)
		}
		down := time.Since(start)
		if err := p.Accept(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(8 * time.Second)
		f := finish(t, "restart-410", c, inf, w, serverA, ns, fmt.Sprintf("A down %v, connections refused meanwhile", down.Round(100*time.Millisecond)))
		wantFetches(t, withKretry, f, 2, "the initial fetch and exactly one relist after the 410")
		return f
	})
}
