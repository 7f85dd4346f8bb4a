package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"k8s.io/klog/v2"
)

// defaultSeed is a typical draw, not a picked one: under the default mix, seeds 1 to 6
// cost the stock informer 4 initial-state fetches but once (seed 3: 2, as its backoff kept
// it from relisting), kretry's 2 every time (one for its 410), and end the stock raw watch
// within 6s.
const defaultSeed = 86

// usage is --help's text before the flags: what the demo runs and the fault mix.
func usage() string {
	var b strings.Builder
	b.WriteString(`kretry-demo: stock client-go vs kretry against an in-process API server under faults.

Four clients watch the same ConfigMaps side by side: a SharedInformerFactory informer and
a raw watcher (LIST, then Watch until the channel closes: the kubectl get -w pattern),
each once plain and once through kretry. The server keeps changing 500 objects and hits
every client with the faults of a real cluster, squeezed into a short run:

  per client, about --fault-rate a second, each once it has caught up since the last
`)
	total := 0
	for _, f := range faultMix {
		total += f.weight
	}
	for _, f := range faultMix {
		lines := strings.Split(f.what, "\n")
		fmt.Fprintf(&b, "    %-17s %3.0f%%  %s\n", f.kind, 100*float64(f.weight)/float64(total), lines[0])
		for _, line := range lines[1:] {
			fmt.Fprintf(&b, "    %-17s       %s\n", "", line)
		}
	}
	b.WriteString(`  every client, --rollouts times, evenly spread (1/5, 2/5, 3/5 of --duration by default)
    rollout (503s)          a rolling upgrade, one apiserver after another: every
                            connection dropped, then --rollout of 503s on every LIST and
                            watch (the one demo server stands for the whole control plane)
  the informers, after the last wave (4/5 of --duration by default), once caught up
    compaction (410)        the watch closes and its resourceVersion is compacted: the
                            one fault where a relist is the right answer (a 410 ends a
                            raw watch with or without kretry, so raw watchers get none);
                            an informer not caught up by the end gets it in an extension
                            of the run (the writer on, no other faults) of up to 5s

The table at the end leads with initial-state fetches (and the bytes they cost), watches
that ended, changes missed and time to recover, and ends with a verdict. --plot draws
requests, fetches and lag over time per client, with the faults (gonum/plot, PNG).

With --kubeconfig it watches a real cluster instead: read-only, no faults.

Flags:
`)
	return b.String()
}

func main() {
	var opts options
	flag.DurationVar(&opts.duration, "duration", 30*time.Second, "how long the writer and the faults run")
	flag.DurationVar(&opts.settle, "settle", 5*time.Second, "how long the clients may take to catch up with the server at the end")
	flag.IntVar(&opts.objects, "objects", 500, "ConfigMaps in the demo collection")
	flag.Float64Var(&opts.faultRate, "fault-rate", 0.5, "per-client faults per second, each once the client has caught up since the last")
	flag.IntVar(&opts.rollouts, "rollouts", 3, "waves of the rolling upgrade (apiservers restarted one after another)")
	flag.DurationVar(&opts.rollout, "rollout", 2*time.Second, "how long each wave answers 503")
	flag.DurationVar(&opts.throttle, "throttle", 2*time.Second, "how long a 429 burst lasts")
	flag.Uint64Var(&opts.seed, "seed", defaultSeed, "seed of the writer and the fault schedules")
	plotPath := flag.String("plot", "", "write a PNG timeline here (runs the plotter module in cmd/kretry-demo/plot with the go tool)")
	flag.StringVar(&opts.kubeconfig, "kubeconfig", "", "watch a real cluster with this kubeconfig instead (read-only, no faults)")
	flag.StringVar(&opts.namespace, "namespace", "", `with --kubeconfig: the namespace to watch ("all" for every one; default the context's)`)
	verbose := flag.Bool("v", false, "keep client-go's log output, and log every request on the wire and every kretry retry")
	flag.Usage = func() {
		fmt.Fprint(flag.CommandLine.Output(), usage())
		flag.PrintDefaults()
	}
	flag.Parse()
	if *verbose {
		opts.retryLog = os.Stderr
	} else {
		quietKlog()
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // the first ^C ends the run (the table still comes); a second one kills
	}()
	res, err := run(ctx, opts, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kretry-demo:", err)
		os.Exit(1)
	}
	printTable(os.Stdout, res)
	if *plotPath != "" {
		title := fmt.Sprintf("kretry-demo --seed %d --duration %s: stock client-go vs kretry", opts.seed, opts.duration)
		if err := plot(context.Background(), res.timeline, *plotPath, title, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, "kretry-demo:", err)
			os.Exit(1)
		}
		fmt.Println("plot:", *plotPath)
	}
}

// quietKlog silences client-go's logging: the stock informer logs every watch it loses,
// which would drown the progress lines.
func quietKlog() {
	flags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(flags)
	_ = flags.Set("logtostderr", "false")
	_ = flags.Set("stderrthreshold", "FATAL")
	klog.SetOutput(io.Discard)
}
