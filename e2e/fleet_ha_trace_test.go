//go:build e2e

package e2e_test

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// haAttempt is one request an agent sent below kretry (what the balancer passed on), and how
// its answer went.
type haAttempt struct {
	At    float64 `json:"at"`              // sent, seconds since the series began
	Fetch bool    `json:"fetch,omitempty"` // an initial-state fetch: a LIST or a watch-list
	RV    string  `json:"rv,omitempty"`    // the resourceVersion asked for
	// Status is the answer's code ("200", "410", "503", ...), "200+410" for a watch's 200
	// whose stream brought an ERROR 410 (a watch cache's 410), or "error": no answer.
	Status  string  `json:"status"`
	Server  int     `json:"apiserver"`          // which apiserver answered, by its serving certificate; -1: unknown
	NewConn bool    `json:"new_conn,omitempty"` // on a connection opened for it
	Events  int     `json:"events,omitempty"`   // frames of a watch stream besides ERROR 410s: events, bookmarks
	Ended   float64 `json:"ended,omitempty"`    // when its answer ended; 0: open at the run's end
	Error   string  `json:"error,omitempty"`    // why, if not at the end of its body
}

// gone reports whether the attempt was answered 410, either way a watch can be.
func (a haAttempt) gone() bool { return a.Status == "410" || a.Status == "200+410" }

// delivered reports whether the attempt brought its agent up to date: a watch that streamed
// something, or a fetch answered 200.
func (a haAttempt) delivered() bool { return a.Events > 0 || a.Fetch && a.Status == "200" }

// haChain is one 410 handed over to client-go in a kretry run, or one relist without a 410
// before it, and what led to it: the agent's attempts on the wire from the last one that
// delivered (the stream that broke, or the fetch the agent started from: the head) to the
// handover (the relist's first fetch, or the raw watcher's last attempt).
type haChain struct {
	Node int  `json:"node"`
	Raw  bool `json:"raw_watcher,omitempty"` // a raw watcher's end; else an informer's relist
	// At is the relist's first fetch, or the raw watcher's end; HandedAt when the 410 reached
	// client-go: when the last attempt before At ended (the raw watcher's end).
	At       float64 `json:"at"`
	HandedAt float64 `json:"handed_at"`
	// From is the apiserver whose 410 was handed over (the chain's last 410), GoneAt when it
	// came, RV the resume point it was about; From is -1 when no 410 came.
	From   int     `json:"from"`
	GoneAt float64 `json:"gone_at,omitempty"`
	RV     string  `json:"resume_rv,omitempty"`
	// NewConns counts the attempts after the head, up to the handover, on a new connection:
	// the connections the search made.
	NewConns int `json:"new_conns"`
	// PointAt is when the resume point was written (the writer's last write at or below it;
	// the mark if none); HeldBy an apiserver that held it at HandedAt (heldBy), -1: none.
	PointAt  float64     `json:"point_at"`
	HeldBy   int         `json:"held_by"`
	Attempts []haAttempt `json:"attempts"`
}

// last is the chain's last attempt before the handover: the raw watcher's last, or the one
// before the relist's fetch.
func (c haChain) last() haAttempt {
	if c.Raw {
		return c.Attempts[len(c.Attempts)-1]
	}
	return c.Attempts[len(c.Attempts)-2]
}

// late reports whether the 410 handed over came before the chain's last attempt, which was
// answered without one: the search found an apiserver, its stream broke later, and the 410
// was handed over then, nothing asked after the break.
func (c haChain) late() bool {
	return c.From >= 0 && len(c.Attempts) > 1 && !c.last().gone() && c.last().At > c.GoneAt
}

