//go:build e2e

package e2e_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kretry/kretry/internal/harness/apiserver"
	"github.com/kretry/kretry/transport"
)

// Environment knobs of TestFleetHA. Without them it is the small check of `make test`: 50
// agents (5 of them raw watchers), the cloud pace, behind two and then three apiservers, one
// run each of stock and kretry.
const (
	fleetHAAgentsEnv  = "KRETRY_FLEETHA_AGENTS"     // agents (default 50)
	fleetHARawEnv     = "KRETRY_FLEETHA_RAW"        // how many of the agents are raw watchers (default N/10, at least 1; 0: none)
	fleetHARunsEnv    = "KRETRY_FLEETHA_RUNS"       // runs per apiserver count, pace and client (default 1)
	fleetHAPacesEnv   = "KRETRY_FLEETHA_PACES"      // comma-separated: cloud (default), fast
	fleetHAServersEnv = "KRETRY_FLEETHA_APISERVERS" // comma-separated apiserver counts (default 2,3)
	fleetHAJSONEnv    = "KRETRY_FLEETHA_JSON"       // where the runs, their per-second series and kretry's traces go
	fleetHACheckEnv   = "KRETRY_FLEETHA_CHECK"      // "0": report only, never fail on the figures
)

// fleetHAPodsPerNode is how many pods each agent's node holds.
const fleetHAPodsPerNode = 5

// fleetHARawWatchTimeout is the timeoutSeconds of a raw watcher's one Watch: longer than any
// run, so that it ends on what the upgrade does to it, never on its own timeout.
var fleetHARawWatchTimeout int64 = 3 * 3600

// TestFleetHA: a fleet of node agents through an HA control plane's rolling upgrade. etcd and
// two or three kube-apiservers (KRETRY_FLEETHA_APISERVERS; the flags of TestRollingUpgrade;
// each its own serving certificate, as kubeadm issues them) behind HAProxy at one of
// TestRollingUpgrade's health-check paces; N nodes' worth of pods (5 a node) in one namespace;
// N agents, each with its own clientset, connection and rate limiter (client-go's defaults: 5
// QPS, burst 10), as N kubelets in N processes would have: a pod informer with
// fieldSelector=spec.nodeName=<its node>, protobuf, client-go's defaults (watch-list first), or,
// for KRETRY_FLEETHA_RAW of them (spread over the nodes), a raw watcher: one LIST of its node's
// pods, then one Watch from that LIST's resourceVersion, never re-watched and never relisted. A
// writer through the balancer patches N/20 pods (at least 5) every second, rotating over the
// nodes, and times each PATCH. Then each kube-apiserver is SIGTERMed and started again in turn,
// twice round, under a stock fleet and under a fleet through kretry (the order alternates run by
// run). Per apiserver count and pace, one cluster serves all runs.
//
// The yardstick, per run over the upgrade (the design's "what kretry may cost the control
// plane"): the apiservers' CPU seconds (summed over them, from /proc, sampled every second) over
// the run and in its busiest 5 s, etcd's range requests (its own metrics), the bytes the
// apiservers sent the agents (read off the agents' TCP connections: TLS handshakes, HTTP/2
// frames and bodies), the informers' relists and initial-state fetches on the wire, and the
// writer's PATCH latency, p50 and p99 of the PATCHes that succeeded (the failed ones are counted
// apart). Reported, not gated: requests through the balancer (all, and the busiest second), the
// 410s answered, new connections, and also initial-state fetches by the apiservers' own metrics,
// the bytes of response bodies, each apiserver's CPU seconds and peak RSS, etcd's CPU. At the
// agents: how long after each restart the first change to each agent's pods reached half and
// all of the caches, caches equal to the server at the end, kretry's retries, resumes and budget
// refusals; of the raw watchers, how many ended before the run did and on what, and the writer's
// changes to their pods they never received. A raw watcher's LIST is not a relist: its agent
// counts its initial-state fetches apart (rawFetches), and it sends its LIST before the
// upgrade's mark.
//
// The trace of a kretry run (fleet_ha_trace_test.go): for each relist and each raw watcher that
// ended on a 410, the watch attempts that led to it on the wire, which apiserver answered each
// (by its certificate), on a new connection or not, and whether an apiserver held the resume
// point when the 410 was handed over. In a file beside the JSON (fleetHATracePath), summed up
// in the log.
//
// The check (unless KRETRY_FLEETHA_CHECK=0; fleet_ha_check_test.go): per apiserver count and
// pace, each figure of the yardstick of each kretry run at or under the median of the stock runs
// plus their spread (max - min), or, with one stock run, plus the figure's margin; every
// informer's cache equals the server at the end; at the cloud pace (and behind three
// apiservers at the fast one too) kretry's raw watchers all watch to the end and miss no change,
// unless on a 410 that was true everywhere (stock's are reported, not checked: a plain Watch
// ends when its apiserver stops).
func TestFleetHA(t *testing.T) {
	if _, err := apiserver.FindBinDir(); err != nil && os.Getenv(apiserver.E2EEnv) == "" {
		t.Skipf("%v; set %s=1 to make this a failure", err, apiserver.E2EEnv)
	}
	n := envInt(t, fleetHAAgentsEnv, 50)
	runs := envInt(t, fleetHARunsEnv, 1)
	raw := fleetHARawCount(t, n)
	counts := envInts(t, fleetHAServersEnv, []int{2, 3}, 2)
	var paces []upgradeProfile
	names := []string{"cloud"}
	if v := os.Getenv(fleetHAPacesEnv); v != "" {
		names = strings.Split(v, ",")
	}
	for _, name := range names {
		i := slices.IndexFunc(upgradeProfiles, func(q upgradeProfile) bool { return q.Name == name })
		if i < 0 {
			t.Fatalf("%s: unknown pace %q (fast, cloud)", fleetHAPacesEnv, name)
		}
		paces = append(paces, upgradeProfiles[i])
	}
	closeSharedCluster(t) // one cluster at a time on the machine
	var all []*fleetHARun
	for _, servers := range counts {
		for _, p := range paces {
			t.Run(fmt.Sprintf("%d-apiservers/%s", servers, p.Name), func(t *testing.T) {
				all = append(all, fleetHAPace(t, p, servers, n, raw, runs)...)
			})
		}
	}
	table := fleetHATable(all)
	verdicts, failures := fleetHACheck(all)
	var traces strings.Builder
	for _, r := range all {
		traces.WriteString(fleetHATraceSummary(r))
	}
	report := table + "\n" + verdicts + traces.String()
	fmt.Print(report)
	t.Log("\n" + report)
	if path := figuresPath("e2e-fleet-ha-figures.txt"); path != "" {
		os.WriteFile(path, []byte(table+"\n"+verdicts), 0o644)
	}
	if path := fleetHAJSONPath(); path != "" {
		data, _ := json.MarshalIndent(fleetHAFile{Agents: n, Machine: machineLine(), Runs: all}, "", " ")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Errorf("write %s: %v", path, err)
		}
		if err := writeFleetHATraces(fleetHATracePath(path), n, all); err != nil {
			t.Errorf("write the trace: %v", err)
		}
	}
	if os.Getenv(fleetHACheckEnv) == "0" {
		return
	}
	for _, f := range failures {
		t.Error(f)
	}
	for _, r := range all {
		if informers := r.Agents - r.Raw; r.CachesEqual != informers {
			t.Errorf("%s: %d of %d caches equal to the server at the end", r.name(), r.CachesEqual, informers)
		}
		for _, p := range fleetHARawProblems(r) {
			t.Errorf("%s: %s", r.name(), p)
		}
	}
}

// name says which run r is, in messages: "3 apiservers, cloud run 1 kretry".
func (r *fleetHARun) name() string {
	return fmt.Sprintf("%d apiservers, %s run %d %s", r.servers(), r.Pace, r.Run, r.Client)
}

// servers is r's apiserver count; runs written before it was recorded had two.
func (r *fleetHARun) servers() int {
	if r.APIServers == 0 {
		return 2
	}
	return r.APIServers
}

