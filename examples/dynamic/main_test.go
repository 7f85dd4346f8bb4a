package main

import (
	"maps"
	"testing"
	"time"

	"github.com/kretry/kretry/examples/internal/targettest"
	"github.com/kretry/kretry/internal/demoserver"
)

// TestRun mirrors a faulty demo server's collection, then stops the faults and the writer
// and checks that the mirror ends equal to the server's state, with a LIST only at the
// start and after each 410.
func TestRun(t *testing.T) {
	server := targettest.StartServer(t, demoserver.Config{Objects: 120, FaultRate: 2, Seed: 5})
	const userAgent = "dynamic-example-test"

	running := targettest.Go(t, server, userAgent, run)
	targettest.Settle(t, server, userAgent, 3*time.Second, "the watch")
	got, _ := running.Stop()

	st := server.Stats(userAgent)
	t.Logf("lists %d, closed %d, faults %v, 410s %d", got.lists, got.closed, st.Faults, st.Expired)
	want := map[string]string{}
	for name, obj := range server.State().Objects {
		want[name] = obj.ResourceVersion
	}
	if !maps.Equal(got.objects, want) {
		t.Errorf("mirror has %d objects, server %d; they differ", len(got.objects), len(want))
	}
	if got.closed != 0 || st.Lists != 1+st.Expired {
		t.Errorf("%d LISTs and %d closed watches with %d 410s; want 1 + one per 410, no close", st.Lists, got.closed, st.Expired)
	}
	if st.ListPages < 2 {
		t.Errorf("%d continuation pages: the LIST was not paged", st.ListPages)
	}
}