// haChains finds an agent's handovers in its attempts after markAt: each run of fetches that
// follows a watch (an informer's relist) or, for a raw watcher that ended on a 410 at rawEnd
// (seconds; negative for an informer), its last attempt before then; PointAt and HeldBy are
// left to the caller.
func haChains(node int, attempts []haAttempt, markAt, rawEnd float64) []haChain {
	raw := rawEnd >= 0
	var ends []int // the handovers' attempts
	if raw {
		for i, a := range attempts {
			if a.At <= rawEnd {
				ends = []int{i}
			}
		}
	} else {
		for i, a := range attempts {
			if a.Fetch && a.At > markAt && i > 0 && !attempts[i-1].Fetch {
				ends = append(ends, i)
			}
		}
	}
	var chains []haChain
	for _, end := range ends {
		head := 0
		for j := end - 1; j >= 0; j-- {
			if attempts[j].delivered() {
				head = j
				break
			}
		}
		c := haChain{Node: node, Raw: raw, At: attempts[end].At, From: -1, HeldBy: -1,
			Attempts: slices.Clone(attempts[head : end+1])}
		search := end // the attempts the search made: up to the raw watcher's last, or before the relist's fetch
		if !raw {
			search = end - 1
		}
		c.HandedAt = attempts[search].Ended
		if raw {
			c.At, c.HandedAt = rawEnd, rawEnd
		}
		for k := head + 1; k <= search; k++ {
			if attempts[k].gone() {
				c.From, c.GoneAt, c.RV = attempts[k].Server, attempts[k].At, attempts[k].RV
			}
			if attempts[k].NewConn {
				c.NewConns++
			}
		}
		chains = append(chains, c)
	}
	return chains
}

// fleetHATrace is a kretry run's chains, with when each resume point was written and whether
// an apiserver held it when its 410 came.
func fleetHATrace(r *fleetHARun, agents []*haAgent, began time.Time, markAt float64, writes []haWrite) []haChain {
	rawEnds := map[int]float64{} // the raw watchers that ended on a 410: when
	for _, w := range r.RawWatchers {
		if w.Ended == "410" {
			rawEnds[w.Node] = w.EndedAt
		}
	}
	var out []haChain
	for _, a := range agents {
		if _, gone := rawEnds[a.node]; a.isRaw && !gone {
			continue
		}
		a.mu.Lock()
		attempts := make([]haAttempt, len(a.attempts))
		for i, att := range a.attempts {
			attempts[i] = *att
		}
		a.mu.Unlock()
		rawEnd := -1.0
		if a.isRaw {
			rawEnd = rawEnds[a.node]
		}
		for _, c := range haChains(a.node, attempts, markAt, rawEnd) {
			if c.From >= 0 {
				c.PointAt = pointTime(c.RV, writes, began, markAt)
				c.HeldBy = r.heldBy(c.PointAt, c.HandedAt)
			}
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b haChain) int { return cmp.Compare(a.At, b.At) })
	return out
}

// pointTime is when resourceVersion rv was written, in seconds since began: the send time of
// the writer's last write at or below it; markAt if it is older than every write.
func pointTime(rv string, writes []haWrite, began time.Time, markAt float64) float64 {
	want, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return markAt
	}
	at, best := markAt, uint64(0)
	for _, w := range writes {
		if w.rv <= want && w.rv > best {
			at, best = w.at.Sub(began).Seconds(), w.rv
		}
	}
	return at
}

// fleetHATracePath is where the trace goes beside the runs' JSON at path: x.json, x-trace.json.
func fleetHATracePath(path string) string { return strings.TrimSuffix(path, ".json") + "-trace.json" }

// haTraceRun is one kretry run's trace in the trace file, with what it needs to be read alone.
type haTraceRun struct {
	APIServers int         `json:"apiservers"`
	Pace       string      `json:"pace"`
	Client     string      `json:"client"`
	Run        int         `json:"run"`
	RestartLog []haRestart `json:"restart_log"`
	Trace      []haChain   `json:"trace"`
}

// writeFleetHATraces writes the kretry runs' traces to path, one chain a line.
func writeFleetHATraces(path string, agents int, runs []*fleetHARun) error {
	var out []haTraceRun
	for _, r := range runs {
		if r.Client == "kretry" {
			out = append(out, haTraceRun{r.servers(), r.Pace, r.Client, r.Run, r.RestartLog, r.Trace})
		}
	}
	data, err := json.Marshal(struct {
		Agents int          `json:"agents"`
		Runs   []haTraceRun `json:"runs"`
	}{agents, out})
	if err != nil {
		return err
	}
	// One chain a line, so that a reader can grep for a node.
	data = bytes.ReplaceAll(data, []byte(`{"node":`), []byte("\n{\"node\":"))
	return os.WriteFile(path, data, 0o644)
}

