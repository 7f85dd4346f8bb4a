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
	"k8s.io/client-go/kubernetes"

	"github.com/kretry/kretry/internal/harness/apiserver"
	"github.com/kretry/kretry/internal/harness/cmwriter"
	"github.com/kretry/kretry/transport"
)

// maxCutOffRetries is internal/policy's bound on the search of a client
// cut off from every apiserver through a balancer.
const maxCutOffRetries = 6

// TestExpiredEverywhereIsOne410 is the shape of a client looping on "too old resource version"
// after an HA control plane's restart: a resume point older than every kube-apiserver's watch
// cache. Two kube-apiservers behind HAProxy; through kretry, a raw watcher that re-watches from
// its last resourceVersion whenever its channel closes without a 410 (a loop, were kretry to end
// the watch cleanly on such a 410) and an informer. Both kube-apiservers are stopped, etcd's
// revision moves on and is compacted past the watchers' resume points, and both start again, so
// every watch cache starts after them. kretry hands the raw watcher exactly one ERROR 410 and the
// watch ends (no re-watch, no second 410); the informer relists once and is current; kretry's
// retries of the 410 are at most the short search of each watch (its resumes were accepted by the
// balancer and failed for seconds, so it was cut off; each retry is an immediate 410: 6 new
// connections, over HTTP/2 each after a ride of the old one) and none follow it.
func TestExpiredEverywhereIsOne410(t *testing.T) {
	closeSharedCluster(t) // one cluster at a time on the machine
	ctx := context.Background()
	c := apiserver.StartT(t, apiserver.Options{
		Servers:      []apiserver.ServerOptions{{ExtraFlags: apiserver.RBACFlags}, {ExtraFlags: apiserver.RBACFlags}},
		ReadyTimeout: 120 * time.Second,
	})
	var backends []string
	for _, s := range c.Servers() {
		backends = append(backends, s.Addr())
	}
	const inter = 500 * time.Millisecond
	lb, err := apiserver.StartHAProxy(ctx, apiserver.HAProxyOptions{Servers: backends, Inter: inter, Fall: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := lb.Close(); err != nil {
			t.Errorf("haproxy: close: %v", err)
		}
	})
	time.Sleep(3 * inter) // both backends up at the balancer

	admin := kubernetes.NewForConfigOrDie(ownConnections(c.ConfigFor(lb.Addr(), apiserver.Admin)))
	ns := "expired-everywhere"
	cms, ls := seedNamespace(ctx, t, admin, ns, 5)

	retries := &kretryLog{began: time.Now()}
	kcfg := &transport.Config{Observer: retries}
	began := time.Now()
	rawClient := newClientWith(ownConnections(c.ConfigFor(lb.Addr(), apiserver.Admin)), kcfg)
	raw := startRawWatcher(t, began, rawClient.kube().CoreV1().ConfigMaps(ns), ls.resourceVersion, true)
	infClient := newClientWith(ownConnections(c.ConfigFor(lb.Addr(), apiserver.Admin)), kcfg)
	inf := startInformer(t, infClient, ns)

	// Changes both watchers see, so that their resume points are past the LIST's.
	for i := range 5 {
		cm := cmwriter.ConfigMap(fmt.Sprintf("change-%d", i), 0)
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	current := func(ctx context.Context) (state, error) { return configMapState(ctx, cms) }
	if _, err := convergeTo(ctx, inf, current, 30*time.Second); err != nil {
		t.Fatalf("informer before the restart: %v", err)
	}
	waitFor(t, 30*time.Second, "the raw watcher to see the changes", func() bool { return len(raw.snapshot()) >= 5 })
	resumePoint := raw.snapshot()[len(raw.snapshot())-1].RV

	// Both kube-apiservers down; etcd moves on and forgets the resume points; both back.
	retries.mark()
	var wg sync.WaitGroup
	for _, s := range c.Servers() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Stop(); err != nil {
				t.Errorf("stop apiserver-%d: %v", s.Index(), err)
			}
		}()
	}
	wg.Wait()
	rev, err := c.PutEtcd(ctx, "/kretry-e2e/moved-on", "1")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CompactEtcd(ctx, rev); err != nil {
		t.Fatal(err)
	}
	if uint64(rev) <= resumePoint {
		t.Fatalf("etcd at revision %d, not past the resume point %d", rev, resumePoint)
	}
	for _, s := range c.Servers() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Start(ctx); err != nil {
				t.Errorf("start apiserver-%d: %v", s.Index(), err)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	// One write after the restart, once the balancer has a backend back: the informer must be
	// current with it.
	waitFor(t, 30*time.Second, "a write through the balancer", func() bool {
		_, err := cms.Create(ctx, cmwriter.ConfigMap("after", 0), metav1.CreateOptions{})
		return err == nil || apierrors.IsAlreadyExists(err)
	})
	if _, err := convergeTo(ctx, inf, current, 60*time.Second); err != nil {
		t.Errorf("informer after the restart: %v", err)
	}
	waitFor(t, 60*time.Second, "the raw watcher's 410", func() bool {
		return len(gones(raw.snapshot())) > 0
	})
	// Long enough for a loop to show: kretry's hold and retry bounds are seconds.
	time.Sleep(15 * time.Second)

	events := raw.snapshot()
	raw.mu.Lock()
	closes, watchErrs := append([]rawClose(nil), raw.closes...), append([]string(nil), raw.watchErrs...)
	raw.mu.Unlock()
	g := gones(events)
	if len(g) != 1 {
		t.Errorf("raw watcher: %d ERROR 410 events, want exactly 1: %v", len(g), g)
	} else if last := events[len(events)-1]; !last.Gone {
		t.Errorf("raw watcher: events after its 410: last %+v", last)
	}
	if len(closes) != 1 || len(watchErrs) != 0 {
		t.Errorf("raw watcher: channel closed %d times, Watch failed %v; want one close, after the 410, and no re-watch", len(closes), watchErrs)
	}
	if n := infClient.caller.snapshot().InitialFetches(); n != 2 {
		t.Errorf("informer: %d initial-state fetches, want 2 (one relist for the 410)", n)
	}
	// Behind the balancer the resumes were accepted and failed for seconds:
	// each of the two watches makes the short search (see policy's
	// maxCutOffRetries), on that many new connections; over HTTP/2 each
	// retry first rides the old connection (answered 410 at once, not
	// counted), so a search is at most twice as many requests.
	expiredRetries, total := retries.since()
	if most := 2 * 2 * maxCutOffRetries; expiredRetries > most {
		t.Errorf("kretry retried the 410 %d times, want at most %d (the short search of each watch): its resumes failed for seconds", expiredRetries, most)
	}
	msg := "none"
	if len(g) == 1 {
		msg = g[0].Err
	}
	t.Logf("expired everywhere: resume point %d, etcd compacted at %d; raw watcher: %d ERROR 410 (%s), %d close; informer: %d initial-state fetches; kretry from the stop on: %d retries and resumes, %d of them of a 410",
		resumePoint, rev, len(g), msg, len(closes), infClient.caller.snapshot().InitialFetches(), total, expiredRetries)
}

// gones returns the ERROR 410 events of events.
func gones(events []rawEvent) []rawEvent {
	var out []rawEvent
	for _, e := range events {
		if e.Gone {
			out = append(out, e)
		}
	}
	return out
}

// waitFor polls cond every 100 ms for up to d, and fails the test naming what it waited for.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
	}
}
