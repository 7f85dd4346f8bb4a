//go:build e2e

package e2e_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// fleetHAFigure is one figure of TestFleetHA's yardstick: how to read it off a run, and the
// margin by which a kretry run may exceed a lone stock run's (with two or more stock runs their
// spread is the margin instead: their own noise, measured).
type fleetHAFigure struct {
	name   string
	format string // of a value
	value  func(*fleetHARun) float64
	margin fleetHAMargin
	// notGatedAlone, when set, says why the figure is reported, not gated, against a lone
	// stock run (make test's gate); make fleet-ha's runs gate it.
	notGatedAlone string
}

// fleetHAMargin is a figure's noise when stock ran once: rel of stock's value plus abs, plus
// perInformer of the run's informers (relists and fetches: a share of the fleet).
type fleetHAMargin struct {
	rel, abs, perInformer float64
	why                   string // how the margin reads, e.g. "25% + 2 s"
}

func (m fleetHAMargin) of(stock float64, informers int) float64 {
	return m.rel*stock + m.abs + m.perInformer*float64(informers)
}

// fleetHAYardstick is what kretry may cost the control plane (the design's yardstick), gated
// per run. The margins for a lone stock run (make test's gate, N = 50, one run, stock first),
// from ten such pairs of runs at N = 50 and 100 behind two and three apiservers on the shared
// 2-core machine, and 3 stock runs at N = 50 behind three (stock's own spread):
//   - relists and fetches: 5% of the informers + 2, and CPU over the run 25% + 2 s, as before
//     (on 2 cores a neighbour's burst moves a run's apiserver CPU by 10-20%);
//   - CPU in the busiest 5 s: 25% + 0.5 s; it was 1.6-2.4 s, kretry's up to 0.41 s (22%) over
//     stock's in a pair, stock's three runs 1.81-1.99 s;
//   - etcd ranges: 5% + 10. Most are the apiservers' own (about 1,150 a run behind two, 1,800
//     behind three, whatever the fleet), and the second run in a cluster reads more than the
//     first: kretry's, second in make test, read up to 58 (3.2%) more than stock's, and stock's
//     read 8 more when second;
//   - bytes sent: 10% + 0.1 MiB; three stock runs were within 0.01 MiB of each other;
//   - the writer's PATCH p50: 50% + 5 ms (9-14 ms, kretry up to 3.7 ms over stock); p99: 100% +
//     100 ms: 24-52 ms in most runs, but 81 and 322 ms in two stock runs while the machine was
//     65-100% busy (at N = 50 the p99 is the sixth-slowest of about 550 PATCHes, and which of
//     them meet the writer's own apiserver's restart is chance).
var fleetHAYardstick = []fleetHAFigure{
	{"relists", "%.0f", func(r *fleetHARun) float64 { return float64(r.Relists) },
		fleetHAMargin{perInformer: 0.05, abs: 2, why: "5% of the informers + 2"}, ""},
	{"initial-state fetches on the wire", "%.0f", func(r *fleetHARun) float64 { return float64(r.WireFetches) },
		fleetHAMargin{perInformer: 0.05, abs: 2, why: "5% of the informers + 2"}, ""},
	{"apiserver CPU s", "%.1f", (*fleetHARun).cpu,
		fleetHAMargin{rel: 0.25, abs: 2, why: "25% + 2 s"}, ""},
	{"apiserver CPU s, busiest 5 s", "%.2f", func(r *fleetHARun) float64 { return r.CPUBusiest5s },
		fleetHAMargin{rel: 0.25, abs: 0.5, why: "25% + 0.5 s"}, ""},
	{"etcd ranges", "%.0f", func(r *fleetHARun) float64 { return float64(r.EtcdRanges) },
		fleetHAMargin{rel: 0.05, abs: 10, why: "5% + 10"}, ""},
	{"MiB sent to the agents", "%.2f", func(r *fleetHARun) float64 { return float64(r.SentBytes) / (1 << 20) },
		fleetHAMargin{rel: 0.10, abs: 0.1, why: "10% + 0.1 MiB"},
		// Not met yet, the one figure: each new connection of kretry's search is a TLS
		// handshake the apiservers send (about 2.2 KB with kubeadm's RSA-2048 leaf), and at
		// N = 50-100 at the cloud pace kretry sent 2-2.5 times stock's bytes (docs/fleet.md).
		"not yet at stock's: make fleet-ha gates it"},
	{"writer's PATCH p50 ms", "%.1f", func(r *fleetHARun) float64 { return r.PatchP50 },
		fleetHAMargin{rel: 0.5, abs: 5, why: "50% + 5 ms"}, ""},
	{"writer's PATCH p99 ms", "%.0f", func(r *fleetHARun) float64 { return r.PatchP99 },
		fleetHAMargin{rel: 1, abs: 100, why: "100% + 100 ms"}, ""},
}

