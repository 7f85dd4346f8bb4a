package main

import (
	"bufio"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kretry/kretry/examples/internal/targettest"
	"github.com/kretry/kretry/internal/demoserver"
)

// TestRun watches a demo server that tears, rejects and errors its watch: the example's
// watch never ends, and it sees every change exactly once, in order. The demo server's
// resourceVersions count its writes, so consecutive events have consecutive RVs.
func TestRun(t *testing.T) {
	var kinds []demoserver.FaultKind
	for _, kind := range demoserver.AllFaults {
		if kind != demoserver.Compaction { // a 410 must end a raw watch; see TestRunRelistsOn410
			kinds = append(kinds, kind)
		}
	}
	server := targettest.StartServer(t, demoserver.Config{Objects: 10, FaultRate: 2, FaultKinds: kinds, Seed: 3})
	const userAgent = "rawwatch-example-test"

	got, out := targettest.RunFor(t, 5*time.Second, server, userAgent, run)
	st := server.Stats(userAgent)
	t.Logf("summary %+v, %d watch requests, faults %v", got, st.Watches+st.Rejected, st.Faults)
	if got.closed != 0 || got.relists != 0 || st.Lists != 1 {
		t.Fatalf("summary %+v after %d LISTs: the watch broke", got, st.Lists)
	}
	if st.FaultsInjected() == 0 || got.events == 0 {
		t.Fatalf("%d faults, %d events: the test proved nothing", st.FaultsInjected(), got.events)
	}
	assertConsecutive(t, out)
}

// TestRunRelistsOn410 compacts the history under the watch: kretry hands the 410 to the
// caller (nothing else can be done), which lists and watches again.
func TestRunRelistsOn410(t *testing.T) {
	server := targettest.StartServer(t, demoserver.Config{Objects: 10})
	const userAgent = "rawwatch-example-test-410"

	running := targettest.Go(t, server, userAgent, run)
	targettest.WaitFor(t, "condition not met in 30s", func() bool { return server.Stats(userAgent).Events > 0 })
	server.InjectFault(userAgent, demoserver.Compaction)
	targettest.WaitFor(t, "condition not met in 30s", func() bool { return server.Stats(userAgent).Lists == 2 && server.Stats(userAgent).Events > 0 })
	got, _ := running.Stop()
	if got.relists != 1 || got.closed != 0 {
		t.Fatalf("summary %+v, want one relist after the 410", got)
	}
}

// assertConsecutive checks the printed events: after the LIST at RV n, the events carry
// n+1, n+2, ... with no gap and no repeat.
func assertConsecutive(t *testing.T, out string) {
	t.Helper()
	var last uint64
	scanner := bufio.NewScanner(strings.NewReader(out))
	for scanner.Scan() {
		fields := strings.Fields(scanner.Text())
		if len(fields) < 3 || fields[0] == "EVENT" {
			continue
		}
		rv, err := strconv.ParseUint(fields[2], 10, 64)
		if err != nil {
			continue
		}
		switch fields[0] {
		case "LIST":
			last = rv
		case "ADDED", "MODIFIED", "DELETED":
			if rv != last+1 {
				t.Fatalf("event at RV %d after RV %d: a change was lost or repeated\n%s", rv, last, out)
			}
			last = rv
		}
	}
}
