// Package cmwriter is the ConfigMap writer of kretry's end-to-end suites: it
// creates, updates and deletes ConfigMaps w-0 … w-11 in one namespace at a
// steady pace, straight at an API server, so that watches under faults have
// changes to deliver. Each object's data carries its generation ("gen"), so
// a suite can check that a client saw every change in order.
package cmwriter

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

// ConfigMap is the object the writer writes: generation gen of name, with
// 1,000 bytes of padding so that a watch event is about 1 KiB.
func ConfigMap(name string, gen int) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Data:       map[string]string{"gen": fmt.Sprint(gen), "pad": strings.Repeat("x", 1000)},
	}
}

// Gen reads a generation written by ConfigMap; 0 if it does not parse.
func Gen(s string) int {
	var n int
	fmt.Sscan(s, &n)
	return n
}

// Writer is one running writer.
type Writer struct {
	cancel   context.CancelFunc
	done     chan struct{}
	mu       sync.Mutex
	writes   int
	fails    int
	firstErr error
}

// Start writes through cms once every every, choosing names and operations
// from a random source seeded with seed, until Stop.
func Start(cms typedcorev1.ConfigMapInterface, seed uint64, every time.Duration) *Writer {
	ctx, cancel := context.WithCancel(context.Background())
	w := &Writer{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		rng := rand.New(rand.NewPCG(seed, seed))
		gen := map[string]int{}
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			name := fmt.Sprintf("w-%d", rng.IntN(12))
			var err error
			_, exists := gen[name]
			switch {
			case !exists:
				if _, err = cms.Create(ctx, ConfigMap(name, 0), metav1.CreateOptions{}); err == nil {
					gen[name] = 0
				}
			case rng.IntN(5) == 0:
				if err = cms.Delete(ctx, name, metav1.DeleteOptions{}); err == nil || apierrors.IsNotFound(err) {
					delete(gen, name)
					err = nil
				}
			default:
				if _, err = cms.Update(ctx, ConfigMap(name, gen[name]+1), metav1.UpdateOptions{}); err == nil {
					gen[name]++
				}
			}
			w.mu.Lock()
			if err != nil {
				w.fails++
				if w.firstErr == nil {
					w.firstErr = err
				}
				// An outcome we could not see (e.g. the server died mid-request): forget it, the
				// next operation on the name re-learns its state.
				if cm, gerr := cms.Get(ctx, name, metav1.GetOptions{}); gerr == nil {
					gen[name] = Gen(cm.Data["gen"])
				} else if apierrors.IsNotFound(gerr) {
					delete(gen, name)
				}
			} else {
				w.writes++
			}
			w.mu.Unlock()
		}
	}()
	return w
}

// Stop ends the writer and waits for its last write; a second Stop does
// nothing more.
func (w *Writer) Stop() {
	w.cancel()
	<-w.done
}

// Stats returns the writes made, those that failed, and the first failure.
func (w *Writer) Stats() (writes, fails int, firstErr error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.writes, w.fails, w.firstErr
}