// fleetHALimit is the check's one rule: a kretry run's figure may be at most the median of
// the stock runs' plus their spread (max - min), or, with one stock run, plus the figure's
// margin. It returns the median, the allowance above it, and what the allowance is.
func fleetHALimit(f fleetHAFigure, stock []*fleetHARun) (median, allowance float64, noise string) {
	values := make([]float64, len(stock))
	for i, r := range stock {
		values[i] = f.value(r)
	}
	slices.Sort(values)
	median = values[len(values)/2]
	if len(values)%2 == 0 {
		median = (values[len(values)/2-1] + values[len(values)/2]) / 2
	}
	if len(values) == 1 {
		allowance = f.margin.of(median, stock[0].Agents-stock[0].Raw)
		return median, allowance, "one stock run: " + f.margin.why
	}
	allowance = values[len(values)-1] - values[0]
	return median, allowance, fmt.Sprintf("spread of %d stock runs, "+f.format+"-"+f.format, len(values), values[0], values[len(values)-1])
}

// fleetHACheck applies the rule to every figure of the yardstick of every kretry run, per
// apiserver count and pace: the verdicts as a table, and one failure per figure over its limit.
func fleetHACheck(runs []*fleetHARun) (report string, failures []string) {
	type group struct {
		servers int
		pace    string
	}
	var groups []group
	for _, r := range runs {
		if g := (group{r.servers(), r.Pace}); !slices.Contains(groups, g) {
			groups = append(groups, g)
		}
	}
	var b strings.Builder
	for _, g := range groups {
		var stock, kr []*fleetHARun
		for _, r := range runs {
			if r.servers() != g.servers || r.Pace != g.pace {
				continue
			}
			if r.Client == "kretry" {
				kr = append(kr, r)
			} else {
				stock = append(stock, r)
			}
		}
		if len(stock) == 0 || len(kr) == 0 {
			continue
		}
		fmt.Fprintf(&b, "check, %d apiservers, %s pace: each kretry run at or under stock's median + its noise\n", g.servers, g.pace)
		fmt.Fprintf(&b, "  %-34s %9s %9s %-34s %9s  %s\n", "figure", "median", "+ noise", "(the noise)", "limit", "kretry, by run")
		for _, f := range fleetHAYardstick {
			median, allowance, noise := fleetHALimit(f, stock)
			limit := median + allowance
			var verdicts []string
			for _, r := range kr {
				v, verdict := f.value(r), "ok"
				switch {
				case v <= limit+1e-9:
				case len(stock) == 1 && f.notGatedAlone != "":
					verdict = "over (reported: " + f.notGatedAlone + ")"
				default:
					verdict = "OVER"
					failures = append(failures, fmt.Sprintf("%s: %s "+f.format+", over stock's median "+f.format+" + "+f.format+" (%s)",
						r.name(), f.name, v, median, allowance, noise))
				}
				verdicts = append(verdicts, fmt.Sprintf("%d: "+f.format+" %s", r.Run, v, verdict))
			}
			fmt.Fprintf(&b, "  %-34s %9s %9s %-34s %9s  %s\n", f.name, fmt.Sprintf(f.format, median), fmt.Sprintf("+"+f.format, allowance),
				noise, fmt.Sprintf(f.format, limit), strings.Join(verdicts, ", "))
		}
	}
	return b.String(), failures
}

