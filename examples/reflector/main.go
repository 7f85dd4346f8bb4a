package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/kretry/kretry/examples/internal/target"
	"github.com/kretry/kretry/reflector"
	"github.com/kretry/kretry/transport"
)

func main() {
	target.Main("reflector", run)
}

// summary is what a run ended with.
type summary struct {
	store cache.Store
	stats reflector.Stats
}

// run keeps a store of the namespace's ConfigMaps until ctx ends, printing its size and
// the reflector's counts once a second.
func run(ctx context.Context, cfg *rest.Config, namespace string, out io.Writer) (summary, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(transport.Wrapper(transport.Config{}))
	clientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return summary{}, err
	}
	lw := cache.NewListWatchFromClient(clientset.CoreV1().RESTClient(), "configmaps", namespace, fields.Everything())
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	r := reflector.New(lw, &corev1.ConfigMap{}, store, reflector.Config{})

	runErr := make(chan error, 1)
	go func() { runErr <- r.Run(ctx) }()
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	for {
		select {
		case err := <-runErr:
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				err = nil // Run returns ctx.Err() once ctx ends, and nothing else
			}
			return summary{store: store, stats: r.Stats()}, err
		case <-ticker.C:
			st := r.Stats()
			fmt.Fprintf(out, "%d ConfigMaps in the store, synced to resourceVersion %s; %d lists (%d after a 410), %d watches\n",
				len(store.ListKeys()), r.LastSyncResourceVersion(), st.Lists, st.Relists410, st.Watches)
		}
	}
}
