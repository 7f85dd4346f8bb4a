//go:build e2e

package e2e_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kretry/kretry/internal/harness/apiserver"
	"github.com/kretry/kretry/internal/harness/faultproxy"
)

// proxySeedObjects is how many ConfigMaps the namespace holds before the clients start: kubectl
// prints them first, so its watch events are the lines after these.
const proxySeedObjects = 10

// proxyCutsPerMinute is the rate of random cuts on every connection opened after the writer
// started.
const proxyCutsPerMinute = 20

// proxyClientSpec is one of the three clients nobody here wrote.
type proxyClientSpec struct {
	name string
	seed uint64
	// args starts it: straight at the API server with kubeconfig, or at kretry-proxy's URL.
	start func(t *testing.T, tools clientTools, began time.Time, ns, kubeconfig, proxyURL string) *process
	// ready reports whether it has its initial state.
	ready func(lines []outLine) bool
}

var proxyClients = []proxyClientSpec{
	{
		name: "kubectl",
		seed: 11,
		start: func(t *testing.T, tools clientTools, began time.Time, ns, kubeconfig, proxyURL string) *process {
			args := []string{"--cache-dir", t.TempDir()}
			if proxyURL != "" {
				args = append(args, "--server="+proxyURL) // the one-line change
			} else {
				args = append(args, "--kubeconfig", kubeconfig)
			}
			args = append(args, "get", "configmaps", "-n", ns, "-w", "-o", "name")
			return startProcess(t, "kubectl", began, "", tools.kubectl, args...)
		},
		ready: func(lines []outLine) bool { return len(lines) >= proxySeedObjects },
	},
	{
		name: "python",
		seed: 12,
		start: func(t *testing.T, tools clientTools, began time.Time, ns, kubeconfig, proxyURL string) *process {
			args := []string{tools.pythonCache, "--namespace", ns}
			if proxyURL != "" {
				args = append(args, "--server", proxyURL)
			} else {
				args = append(args, "--kubeconfig", kubeconfig)
			}
			return startProcess(t, "python", began, "", tools.python, args...)
		},
		ready: func(lines []outLine) bool {
			return slices.ContainsFunc(jsonLines(lines), func(o map[string]any) bool { return o["list"] != nil })
		},
	},
	{
		name: "client-node",
		seed: 13,
		start: func(t *testing.T, tools clientTools, began time.Time, ns, kubeconfig, proxyURL string) *process {
			args := []string{"informer.mjs", "--namespace", ns}
			if proxyURL != "" {
				args = append(args, "--server", proxyURL)
			} else {
				args = append(args, "--kubeconfig", kubeconfig)
			}
			return startProcess(t, "client-node", began, tools.nodeDir, tools.node, args...)
		},
		ready: func(lines []outLine) bool {
			listed := 0
			for _, o := range jsonLines(lines) {
				if o["src"] == "list" {
					listed++
				}
			}
			return listed >= proxySeedObjects
		},
	},
}

// proxyPath is one client on one path: straight at the API server through the fault proxy
// (stock), or through kretry-proxy, which reaches the API server through the fault proxy.
type proxyPath struct {
	spec      proxyClientSpec
	kretry    bool
	tcp       *faultproxy.Proxy // cuts
	faults    *apiFaults        // 503s, ERROR events, wire counts
	proxy     *process          // kretry-proxy, nil for stock
	proxyAddr string
	client    *process
}

func (p *proxyPath) pathName() string {
	if p.kretry {
		return "kretry-proxy"
	}
	return "stock"
}