// TestFleetHACheckRule: the rule without a control plane.
func TestFleetHACheckRule(t *testing.T) {
	run := func(client string, n int, cpu float64, relists int64) *fleetHARun {
		return &fleetHARun{APIServers: 3, Pace: "cloud", Client: client, Run: n, Agents: 50, Raw: 5, CPU: []float64{cpu / 3, cpu / 3, cpu / 3}, Relists: relists}
	}
	cpu := fleetHAYardstick[slices.IndexFunc(fleetHAYardstick, func(f fleetHAFigure) bool { return f.name == "apiserver CPU s" })]
	relists := fleetHAYardstick[0]
	for _, tc := range []struct {
		name          string
		figure        fleetHAFigure
		stock         []*fleetHARun
		median, allow float64
	}{
		{"one stock run: the margin, 25% + 2 s", cpu, []*fleetHARun{run("stock", 1, 8, 0)}, 8, 4},
		{"one stock run: 5% of 45 informers + 2", relists, []*fleetHARun{run("stock", 1, 8, 40)}, 40, 4.25},
		{"three stock runs: the median and the spread", cpu, []*fleetHARun{run("stock", 1, 12, 0), run("stock", 2, 9, 0), run("stock", 3, 10, 0)}, 10, 3},
		{"two stock runs: the mean of the two and their spread", cpu, []*fleetHARun{run("stock", 1, 12, 0), run("stock", 2, 9, 0)}, 10.5, 3},
		{"three equal stock runs: no noise", relists, []*fleetHARun{run("stock", 1, 8, 40), run("stock", 2, 8, 40), run("stock", 3, 8, 40)}, 40, 0},
	} {
		median, allow, _ := fleetHALimit(tc.figure, tc.stock)
		if d := median - tc.median + allow - tc.allow; median != tc.median || d*d > 1e-12 {
			t.Errorf("%s: median %v + %v, want %v + %v", tc.name, median, allow, tc.median, tc.allow)
		}
	}

	// Per apiserver count and pace: a kretry run over its own group's limit fails, one under
	// passes, and a group without stock runs is not checked.
	runs := []*fleetHARun{run("stock", 1, 10, 40), run("kretry", 1, 9, 0), run("stock", 2, 10, 40), run("kretry", 2, 13, 0)}
	two := run("kretry", 1, 30, 0)
	two.APIServers = 2
	runs = append(runs, two)
	report, failures := fleetHACheck(runs)
	if len(failures) != 1 || !strings.Contains(failures[0], "3 apiservers, cloud run 2 kretry: apiserver CPU s 13.0") {
		t.Errorf("failures %q, want one: run 2's CPU over 10 + 0 (two equal stock runs)\n%s", failures, report)
	}
	if strings.Contains(report, "2 apiservers") {
		t.Errorf("a group without stock runs was checked:\n%s", report)
	}

	// Bytes sent over a lone stock run's limit is reported, not a failure; over two stock
	// runs' limit it fails.
	bytes := func(client string, n int, mib float64) *fleetHARun {
		r := run(client, n, 9, 0)
		r.SentBytes = int64(mib * (1 << 20))
		return r
	}
	if report, failures := fleetHACheck([]*fleetHARun{bytes("stock", 1, 1), bytes("kretry", 1, 3)}); len(failures) != 0 || !strings.Contains(report, "over (reported") {
		t.Errorf("a lone stock run: failures %q, want none, bytes reported over\n%s", failures, report)
	}
	if _, failures := fleetHACheck([]*fleetHARun{bytes("stock", 1, 1), bytes("stock", 2, 1.1), bytes("kretry", 1, 3)}); len(failures) != 1 || !strings.Contains(failures[0], "MiB sent") {
		t.Errorf("two stock runs: failures %q, want the bytes sent", failures)
	}
}