// fleetHARawProblems is what is wrong with r's raw watchers: at the cloud pace, under kretry,
// a raw watch is resumed across every restart while an apiserver holds its resume point, so
// none ends before the run does and none misses a change, but for a 410 that was true
// everywhere: every apiserver started after the watcher's last event, or was stopped since
// (see heldBy). Stock's are not checked: a plain Watch ends when its apiserver stops. Nor is the
// fast pace behind two apiservers: there the balancer has taken the stopping apiserver out, the
// one left started after the resume point, and its 410 is true, so a raw watcher ending on it
// is right. Behind three the two left need not both have restarted since: one may hold the
// point, and the search must find it, so the fast pace is checked there too.
func fleetHARawProblems(r *fleetHARun) []string {
	if r.Client != "kretry" || r.Pace != "cloud" && r.servers() < 3 {
		return nil
	}
	var problems []string
	for _, w := range r.RawWatchers {
		if w.Ended == "410" {
			if held := r.heldBy(w.LastEventAt, w.EndedAt); held >= 0 {
				problems = append(problems, fmt.Sprintf("the raw watcher of %s ended (%s %s) at %.1fs, while apiserver %d held its resume point (its last event at %.1fs)",
					nodeName(w.Node), w.Ended, w.Error, w.EndedAt, held, w.LastEventAt))
			}
			continue // a true 410: the changes after it are missed, as they must be
		}
		if w.Ended != "" {
			problems = append(problems, fmt.Sprintf("the raw watcher of %s ended (%s %s) at %.1fs", nodeName(w.Node), w.Ended, w.Error, w.EndedAt))
		}
		if w.Missed > 0 {
			problems = append(problems, fmt.Sprintf("the raw watcher of %s missed %d changes", nodeName(w.Node), w.Missed))
		}
	}
	return problems
}

// heldBy returns an apiserver that held a resume point from an event at lastEvent until
// ended (seconds since the series began), or -1 if none did: one whose watch cache began before
// the event (it was ready a second before it, or never restarted before it) and that was not
// stopped between the two. The second is a margin for the write before its event: it errs
// towards a true 410.
func (r *fleetHARun) heldBy(lastEvent, ended float64) int {
	servers := 0
	for _, rs := range r.RestartLog {
		servers = max(servers, rs.Server+1)
	}
	for i := range servers {
		began, stopped := true, false
		for _, rs := range r.RestartLog {
			if rs.Server != i {
				continue
			}
			if rs.Term <= lastEvent && rs.Ready > lastEvent-1 {
				began = false // restarted, its cache beginning (near) after the event
			}
			if rs.Term > lastEvent && rs.Term <= ended {
				stopped = true
			}
		}
		if began && !stopped {
			return i
		}
	}
	return -1
}

// TestFleetHARawProblems: the raw watchers' check without a control plane.
func TestFleetHARawProblems(t *testing.T) {
	// Two apiservers restarted in turn, twice round: SIGTERMed at 4, 24, 44 and 64 s, each
	// ready 3 s later.
	log := []haRestart{{0, 4, 7}, {1, 24, 27}, {0, 44, 47}, {1, 64, 67}}
	for _, tc := range []struct {
		name   string
		client string
		pace   string
		raw    []haRawWatcher
		want   int
	}{
		{"kretry, all watching, none missed", "kretry", "cloud", []haRawWatcher{{Node: 0}, {Node: 10}}, 0},
		// Its last event at 20 s: apiserver 1 held it until it stopped at 24 s.
		{"kretry, one ended on a 410 while another apiserver held its point", "kretry", "cloud",
			[]haRawWatcher{{Node: 0}, {Node: 10, Ended: "410", LastEventAt: 20, EndedAt: 22, Missed: 3}}, 1},
		// Its last event at 26 s, before apiserver 1 was ready again, and apiserver 0 stopped at
		// 44 s: a true 410 at 46 s (seen in a run at N = 100).
		{"kretry, one ended on a true 410", "kretry", "cloud",
			[]haRawWatcher{{Node: 10, Ended: "410", LastEventAt: 26, EndedAt: 46.4, Missed: 3}}, 0},
		{"kretry, one ended on a 410 at 46 s, its last event at 30 s: apiserver 1 held it", "kretry", "cloud",
			[]haRawWatcher{{Node: 10, Ended: "410", LastEventAt: 30, EndedAt: 46.4}}, 1},
		{"kretry, one missed a change", "kretry", "cloud", []haRawWatcher{{Node: 0, Missed: 1}}, 1},
		{"kretry, one closed", "kretry", "cloud", []haRawWatcher{{Node: 0, Ended: "closed"}}, 1},
		{"kretry at the fast pace, one ended on a true 410", "kretry", "fast", []haRawWatcher{{Node: 0, Ended: "410", Missed: 3}}, 0},
		{"kretry at the fast pace, one ended on a 410 while another apiserver held its point: not checked behind two", "kretry", "fast",
			[]haRawWatcher{{Node: 10, Ended: "410", LastEventAt: 20, EndedAt: 22, Missed: 3}}, 0},
		{"stock, all ended", "stock", "cloud", []haRawWatcher{{Node: 0, Ended: "closed", Missed: 6}, {Node: 10, Ended: "error"}}, 0},
		{"kretry, no raw watchers", "kretry", "cloud", nil, 0},
	} {
		got := fleetHARawProblems(&fleetHARun{Client: tc.client, Pace: tc.pace, Raw: len(tc.raw), RawWatchers: tc.raw, RestartLog: log})
		if len(got) != tc.want {
			t.Errorf("%s: %d problems %q, want %d", tc.name, len(got), got, tc.want)
		}
	}

	// Three apiservers restarted in turn, twice round, from 4 s, 20 s apart.
	log3 := []haRestart{{0, 4, 7}, {1, 24, 27}, {2, 44, 47}, {0, 64, 67}, {1, 84, 87}, {2, 104, 107}}
	for _, tc := range []struct {
		name string
		pace string
		raw  []haRawWatcher
		want int
	}{
		// Its last event at 26 s, its end at 65 s: apiserver 1's cache began at 27 s, after it,
		// and apiservers 2 and 0 were stopped since (at 44 and 64 s): a true 410.
		{"fast, a true 410 behind three", "fast", []haRawWatcher{{Node: 0, Ended: "410", LastEventAt: 26, EndedAt: 65, Missed: 3}}, 0},
		// Its last event at 30 s, its end at 41 s: apiserver 2, never restarted yet, held it.
		{"fast, a 410 while apiserver 2 held the point", "fast", []haRawWatcher{{Node: 0, Ended: "410", LastEventAt: 30, EndedAt: 41, Missed: 3}}, 1},
		{"cloud, the same", "cloud", []haRawWatcher{{Node: 0, Ended: "410", LastEventAt: 30, EndedAt: 41, Missed: 3}}, 1},
	} {
		got := fleetHARawProblems(&fleetHARun{APIServers: 3, Client: "kretry", Pace: tc.pace, Raw: len(tc.raw), RawWatchers: tc.raw, RestartLog: log3})
		if len(got) != tc.want {
			t.Errorf("three apiservers, %s: %d problems %q, want %d", tc.name, len(got), got, tc.want)
		}
	}
}

// envInts reads a comma-separated list of numbers, each at least least (def if unset).
func envInts(t *testing.T, name string, def []int, least int) []int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < least {
			t.Fatalf("%s=%q: want comma-separated numbers of at least %d", name, v, least)
		}
		out = append(out, n)
	}
	return out
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

// fleetHARawCount is KRETRY_FLEETHA_RAW: how many of the n agents are raw watchers (default
// n/10, at least 1; 0 allowed).
func fleetHARawCount(t *testing.T, n int) int {
	v := os.Getenv(fleetHARawEnv)
	if v == "" {
		return min(n, max(1, n/10))
	}
	raw, err := strconv.Atoi(v)
	if err != nil || raw < 0 || raw > n {
		t.Fatalf("%s=%q: want a number from 0 to the agents (%d)", fleetHARawEnv, v, n)
	}
	return raw
}

// fleetHARawAgents says which of the n agents are the raw watchers: raw of them, spread evenly.
func fleetHARawAgents(n, raw int) []bool {
	isRaw := make([]bool, n)
	for k := range raw {
		isRaw[k*n/raw] = true
	}
	return isRaw
}

// fleetHAJSONPath is KRETRY_FLEETHA_JSON, else .apiserver/fleet-ha.json. The trace goes beside
// it (fleetHATracePath).
func fleetHAJSONPath() string {
	if p := os.Getenv(fleetHAJSONEnv); p != "" {
		return p
	}
	return figuresPath("fleet-ha.json")
}

// fleetHAFile is the JSON the plot (e2e/plot -fleet-ha) draws.
type fleetHAFile struct {
	Agents  int           `json:"agents"`
	Machine string        `json:"machine"`
	Runs    []*fleetHARun `json:"runs"`
}

