package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"regexp"
	"runtime"
	"runtime/debug"
	"strconv"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kretry/kretry/cmd/kretry-proxy/proxy"
	"github.com/kretry/kretry/internal/demoserver"
	"github.com/kretry/kretry/transport"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // the first signal shuts down gracefully; a second one kills
	}()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr, nil); err != nil {
		fmt.Fprintln(os.Stderr, "kretry-proxy:", err)
		os.Exit(1)
	}
}

// options are the command line.
type options struct {
	kubeconfig        string
	context           string
	serviceAccountDir string
	demo              bool
	probeAddress      string
	port              int
	address           string
	acceptHosts       hostPatterns
	allowUpgrades     bool
	readOnly          bool
	retryGets         bool
	listBufferSize    byteSize
	shutdownTimeout   time.Duration
	demoFaultRate     float64
	printVersion      bool
}

// usageHeader comes before the flags in --help.
const usageHeader = `Usage: kretry-proxy [flags]

Serves the Kubernetes API on http://127.0.0.1:8001, as kubectl proxy does, with kretry
underneath: every LIST and WATCH through it is retried and resumed. It finds its cluster as
kubectl does (--kubeconfig, $KUBECONFIG, ~/.kube/config, else the pod's service account),
acts with its own identity only, and refuses exec, attach, port-forward, a kubelet's commands and
every upgrade unless --allow-upgrades; writes pass unless --read-only (what they may do is
RBAC's to say). More in docs/kretry-proxy.md (github.com/kretry/kretry).

Flags:
`

// parseFlags reads the command line. --help (or -h) prints the usage on stdout and returns
// flag.ErrHelp; other errors are returned, not printed.
func parseFlags(args []string, stdout io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("kretry-proxy", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // run prints an error once; the usage only when asked for
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster to serve (default: $KUBECONFIG, else ~/.kube/config, else in-cluster)")
	fs.StringVar(&o.context, "context", "", "kubeconfig context (default: the current one)")
	fs.StringVar(&o.serviceAccountDir, "service-account-dir", defaultServiceAccountDir, "in-cluster: where the pod's service account token and ca.crt are mounted")
	fs.BoolVar(&o.demo, "demo", false, "serve an in-process demo API server instead of a cluster")
	fs.StringVar(&o.probeAddress, "probe-address", "", "also serve /healthz and /metrics (only) on this address, e.g. :8081, for the kubelet's probes (default: off)")
	fs.IntVar(&o.port, "port", 8001, "port to serve on (0: a free one)")
	fs.StringVar(&o.address, "address", "127.0.0.1", "loopback address to serve on")
	o.acceptHosts = hostPatterns{list: proxy.DefaultAcceptHosts}
	fs.Var(&o.acceptHosts, "accept-hosts", "comma-separated regular `expressions` for the name in the Host and Origin headers,\neach matched against the whole name")
	fs.BoolVar(&o.allowUpgrades, "allow-upgrades", false, allowUpgradesUsage)
	fs.BoolVar(&o.readOnly, "read-only", false, "refuse every method but GET (with --allow-upgrades, exec, attach and port-forward over WebSocket are GETs and pass)")
	fs.BoolVar(&o.retryGets, "retry-gets", true, "retry GETs of single objects (and of /api/v1-style discovery) like LISTs")
	o.listBufferSize = defaultListBufferSize
	fs.Var(&o.listBufferSize, "list-buffer-size", "the largest LIST body held whole in memory so that a break can be retried (custom\nresources, gzip, CBOR, tables; built-in kinds stream): bytes or a `quantity` such as 32Mi,\nat least 1Mi; size the container's memory limit with it")
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 10*time.Second, "on SIGTERM/SIGINT, how long requests in flight may take to finish")
	fs.Float64Var(&o.demoFaultRate, "demo-fault-rate", 0.2, "with --demo: fault scenarios per second per client")
	fs.BoolVar(&o.printVersion, "version", false, "print the module version and exit")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(stdout)
		fmt.Fprint(stdout, usageHeader)
		fs.PrintDefaults()
		return o, err
	} else if err != nil {
		return o, fmt.Errorf("%w (kretry-proxy --help lists the flags)", err)
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.demo && (o.kubeconfig != "" || o.context != "") {
		return o, errors.New("--demo serves the in-process demo API server: it takes no --kubeconfig or --context")
	}
	if !isLoopback(o.address) {
		return o, fmt.Errorf("--address %s is not a loopback address: the proxy lends its credentials to whoever connects", o.address)
	}
	return o, nil
}

