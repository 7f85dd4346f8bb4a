package target

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"

	"k8s.io/client-go/rest"
)

// RunFunc is an example's run function: it works on the ConfigMaps in cfg's namespace
// until ctx ends, printing its progress on out, and returns what it saw (which its tests
// check, and Main drops).
type RunFunc[S any] func(ctx context.Context, cfg *rest.Config, namespace string, out io.Writer) (S, error)

// Main is the main function every example shares. It registers the shared flags and
// --duration on the command line and parses it, opens the target with the user agent
// "kretry-example-<name>", and calls run on the target, printing on stdout, under a
// context that ends on an interrupt or when --duration is up. An error from opening the
// target or from run is printed on stderr, and the program exits with status 1.
func Main[S any](name string, run RunFunc[S]) {
	if err := runMain(name, run); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func runMain[S any](name string, run RunFunc[S]) error {
	var flags Flags
	flags.Register(flag.CommandLine)
	duration := flag.Duration("duration", 0, "stop after this long (0: run until interrupted)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if *duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *duration)
		defer cancel()
	}
	t, err := Open(flags, "kretry-example-"+name, os.Stdout)
	if err != nil {
		return err
	}
	defer t.Close()
	_, err = run(ctx, t.Config, t.Namespace, os.Stdout)
	return err
}
