package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"time"

	"k8s.io/klog/v2"

	"github.com/kretry/kretry/internal/report"
	"github.com/kretry/kretry/transport"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "kretry-fleet:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	flags := flag.NewFlagSet("kretry-fleet", flag.ContinueOnError)
	clients := flags.Int("clients", 1000, "informers per run (each its own clientset, connections and rate limiter, as separate processes)")
	objects := flags.Int("objects", 50, "ConfigMaps on the server")
	listCost := flags.Duration("list-cost", 20*time.Millisecond, "how long a LIST or watch-list holds an inflight seat at the server")
	inflight := flags.Int("inflight", 50, "the server's inflight limit on LISTs and watch-lists; past it, 429 with Retry-After: 1")
	down := flags.Duration("down", 10*time.Second, "how long the restart scenario's server is down")
	overload := flags.Duration("overload", 60*time.Second, "how long the overload scenario answers 429")
	scenarios := flags.String("scenarios", "restart,lbdrop,overload", "scenarios to run, comma-separated: restart, lbdrop, overload")
	kindList := flags.String("kinds", "client-go,kretry", "clients to run, comma-separated: client-go, kretry (the default retry budget), kretry-nobudget")
	settle := flags.Duration("settle", 60*time.Second, "how long a run may take after its fault for every cache to catch up")
	out := flags.String("json", "", "write every run's figures and request-rate series to this JSON file")
	plot := flags.String("plot", "", "draw the restart and lbdrop request rates as a PNG (runs the nested module cmd/kretry-fleet/plot)")
	if err := flags.Parse(args); err != nil {
		return err
	}
	klog.SetOutput(io.Discard) // client-go's reflectors would log every fault of every client
	klog.LogToStderr(false)

	opts := options{
		clients: *clients, objects: *objects, listCost: *listCost, inflight: *inflight,
		writeInterval: 200 * time.Millisecond, warmup: 2 * time.Second, settle: *settle,
	}
	allScenarios := map[string]scenario{
		"restart":  {name: "restart", fault: func(s *server) { s.Restart(*down) }},
		"lbdrop":   {name: "lbdrop", fault: func(s *server) { s.DropConnections() }},
		"overload": {name: "overload", fault: func(s *server) { s.Overload(*overload) }},
	}
	allKinds := map[string]clientKind{}
	for _, k := range kinds() {
		allKinds[k.name] = k
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	fmt.Fprintf(stdout, "kretry-fleet: %d informers per run, %d objects, inflight %d, list cost %s; %s, %d CPUs\n",
		opts.clients, opts.objects, opts.inflight, opts.listCost, runtime.Version(), runtime.NumCPU())
	var results []result
	for _, sn := range strings.Split(*scenarios, ",") {
		sc, ok := allScenarios[sn]
		if !ok {
			return fmt.Errorf("unknown scenario %q", sn)
		}
		for _, kn := range strings.Split(*kindList, ",") {
			kind, ok := allKinds[kn]
			if !ok {
				return fmt.Errorf("unknown client kind %q", kn)
			}
			began := time.Now()
			r, err := runOne(ctx, sc, kind, opts)
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "  %s/%s done in %s\n", sc.name, kind.name, time.Since(began).Round(time.Second))
			results = append(results, r)
		}
	}
	printTable(stdout, results)
	if *out != "" || *plot != "" {
		path := *out
		if path == "" {
			f, err := os.CreateTemp("", "kretry-fleet-*.json")
			if err != nil {
				return err
			}
			path = f.Name()
			f.Close()
			defer os.Remove(path)
		}
		data, err := json.Marshal(results)
		if err != nil {
			return err
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return err
		}
		if *plot != "" {
			return drawPlot(ctx, path, *plot, fmt.Sprintf("%d informers", opts.clients))
		}
	}
	return nil
}

// printTable writes one row per run.
func printTable(w io.Writer, results []result) {
	fmt.Fprintf(w, "\n%-9s %-14s %6s %9s %9s %9s %9s %7s %11s %6s %6s %9s %10s %9s %8s %8s\n",
		"scenario", "client", "N", "peak r/s", "p99 r/s", "burst r/s", "requests", "LISTs", "bytes", "429s", "410s", "half", "catch-up", "cache==", "retries", "refused")
	for _, r := range results {
		fmt.Fprintf(w, "%-9s %-14s %6d %9.0f %9.0f %9.0f %9d %7d %11s %6d %6d %9s %10s %9s %8d %8d\n",
			r.Scenario, r.Kind, r.Clients, r.PeakRPS, r.P99RPS, r.PeakBurst, r.Requests, r.Fetches, report.Bytes(r.BytesServed),
			r.Throttled, r.Expired, seconds(r.CatchUpHalf), seconds(r.CatchUp), fmt.Sprintf("%d/%d", r.CachesEqual, r.Clients),
			r.Retries, r.BudgetRefusals)
	}
	fmt.Fprintln(w, `
r/s: requests arriving at the server in one second (windows sliding by 100 ms), from the fault to the end of the run: the busiest
window and the 99th percentile. burst: the busiest 100 ms bin, as requests per second.
LISTs: initial-state fetches (LISTs and watch-lists). catch-up: from the fault's end until every cache had the first change made after it;
half: until half of them had.
cache==: caches equal to the server after the writer stopped. retries: kretry's retries and resumes. refused: retries the budget refused.`)
}

// seconds formats a catch-up time; a negative one never came.
func seconds(s float64) string {
	if s < 0 {
		return "never"
	}
	return fmt.Sprintf("%.1fs", s)
}

// drawPlot draws the runs in the JSON file in as the PNG out, with the
// plot module beside this command's source.
func drawPlot(ctx context.Context, in, out, title string) error {
	_, source, _, _ := runtime.Caller(0)
	dir, err := report.PlotModule(source)
	if err != nil {
		return err
	}
	return report.Plot(ctx, dir, in, out, title, os.Stderr)
}

// kinds are the clients a run can be made with.
func kinds() []clientKind {
	return []clientKind{
		{name: "client-go", config: func(*kretryCounters) *transport.Config { return nil }},
		{name: "kretry", config: func(c *kretryCounters) *transport.Config {
			return &transport.Config{Observer: retryCounter{c}}
		}},
		{name: "kretry-nobudget", config: func(c *kretryCounters) *transport.Config {
			return &transport.Config{Observer: retryCounter{c}, RetryBudget: transport.RetryBudget{Disabled: true}}
		}},
	}
}

// retryCounter is a transport.Observer counting kretry's retries and the
// retries the budget refused.
type retryCounter struct{ counters *kretryCounters }

func (r retryCounter) ObserveRetry(transport.RetryEvent)          { r.counters.retries.Add(1) }
func (r retryCounter) ObserveBudgetRefusal(transport.BudgetEvent) { r.counters.budgetRefusals.Add(1) }
func (retryCounter) ObserveAttempt(transport.AttemptEvent)        {}
func (retryCounter) ObserveGiveUp(transport.GiveUpEvent)          {}
