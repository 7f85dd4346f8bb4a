package main

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestFleetSmall runs the LB-drop scenario with three informers of each
// kind: every cache ends equal to the server, and a drop costs no LIST.
func TestFleetSmall(t *testing.T) {
	opts := options{clients: 3, objects: 10, listCost: time.Millisecond, inflight: 10,
		writeInterval: 50 * time.Millisecond, warmup: 200 * time.Millisecond, settle: 20 * time.Second}
	lbdrop := scenario{name: "lbdrop", fault: func(s *server) { s.DropConnections() }}
	for _, kind := range kinds() {
		r, err := runOne(context.Background(), lbdrop, kind, opts)
		if err != nil {
			t.Fatal(err)
		}
		if r.CachesEqual != opts.clients || r.Fetches != 0 || r.CatchUp < 0 {
			t.Errorf("%s: caches equal %d/%d, LISTs %d, catch-up %.1fs; want all, 0, a catch-up", kind.name, r.CachesEqual, opts.clients, r.Fetches, r.CatchUp)
		}
	}
}
