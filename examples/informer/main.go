package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/kretry/kretry/examples/internal/target"
	"github.com/kretry/kretry/transport"
)

func main() {
	target.Main("informer", run)
}

// summary is what a run saw.
type summary struct {
	events  int64 // handler notifications
	objects int   // ConfigMaps in the cache at the end
}

// run keeps a ConfigMap informer running until ctx ends.
func run(ctx context.Context, cfg *rest.Config, namespace string, out io.Writer) (summary, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(transport.Wrapper(transport.Config{})) // the whole adoption
	clientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return summary{}, err
	}

	factory := informers.NewSharedInformerFactoryWithOptions(clientset, 0, informers.WithNamespace(namespace))
	configMaps := factory.Core().V1().ConfigMaps()
	var events atomic.Int64
	count := func(any) { events.Add(1) }
	if _, err := configMaps.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    count,
		UpdateFunc: func(_, obj any) { count(obj) },
		DeleteFunc: count,
	}); err != nil {
		return summary{}, err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), configMaps.Informer().HasSynced) {
		return summary{}, errors.New("the informer did not sync before the end")
	}

	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	for {
		cached, err := configMaps.Lister().ConfigMaps(namespace).List(labels.Everything())
		if err != nil {
			return summary{}, err
		}
		fmt.Fprintf(out, "%d ConfigMaps cached, synced to resourceVersion %s, %d notifications\n",
			len(cached), configMaps.Informer().LastSyncResourceVersion(), events.Load())
		select {
		case <-ctx.Done():
			return summary{events: events.Load(), objects: len(cached)}, nil
		case <-ticker.C:
		}
	}
}
