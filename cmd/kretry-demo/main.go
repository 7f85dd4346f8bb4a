package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/klog/v2"
)

// defaultSeed's schedule opens with an ERROR 500 event, a 503 and a compaction, so even a
// short run shows each way a stock informer relists.
const defaultSeed = 86

func main() {
	var opts options
	flag.DurationVar(&opts.duration, "duration", 30*time.Second, "how long the writer and the faults run")
	flag.DurationVar(&opts.settle, "settle", 15*time.Second, "how long the caches may take to match the server at the end")
	flag.IntVar(&opts.objects, "objects", 500, "ConfigMaps in the demo collection")
	flag.Float64Var(&opts.faultRate, "fault-rate", 0.5, "fault scenarios per second per client, each once it has recovered from the last")
	flag.Uint64Var(&opts.seed, "seed", defaultSeed, "seed of the writer and the fault schedule")
	flag.StringVar(&opts.kubeconfig, "kubeconfig", "", "watch a real cluster with this kubeconfig instead (read-only, no faults)")
	flag.StringVar(&opts.namespace, "namespace", "", `with --kubeconfig: the namespace to watch ("all" for every one; default the context's)`)
	verbose := flag.Bool("v", false, "keep client-go's log output")
	flag.Parse()
	if !*verbose {
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
}

// quietKlog silences client-go's logging: the plain informer logs every watch it loses,
// which would drown the progress lines.
func quietKlog() {
	flags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(flags)
	_ = flags.Set("logtostderr", "false")
	_ = flags.Set("stderrthreshold", "FATAL")
	klog.SetOutput(io.Discard)
}
