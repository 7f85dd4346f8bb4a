package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kretry/kretry/internal/harness/demoserver"
)

func TestMain(m *testing.M) {
	quietKlog()
	os.Exit(m.Run())
}

// TestDemo runs the demo briefly at a high fault rate with the default seed and checks
// its promise: kretry's informer fetches the full state once plus once per 410 Expired,
// nothing else; its cache ends equal to the server's; the plain informer relists more.
func TestDemo(t *testing.T) {
	var out bytes.Buffer
	res, err := run(t.Context(), options{
		duration:  6 * time.Second,
		settle:    30 * time.Second,
		objects:   40,
		faultRate: 3,
		seed:      defaultSeed,
	}, &out)
	if err != nil {
		t.Fatal(err)
	}
	printTable(&out, res)
	t.Log("\n" + out.String())

	plain, kretry := res.clients[0], res.clients[1]
	if kretry.faults == 0 || plain.faults == 0 {
		t.Fatalf("faults injected: plain %d, kretry %d; want some into both", plain.faults, kretry.faults)
	}
	if kretry.fetches != 1+kretry.expired {
		t.Errorf("kretry: %d initial-state fetches with %d 410s; want exactly 1 + one per 410", kretry.fetches, kretry.expired)
	}
	if !kretry.consistent {
		t.Error("kretry: cache != server state after the settle wait")
	}
	if kretry.recovery.unrecovered > 0 {
		t.Errorf("kretry: %d faults never recovered from", kretry.recovery.unrecovered)
	}
	// The default schedule opens with an ERROR 500 event; a stock informer relists on it
	// (its internal-error retry window is off by default), and on every 503 burst.
	relists := plain.faultKinds[demoserver.InternalErrorEvent] + plain.faultKinds[demoserver.Unavailable]
	if relists == 0 {
		t.Fatalf("plain: faults %v, want the schedule's opening ERROR 500 event", plain.faultKinds)
	}
	if plain.fetches < 1+plain.expired+relists {
		t.Errorf("plain: %d initial-state fetches, want at least 1 + %d 410s + %d relisting faults", plain.fetches, plain.expired, relists)
	}
	if !strings.Contains(out.String(), "LISTs (initial-state fetches)") {
		t.Error("no table")
	}
}

func TestRecoveryTracker(t *testing.T) {
	tr := newRecoveryTracker()
	at := time.Unix(100, 0)
	tr.fault(at, 10)
	tr.fault(at.Add(time.Second), 20)
	tr.observe(at.Add(500*time.Millisecond), "9")
	tr.observe(at.Add(2*time.Second), "15")
	tr.observe(at.Add(4*time.Second), "not a number")
	got := tr.stats()
	want := recoveryStats{count: 1, unrecovered: 1, mean: 2 * time.Second, max: 2 * time.Second}
	if got != want {
		t.Fatalf("after one recovery: %+v, want %+v", got, want)
	}
	tr.observe(at.Add(5*time.Second), "20")
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
		if c.fetches != 1 || !c.consistent || c.requests == 0 || c.bytes == 0 {
			t.Errorf("%s: %+v; want one fetch and cache == server", c.name, c)
		}
	}
	if strings.Contains(out.String(), "faults injected") {
		t.Error("the table reports faults for a real cluster")
	}
}
