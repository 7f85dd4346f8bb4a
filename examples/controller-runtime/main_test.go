package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/kretry/kretry/examples/internal/targettest"
	"github.com/kretry/kretry/internal/demoserver"
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	m.Run()
}

// TestManager runs the manager against a faulty demo server: with kretry under it the
// cache fetches the full state once, plus once per 410 Expired, and nothing else; every
// change is reconciled; the cache ends equal to the server; and kretry_retries_total counted
// the retries and resumes.
func TestManager(t *testing.T) {
	server := targettest.StartServer(t, demoserver.Config{Objects: 30, FaultRate: 2, Seed: 7})
	const userAgent = "controller-runtime-example-test"
	retriesBefore := retriesTotal()

	mgr, r, err := newManager(server.RESTConfig(userAgent), options{namespace: server.Namespace(), metricsAddr: "0"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		t.Fatal("the manager's cache did not sync")
	}
	targettest.Settle(t, server, userAgent, 4*time.Second, "the manager's watch")
	cached, err := cacheState(ctx, mgr.GetCache(), server.Namespace())
	if err != nil {
		t.Fatal(err)
	}
	want := server.State()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	if got, want := fmt.Sprint(cached), fmt.Sprint(resourceVersions(want)); got != want {
		t.Fatalf("cache %s\nserver %s", got, want)
	}
	st := server.Stats(userAgent)
	t.Logf("%d reconciles; server: %d initial-state fetches, %d 410s, faults %v; kretry_retries_total +%v",
		r.reconciles.Load(), st.InitialStateFetches(), st.Expired, st.Faults, retriesTotal()-retriesBefore)
	if st.InitialStateFetches() != 1+st.Expired {
		t.Fatalf("%d initial-state fetches with %d 410s (faults %v); want 1 + one per 410", st.InitialStateFetches(), st.Expired, st.Faults)
	}
	if r.reconciles.Load() < int64(len(want.Objects)) {
		t.Fatalf("%d reconciles for %d objects", r.reconciles.Load(), len(want.Objects))
	}
	if len(st.Faults) > 0 && retriesTotal() == retriesBefore {
		t.Fatalf("faults %v, yet kretry_retries_total did not move", st.Faults)
	}
}

// retriesTotal sums kretry_retries_total over its verbs and reasons, as the manager's
// /metrics serves it.
func retriesTotal() float64 {
	families, err := metrics.Registry.Gather()
	if err != nil {
		panic(err)
	}
	var sum float64
	for _, family := range families {
		if family.GetName() == "kretry_retries_total" {
			for _, sample := range family.GetMetric() {
				sum += sample.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// cacheState is name -> resourceVersion of the ConfigMaps in the manager's cache.
func cacheState(ctx context.Context, c client.Reader, namespace string) (map[string]string, error) {
	var list corev1.ConfigMapList
	if err := c.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	s := map[string]string{}
	for _, cm := range list.Items {
		s[cm.Name] = cm.ResourceVersion
	}
	return s, nil
}

func resourceVersions(st demoserver.State) map[string]string {
	s := map[string]string{}
	for name, obj := range st.Objects {
		s[name] = obj.ResourceVersion
	}
	return s
}