// fleetHARun is one upgrade under one fleet.
type fleetHARun struct {
	APIServers int    `json:"apiservers"`            // behind the balancer (absent in runs before it was recorded: 2)
	ServingKey string `json:"serving_key,omitempty"` // the serving certificates' key type; empty: RSA-2048
	Pace       string `json:"pace"`
	Client     string `json:"client"`
	Run        int    `json:"run"`
	Agents     int    `json:"agents"`
	Raw        int    `json:"raw_watchers"` // of the agents; the others are informers

	// Control plane, over the upgrade.
	APIListCalls   int64     `json:"api_list"`       // apiserver_request_total LIST pods
	APIWatchLists  int64     `json:"api_watch_list"` // apiserver_watch_list_duration_seconds_count pods
	APIGone        int64     `json:"api_410"`        // apiserver_request_total code 410 on pods
	WireFetches    int64     `json:"wire_fetches"`   // LISTs + watch-lists the agents sent
	WireFetches200 int64     `json:"wire_fetches_200"`
	WireRequests   int64     `json:"wire_requests"`
	WireGone       int64     `json:"wire_410"`        // 410s on the wire: answers, and ERROR 410 events in a watch's 200
	Bytes          int64     `json:"bytes"`           // response body bytes the agents read
	SentBytes      int64     `json:"sent_bytes"`      // bytes the apiservers sent the agents: read off the agents' TCP connections (TLS, HTTP/2, bodies)
	HandshakeBytes int64     `json:"handshake_bytes"` // of them, each new connection's until its first request: TLS handshakes
	NewConns       int64     `json:"new_conns"`       // connections the agents opened
	CPU            []float64 `json:"cpu"`             // CPU seconds per apiserver
	CPUBusiest5s   float64   `json:"cpu_busiest_5s"`
	PeakRSS        []float64 `json:"peak_rss"` // bytes, per apiserver, peak over its processes
	EtcdCPU        float64   `json:"etcd_cpu"`
	EtcdRanges     int64     `json:"etcd_ranges"`
	ReqPeak        int64     `json:"req_peak"` // requests/s at the balancer
	ReqP99         int64     `json:"req_p99"`
	HarnessCPU     float64   `json:"harness_cpu"` // the agents' process
	MachineBusy    float64   `json:"machine_busy"`
	Load           string    `json:"load"`

	// The writer, through the balancer: its PATCHes' latency, over those that succeeded.
	PatchP50 float64 `json:"patch_p50_ms"`
	PatchP99 float64 `json:"patch_p99_ms"`

	// Agents.
	Relists      int64   `json:"relists"`      // initial-state fetches client-go sent after its first
	HalfAfter    float64 `json:"half_after_s"` // worst restart: seconds until half the caches held the first change after it
	AllAfter     float64 `json:"all_after_s"`
	LagHalf      float64 `json:"lag_half_s"` // worst restart: seconds from that change's write to half the caches
	LagAll       float64 `json:"lag_all_s"`
	Undelivered  int     `json:"undelivered"` // first changes after a restart never seen by their agent
	CachesEqual  int     `json:"caches_equal"`
	Retries      int64   `json:"retries"`
	Resumes      int64   `json:"resumes"`
	Expired      int64   `json:"expired_retries"`
	Refusals     int64   `json:"budget_refusals"`
	GiveUps      int64   `json:"give_ups"`
	Writes       int     `json:"writes"`
	WritesFailed int     `json:"writes_failed"`

	// Raw watchers.
	RawEnded    int            `json:"raw_ended"` // ended before the run did: closed + 410 + error
	RawClosed   int            `json:"raw_ended_closed"`
	RawGone     int            `json:"raw_ended_410"`
	RawErrors   int            `json:"raw_ended_error"` // an ERROR event other than 410, or the Watch call failed
	RawMissed   int            `json:"raw_missed"`      // the writer's changes to their pods after their LIST never received
	RawFetches  int64          `json:"raw_fetches"`     // initial-state fetches they sent over the upgrade (by design 0)
	RawWatchers []haRawWatcher `json:"raw"`

	Restarts   []float64   `json:"restarts"` // seconds since the series began: each SIGTERM
	RestartLog []haRestart `json:"restart_log"`
	Series     []haPoint   `json:"series"`

	// Trace is kretry's runs' account of each 410 handed over: its relists and the raw
	// watchers that ended on a 410 (fleet_ha_trace_test.go). It goes to a file of its own,
	// beside the JSON: thousands of chains at N = 1,000.
	Trace []haChain `json:"-"`
}

// cpu is the apiservers' CPU seconds over the run, summed.
func (r *fleetHARun) cpu() float64 {
	var sum float64
	for _, c := range r.CPU {
		sum += c
	}
	return sum
}

// busiest5s is the most CPU seconds the apiservers spent in 5 consecutive seconds of series
// (all of them in a shorter series).
func busiest5s(series []haPoint) float64 {
	var window, most float64
	for i, p := range series {
		window += p.APICPU
		if i >= 5 {
			window -= series[i-5].APICPU
		}
		most = max(most, window)
	}
	return most
}

// percentile is the nearest-rank p-th percentile (0 < p <= 100) of xs (sorted in place), 0 for
// none.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	return xs[max(0, int(math.Ceil(p/100*float64(len(xs))))-1)]
}

// haRestart is one apiserver's restart in a run, in seconds since the series began.
type haRestart struct {
	Server int     `json:"server"`
	Term   float64 `json:"term"`  // its SIGTERM
	Ready  float64 `json:"ready"` // ready again (Start returned)
}

// haRawWatcher is what one raw watcher did in a run.
type haRawWatcher struct {
	Node    int     `json:"node"`
	ListRV  uint64  `json:"list_rv"`
	Events  int     `json:"events"`             // events received, ERROR ones included
	Ended   string  `json:"ended,omitempty"`    // "" (still watching at the run's end), closed, 410, error
	EndedAt float64 `json:"ended_at,omitempty"` // seconds since the series began (as restarts)
	// LastEventAt is when its last event before its end arrived (0: none, its LIST's before
	// the upgrade), in the same seconds.
	LastEventAt float64 `json:"last_event_at,omitempty"`
	Error       string  `json:"error,omitempty"` // the ERROR event's status, or the Watch call's error
	Missed      int     `json:"missed"`
}

// haPoint is one second of a run.
type haPoint struct {
	At        float64 `json:"at"`
	Requests  int64   `json:"requests"`   // requests the agents sent (through the balancer)
	Fetches   int64   `json:"fetches"`    // initial-state fetches among them
	APICPU    float64 `json:"api_cpu"`    // CPU cores the apiservers used, summed
	EtcdCPU   float64 `json:"etcd_cpu"`   // CPU cores etcd used
	AgentsCPU float64 `json:"agents_cpu"` // CPU cores the agents' process used
}

func fleetHAPace(t *testing.T, p upgradeProfile, servers, n, raw, runs int) []*fleetHARun {
	ctx := context.Background()
	began := time.Now()
	c, lb, closeLB := startHAControlPlane(t, p, "", servers, 180*time.Second)
	defer closeLB()
	certs, err := servingDigests(c)
	if err != nil {
		t.Fatal(err)
	}

	adminCfg := ownConnections(c.ConfigFor(lb.Addr(), apiserver.Admin))
	withContentType(adminCfg, true)
	admin := kubernetes.NewForConfigOrDie(adminCfg)
	ns := "fleet-" + p.Name
	if err := seedPods(ctx, admin, ns, n); err != nil {
		t.Fatal(err)
	}
	etcdPID := findEtcdPID(c.Dir())
	t.Logf("%d apiservers behind the balancer, %d pods, in %v", servers, n*fleetHAPodsPerNode, time.Since(began).Round(100*time.Millisecond))

	var out []*fleetHARun
	for run := 1; run <= runs; run++ {
		order := []bool{false, true}
		if run%2 == 0 {
			order = []bool{true, false}
		}
		for _, withKretry := range order {
			r := fleetHAUpgrade(t, c, lb.Addr(), certs, admin, ns, p, n, raw, run, withKretry, etcdPID)
			if r == nil {
				return out
			}
			t.Logf("%s", fleetHARow(r))
			out = append(out, r)
		}
	}
	return out
}

