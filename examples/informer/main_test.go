package main

import (
	"testing"
	"time"

	"github.com/kretry/kretry/examples/internal/targettest"
	"github.com/kretry/kretry/internal/demoserver"
)

// TestRun runs the example against a faulty demo server: with kretry under it the informer
// fetches the full state once, plus once per 410 Expired, and nothing else.
func TestRun(t *testing.T) {
	server := targettest.StartServer(t, demoserver.Config{Objects: 30, FaultRate: 2, Seed: 7})
	const userAgent = "informer-example-test"

	got, out := targettest.RunFor(t, 4*time.Second, server, userAgent, run)
	t.Log("\n" + out)
	if got.events == 0 || got.objects == 0 {
		t.Fatalf("summary %+v: the informer saw nothing", got)
	}
	// A 410 that ends a run of failures is handed over after a hold (see
	// policy.Tracker.Gone), so the relist after the last 410 may fall after
	// the run ends; none may come without a 410.
	st := server.Stats(userAgent)
	if fetches := st.InitialStateFetches(); fetches > 1+st.Expired || fetches < st.Expired {
		t.Fatalf("%d initial-state fetches with %d 410s (faults %v); want 1 + one per 410", fetches, st.Expired, st.Faults)
	}
}
