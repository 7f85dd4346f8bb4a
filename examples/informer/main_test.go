package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/kretry/kretry/internal/demoserver"
)

// TestRun runs the example against a faulty demo server: with kretry under it the informer
// fetches the full state once, plus once per 410 Expired, and nothing else.
func TestRun(t *testing.T) {
	server := demoserver.Start(demoserver.Config{Objects: 30, FaultRate: 2, Seed: 7})
	defer server.Close()
	const userAgent = "informer-example-test"

	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Second)
	defer cancel()
	var out bytes.Buffer
	got, err := run(ctx, server.RESTConfig(userAgent), server.Namespace(), &out)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	if got.events == 0 || got.objects == 0 {
		t.Fatalf("summary %+v: the informer saw nothing", got)
	}
	st := server.Stats(userAgent)
	if st.InitialStateFetches() != 1+st.Expired {
		t.Fatalf("%d initial-state fetches with %d 410s (faults %v); want 1 + one per 410", st.InitialStateFetches(), st.Expired, st.Faults)
	}
}
