package transport_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kretry/kretry/internal/harness/fakeclock"
	"github.com/kretry/kretry/transport"
)

// scriptedWatches is a loopback API server whose n-th pod WATCH is answered by
// script[n] (the last one repeating); it records every watch's query.
type scriptedWatches struct {
	*httptest.Server
	mu      sync.Mutex
	queries []url.Values
	arrived chan int // the index of every watch request, as it arrives
}

func newScriptedWatches(t *testing.T, script ...func(w http.ResponseWriter, r *http.Request)) *scriptedWatches {
	t.Helper()
	s := &scriptedWatches{arrived: make(chan int, 100)}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/namespaces/ns/pods" || r.URL.Query().Get("watch") != "true" {
			http.NotFound(w, r)
			return
		}
		s.mu.Lock()
		n := len(s.queries)
		s.queries = append(s.queries, r.URL.Query())
		s.mu.Unlock()
		s.arrived <- n
		script[min(n, len(script)-1)](w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *scriptedWatches) timeouts() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, q := range s.queries {
		out = append(out, q.Get("timeoutSeconds"))
	}
	return out
}

func (s *scriptedWatches) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queries)
}

// podEvents answers a watch with one ADDED event per resourceVersion, then
// ends the stream (before its timeoutSeconds: a break) or, with hold, keeps
// it open until the client goes.
func podEvents(hold bool, rvs ...int) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		for _, rv := range rvs {
			fmt.Fprintf(w, `{"type":"ADDED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"pod-%d","namespace":"ns","resourceVersion":"%d"}}}`+"\n", rv, rv)
		}
		w.(http.Flusher).Flush()
		if hold {
			<-r.Context().Done()
		}
	}
}

// unavailableWatch answers 503 with a Status, with Retry-After when
// retryAfter is set.
func unavailableWatch(retryAfter string) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, statusBody(503, metav1.StatusReasonServiceUnavailable, "apiserver is shutting down", nil))
	}
}

// silent accepts the request and never answers it.
func silent(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }

// drain reads the watch until its channel closes; a bound of real time turns
// a watch left hanging into a failure.
func drain(t *testing.T, w watch.Interface) []string {
	t.Helper()
	var rvs []string
	bound := time.After(15 * time.Second)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return rvs
			}
			if obj, isObject := ev.Object.(metav1.Object); isObject {
				rvs = append(rvs, obj.GetResourceVersion())
			} else {
				rvs = append(rvs, string(ev.Type))
			}
		case <-bound:
			w.Stop()
			t.Fatalf("the watch was still open after %d events (%v)", len(rvs), rvs)
		}
	}
}

// TestClientsetResumeRetryCarriesWhatRemains: a 4 s watch breaks, its resume
// meets a 503 with Retry-After: 2, and the retry 2.1 s in asks the server
// for the 2 s that remain. Fails before (the retry re-sent the first
// resume's timeoutSeconds=4, and the watch could end ~6.4 s in).
func TestClientsetResumeRetryCarriesWhatRemains(t *testing.T) {
	server := newScriptedWatches(t, podEvents(false, 11), unavailableWatch("2"), podEvents(true, 12))
	clock := fakeclock.New(epoch)
	cs := clientset(t, server.Server, transport.Wrapper(transport.Config{Clock: clock, Rand: func() float64 { return 0.5 }}))
	w, err := cs.CoreV1().Pods("ns").Watch(context.Background(), metav1.ListOptions{ResourceVersion: "10", TimeoutSeconds: ptr(int64(4))})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for _, want := range []string{"11", "12"} {
		ev := <-w.ResultChan()
		if obj, ok := ev.Object.(metav1.Object); !ok || obj.GetResourceVersion() != want {
			t.Fatalf("got %v, want the event at %s", ev, want)
		}
	}
	// The watch, its resume at once after the break, the retry after 2.1 s.
	if got := server.timeouts(); !slices.Equal(got, []string{"4", "4", "2"}) {
		t.Errorf("timeoutSeconds asked %v, want [4 4 2]", got)
	}
}