// seedPods creates ns, its default ServiceAccount (no controller-manager runs to create it)
// and n nodes' worth of pods, bound to node-0 ... node-(n-1).
func seedPods(ctx context.Context, admin kubernetes.Interface, ns string, n int) error {
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	no := false
	jobs := make(chan int)
	errs := make(chan error, 16)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				node, j := i/fleetHAPodsPerNode, i%fleetHAPodsPerNode
				pod := &corev1.Pod{
					ObjectMeta: metav1.ObjectMeta{Name: podName(node, j), Annotations: map[string]string{"gen": "0"},
						Labels: map[string]string{"app": "fleet", "slot": strconv.Itoa(j)}},
					Spec: corev1.PodSpec{
						NodeName:                     nodeName(node),
						AutomountServiceAccountToken: &no,
						Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
							Env: []corev1.EnvVar{{Name: "PAD", Value: strings.Repeat("x", 512)}}}},
					},
				}
				if _, err := admin.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for i := range n * fleetHAPodsPerNode {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	select {
	case err := <-errs:
		return fmt.Errorf("create pods: %w", err)
	default:
		return nil
	}
}

func nodeName(i int) string   { return fmt.Sprintf("node-%d", i) }
func podName(i, j int) string { return fmt.Sprintf("p-%d-%d", i, j) }

// haFleet is what all agents of one run share: the per-second request counts, and which
// apiserver serves which certificate.
type haFleet struct {
	began    time.Time
	servers  map[[32]byte]int // SHA-256 of a serving certificate's DER: its apiserver
	requests [7200]atomic.Int64
	fetches  [7200]atomic.Int64
}

func (f *haFleet) second() int {
	return min(int(time.Since(f.began)/time.Second), len(f.requests)-1)
}

// since is now in seconds since the series began.
func (f *haFleet) since() float64 { return time.Since(f.began).Seconds() }

// servingDigests maps each apiserver's serving certificate to its index.
func servingDigests(c *apiserver.Cluster) (map[[32]byte]int, error) {
	out := map[[32]byte]int{}
	for _, s := range c.Servers() {
		cert, err := s.Certificate()
		if err != nil {
			return nil, err
		}
		out[sha256.Sum256(cert.Raw)] = s.Index()
	}
	return out, nil
}

// serverOf is the apiserver whose certificate state shows, -1 if none of them.
func (f *haFleet) serverOf(state tls.ConnectionState) int {
	if len(state.PeerCertificates) == 0 {
		return -1
	}
	if i, ok := f.servers[sha256.Sum256(state.PeerCertificates[0].Raw)]; ok {
		return i
	}
	return -1
}

// haAgent is one node agent: an informer, or a raw watcher (isRaw; raw set, inf nil).
type haAgent struct {
	node  int
	isRaw bool
	inf   cache.SharedIndexInformer
	raw   *rawWatcher
	rawRV uint64 // the resourceVersion of the raw watcher's LIST
	stop  chan struct{}
	done  chan struct{}
	conns connSet
	log   *haKretryLog

	// counts, since the mark for the "since" ones
	callerFetches atomic.Int64 // initial-state fetches client-go sent (above kretry); informers only
	wireFetches   atomic.Int64 // informers only
	rawFetches    atomic.Int64 // a raw watcher's initial-state fetches on the wire: its LIST, and any other
	wire200       atomic.Int64
	wireRequests  atomic.Int64
	wireGone      atomic.Int64
	bytes         atomic.Int64 // response bodies read
	connBytes     atomic.Int64 // read off its TCP connections
	handshakes    atomic.Int64 // of them, read before each connection's first request: TLS handshakes
	dials         atomic.Int64

	mu       sync.Mutex
	seen     []haSeen
	attempts []*haAttempt // every request on the wire, for the trace
}

// haSeen is one pod version an agent's cache received.
type haSeen struct {
	pod string
	rv  uint64
	at  time.Time
}

func (a *haAgent) record(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	rv, _ := strconv.ParseUint(pod.ResourceVersion, 10, 64)
	a.mu.Lock()
	a.seen = append(a.seen, haSeen{pod: pod.Name, rv: rv, at: time.Now()})
	a.mu.Unlock()
}

// firstSeen is when the agent first held pod at rv or later, if ever.
func (a *haAgent) firstSeen(pod string, rv uint64) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range a.seen {
		if s.pod == pod && s.rv >= rv {
			return s.at, true
		}
	}
	return time.Time{}, false
}

// connSet keeps an agent's connections, to close them when the agent stops (as a process
// that exits would), and counts them and the bytes read off them.
type connSet struct {
	dials, read *atomic.Int64

	mu    sync.Mutex
	conns []net.Conn
}

func (cs *connSet) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	cs.dials.Add(1)
	conn = &countingConn{Conn: conn, read: cs.read}
	cs.mu.Lock()
	cs.conns = append(cs.conns, conn)
	cs.mu.Unlock()
	return conn, nil
}

// countingConn counts the bytes read off a connection: below TLS, all the apiserver sent.
type countingConn struct {
	net.Conn
	read *atomic.Int64
	own  atomic.Int64 // this connection's
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read.Add(int64(n))
	c.own.Add(int64(n))
	return n, err
}

// handshakeBytes is what conn (a TLS connection over a countingConn) has read so far: at its
// first request, its TLS handshake and the server's HTTP/2 settings.
func handshakeBytes(conn net.Conn) int64 {
	if tc, ok := conn.(*tls.Conn); ok {
		if cc, ok := tc.NetConn().(*countingConn); ok {
			return cc.own.Load()
		}
	}
	return 0
}

func (cs *connSet) closeAll() {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for _, c := range cs.conns {
		c.Close()
	}
	cs.conns = nil
}

// haWire counts what an agent sends below kretry (what the balancer passes on).
type haWire struct {
	a    *haAgent
	f    *haFleet
	next http.RoundTripper
}

func isFetch(req *http.Request) bool {
	q := req.URL.Query()
	if q.Get("watch") == "true" || q.Get("watch") == "1" {
		return q.Get("sendInitialEvents") == "true"
	}
	return req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/pods")
}

// WrappedRoundTripper lets client-go's utilnet.CloseIdleConnectionsFor, which kretry calls to
// retire an HTTP/2 connection before it retries a 410 on a new one, reach the transport below:
// without it every such retry first rode the old connection, one more request each.
func (w *haWire) WrappedRoundTripper() http.RoundTripper { return w.next }

func (w *haWire) RoundTrip(req *http.Request) (*http.Response, error) {
	fetch := isFetch(req)
	sec := w.f.second()
	w.f.requests[sec].Add(1)
	w.a.wireRequests.Add(1)
	switch {
	case fetch && w.a.isRaw:
		w.a.rawFetches.Add(1)
	case fetch:
		w.f.fetches[sec].Add(1)
		w.a.wireFetches.Add(1)
	}
	att := &haAttempt{At: w.f.since(), Fetch: fetch, RV: req.URL.Query().Get("resourceVersion"), Server: -1}
	w.a.mu.Lock()
	w.a.attempts = append(w.a.attempts, att)
	w.a.mu.Unlock()
	// Which connection the request rode: HTTP/2 reports it too, a new one as not reused.
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			server := -1
			if tc, ok := info.Conn.(*tls.Conn); ok {
				server = w.f.serverOf(tc.ConnectionState())
			}
			if !info.Reused {
				w.a.handshakes.Add(handshakeBytes(info.Conn))
			}
			w.a.mu.Lock()
			att.NewConn = att.NewConn || !info.Reused
			att.Server = server
			w.a.mu.Unlock()
		},
	}))
	resp, err := w.next.RoundTrip(req)
	if err != nil {
		w.a.mu.Lock()
		att.Status, att.Error, att.Ended = "error", err.Error(), w.f.since()
		w.a.mu.Unlock()
		return resp, err
	}
	switch {
	case resp.StatusCode == http.StatusOK && fetch && !w.a.isRaw:
		w.a.wire200.Add(1)
	case resp.StatusCode == http.StatusGone:
		w.a.wireGone.Add(1)
	}
	w.a.mu.Lock()
	att.Status = strconv.Itoa(resp.StatusCode)
	if resp.TLS != nil && att.Server < 0 {
		att.Server = w.f.serverOf(*resp.TLS)
	}
	w.a.mu.Unlock()
	body := &haBody{ReadCloser: resp.Body, a: w.a, f: w.f, att: att}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/vnd.kubernetes.protobuf;stream=watch") {
		body.gone = &watchGone{}
	}
	resp.Body = body
	return resp, nil
}