// allowUpgradesUsage is what --allow-upgrades lets through, as docs/kretry-proxy.md lists it.
const allowUpgradesUsage = "let through what is refused by default as something that runs a command or opens a tunnel:\n" +
	"every protocol upgrade; pods' exec, attach and portforward; behind a node's proxy, and\n" +
	"behind a pod's or a service's proxy to port 10250 or 10255, whatever is not one of the\n" +
	"kubelet's read endpoints (its run, exec, attach, portForward, cri, checkpoint, debug);\n" +
	"a path to a proxy or a pod's streams not in canonical form. CONNECT and TRACE stay refused"

// hostPatterns is --accept-hosts: comma-separated regular expressions, each matched against a
// whole name (proxy.ParseAcceptHosts). patterns is nil for the default.
type hostPatterns struct {
	list     string
	patterns []*regexp.Regexp
}

func (h *hostPatterns) String() string { return h.list }

func (h *hostPatterns) Set(value string) error {
	patterns, err := proxy.ParseAcceptHosts(value)
	if err != nil {
		return err
	}
	h.list, h.patterns = value, patterns
	return nil
}

// defaultListBufferSize is kretry's default (transport.Config.ListBufferSize), spelled out so
// that --help shows it.
const defaultListBufferSize = 128 << 20

// byteSize is a flag of a number of bytes, written as a Kubernetes quantity ("32Mi", "64M",
// "1048576"), as a container's memory limit is.
type byteSize int64

func (b *byteSize) String() string {
	return resource.NewQuantity(int64(*b), resource.BinarySI).String()
}

// maxByteSize is the largest size an int64 holds. resource.ParseQuantity caps a quantity with
// a binary suffix (Ki to Ei) there, so such a quantity that reads as maxByteSize was at least
// that large.
var maxByteSize = *resource.NewQuantity(math.MaxInt64, resource.DecimalSI)

// Set takes any quantity that is a whole number of bytes, at least 1Mi, within an int64:
// 1.5Mi is 1572864 bytes, as in a container's memory limit.
func (b *byteSize) Set(value string) error {
	q, err := resource.ParseQuantity(value)
	if err != nil {
		return fmt.Errorf("%q is not a size: want bytes or a quantity such as 32Mi", value)
	}
	if over := q.Cmp(maxByteSize); over > 0 || over == 0 && q.Format == resource.BinarySI {
		return fmt.Errorf("%q is too large: at most %d bytes", value, int64(math.MaxInt64))
	}
	n := q.Value() // rounded up: exact only where q is a whole number
	switch {
	case q.Cmp(*resource.NewQuantity(n, resource.DecimalSI)) != 0:
		return fmt.Errorf("%q is not a whole number of bytes", value)
	case n < 1<<20:
		return fmt.Errorf("%q is under 1Mi: a LIST body larger than that would stream unprotected", value)
	}
	*b = byteSize(n)
	return nil
}

// isLoopback reports whether address is "localhost" or a loopback IP.
func isLoopback(address string) bool {
	if address == "localhost" {
		return true
	}
	ip := net.ParseIP(address)
	return ip != nil && ip.IsLoopback()
}

