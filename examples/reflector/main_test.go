package main

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kretry/kretry/examples/internal/targettest"
	"github.com/kretry/kretry/internal/demoserver"
)

// TestRun runs the reflector against a faulty demo server, then stops the faults and the
// writer and checks that the store ends equal to the server's state, fetched in full only
// at the start and after each 410.
func TestRun(t *testing.T) {
	server := targettest.StartServer(t, demoserver.Config{Objects: 50, FaultRate: 2, Seed: 11})
	const userAgent = "reflector-example-test"

	running := targettest.Go(t, server, userAgent, run)
	targettest.Settle(t, server, userAgent, 3*time.Second, "the reflector's watch")
	got, out := running.Stop()
	t.Log("\n" + out)

	st := server.Stats(userAgent)
	t.Logf("reflector %+v; server: faults %v, 410s %d", got.stats, st.Faults, st.Expired)
	state := server.State()
	if len(got.store.ListKeys()) != len(state.Objects) {
		t.Errorf("store has %d objects, server %d", len(got.store.ListKeys()), len(state.Objects))
	}
	for name, want := range state.Objects {
		obj, ok, _ := got.store.GetByKey(server.Namespace() + "/" + name)
		if !ok || obj.(*corev1.ConfigMap).ResourceVersion != want.ResourceVersion {
			t.Errorf("store: %s missing or stale", name)
		}
	}
	if st.InitialStateFetches() != 1+st.Expired || got.stats.Lists != 1+got.stats.Relists410 {
		t.Errorf("%d initial-state fetches with %d 410s (reflector: %+v); want 1 + one per 410",
			st.InitialStateFetches(), st.Expired, got.stats)
	}
}