// haBody counts the bytes an agent reads and, in a protobuf watch stream, the ERROR 410
// events: a watch cache's 410 is a 200 whose one event says so. It tells the trace how its
// attempt's answer went on.
type haBody struct {
	io.ReadCloser
	a    *haAgent
	f    *haFleet
	att  *haAttempt
	gone *watchGone // nil: not a protobuf watch stream
}

func (b *haBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.a.bytes.Add(int64(n))
	if b.gone != nil && n > 0 {
		before, framesBefore := b.gone.count, b.gone.frames
		b.gone.Write(p[:n])
		if gone := b.gone.count - before; gone > 0 || b.gone.frames > framesBefore {
			b.a.wireGone.Add(gone)
			b.a.mu.Lock()
			b.att.Events = int(b.gone.frames - b.gone.count)
			if gone > 0 && b.att.Status == "200" {
				b.att.Status = "200+410"
			}
			b.a.mu.Unlock()
		}
	}
	if err != nil {
		b.ended(err)
	}
	return n, err
}

func (b *haBody) Close() error {
	b.ended(nil)
	return b.ReadCloser.Close()
}

// ended records when the answer's body ended, and how, unless it did before.
func (b *haBody) ended(err error) {
	b.a.mu.Lock()
	defer b.a.mu.Unlock()
	if b.att.Ended != 0 {
		return
	}
	b.att.Ended = b.f.since()
	switch {
	case err == nil:
		b.att.Error = "closed by the client"
	case err != io.EOF:
		b.att.Error = err.Error()
	}
}

// haCaller counts the initial-state fetches client-go asks for (above kretry): an informer's
// relists; a raw watcher's one LIST is not one.
type haCaller struct {
	a    *haAgent
	next http.RoundTripper
}

func (c *haCaller) RoundTrip(req *http.Request) (*http.Response, error) {
	if !c.a.isRaw && isFetch(req) {
		c.a.callerFetches.Add(1)
	}
	return c.next.RoundTrip(req)
}

// haKretryLog counts one agent's kretry events.
type haKretryLog struct {
	retries, resumes, expired, refusals, giveUps atomic.Int64
}

func (l *haKretryLog) ObserveAttempt(transport.AttemptEvent) {}

func (l *haKretryLog) ObserveRetry(e transport.RetryEvent) {
	if e.Resume {
		l.resumes.Add(1)
	} else {
		l.retries.Add(1)
	}
	if e.Reason == transport.ReasonExpiredResume {
		l.expired.Add(1)
	}
}

func (l *haKretryLog) ObserveGiveUp(transport.GiveUpEvent) { l.giveUps.Add(1) }

func (l *haKretryLog) ObserveBudgetRefusal(transport.BudgetEvent) { l.refusals.Add(1) }

// startAgent starts one node agent through addr: an informer, or with isRaw a raw watcher
// (its LIST done when startAgent returns).
func startAgent(t *testing.T, c *apiserver.Cluster, addr, ns string, node int, f *haFleet, withKretry, isRaw bool) (*haAgent, error) {
	a := &haAgent{node: node, isRaw: isRaw, stop: make(chan struct{}), done: make(chan struct{})}
	a.conns.dials, a.conns.read = &a.dials, &a.connBytes
	cfg := c.ConfigFor(addr, apiserver.Admin)
	cfg.QPS, cfg.Burst = 0, 0 // client-go's defaults: 5 QPS, burst 10, a limiter of its own
	cfg.UserAgent = "kubelet/fleet-ha"
	cfg.Dial = a.conns.dial
	withContentType(cfg, true)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &haWire{a: a, f: f, next: rt} })
	if withKretry {
		a.log = &haKretryLog{}
		cfg.Wrap(transport.Wrapper(transport.Config{Observer: a.log}))
	}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &haCaller{a: a, next: rt} })
	cs := kubernetes.NewForConfigOrDie(cfg)
	selector := "spec.nodeName=" + nodeName(node)
	if isRaw {
		close(a.done) // no informer to wait for
		pods := cs.CoreV1().Pods(ns)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		list, err := pods.List(ctx, metav1.ListOptions{FieldSelector: selector})
		if err != nil {
			a.conns.closeAll()
			return nil, fmt.Errorf("raw watcher of %s: LIST: %w", nodeName(node), err)
		}
		a.rawRV, _ = strconv.ParseUint(list.ResourceVersion, 10, 64)
		a.raw = startRawWatcher(t, f.began, nodePodsWatch{pods: pods, selector: selector}, list.ResourceVersion, false)
		return a, nil
	}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = selector }))
	a.inf = factory.Core().V1().Pods().Informer()
	a.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    a.record,
		UpdateFunc: func(_, obj any) { a.record(obj) },
	})
	go func() {
		defer close(a.done)
		a.inf.Run(a.stop)
	}()
	return a, nil
}

// nodePodsWatch lends rawWatcher, written for ConfigMaps, one node's pods: its Watch (the only
// method rawWatcher calls) watches them and hands each on as a ConfigMap with what rawWatcher
// records of an object (name, resourceVersion, the writer's gen); ERROR events pass unchanged.
type nodePodsWatch struct {
	typedcorev1.ConfigMapInterface // nil: never called
	pods                           typedcorev1.PodInterface
	selector                       string
}

func (p nodePodsWatch) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.FieldSelector = p.selector
	opts.TimeoutSeconds = &fleetHARawWatchTimeout
	w, err := p.pods.Watch(ctx, opts)
	if err != nil {
		return nil, err
	}
	return watch.Filter(w, func(ev watch.Event) (watch.Event, bool) {
		if pod, ok := ev.Object.(*corev1.Pod); ok {
			ev.Object = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, ResourceVersion: pod.ResourceVersion},
				Data: map[string]string{"gen": pod.Annotations["gen"]}}
		}
		return ev, true
	}), nil
}

// rawResult is how a's raw watcher ended (if it did before now) and how many of writes, the
// writer's changes, to its node's pods after its LIST it never received (by pod name and
// resourceVersion).
func (a *haAgent) rawResult(writes []haWrite) haRawWatcher {
	res := haRawWatcher{Node: a.node, ListRV: a.rawRV}
	events := a.raw.snapshot()
	closes := a.raw.closesSnapshot()
	a.raw.mu.Lock()
	watchErrs := append([]string(nil), a.raw.watchErrs...)
	a.raw.mu.Unlock()
	res.Events = len(events)
	for _, e := range events {
		if e.Type != watch.Error {
			res.LastEventAt = e.At.Seconds()
		}
	}
	switch {
	case len(watchErrs) > 0:
		res.Ended, res.Error = "error", watchErrs[0]
	case len(closes) > 0:
		res.Ended, res.EndedAt = "closed", closes[0].At.Seconds() // rawWatcher's began is the fleet's
		if k := closes[0].Events; k > 0 && events[k-1].Type == watch.Error {
			res.Ended, res.Error = "error", events[k-1].Err
			if events[k-1].Gone {
				res.Ended = "410"
			}
		}
	}
	type podRV struct {
		pod string
		rv  uint64
	}
	got := map[podRV]bool{}
	for _, e := range events {
		if e.Type == watch.Added || e.Type == watch.Modified {
			got[podRV{e.Name, e.RV}] = true
		}
	}
	for _, w := range writes {
		if w.node == a.node && w.rv > a.rawRV && !got[podRV{w.pod, w.rv}] {
			res.Missed++
		}
	}
	return res
}

func (a *haAgent) close() {
	close(a.stop)
	<-a.done
	if a.raw != nil {
		a.raw.stopAndWait()
	}
	a.conns.closeAll()
}

// haWrite is one change the writer made.
type haWrite struct {
	node int
	pod  string
	rv   uint64
	at   time.Time     // when the write was sent
	took time.Duration // until its answer
}

// fleetHAGen numbers the writer's ticks across runs.
var fleetHAGen atomic.Int64

// haWriter patches pods through the balancer every second, as another client of the control
// plane would, and times each PATCH: a failed one (an error, or no answer in 5 s) is counted
// apart, not timed.
type haWriter struct {
	mu     sync.Mutex
	writes []haWrite
	fails  int
	stop   chan struct{}
	done   chan struct{}
}

