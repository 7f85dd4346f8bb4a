package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kretry/kretry/internal/demoserver"
)

// TestRun runs the reflector against a faulty demo server, then stops the faults and the
// writer and checks that the store ends equal to the server's state, fetched in full only
// at the start and after each 410.
func TestRun(t *testing.T) {
	server := demoserver.Start(demoserver.Config{Objects: 50, FaultRate: 2, Seed: 11})
	defer server.Close()
	const userAgent = "reflector-example-test"

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan summary, 1)
	var out bytes.Buffer
	go func() {
		got, err := run(ctx, server.RESTConfig(userAgent), server.Namespace(), &out)
		if err != nil {
			t.Error(err)
		}
		done <- got
	}()

	time.Sleep(3 * time.Second) // let faults happen; nothing below depends on how many
	server.StopFaults()
	server.StopWriter()
	// A bookmark is sent only to a watch that has every change; the second one counted
	// after the writer stopped was computed after its last change.
	bookmarks := server.Stats(userAgent).Bookmarks
	deadline := time.Now().Add(30 * time.Second)
	for server.Stats(userAgent).Bookmarks < bookmarks+2 {
		if time.Now().After(deadline) {
			t.Fatal("the reflector's watch did not catch up within 30s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	got := <-done
	t.Log("\n" + out.String())

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