// TestClientsetSilentReopenIsBounded: a reopen that the server accepts and
// never answers ends at the caller's deadline (a 2 s watch closes at 2 s);
// without timeoutSeconds it is a failure after the answer timeout, and the
// next reopen is answered. Fails before: the reopen hung for as long as the
// server held it.
func TestClientsetSilentReopenIsBounded(t *testing.T) {
	t.Run("2s watch", func(t *testing.T) {
		server := newScriptedWatches(t, podEvents(false, 11), silent)
		clock := fakeclock.New(epoch)
		cs := clientset(t, server.Server, transport.Wrapper(transport.Config{Clock: clock, Rand: func() float64 { return 0.5 }}))
		w, err := cs.CoreV1().Pods("ns").Watch(context.Background(), metav1.ListOptions{ResourceVersion: "10", TimeoutSeconds: ptr(int64(2))})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for n := range server.arrived {
				if n == 1 { // the silent reopen: the caller's 2 s pass
					clock.Advance(2 * time.Second)
					return
				}
			}
		}()
		if got := drain(t, w); !slices.Equal(got, []string{"11"}) {
			t.Errorf("got %v, want the one event and a clean end", got)
		}
		if n := server.count(); n != 2 {
			t.Errorf("%d watch requests, want the watch and its one reopen", n)
		}
		if elapsed := clock.Since(epoch); elapsed != 2*time.Second {
			t.Errorf("ended %v in, want at its 2s deadline", elapsed)
		}
	})
	t.Run("no timeoutSeconds", func(t *testing.T) {
		server := newScriptedWatches(t, podEvents(false, 11), silent, podEvents(true, 12))
		clock := fakeclock.New(epoch)
		heard := &recorder{}
		cs := clientset(t, server.Server, transport.Wrapper(transport.Config{Clock: clock, Rand: func() float64 { return 0.5 }, Observer: heard}))
		w, err := cs.CoreV1().Pods("ns").Watch(context.Background(), metav1.ListOptions{ResourceVersion: "10"})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		go func() {
			for n := range server.arrived {
				if n == 1 {
					clock.Advance(20 * time.Second)
					return
				}
			}
		}()
		for _, want := range []string{"11", "12"} {
			select {
			case ev := <-w.ResultChan():
				if obj, ok := ev.Object.(metav1.Object); !ok || obj.GetResourceVersion() != want {
					t.Fatalf("got %v, want the event at %s", ev, want)
				}
			case <-time.After(15 * time.Second):
				t.Fatalf("no event at %s: the silent reopen was left hanging", want)
			}
		}
		var retries []string
		for _, line := range heard.lines() {
			if strings.HasPrefix(line, "resume ") || strings.HasPrefix(line, "retry ") {
				retries = append(retries, line)
			}
		}
		if len(retries) != 2 || !strings.HasPrefix(retries[1], "resume watch connection 0") {
			t.Errorf("retries %q, want the resume and one retry of the unanswered reopen", retries)
		}
	})
}

// TestClientsetWatchEstablishmentStopsAtTheDeadline: Watch(timeoutSeconds=2)
// against a server answering 503 forever gets the 503 at once, as stock
// client-go does, with no request sent after the deadline. Fails before:
// the establishment retried for the whole 30 s window.
func TestClientsetWatchEstablishmentStopsAtTheDeadline(t *testing.T) {
	for _, retryAfter := range []string{"", "1"} {
		t.Run("Retry-After "+retryAfter, func(t *testing.T) {
			server := newScriptedWatches(t, unavailableWatch(retryAfter))
			clock := fakeclock.New(epoch)
			cs := clientset(t, server.Server, transport.Wrapper(transport.Config{Clock: clock, Rand: func() float64 { return 0.5 }}))
			_, err := cs.CoreV1().Pods("ns").Watch(context.Background(), metav1.ListOptions{ResourceVersion: "10", TimeoutSeconds: ptr(int64(2))})
			if !apierrors.IsServiceUnavailable(err) {
				t.Fatalf("Watch err = %v, want the server's 503", err)
			}
			// The next wait (1.2 s, or 1.05 s for Retry-After: 1) would end
			// less than a second before the deadline; client-go adds no
			// retry of its own (Retry-After stripped).
			if n := server.count(); n != 1 {
				t.Errorf("%d watch requests, want 1", n)
			}
			if len(clock.Sleeps()) != 0 {
				t.Errorf("waited %v, want no wait", clock.Sleeps())
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
