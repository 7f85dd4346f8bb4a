package main

import (
	"context"
	"fmt"
	"io"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/kretry/kretry/examples/internal/target"
	"github.com/kretry/kretry/transport"
)

var configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

func main() {
	target.Main("dynamic", run)
}

// summary is what a run ended with.
type summary struct {
	objects map[string]string // name → resourceVersion
	lists   int               // paged LISTs made (one at the start, one per 410)
	closed  int               // watches that ended without an ERROR event before ctx did
}

// run mirrors the namespace's ConfigMaps into a map until ctx ends, printing its size once
// a second.
func run(ctx context.Context, cfg *rest.Config, namespace string, out io.Writer) (summary, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(transport.Wrapper(transport.Config{}))
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return summary{}, err
	}
	resource := client.Resource(configMaps).Namespace(namespace)

	s := summary{objects: map[string]string{}}
	for {
		rv, err := list(ctx, resource, s.objects)
		if err == nil {
			s.lists++
			err = follow(ctx, resource, rv, s.objects, out)
		}
		switch {
		case ctx.Err() != nil:
			return s, nil
		case apierrors.IsResourceExpired(err) || apierrors.IsGone(err):
			fmt.Fprintf(out, "%v: listing again\n", err)
		case err != nil:
			return s, err
		default:
			fmt.Fprintln(out, "the watch ended: listing again")
			s.closed++
		}
	}
}

// list replaces objects with a paged LIST and returns its resourceVersion.
func list(ctx context.Context, resource dynamic.ResourceInterface, objects map[string]string) (string, error) {
	clear(objects)
	opts := metav1.ListOptions{Limit: 50}
	for {
		page, err := resource.List(ctx, opts)
		if err != nil {
			return "", err
		}
		for _, item := range page.Items {
			objects[item.GetName()] = item.GetResourceVersion()
		}
		if page.GetContinue() == "" {
			return page.GetResourceVersion(), nil
		}
		opts.Continue = page.GetContinue()
	}
}

// follow applies watch events from rv on until the watch ends, returning the Status of an
// ERROR event, or nil when the result channel closed.
func follow(ctx context.Context, resource dynamic.ResourceInterface, rv string, objects map[string]string, out io.Writer) error {
	w, err := resource.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
	if err != nil {
		return err
	}
	defer w.Stop()
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	for {
		select {
		case <-ticker.C:
			fmt.Fprintf(out, "%d ConfigMaps, at resourceVersion %s\n", len(objects), rv)
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil
			}
			if ev.Type == watch.Error {
				return apierrors.FromObject(ev.Object)
			}
			obj, isUnstructured := ev.Object.(*unstructured.Unstructured)
			if !isUnstructured {
				return fmt.Errorf("unexpected %T in a %s event", ev.Object, ev.Type)
			}
			rv = obj.GetResourceVersion()
			switch ev.Type {
			case watch.Added, watch.Modified:
				objects[obj.GetName()] = rv
			case watch.Deleted:
				delete(objects, obj.GetName())
			}
		}
	}
}