func startHAWriter(admin kubernetes.Interface, ns string, n int) *haWriter {
	w := &haWriter{stop: make(chan struct{}), done: make(chan struct{})}
	per := max(5, n/20)
	go func() {
		defer close(w.done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		next := 0
		for {
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
			gen := fleetHAGen.Add(1) // never a value of an earlier run: a patch that changes nothing writes nothing
			var wg sync.WaitGroup
			sem := make(chan struct{}, 8)
			for k := 0; k < per; k++ {
				i := next % (n * fleetHAPodsPerNode)
				next++
				// rotate over nodes first, then over each node's pods
				node, j := i%n, (i/n)%fleetHAPodsPerNode
				wg.Add(1)
				sem <- struct{}{}
				go func() {
					defer wg.Done()
					defer func() { <-sem }()
					at := time.Now()
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					defer cancel()
					patch := fmt.Sprintf(`{"metadata":{"annotations":{"gen":"%d"}}}`, gen)
					pod, err := admin.CoreV1().Pods(ns).Patch(ctx, podName(node, j), types.MergePatchType, []byte(patch), metav1.PatchOptions{})
					took := time.Since(at)
					w.mu.Lock()
					defer w.mu.Unlock()
					if err != nil {
						w.fails++
						return
					}
					rv, _ := strconv.ParseUint(pod.ResourceVersion, 10, 64)
					w.writes = append(w.writes, haWrite{node: node, pod: pod.Name, rv: rv, at: at, took: took})
				}()
			}
			wg.Wait()
		}
	}()
	return w
}

func (w *haWriter) halt() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

func (w *haWriter) snapshot() ([]haWrite, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]haWrite(nil), w.writes...), w.fails
}

// procSample is one reading of a process from /proc.
type procSample struct {
	cpu   float64 // user+system seconds
	hwm   float64 // peak RSS, bytes
	alive bool
}

var clockTicks = 100.0 // USER_HZ on Linux

func readProc(pid int) procSample {
	if pid <= 0 {
		return procSample{}
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procSample{}
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procSample{}
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 13 || fields[0] == "Z" {
		return procSample{}
	}
	ut, _ := strconv.ParseFloat(fields[11], 64)
	st, _ := strconv.ParseFloat(fields[12], 64)
	out := procSample{cpu: (ut + st) / clockTicks, alive: true}
	if f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
				out.hwm = kb * 1024
			}
		}
		f.Close()
	}
	return out
}

// machineBusy reads /proc/stat's total and idle jiffies.
func machineJiffies() (total, idle float64) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(data), "\n")
	for i, f := range strings.Fields(line)[1:] {
		v, _ := strconv.ParseFloat(f, 64)
		total += v
		if i == 3 || i == 4 { // idle, iowait
			idle += v
		}
	}
	return total, idle
}

// findEtcdPID is the etcd whose data lives under dir.
func findEtcdPID(dir string) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if s := string(cmd); strings.Contains(s, "etcd") && strings.Contains(s, dir) && !strings.Contains(s, "kube-apiserver") {
			return pid
		}
	}
	return 0
}

// procMeter follows the apiservers (across their restarts), etcd and this process, one
// sample a second.
type procMeter struct {
	servers []*apiserver.Server
	etcd    int
	fleet   *haFleet

	mu        sync.Mutex
	base      map[int]float64 // pid -> CPU at the first sample (processes alive at the start)
	last      map[int]procSample
	owner     map[int]int // pid -> server index
	series    []haPoint
	stop      chan struct{}
	done      chan struct{}
	t0, i0    float64
	self0     float64
	etcdStart float64
}

func startProcMeter(servers []*apiserver.Server, etcd int, f *haFleet) *procMeter {
	m := &procMeter{servers: servers, etcd: etcd, fleet: f, base: map[int]float64{}, last: map[int]procSample{},
		owner: map[int]int{}, stop: make(chan struct{}), done: make(chan struct{})}
	for _, s := range servers {
		if pid := s.PID(); pid != 0 {
			m.base[pid] = readProc(pid).cpu
			m.owner[pid] = s.Index()
		}
	}
	m.etcdStart = readProc(etcd).cpu
	m.self0 = readProc(os.Getpid()).cpu
	m.t0, m.i0 = machineJiffies()
	go m.loop()
	return m
}

func (m *procMeter) loop() {
	defer close(m.done)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	prevAPI, prevEtcd, prevSelf := m.apiCPU(), readProc(m.etcd).cpu, readProc(os.Getpid()).cpu
	prevReq := m.fleet.second() // the fleet's sync before the meter started is not the upgrade's
	for {
		select {
		case <-m.stop:
			return
		case <-tick.C:
		}
		m.sample()
		api, etcd, self := m.apiCPU(), readProc(m.etcd).cpu, readProc(os.Getpid()).cpu
		sec := m.fleet.second()
		var req, fetch int64
		for s := prevReq; s < sec; s++ {
			req += m.fleet.requests[s].Load()
			fetch += m.fleet.fetches[s].Load()
		}
		prevReq = sec
		m.mu.Lock()
		m.series = append(m.series, haPoint{At: time.Since(m.fleet.began).Seconds(), Requests: req, Fetches: fetch,
			APICPU: api - prevAPI, EtcdCPU: etcd - prevEtcd, AgentsCPU: self - prevSelf})
		m.mu.Unlock()
		prevAPI, prevEtcd, prevSelf = api, etcd, self
	}
}

// sample reads every server's current process.
func (m *procMeter) sample() {
	for _, s := range m.servers {
		pid := s.PID()
		if pid == 0 {
			continue
		}
		ps := readProc(pid)
		if !ps.alive {
			continue
		}
		m.mu.Lock()
		if _, ok := m.owner[pid]; !ok {
			m.owner[pid] = s.Index()
		}
		m.last[pid] = ps
		m.mu.Unlock()
	}
}

// apiCPU is the CPU seconds of every apiserver process seen, since the meter started.
func (m *procMeter) apiCPU() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var sum float64
	for pid, ps := range m.last {
		sum += ps.cpu - m.base[pid]
	}
	return sum
}

// finish stops the meter and returns per server its CPU seconds and peak RSS, etcd's CPU
// seconds, this process's, and the share of the machine busy.
func (m *procMeter) finish() (cpu, rss []float64, etcd, self, busy float64, series []haPoint) {
	m.sample()
	close(m.stop)
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	cpu, rss = make([]float64, len(m.servers)), make([]float64, len(m.servers))
	for pid, ps := range m.last {
		i := m.owner[pid]
		cpu[i] += ps.cpu - m.base[pid]
		rss[i] = math.Max(rss[i], ps.hwm)
	}
	t1, i1 := machineJiffies()
	if t1 > m.t0 {
		busy = 1 - (i1-m.i0)/(t1-m.t0)
	}
	return cpu, rss, readProc(m.etcd).cpu - m.etcdStart, readProc(os.Getpid()).cpu - m.self0, busy, m.series
}

// scrape reads the figures of one /metrics page: pods LISTs, watch-lists and 410s from a
// kube-apiserver, range requests from etcd.
type scraped struct{ lists, watchLists, gone, ranges int64 }

func (a scraped) minus(b scraped) scraped {
	return scraped{a.lists - b.lists, a.watchLists - b.watchLists, a.gone - b.gone, a.ranges - b.ranges}
}

func (a scraped) plus(b scraped) scraped {
	return scraped{a.lists + b.lists, a.watchLists + b.watchLists, a.gone + b.gone, a.ranges + b.ranges}
}

func parseMetrics(r io.Reader) scraped {
	var s scraped
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			continue
		}
		name := line[:sp]
		pods := strings.Contains(name, `resource="pods"`) && strings.Contains(name, `subresource=""`)
		switch {
		case strings.HasPrefix(name, "apiserver_request_total{") && pods:
			if strings.Contains(name, `verb="LIST"`) {
				s.lists += int64(v)
			}
			if strings.Contains(name, `code="410"`) {
				s.gone += int64(v)
			}
		case strings.HasPrefix(name, "apiserver_watch_list_duration_seconds_count{") && strings.Contains(name, `resource="pods"`):
			s.watchLists += int64(v)
		case strings.HasPrefix(name, "grpc_server_handled_total{") && strings.Contains(name, `grpc_method="Range"`):
			s.ranges += int64(v)
		}
	}
	return s
}

