package main

import (
	"context"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"github.com/kretry/kretry/examples/internal/target"
	"github.com/kretry/kretry/transport"
)

func main() {
	target.Main("rawwatch", run)
}

// summary is what a run saw.
type summary struct {
	events  int // ADDED, MODIFIED and DELETED events printed
	relists int // LIST + WATCH restarts after a 410 Expired
	closed  int // result channels that closed before ctx ended without an ERROR event
}

// run lists and watches ConfigMaps until ctx ends, printing each change.
func run(ctx context.Context, cfg *rest.Config, namespace string, out io.Writer) (summary, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(transport.Wrapper(transport.Config{}))
	clientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return summary{}, err
	}
	configMaps := clientset.CoreV1().ConfigMaps(namespace)

	var s summary
	for {
		err := watchOnce(ctx, configMaps, out, &s)
		switch {
		case ctx.Err() != nil:
			return s, nil
		case apierrors.IsResourceExpired(err) || apierrors.IsGone(err):
			fmt.Fprintf(out, "-- %v: listing again\n", err)
			s.relists++
		case err != nil:
			return s, err
		default:
			// Only without kretry (or past its retry windows) does a watch end like this.
			fmt.Fprintln(out, "-- the watch ended: listing again")
			s.closed++
		}
	}
}

// watchOnce lists, then watches from the list's resourceVersion until the watch ends. It
// returns the Status of an ERROR event, or nil when the result channel closed.
func watchOnce(ctx context.Context, configMaps typedcorev1.ConfigMapInterface, out io.Writer, s *summary) error {
	list, err := configMaps.List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%-8s %-24s %s\n", "EVENT", "NAME", "RESOURCEVERSION")
	for _, cm := range list.Items {
		fmt.Fprintf(out, "%-8s %-24s %s\n", "LISTED", cm.Name, cm.ResourceVersion)
	}
	fmt.Fprintf(out, "%-8s %-24s %s\n", "LIST", "*", list.ResourceVersion)
	w, err := configMaps.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion, AllowWatchBookmarks: true})
	if err != nil {
		return err
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		switch ev.Type {
		case watch.Bookmark:
		case watch.Error:
			return apierrors.FromObject(ev.Object)
		default:
			cm, ok := ev.Object.(*corev1.ConfigMap)
			if !ok {
				return fmt.Errorf("unexpected %T in a %s event", ev.Object, ev.Type)
			}
			s.events++
			fmt.Fprintf(out, "%-8s %-24s %s  %s\n", ev.Type, cm.Name, cm.ResourceVersion, time.Now().Format(time.TimeOnly))
		}
	}
	return nil
}
