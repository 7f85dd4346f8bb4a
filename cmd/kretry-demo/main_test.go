package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kretry/kretry/internal/demoserver"
)

func TestMain(m *testing.M) {
	quietKlog()
	os.Exit(m.Run())
}

// TestDemo runs the demo briefly at a high fault rate with the default seed and checks
// its promises: kretry's informer fetches the full state once plus once per 410 Expired,
// nothing else, and its cache ends equal to the server's; kretry's raw watcher stays
// open and gets every change exactly once, in order, with no ERROR event; the stock
// informer relists for more than its 410s, and the stock raw watcher ends.
func TestDemo(t *testing.T) {
	var out bytes.Buffer
	res, err := run(t.Context(), options{
		duration:  6 * time.Second,
		settle:    30 * time.Second,
		objects:   40,
		faultRate: 3,
		rollouts:  1,
		rollout:   time.Second,
		throttle:  time.Second,
		seed:      defaultSeed,
	}, &out)
	if err != nil {
		t.Fatal(err)
	}
	printTable(&out, res)
	t.Log("\n" + out.String())

	stock, kretry := res.client(stockInformer), res.client(kretryInformer)
	stockRaw, kretryRaw := res.client(stockRawWatch), res.client(kretryRawWatch)
	for _, c := range res.clients {
		if c.faults == 0 {
			t.Errorf("%s: no fault injected", c.name)
		}
	}
	if res.changes == 0 {
		t.Fatal("no change written during the run")
	}

	if kretry.expired == 0 {
		t.Errorf("kretry informer: no 410 received; the compaction did not reach it (faults %v)", kretry.faultKinds)
	}
	if kretry.fetches != 1+kretry.expired {
		t.Errorf("kretry informer: %d initial-state fetches with %d 410s; want exactly 1 + one per 410", kretry.fetches, kretry.expired)
	}
	if !kretry.consistent {
		t.Error("kretry informer: cache != server state after the settle wait")
	}
	if kretry.recovery.unrecovered > 0 {
		t.Errorf("kretry informer: %d faults never recovered from", kretry.recovery.unrecovered)
	}

	if kretryRaw.ended || kretryRaw.missed != 0 || kretryRaw.outOfOrder != 0 || kretryRaw.errorEvents != 0 || !kretryRaw.consistent {
		t.Errorf("kretry raw watch: ended %v (at %s), missed %d of %d changes, %d out of order, %d ERROR events, caught up %v; want open, nothing missed, in order, no ERROR",
			kretryRaw.ended, kretryRaw.endedAt, kretryRaw.missed, res.changes, kretryRaw.outOfOrder, kretryRaw.errorEvents, kretryRaw.consistent)
	}
	if kretryRaw.fetches != 1 {
		t.Errorf("kretry raw watch: %d initial-state fetches, want its one LIST", kretryRaw.fetches)
	}

	// The stock informer relists on the rollout's 503 and on every ERROR 500 event.
	if stock.fetches <= 1+stock.expired {
		t.Errorf("stock informer: %d initial-state fetches with %d 410s, faults %v; want relists beyond the 410s", stock.fetches, stock.expired, stock.faultKinds)
	}
	// The stock informer's cache is not checked: after a string of faults client-go's
	// reflector may back off for up to 30s (one backoff for relists and re-watches, reset
	// after 2 minutes without a failure), longer than the settle wait.
	if !stockRaw.ended || stockRaw.missed == 0 {
		t.Errorf("stock raw watch: ended %v, missed %d; want it ended by its first fault", stockRaw.ended, stockRaw.missed)
	}
	if !strings.Contains(out.String(), "initial-state fetches") || !strings.Contains(out.String(), "verdict: ") {
		t.Error("no table or no verdict")
	}
}

func TestRecoveryTracker(t *testing.T) {
	tr := &recoveryTracker{}
	at := time.Unix(100, 0)
	tr.fault(at, 10)
	tr.fault(at.Add(time.Second), 20)
	tr.observe(at.Add(500*time.Millisecond), 10, 0) // caught up when it struck: not yet back
	tr.observe(at.Add(2*time.Second), 15, 0)
	got := tr.stats()
	want := recoveryStats{count: 1, unrecovered: 1, mean: 2 * time.Second, max: 2 * time.Second}
	if got != want {
		t.Fatalf("after one recovery: %+v, want %+v", got, want)
	}
	tr.observe(at.Add(4*time.Second), 20, 0)
	if got := tr.stats(); got.count != 1 {
		t.Fatalf("recovered at the fault's own RV while the writer runs: %+v", got)
	}
	tr.observe(at.Add(5*time.Second), 20, 20) // the writer stopped at 20: the final state
	if got := tr.stats(); got.count != 2 || got.max != 4*time.Second || got.mean != 3*time.Second || got.unrecovered != 0 {
		t.Fatalf("after both: %+v", got)
	}
}

// TestDemoKubeconfig runs the --kubeconfig mode, pointed at a quiet demo server: both
// informers list once, count on the client side, and end equal to a fresh LIST.
func TestDemoKubeconfig(t *testing.T) {
	server := demoserver.Start(demoserver.Config{Objects: 20, WriteInterval: -1})
	defer server.Close()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: demo, cluster: {server: "`+server.URL()+`"}}]
users: [{name: demo, user: {}}]
contexts: [{name: demo, context: {cluster: demo, user: demo, namespace: `+server.Namespace()+`}}]
current-context: demo
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for range 5 {
			server.Step()
		}
	}()

	var out bytes.Buffer
	res, err := run(t.Context(), options{duration: 2 * time.Second, settle: 30 * time.Second, kubeconfig: kubeconfig}, &out)
	if err != nil {
		t.Fatal(err)
	}
	printTable(&out, res)
	t.Log("\n" + out.String())
	for _, c := range res.clients {
		if c.fetches != 1 || !c.consistent || c.requests == 0 || c.bytes == 0 || c.fetchBytes == 0 || c.ended || c.watchEnds != 0 {
			t.Errorf("%s: %+v; want one fetch, cache == server and no watch ended", c.name, c)
		}
	}
	if strings.Contains(out.String(), "faults injected") {
		t.Error("the table reports faults for a real cluster")
	}
}