func scrapeServer(c *apiserver.Cluster, s *apiserver.Server) (scraped, error) {
	req, _ := http.NewRequest(http.MethodGet, "https://"+s.Addr()+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+c.Token(apiserver.Admin))
	hc := c.HTTPClient()
	defer hc.CloseIdleConnections()
	hc.Timeout = 10 * time.Second
	resp, err := hc.Do(req)
	if err != nil {
		return scraped{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return scraped{}, fmt.Errorf("%s /metrics: %s", s.Addr(), resp.Status)
	}
	return parseMetrics(resp.Body), nil
}

func scrapeEtcd(c *apiserver.Cluster) scraped {
	resp, err := http.Get(c.EtcdURL() + "/metrics")
	if err != nil {
		return scraped{}
	}
	defer resp.Body.Close()
	return parseMetrics(resp.Body)
}

// fleetHAUpgrade runs one rolling upgrade under a fleet of n agents, raw of them raw watchers.
func fleetHAUpgrade(t *testing.T, c *apiserver.Cluster, lbAddr string, certs map[[32]byte]int, admin kubernetes.Interface, ns string,
	p upgradeProfile, n, raw, run int, withKretry bool, etcdPID int) *fleetHARun {
	ctx := context.Background()
	name := "stock"
	if withKretry {
		name = "kretry"
	}
	servers := c.Servers()
	r := &fleetHARun{APIServers: len(servers), ServingKey: os.Getenv(servingKeyEnv), Pace: p.Name, Client: name, Run: run, Agents: n, Raw: raw}
	f := &haFleet{began: time.Now(), servers: certs}
	agents := make([]*haAgent, n)
	startErrs := make([]error, n)
	isRaw := fleetHARawAgents(n, raw)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			agents[i], startErrs[i] = startAgent(t, c, lbAddr, ns, i, f, withKretry, isRaw[i])
		}()
	}
	wg.Wait()
	defer func() {
		for _, a := range agents {
			if a != nil {
				a.close()
			}
		}
	}()
	for _, err := range startErrs {
		if err != nil {
			t.Errorf("%s: %v", r.name(), err)
			return nil
		}
	}
	syncCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	for _, a := range agents {
		if a.isRaw {
			continue
		}
		if !cache.WaitForCacheSync(syncCtx.Done(), a.inf.HasSynced) {
			cancel()
			t.Errorf("%s: the fleet did not sync in 5 minutes", r.name())
			return nil
		}
	}
	cancel()
	synced := time.Since(f.began)

	// The mark: everything from here on is the upgrade's.
	type mark struct{ caller, wire, wire200, req, gone, bytes, connBytes, handshakes, dials, raw int64 }
	marks := make([]mark, n)
	for i, a := range agents {
		marks[i] = mark{a.callerFetches.Load(), a.wireFetches.Load(), a.wire200.Load(), a.wireRequests.Load(), a.wireGone.Load(),
			a.bytes.Load(), a.connBytes.Load(), a.handshakes.Load(), a.dials.Load(), a.rawFetches.Load()}
	}
	markAt := f.since()
	var kmarks [5]int64
	if withKretry {
		for _, a := range agents {
			kmarks[0] += a.log.retries.Load()
			kmarks[1] += a.log.resumes.Load()
			kmarks[2] += a.log.expired.Load()
			kmarks[3] += a.log.refusals.Load()
			kmarks[4] += a.log.giveUps.Load()
		}
	}
	apiAcc := scraped{}
	apiBase := make([]scraped, len(servers))
	for i, s := range servers {
		var err error
		if apiBase[i], err = scrapeServer(c, s); err != nil {
			t.Logf("scrape: %v", err)
		}
	}
	etcdBase := scrapeEtcd(c)
	markSec := f.second()
	meter := startProcMeter(servers, etcdPID, f)
	w := startHAWriter(admin, ns, n)
	time.Sleep(3 * time.Second)

	var restarts []time.Time
	for round := 1; round <= upgradeRounds; round++ {
		for i, s := range servers {
			if m, err := scrapeServer(c, s); err == nil {
				apiAcc = apiAcc.plus(m.minus(apiBase[i]))
			} else {
				t.Logf("scrape before SIGTERM: %v", err)
			}
			apiBase[i] = scraped{} // the next process's counters start at zero
			restarts = append(restarts, time.Now())
			meter.sample()
			if _, err := s.Terminate(60 * time.Second); err != nil {
				t.Fatal(err)
			}
			if err := s.Start(ctx); err != nil {
				t.Fatal(err)
			}
			r.RestartLog = append(r.RestartLog, haRestart{Server: i, Term: restarts[len(restarts)-1].Sub(f.began).Seconds(), Ready: time.Since(f.began).Seconds()})
			meter.sample()
			time.Sleep(3 * p.Inter)
		}
	}
	time.Sleep(3 * time.Second)
	w.halt()
	writes, fails := w.snapshot()
	r.Writes, r.WritesFailed = len(writes), fails
	var took []float64
	for _, wr := range writes {
		took = append(took, float64(wr.took)/float64(time.Millisecond))
	}
	r.PatchP50, r.PatchP99 = percentile(took, 50), percentile(took, 99)

	// The end state, by a consistent LIST, grouped by node; then wait for the caches.
	list, err := admin.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := make([]map[string]string, n)
	for i := range want {
		want[i] = map[string]string{}
	}
	for _, pod := range list.Items {
		var node int
		fmt.Sscanf(pod.Spec.NodeName, "node-%d", &node)
		if node >= 0 && node < n {
			want[node][pod.Name] = pod.ResourceVersion
		}
	}
	equal := func(a *haAgent) bool {
		items := a.inf.GetStore().List()
		if len(items) != len(want[a.node]) {
			return false
		}
		for _, obj := range items {
			pod := obj.(*corev1.Pod)
			if want[a.node][pod.Name] != pod.ResourceVersion {
				return false
			}
		}
		return true
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		r.CachesEqual = 0
		for _, a := range agents {
			if !a.isRaw && equal(a) {
				r.CachesEqual++
			}
		}
		if r.CachesEqual == n-raw || time.Now().After(deadline) {
			break
		}
	}

	// Control plane figures.
	for i, s := range servers {
		if m, err := scrapeServer(c, s); err == nil {
			apiAcc = apiAcc.plus(m.minus(apiBase[i]))
		}
	}
	r.APIListCalls, r.APIWatchLists, r.APIGone = apiAcc.lists, apiAcc.watchLists, apiAcc.gone
	r.EtcdRanges = scrapeEtcd(c).minus(etcdBase).ranges
	var series []haPoint
	r.CPU, r.PeakRSS, r.EtcdCPU, r.HarnessCPU, r.MachineBusy, series = meter.finish()
	r.Series = series
	r.CPUBusiest5s = busiest5s(series)
	for _, rs := range restarts {
		r.Restarts = append(r.Restarts, rs.Sub(f.began).Seconds())
	}
	endSec := f.second()
	var perSec []int64
	for s := markSec; s < endSec; s++ {
		perSec = append(perSec, f.requests[s].Load())
	}
	sort.Slice(perSec, func(i, j int) bool { return perSec[i] < perSec[j] })
	if len(perSec) > 0 {
		r.ReqPeak = perSec[len(perSec)-1]
		r.ReqP99 = perSec[min(len(perSec)-1, int(math.Ceil(0.99*float64(len(perSec))))-1)]
	}
	load, _ := os.ReadFile("/proc/loadavg")
	r.Load = strings.Join(strings.Fields(string(load))[:3], " ")
	for i, a := range agents {
		r.Relists += a.callerFetches.Load() - marks[i].caller
		r.WireFetches += a.wireFetches.Load() - marks[i].wire
		r.WireFetches200 += a.wire200.Load() - marks[i].wire200
		r.WireRequests += a.wireRequests.Load() - marks[i].req
		r.WireGone += a.wireGone.Load() - marks[i].gone
		r.Bytes += a.bytes.Load() - marks[i].bytes
		r.SentBytes += a.connBytes.Load() - marks[i].connBytes
		r.HandshakeBytes += a.handshakes.Load() - marks[i].handshakes
		r.NewConns += a.dials.Load() - marks[i].dials
		r.RawFetches += a.rawFetches.Load() - marks[i].raw
		if withKretry {
			r.Retries += a.log.retries.Load()
			r.Resumes += a.log.resumes.Load()
			r.Expired += a.log.expired.Load()
			r.Refusals += a.log.refusals.Load()
			r.GiveUps += a.log.giveUps.Load()
		}
	}
	r.Retries -= kmarks[0]
	r.Resumes -= kmarks[1]
	r.Expired -= kmarks[2]
	r.Refusals -= kmarks[3]
	r.GiveUps -= kmarks[4]

	// The raw watchers: how they ended, what they missed (the caches' wait above gave the
	// living ones time to receive the last writes).
	for _, a := range agents {
		if !a.isRaw {
			continue
		}
		rr := a.rawResult(writes)
		r.RawWatchers = append(r.RawWatchers, rr)
		r.RawMissed += rr.Missed
		switch rr.Ended {
		case "closed":
			r.RawClosed++
		case "410":
			r.RawGone++
		case "error":
			r.RawErrors++
		}
	}
	r.RawEnded = r.RawClosed + r.RawGone + r.RawErrors
	if r.RawFetches > 0 {
		t.Logf("%s: the raw watchers sent %d initial-state fetches over the upgrade (by design none)", r.name(), r.RawFetches)
	}
	if withKretry {
		r.Trace = fleetHATrace(r, agents, f.began, markAt, writes)
	}

	// Freshness: per restart, per informer, the first change to its pods written after the
	// SIGTERM, and when the agent's cache held it.
	byNode := make([][]haWrite, n)
	for _, wr := range writes {
		byNode[wr.node] = append(byNode[wr.node], wr)
	}
	for i := range byNode {
		sort.Slice(byNode[i], func(a, b int) bool { return byNode[i][a].at.Before(byNode[i][b].at) })
	}
	for _, rs := range restarts {
		var after, lag []float64
		for node, ws := range byNode {
			if agents[node].isRaw {
				continue
			}
			k := sort.Search(len(ws), func(k int) bool { return ws[k].at.After(rs) })
			if k == len(ws) {
				continue
			}
			at, ok := agents[node].firstSeen(ws[k].pod, ws[k].rv)
			if !ok {
				r.Undelivered++
				continue
			}
			after = append(after, at.Sub(rs).Seconds())
			lag = append(lag, at.Sub(ws[k].at).Seconds())
		}
		if len(after) == 0 {
			continue
		}
		sort.Float64s(after)
		sort.Float64s(lag)
		r.HalfAfter = math.Max(r.HalfAfter, after[len(after)/2])
		r.AllAfter = math.Max(r.AllAfter, after[len(after)-1])
		r.LagHalf = math.Max(r.LagHalf, lag[len(lag)/2])
		r.LagAll = math.Max(r.LagAll, lag[len(lag)-1])
	}
	t.Logf("%s: fleet synced in %v", r.name(), synced.Round(100*time.Millisecond))
	return r
}