// fleetHATraceShown is how many chains a run's summary spells out; the trace file has them all.
const fleetHATraceShown = 12

// fleetHATraceSummary sums up a kretry run's trace for the log: whose 410s were handed over,
// after how many new connections, which apiservers answered the searches, and whether one held
// the resume point; then the first chains, attempt by attempt. Empty for stock's runs.
func fleetHATraceSummary(r *fleetHARun) string {
	if r.Client != "kretry" {
		return ""
	}
	var b strings.Builder
	relists, raw, late := 0, 0, 0
	from, conns, held := map[int]int{}, map[int]int{}, map[int]int{}
	type answers struct{ all, gone int }
	answered := map[int]*answers{}
	for _, c := range r.Trace {
		if c.Raw {
			raw++
		} else {
			relists++
		}
		from[c.From]++
		if c.From >= 0 {
			conns[c.NewConns]++
			held[c.HeldBy]++
		}
		if c.late() {
			late++
		}
		search := c.Attempts[1:]
		if !c.Raw {
			search = search[:len(search)-1] // the relist's fetch is not the search's
		}
		for _, a := range search {
			if answered[a.Server] == nil {
				answered[a.Server] = &answers{}
			}
			answered[a.Server].all++
			if a.gone() {
				answered[a.Server].gone++
			}
		}
	}
	fmt.Fprintf(&b, "trace, %s: %d relists, %d raw watchers ended on a 410", r.name(), relists, raw)
	var restarts []string
	for _, rs := range r.RestartLog {
		restarts = append(restarts, fmt.Sprintf("a%d %.1f-%.1f", rs.Server, rs.Term, rs.Ready))
	}
	fmt.Fprintf(&b, " (restarts, SIGTERM-ready s: %s)\n", strings.Join(restarts, ", "))
	if len(r.Trace) == 0 {
		return b.String()
	}
	count := func(m map[int]int, name func(int) string) string {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(m)) {
			parts = append(parts, fmt.Sprintf("%s ×%d", name(k), m[k]))
		}
		return strings.Join(parts, ", ")
	}
	fmt.Fprintf(&b, "  410 handed over from: %s\n", count(from, func(k int) string {
		if k < 0 {
			return "no 410 (a relist after something else)"
		}
		return fmt.Sprintf("apiserver %d", k)
	}))
	fmt.Fprintf(&b, "  new connections the search made before it: %s\n", count(conns, strconv.Itoa))
	var ans []string
	for _, k := range slices.Sorted(maps.Keys(answered)) {
		ans = append(ans, fmt.Sprintf("%s %d (410: %d)", serverName(k), answered[k].all, answered[k].gone))
	}
	fmt.Fprintf(&b, "  attempts after the stream broke, by who answered: %s\n", strings.Join(ans, ", "))
	fmt.Fprintf(&b, "  an apiserver held the resume point when the 410 was handed over: %s\n", count(held, func(k int) string {
		if k < 0 {
			return "none (a true 410)"
		}
		return fmt.Sprintf("apiserver %d", k)
	}))
	if late > 0 {
		fmt.Fprintf(&b, "  handed over late, %d: the search had found an apiserver, its stream broke later, and the 410 came\n"+
			"    over then, nothing asked after the break\n", late)
	}
	for i, c := range r.Trace {
		if i == fleetHATraceShown {
			fmt.Fprintf(&b, "  ... %d more in the trace file\n", len(r.Trace)-i)
			break
		}
		b.WriteString("  " + c.String() + "\n")
	}
	return b.String()
}

// serverName is "a<i>" for apiserver i, "a?" when unknown.
func serverName(i int) string {
	if i < 0 {
		return "a?"
	}
	return "a" + strconv.Itoa(i)
}