// TestProxyClients: kubectl get -w, a Python list-then-watch cache and a client-node informer,
// each run twice at once: straight at the API server (stock) and through kretry-proxy. Both
// paths go through the same faults: a TCP fault proxy that cuts every connection (all at 5s,
// then 20 per minute at random, all again at 20s) and, behind it, an HTTP fault injector that
// ends a watch with an ERROR 500 InternalError event (at 12s and 30s) and answers ConfigMap
// LISTs and WATCHes 503 for 4s from 20s on (a rolling upgrade), while a writer changes
// ConfigMaps for 40s. A reference watch straight to the API server records every change.
//
// Through kretry-proxy every client must see one LIST and one WATCH, no error, every change
// exactly once and in order, and end with cache == server (kubectl: keep running and print
// every change). What the stock clients do is recorded, not asserted, except that stock
// kubectl must have exited (else the scenario cut nothing).
func TestProxyClients(t *testing.T) {
	sharedCluster(t)
	tools := findClientTools(t)
	ctx := context.Background()
	ns := namespace(t, serverA, "proxy", proxySeedObjects)
	admin := adminClient(serverA)
	start, gens, listRV := listState(t, serverA, ns)
	began := time.Now()
	ref := startRawWatcher(t, began, admin.CoreV1().ConfigMaps(ns), strconv.FormatUint(listRV, 10), false)

	var paths []*proxyPath
	for _, spec := range proxyClients {
		for _, viaProxy := range []bool{false, true} {
			p := &proxyPath{spec: spec, kretry: viaProxy, faults: newAPIFaults(t, serverA)}
			var err error
			if p.tcp, err = faultproxy.New(spec.seed, p.faults.Addr()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.tcp.Close() })
			straight := writeKubeconfig(t, "https://"+p.tcp.Addr(), cluster.Token(apiserver.Admin))
			proxyURL := ""
			if viaProxy {
				p.proxy, p.proxyAddr = startKretryProxy(t, tools, began, "kretry-proxy for "+spec.name, straight)
				proxyURL = "http://" + p.proxyAddr
			}
			p.client = spec.start(t, tools, began, ns, straight, proxyURL)
			paths = append(paths, p)
		}
	}
	for _, p := range paths {
		deadline := time.Now().Add(60 * time.Second)
		for !p.spec.ready(p.client.output()) {
			if p.client.exited() || time.Now().After(deadline) {
				err, _, _ := p.client.exit()
				t.Fatalf("%s (%s) did not get its initial state (exit: %v); stdout %q; stderr: %s",
					p.spec.name, p.pathName(), err, p.client.output(), p.client.stderrTail())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	// The faults, on every path at once.
	t0 := time.Now()
	w := startWriter(t, serverA, ns, 21, 100*time.Millisecond)
	each := func(f func(p *proxyPath)) {
		for _, p := range paths {
			f(p)
		}
	}
	at := func(d time.Duration) { time.Sleep(time.Until(t0.Add(d))) }
	each(func(p *proxyPath) { p.tcp.SetRule(faultproxy.Rule{CutsPerMinute: proxyCutsPerMinute}) })
	at(5 * time.Second)
	each(func(p *proxyPath) { p.tcp.CutAll() })
	at(12 * time.Second)
	each(func(p *proxyPath) { p.faults.InternalError() })
	at(20 * time.Second)
	each(func(p *proxyPath) { p.faults.Unavailable(4 * time.Second); p.tcp.CutAll() })
	at(30 * time.Second)
	each(func(p *proxyPath) { p.faults.InternalError() })
	at(36 * time.Second)
	each(func(p *proxyPath) { p.tcp.SetRule(faultproxy.Rule{}) })
	at(40 * time.Second)
	w.Stop()
	final, err := serverState(ctx, serverA, ns)
	if err != nil {
		t.Fatal(err)
	}

	// Settle: until the reference and every client through kretry-proxy have every change
	// (at most 20s), then 3s more for the stock ones.
	var refEvents []rawEvent
	settled := func() bool {
		refEvents = ref.snapshot()
		if got, _ := replay(start, gens, listRV, refEvents); fmt.Sprint(got) != fmt.Sprint(final) {
			return false
		}
		for _, p := range paths {
			if p.kretry && len(deliveredEvents(p, p.client.output())) < len(refEvents) {
				return false
			}
		}
		return true
	}
	for deadline := time.Now().Add(20 * time.Second); !settled() && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(3 * time.Second)
	refEvents = ref.snapshot()
	ref.stopAndWait()
	if _, problems := replay(start, gens, listRV, refEvents); len(problems) > 0 || len(ref.closes) > 0 || len(ref.watchErrs) > 0 {
		t.Fatalf("reference watch (no proxy) is not a valid reference: closes=%+v watch errors=%v problems=%v", ref.closes, ref.watchErrs, problems)
	}
	writes, fails, _ := w.Stats()

	// Stop the clients (SIGTERM: the Python and Node clients print their caches), ask every
	// kretry-proxy what it served (a request is counted when it is over), then stop the
	// proxies, which must shut down cleanly.
	runningAtEnd := map[*proxyPath]bool{}
	var wg sync.WaitGroup
	for _, p := range paths {
		runningAtEnd[p] = !p.client.exited()
		wg.Add(1)
		go func() { defer wg.Done(); p.client.stop(10 * time.Second) }()
	}
	wg.Wait()
	metrics := map[*proxyPath]func(string, ...string) int{}
	for _, p := range paths {
		if p.kretry {
			if metrics[p], err = proxyMetrics(p.proxyAddr); err != nil {
				t.Errorf("%s: kretry-proxy /metrics: %v", p.spec.name, err)
			}
		}
	}
	for _, p := range paths {
		if p.kretry && !p.proxy.stop(15*time.Second) {
			t.Errorf("kretry-proxy for %s did not shut down within 15s of SIGTERM; stderr: %s", p.spec.name, p.proxy.stderrTail())
		} else if p.kretry {
			if err, _, _ := p.proxy.exit(); err != nil {
				t.Errorf("kretry-proxy for %s exited with %v; stderr: %s", p.spec.name, err, p.proxy.stderrTail())
			}
		}
	}

	for _, p := range paths {
		f := proxyFigureFor(t, p, metrics[p], refEvents, final, runningAtEnd[p], t0.Sub(began))
		if fails > 0 {
			f.Note += fmt.Sprintf("; %d writes failed", fails)
		}
		f.Writes = writes
		recordProxyFigure(f)
		t.Logf("%s/%s: %+v", f.Client, f.Path, f)
	}
	writeProxyFiguresFile()
	t.Log("\n" + proxyFiguresTable())
}

// deliveredEvent is a watch event as a client reported it.
type deliveredEvent struct {
	Type string // ADDED, MODIFIED, DELETED (Python); "" where the client does not say
	Name string
	RV   uint64
}

// deliveredEvents are the watch events p's client delivered, in order. kubectl prints names
// only (the lines after the initial list); client-node reports its handlers' calls, of which
// those made from a list are not events.
func deliveredEvents(p *proxyPath, lines []outLine) []deliveredEvent {
	var evs []deliveredEvent
	switch p.spec.name {
	case "kubectl":
		for i, l := range lines {
			if i >= proxySeedObjects {
				evs = append(evs, deliveredEvent{Name: strings.TrimPrefix(l.Text, "configmap/")})
			}
		}
	default:
		for _, o := range jsonLines(lines) {
			typ, isEvent := o["event"].(string)
			if !isEvent || o["src"] == "list" {
				continue
			}
			rv, _ := strconv.ParseUint(fmt.Sprint(o["rv"]), 10, 64)
			if p.spec.name == "client-node" {
				typ = ""
			}
			evs = append(evs, deliveredEvent{Type: typ, Name: fmt.Sprint(o["name"]), RV: rv})
		}
	}
	return evs
}

// proxyFigure is one row of the kretry-proxy table.
type proxyFigure struct {
	Client, Path        string
	Fetches, Fetches200 int // LISTs the client sent; LISTs the API server answered 200
	Watches, WireWatch  int // WATCHes the client sent; WATCHes that reached the API server
	Unavailable, Errors int // 503 answers and ERROR 500 events injected on the path
	Cuts                int
	Ended               int // times the client saw its watch end with an error (kubectl: exited)
	Missed, Changes     int // reference events the client never delivered, of all
	Cache               string
	Writes              int
	Note                string
}

// proxyFigureFor measures one path and, for kretry-proxy paths, checks the claims.
// faultsAt is when the faults began, as process output times count (since the scenario began).
func proxyFigureFor(t *testing.T, p *proxyPath, metric func(string, ...string) int, ref []rawEvent, final state, running bool, faultsAt time.Duration) proxyFigure {
	t.Helper()
	wire := p.faults.counts()
	f := proxyFigure{Client: p.spec.name, Path: p.pathName(),
		Fetches: wire.Lists + wire.UnavailableLists, Fetches200: wire.Lists200,
		Watches: wire.Watches + wire.WatchLists + wire.UnavailableWatches, WireWatch: wire.Watches + wire.WatchLists,
		Unavailable: wire.UnavailableLists + wire.UnavailableWatches, Errors: wire.InternalErrors,
		Cuts: int(p.tcp.Stats().Cuts), Changes: len(ref), Cache: "n/a"}
	if p.kretry && metric != nil {
		f.Fetches = metric("kretry_proxy_requests_total", `class="list"`)
		f.Watches = metric("kretry_proxy_requests_total", `class="watch"`) + metric("kretry_proxy_requests_total", `class="watch_list"`)
	}
	fail := func(format string, args ...any) {
		t.Helper()
		if p.kretry {
			t.Errorf("%s through kretry-proxy: %s", p.spec.name, fmt.Sprintf(format, args...))
		}
	}
	lines := p.client.output()
	got := deliveredEvents(p, lines)
	var notes []string

	switch p.spec.name {
	case "kubectl":
		matched := 0
		for matched < len(got) && matched < len(ref) && got[matched].Name == ref[matched].Name {
			matched++
		}
		f.Missed = len(ref) - matched
		if extra := len(got) - matched; extra > 0 {
			notes = append(notes, fmt.Sprintf("%d lines out of order or repeated", extra))
			fail("%d printed changes differ from the reference from change %d on", extra, matched)
		}
		if running {
			notes = append(notes, fmt.Sprintf("ran to the end, printed %d of %d changes", matched, len(ref)))
		} else {
			f.Ended = 1
			err, at, _ := p.client.exit()
			how := "status 0, no message"
			if err != nil {
				how = fmt.Sprintf("%v: %s", err, lastLine(p.client.stderrTail()))
			}
			notes = append(notes, fmt.Sprintf("exited %v into the faults (%s) after %d of %d changes",
				(at-faultsAt).Round(100*time.Millisecond), how, matched, len(ref)))
			fail("exited at %v: %v: %s", at, err, p.client.stderrTail())
		}
		if !p.kretry && running {
			t.Errorf("stock kubectl ran to the end: the scenario cut nothing")
		}
	default:
		objs := jsonLines(lines)
		var cache map[string]any
		listFailures, listCalls := 0, 0
		endedBy := map[string]int{}
		for _, o := range objs {
			switch {
			case o["cache"] != nil: // the last line, with the totals
				cache, _ = o["cache"].(map[string]any)
				lists, _ := o["lists"].(float64)
				listCalls = int(lists)
			case o["ended"] != nil:
				f.Ended++
				endedBy[fmt.Sprint(o["ended"])]++
			case o["list_failed"] != nil:
				listFailures++
			}
		}
		if cache == nil {
			f.Cache = "NO (no cache printed)"
			err, at, _ := p.client.exit()
			fail("no cache printed at SIGTERM (exit %v at %v); last lines %q; stderr: %s", err, at, lastLines(lines, 5), p.client.stderrTail())
		} else {
			s := state{}
			for name, rv := range cache {
				s[name] = fmt.Sprint(rv)
			}
			if fmt.Sprint(s) == fmt.Sprint(final) {
				f.Cache = "yes"
			} else {
				f.Cache = "NO"
				fail("cache != server:\ncache  %v\nserver %v", s, final)
			}
		}
		delivered := map[uint64]int{}
		for _, e := range got {
			delivered[e.RV]++
		}
		for _, e := range ref {
			if delivered[e.RV] == 0 {
				f.Missed++
			}
		}
		dups := 0
		for _, n := range delivered {
			dups += n - 1
		}
		if dups > 0 {
			notes = append(notes, fmt.Sprintf("%d events delivered twice", dups))
		}
		if p.kretry {
			if listCalls != 1 || f.Ended != 0 {
				fail("%d list calls and %d ended watches, want 1 and 0", listCalls, f.Ended)
			}
			for i := range max(len(got), len(ref)) {
				var want deliveredEvent
				if i < len(ref) {
					want = deliveredEvent{Type: string(ref[i].Type), Name: ref[i].Name, RV: ref[i].RV}
					if p.spec.name == "client-node" {
						want.Type = ""
					}
				}
				if i >= len(got) || got[i] != want {
					fail("event %d: got %+v, want %+v (every change exactly once, in order)", i, eventAt(got, i), want)
					break
				}
			}
		}
		if len(endedBy) > 0 {
			var by []string
			for what, n := range endedBy {
				by = append(by, fmt.Sprintf("%d× %s", n, what))
			}
			slices.Sort(by)
			notes = append(notes, "ended by "+strings.Join(by, ", "))
		}
		notes = append(notes, fmt.Sprintf("%d list calls (%d failed)", listCalls, listFailures))
		if p.spec.name == "python" {
			notes[len(notes)-1] += ", relists after every error"
		} else {
			notes[len(notes)-1] += ", restarted after every error"
		}
	}
	if p.kretry {
		if f.Fetches != 1 || f.Watches != 1 {
			fail("kretry-proxy served %d LISTs and %d WATCHes, want 1 and 1", f.Fetches, f.Watches)
		}
		if f.Missed != 0 {
			fail("%d of %d changes missed", f.Missed, len(ref))
		}
		if forwarded := wire.Lists + wire.Watches + wire.WatchLists; wire.OverHTTP2 != forwarded {
			fail("%d of its %d requests reached the API server's side over HTTP/2, want all", wire.OverHTTP2, forwarded)
		}
		if f.Errors == 0 || f.Unavailable == 0 || f.WireWatch < 2 {
			fail("the path saw %d ERROR events, %d 503s and %d watches on the wire: the scenario did not exercise it", f.Errors, f.Unavailable, f.WireWatch)
		}
	}
	f.Note = strings.Join(notes, "; ")
	return f
}

func eventAt(evs []deliveredEvent, i int) any {
	if i < len(evs) {
		return evs[i]
	}
	return "nothing"
}

func lastLines(lines []outLine, n int) []outLine { return lines[max(0, len(lines)-n):] }

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	l := lines[len(lines)-1]
	if len(l) > 120 {
		l = l[:120] + "…"
	}
	return l
}

var (
	proxyFiguresMu sync.Mutex
	proxyFigures   []proxyFigure
)

func recordProxyFigure(f proxyFigure) {
	proxyFiguresMu.Lock()
	proxyFigures = append(proxyFigures, f)
	proxyFiguresMu.Unlock()
}

func proxyFiguresTable() string {
	proxyFiguresMu.Lock()
	defer proxyFiguresMu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "%-11s %-12s %7s %4s %7s %4s %3s %3s %4s %5s %9s %-12s %s\n",
		"client", "path", "fetches", "200s", "watches", "wire", "503", "ERR", "cuts", "ended", "missed", "cache=server", "note")
	for _, f := range proxyFigures {
		fmt.Fprintf(&b, "%-11s %-12s %7d %4d %7d %4d %3d %3d %4d %5d %9s %-12s %s\n",
			f.Client, f.Path, f.Fetches, f.Fetches200, f.Watches, f.WireWatch, f.Unavailable, f.Errors, f.Cuts, f.Ended,
			fmt.Sprintf("%d/%d", f.Missed, f.Changes), f.Cache, f.Note)
	}
	b.WriteString("fetches: LISTs the client sent (stock: as the API server's side of the cut link got them, 503s included;\n" +
		"  kretry-proxy: as it served them); 200s: LISTs the API server answered 200 (each a full list it paid for);\n" +
		"watches, wire: WATCH requests the client sent, and those that reached the API server; 503, ERR: injected 503 answers\n" +
		"  and ERROR 500 InternalError events; cuts: TCP connections cut; ended: times the client saw its watch end with an\n" +
		"  error (kubectl: exited); missed: changes of the reference watch the client never delivered as an event;\n" +
		"cache=server: the client's cache at the end equals a consistent LIST (kubectl keeps none).\n")
	return b.String()
}

func writeProxyFiguresFile() {
	if path := figuresPath("e2e-proxy-figures.txt"); path != "" {
		os.WriteFile(path, []byte(proxyFiguresTable()), 0o644)
	}
}