func fleetHARow(r *fleetHARun) string {
	rss := 0.0
	perServer := make([]string, len(r.CPU))
	for i := range r.CPU {
		rss = math.Max(rss, r.PeakRSS[i])
		perServer[i] = fmt.Sprintf("%.1f", r.CPU[i])
	}
	rawEnded, rawMissed := "-", "-"
	if r.Raw > 0 {
		rawEnded = fmt.Sprintf("%d/%d c%d g%d e%d", r.RawEnded, r.Raw, r.RawClosed, r.RawGone, r.RawErrors)
		rawMissed = strconv.Itoa(r.RawMissed)
	}
	return fmt.Sprintf("%4d %-5s %d %-6s %6d %6d %5d %5d %5d %5d %6.1f %6.1f %5.2f %5d %6.1f %-14s %5.1f %5.0f %5.1f %6d %6d %5d %6.0f/%-6.0f %5d %5.1f/%-5.1f %5.1f/%-5.1f %4d %5d/%-5d %-16s %6s %6d %6d %4d %5d %5.1f %4.0f%% %s",
		r.servers(), r.Pace, r.Run, r.Client, r.Agents, r.Relists, r.WireFetches, r.WireFetches200, r.APIListCalls, r.APIWatchLists,
		float64(r.Bytes)/(1<<20), float64(r.SentBytes)/(1<<20), float64(r.HandshakeBytes)/(1<<20), r.NewConns, r.cpu(), "("+strings.Join(perServer, "+")+")", r.CPUBusiest5s,
		rss/(1<<20), r.EtcdCPU, r.EtcdRanges, r.ReqPeak, r.ReqP99, r.PatchP50, r.PatchP99, r.WritesFailed,
		r.HalfAfter, r.AllAfter, r.LagHalf, r.LagAll, r.Undelivered, r.CachesEqual, r.Agents-r.Raw, rawEnded, rawMissed,
		r.Retries, r.Resumes, r.Refusals, r.WireGone, r.HarnessCPU, 100*r.MachineBusy, r.Load)
}

func fleetHATable(runs []*fleetHARun) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%4s %-5s %s %-6s %6s %6s %5s %5s %5s %5s %6s %6s %5s %5s %6s %-14s %5s %5s %5s %6s %6s %5s %13s %5s %11s %11s %4s %11s %-16s %6s %6s %6s %4s %5s %5s %5s %s\n",
		"apis", "pace", "#", "client", "agents", "relist", "fetch", "200", "LIST", "WL", "MiB", "sent", "hs", "conns", "cpu", "(each)", "cpu5s",
		"rss", "etcd", "ranges", "rq/s", "p99", "patch ms", "wfail", "half/all", "lag h/all", "miss", "caches", "raw ended", "r-miss",
		"retry", "resume", "bdgt", "410", "agts", "busy", "load")
	for _, r := range runs {
		b.WriteString(fleetHARow(r) + "\n")
	}
	b.WriteString("Over the upgrade (from the writer's start to caches equal at the end): apis: apiservers behind the balancer;\n" +
		"  agents: informers + raw watchers; relist: initial-state fetches the informers' client-go asked for; fetch/200:\n" +
		"  LISTs + watch-lists the informers sent / answered 200 (below kretry: what the balancer passed; a raw watcher's one\n" +
		"  LIST, before the upgrade, is in neither); LIST, WL: pods LISTs and watch-lists by the apiservers' own metrics\n" +
		"  (apiserver_request_total, apiserver_watch_list_duration_seconds; a dying server's last seconds are not scraped;\n" +
		"  LIST counts the harness's one consistent LIST at the end); MiB: response bodies the agents read; sent: MiB the\n" +
		"  apiservers sent the agents, read off the agents' TCP connections (TLS handshakes, HTTP/2 frames, bodies); hs: of\n" +
		"  them, MiB each new connection read before its first request (its TLS handshake); conns: connections the agents\n" +
		"  opened; cpu (each): the apiservers' CPU seconds, summed (each apiserver's; /proc, all its processes); cpu5s:\n" +
		"  their CPU seconds in the busiest 5 s (per-second samples, summed over apiservers); rss: peak RSS MiB of any;\n" +
		"  etcd: etcd's CPU seconds; ranges: etcd range requests\n" +
		"  (grpc_server_handled_total{grpc_method=\"Range\"}); rq/s, p99: requests/s through the balancer, peak and 99th\n" +
		"  percentile second; patch ms: the writer's PATCH latency through the balancer, p50/p99 of those that succeeded;\n" +
		"  wfail: PATCHes that failed (an error, or no answer in 5 s), not in the latency; half/all: worst restart, seconds\n" +
		"  from the SIGTERM until half / all caches held the first change to their pods after it (informers); lag: the same\n" +
		"  from that change's write; miss: such changes never seen; caches: informers' caches equal to the server at the\n" +
		"  end; raw ended: raw watchers whose one watch ended before the run did / raw watchers, c: closed without an ERROR\n" +
		"  event, g: on an ERROR 410, e: on another ERROR (or the Watch call failed); r-miss: the writer's changes to the raw\n" +
		"  watchers' pods after their LIST never received, summed; retry, resume, bdgt: kretry's retries, resumes, budget\n" +
		"  refusals (all agents); 410: 410s answered, on the wire: 410 answers, and the ERROR 410 events of watch streams (a\n" +
		"  watch cache's 410 to a watch is a 200 whose one event is the 410, a 200 to apiserver_request_total); agts: the\n" +
		"  agents' process's CPU seconds; busy: the machine's CPU busy over the run (all cores; near 100%: the machine, not\n" +
		"  the control plane, is the limit); load: load average.\n")
	return b.String()
}

func machineLine() string {
	load, _ := os.ReadFile("/proc/loadavg")
	return fmt.Sprintf("%d CPUs, load average at the end %s", numCPU(), strings.Join(strings.Fields(string(load))[:3], " "))
}

func numCPU() int {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return 0
	}
	return strings.Count(string(data), "processor\t:")
}
