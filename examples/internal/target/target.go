package target

import (
	"flag"
	"fmt"
	"io"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kretry/kretry/internal/demoserver"
)

// Flags are the command-line flags every example shares.
type Flags struct {
	Kubeconfig string
	Namespace  string
	FaultRate  float64
}

// Register adds --kubeconfig, --namespace and --fault-rate to fs.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.Kubeconfig, "kubeconfig", "", "use this cluster (read-only) instead of an in-process demo server")
	fs.StringVar(&f.Namespace, "namespace", "", "with --kubeconfig: namespace to watch (default: the context's)")
	fs.Float64Var(&f.FaultRate, "fault-rate", 0.5, "demo server only: fault scenarios per second")
}

// Target is where an example's requests go.
type Target struct {
	// Config reaches the cluster; the example wraps it with kretry.
	Config *rest.Config
	// Namespace holds the ConfigMaps the example reads.
	Namespace string
	// Server is the in-process demo server, nil for a real cluster.
	Server *demoserver.Server
}

// Close stops the demo server, if there is one.
func (t *Target) Close() {
	if t.Server != nil {
		t.Server.Close()
	}
}

// Open connects to the kubeconfig's cluster, or starts a demo server (and says so on out).
func Open(f Flags, userAgent string, out io.Writer) (*Target, error) {
	if f.Kubeconfig == "" {
		server := demoserver.Start(demoserver.Config{FaultRate: f.FaultRate, Seed: 1})
		fmt.Fprintf(out, "no --kubeconfig: demo server on %s, %.2g faults/s\n", server.URL(), f.FaultRate)
		return &Target{Config: server.RESTConfig(userAgent), Namespace: server.Namespace(), Server: server}, nil
	}
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: f.Kubeconfig}, &clientcmd.ConfigOverrides{})
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", f.Kubeconfig, err)
	}
	namespace := f.Namespace
	if namespace == "" {
		if namespace, _, err = loader.Namespace(); err != nil {
			return nil, err
		}
	}
	cfg.UserAgent = userAgent
	return &Target{Config: cfg, Namespace: namespace}, nil
}