// run serves until ctx ends, then shuts down gracefully. ready, if set, receives the address
// served on once it accepts connections (for tests).
func run(ctx context.Context, args []string, stdout, stderr io.Writer, ready func(addr string)) error {
	o, err := parseFlags(args, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	} else if err != nil {
		return err
	}
	if o.printVersion {
		fmt.Fprintln(stdout, "kretry-proxy", version())
		return nil
	}
	fmt.Fprintln(stdout, startLine(transport.CurrentState(), buildSettings()))
	c, closeTarget, err := target(o, stdout, os.Getenv)
	if err != nil {
		return err
	}
	defer closeTarget()
	srv, err := proxy.New(c.config, proxy.Options{
		TokenFile:     c.tokenFile,
		AcceptHosts:   o.acceptHosts.patterns,
		AllowUpgrades: o.allowUpgrades,
		ReadOnly:      o.readOnly,
		Transport:     transport.Config{RetryGets: o.retryGets, ListBufferSize: int64(o.listBufferSize)},
		ErrorLog:      log.New(stderr, "kretry-proxy: ", log.LstdFlags),
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(o.address, strconv.Itoa(o.port)))
	if err != nil {
		return err
	}
	probed := make(chan error, 1)
	if o.probeAddress != "" {
		probeLn, err := net.Listen("tcp", o.probeAddress)
		if err != nil {
			ln.Close()
			return fmt.Errorf("--probe-address: %w", err)
		}
		probe := &http.Server{Handler: srv.ProbeHandler(), ReadHeaderTimeout: 10 * time.Second}
		fmt.Fprintf(stdout, "Serving /healthz and /metrics on %s\n", probeLn.Addr())
		go func() { probed <- probe.Serve(probeLn) }()
		defer probe.Close()
	}
	fmt.Fprintf(stdout, "Starting to serve on %s\n", ln.Addr())
	if ready != nil {
		ready(ln.Addr().String())
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case err := <-probed:
		srv.Shutdown(context.Background())
		<-served
		return fmt.Errorf("--probe-address: %w", err)
	case <-ctx.Done():
	}
	fmt.Fprintln(stderr, "kretry-proxy: shutting down: ending open watches, waiting for requests in flight")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return <-served
}

// target is the cluster found as kubectl finds one, or with --demo an in-process demo
// server; it says on stdout which.
func target(o options, stdout io.Writer, getenv func(string) string) (cluster, func(), error) {
	if o.demo {
		kinds := make([]demoserver.FaultKind, 0, len(demoserver.AllFaults))
		for _, kind := range demoserver.AllFaults {
			// A 410 is the one fault kretry rightly hands over: it would end `kubectl get -w`.
			if kind != demoserver.Compaction {
				kinds = append(kinds, kind)
			}
		}
		server := demoserver.Start(demoserver.Config{FaultRate: o.demoFaultRate, Seed: 1, FaultKinds: kinds})
		fmt.Fprintf(stdout, "--demo: serving an in-process demo API server, not a cluster (%s): ConfigMaps in namespace %q, changing, %.2g faults/s per client\n",
			server.URL(), server.Namespace(), o.demoFaultRate)
		return cluster{config: server.RESTConfig("kretry-proxy")}, server.Close, nil
	}
	c, err := findCluster(o, getenv)
	if err != nil {
		return cluster{}, nil, err
	}
	fmt.Fprintf(stdout, "Serving the cluster at %s (%s)\n", c.config.Host, c.found)
	return c, func() {}, nil
}

// startLine is the first line kretry-proxy prints: its version and VCS revision, and whether
// kretry is on and why, so that a proxy with kretry off never looks like one with kretry on.
func startLine(state transport.State, build map[string]string) string {
	revision := "revision unknown"
	if r := build["vcs.revision"]; r != "" {
		revision = "revision " + r
		if build["vcs.modified"] == "true" {
			revision += " (modified)"
		}
	}
	kretry := "kretry on"
	if !state.On {
		kretry = "kretry off: requests pass through untouched"
	}
	return fmt.Sprintf("kretry-proxy %s, %s, %s: %s (%s)", version(), revision, runtime.Version(), kretry, state.Why)
}

// buildSettings are the binary's build settings (vcs.revision, vcs.modified, ...), none
// when it has no build information.
func buildSettings() map[string]string {
	settings := map[string]string{}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			settings[s.Key] = s.Value
		}
	}
	return settings
}