// String is the chain on one line: what ended, each attempt (time, status, apiserver, * for a
// new connection), and the verdict.
func (c haChain) String() string {
	var b strings.Builder
	what := "relist"
	if c.Raw {
		what = "raw watcher ended"
	}
	fmt.Fprintf(&b, "%s %s at %.1fs:", nodeName(c.Node), what, c.At)
	for i, a := range c.Attempts {
		kind := ""
		if a.Fetch {
			kind = "fetch "
		}
		fmt.Fprintf(&b, " %.1f %s%s %s", a.At, kind, a.Status, serverName(a.Server))
		if a.NewConn {
			b.WriteString("*")
		}
		if i == 0 && a.Ended > 0 {
			fmt.Fprintf(&b, " (ended %.1f)", a.Ended)
		}
		if i < len(c.Attempts)-1 {
			b.WriteString(";")
		}
	}
	if c.From < 0 {
		b.WriteString(" | no 410 before it")
		return b.String()
	}
	held := "no apiserver held it"
	if c.HeldBy >= 0 {
		held = fmt.Sprintf("apiserver %d held it", c.HeldBy)
	}
	connections := "connections"
	if c.NewConns == 1 {
		connections = "connection"
	}
	fmt.Fprintf(&b, " | 410 from apiserver %d at %.1fs after %d new %s", c.From, c.GoneAt, c.NewConns, connections)
	if c.late() {
		last := c.last()
		fmt.Fprintf(&b, ", handed over at %.1fs when %s's %s ended, nothing asked since", c.HandedAt, serverName(last.Server), last.Status)
	}
	fmt.Fprintf(&b, "; point rv %s written at %.1fs, at the handover %s", c.RV, c.PointAt, held)
	return b.String()
}

// TestFleetHAChains: the trace's chains without a control plane.
func TestFleetHAChains(t *testing.T) {
	stream := func(at float64, server int, events int, ended float64, newConn bool) haAttempt {
		return haAttempt{At: at, RV: "100", Status: "200", Server: server, Events: events, Ended: ended, NewConn: newConn}
	}
	gone := func(at float64, server int, newConn bool) haAttempt {
		return haAttempt{At: at, RV: "150", Status: "200+410", Server: server, NewConn: newConn, Ended: at}
	}
	fetch := func(at float64) haAttempt {
		return haAttempt{At: at, Fetch: true, Status: "200", Server: 0, Events: 6}
	}
	const informer = -1 // no raw watcher's end
	for _, tc := range []struct {
		name     string
		attempts []haAttempt
		rawEnd   float64
		want     []haChain // Attempts compared by count
		late     bool
	}{
		{"no relist", []haAttempt{fetch(1), stream(20, 1, 4, 30, true), stream(30.2, 0, 2, 0, true)}, informer, nil, false},
		{"a relist after three 410s from apiserver 1, two on new connections",
			[]haAttempt{fetch(1), stream(20, 0, 4, 30, false), gone(30.1, 1, true), gone(30.3, 1, false), gone(30.6, 1, true), fetch(31)}, informer,
			[]haChain{{At: 31, HandedAt: 30.6, From: 1, GoneAt: 30.6, RV: "150", NewConns: 2, HeldBy: -1, Attempts: make([]haAttempt, 5)}}, false},
		{"the fetch before the mark is the informer's first, not a relist",
			[]haAttempt{stream(1, 0, 0, 2, false), fetch(2), stream(3, 0, 1, 0, false)}, informer, nil, false},
		{"a resume that streamed nothing is not the head: the chain goes back to the stream that did",
			[]haAttempt{fetch(1), stream(20, 0, 4, 30, false), stream(30.1, 1, 0, 40, false), gone(40.2, 1, true), fetch(41)}, informer,
			[]haChain{{At: 41, HandedAt: 40.2, From: 1, GoneAt: 40.2, RV: "150", NewConns: 1, HeldBy: -1, Attempts: make([]haAttempt, 4)}}, false},
		{"a relist after errors, no 410",
			[]haAttempt{fetch(1), stream(20, 0, 4, 30, false), {At: 30.1, Status: "error", Server: -1, NewConn: true, Ended: 30.1}, fetch(31)}, informer,
			[]haChain{{At: 31, HandedAt: 30.1, From: -1, NewConns: 1, HeldBy: -1, Attempts: make([]haAttempt, 3)}}, false},
		{"a raw watcher's end on a 410: its LIST is the head when its stream brought nothing",
			[]haAttempt{fetch(1), stream(1.1, 0, 0, 30, false), gone(30.1, 1, true), gone(30.4, 1, true)}, 30.42,
			[]haChain{{Raw: true, At: 30.42, HandedAt: 30.42, From: 1, GoneAt: 30.4, RV: "150", NewConns: 2, HeldBy: -1, Attempts: make([]haAttempt, 4)}}, false},
		// Seen at N = 100 behind two apiservers: the search found apiserver 1; when its stream
		// broke 18 s later the relist came with nothing asked after the break.
		{"a late handover: the 410s, then a stream from another apiserver, then the relist",
			[]haAttempt{fetch(1), gone(5.6, 0, true), gone(6.8, 0, false), stream(6.9, 1, 0, 24.95, true), fetch(26.1)}, informer,
			[]haChain{{At: 26.1, HandedAt: 24.95, From: 0, GoneAt: 6.8, RV: "150", NewConns: 2, HeldBy: -1, Attempts: make([]haAttempt, 5)}}, true},
		{"a raw watcher's late end",
			[]haAttempt{stream(0.3, 0, 1, 5.6, false), gone(5.6, 0, true), stream(6.9, 1, 0, 24.95, true)}, 24.951,
			[]haChain{{Raw: true, At: 24.951, HandedAt: 24.951, From: 0, GoneAt: 5.6, RV: "150", NewConns: 2, HeldBy: -1, Attempts: make([]haAttempt, 3)}}, true},
	} {
		got := haChains(7, tc.attempts, 10, tc.rawEnd)
		if len(got) != len(tc.want) {
			t.Errorf("%s: %d chains, want %d: %+v", tc.name, len(got), len(tc.want), got)
			continue
		}
		for i, c := range got {
			w := tc.want[i]
			w.Node = 7
			if len(c.Attempts) != len(w.Attempts) {
				t.Errorf("%s: chain %d has %d attempts, want %d: %s", tc.name, i, len(c.Attempts), len(w.Attempts), c)
			}
			if c.late() != tc.late {
				t.Errorf("%s: late %v, want %v: %s", tc.name, c.late(), tc.late, c)
			}
			type fields haChain // without String, to compare every field
			c.Attempts, w.Attempts = nil, nil
			if g, w := fmt.Sprintf("%+v", fields(c)), fmt.Sprintf("%+v", fields(w)); g != w {
				t.Errorf("%s: chain %d\n got %s\nwant %s", tc.name, i, g, w)
			}
		}
	}
}

