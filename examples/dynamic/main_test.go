package main

import (
	"bytes"
	"context"
	"maps"
	"testing"
	"time"

	"github.com/kretry/kretry/internal/demoserver"
)

// TestRun mirrors a faulty demo server's collection, then stops the faults and the writer
// and checks that the mirror ends equal to the server's state, with a LIST only at the
// start and after each 410.
func TestRun(t *testing.T) {
	server := demoserver.Start(demoserver.Config{Objects: 120, FaultRate: 2, Seed: 5})
	defer server.Close()
	const userAgent = "dynamic-example-test"

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
			t.Fatal("the watch did not catch up within 30s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	got := <-done

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