// TestPointTime: a resume point is dated by the writer's last write at or below it.
func TestPointTime(t *testing.T) {
	began := time.Now()
	writes := []haWrite{{rv: 120, at: began.Add(12 * time.Second)}, {rv: 100, at: began.Add(10 * time.Second)}, {rv: 140, at: began.Add(14 * time.Second)}}
	for _, tc := range []struct {
		rv   string
		want float64
	}{{"130", 12}, {"140", 14}, {"99", 5}, {"", 5}, {"1000", 14}} {
		if got := pointTime(tc.rv, writes, began, 5); got != tc.want {
			t.Errorf("rv %q: %v, want %v", tc.rv, got, tc.want)
		}
	}
}

// TestFleetHATraceFile: the trace file beside the JSON holds kretry's runs, one chain a line.
func TestFleetHATraceFile(t *testing.T) {
	path := fleetHATracePath(t.TempDir() + "/fleet-ha.json")
	if !strings.HasSuffix(path, "/fleet-ha-trace.json") {
		t.Fatalf("trace path %s", path)
	}
	chains := []haChain{{Node: 3, From: 1, Attempts: []haAttempt{{At: 1, Status: "200+410"}}}, {Node: 4, From: -1}}
	runs := []*fleetHARun{{APIServers: 3, Pace: "cloud", Client: "stock", Run: 1}, {APIServers: 3, Pace: "cloud", Client: "kretry", Run: 1, Trace: chains}}
	if err := writeFleetHATraces(path, 50, runs); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Agents int          `json:"agents"`
		Runs   []haTraceRun `json:"runs"`
	}
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if got.Agents != 50 || len(got.Runs) != 1 || got.Runs[0].Client != "kretry" || len(got.Runs[0].Trace) != 2 || got.Runs[0].Trace[0].Attempts[0].Status != "200+410" {
		t.Errorf("read back %+v", got)
	}
	if lines := strings.Count(string(data), "\n"); lines != 2 {
		t.Errorf("%d line breaks, want one before each of the 2 chains:\n%s", lines, data)
	}
}
