package transport_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/kretry/kretry/internal/harness/fakeclock"
	"github.com/kretry/kretry/transport"
)

// TestRetriesBelowClientGoRateLimiter: client-go's QPS/Burst limiter takes one token per call,
// above kretry: a LIST that kretry retries twice through 503s costs one token (at QPS 1, burst
// 1, it returns at once), and the next call waits for the limiter as it would without kretry.
func TestRetriesBelowClientGoRateLimiter(t *testing.T) {
	server, lists := apiServer(t, 2, unavailable)
	cfg := &rest.Config{Host: server.URL, QPS: 1, Burst: 1}
	cs := clientsetWith(t, cfg, transport.Wrapper(transport.Config{Clock: fakeclock.New(epoch), Rand: func() float64 { return 0 }}))
	ctx := context.Background()

	began := time.Now()
	if _, err := cs.CoreV1().Pods("ns").List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	first := time.Since(began)
	if n := lists.Load(); n != 3 || first > 500*time.Millisecond {
		t.Errorf("the first LIST: %d requests in %v, want 3 (two kretry retries) at once: the limiter takes one token a call", n, first)
	}
	began = time.Now()
	if _, err := cs.CoreV1().Pods("ns").List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if second := time.Since(began); second < 500*time.Millisecond {
		t.Errorf("the second LIST took %v, want the limiter's wait (about 1 s at QPS 1)", second)
	}
	t.Logf("QPS 1, burst 1: a LIST through 2 retries in %v (%d requests), the next one after %v", first.Round(time.Millisecond), lists.Load()-1, time.Since(began).Round(100*time.Millisecond))
}

// TestStackedTransports: kretry under kretry (a program wrapped with kretry, talking to
// kretry-proxy) retries each of the inner one's give-ups for a window of its own: an API
// server answering 503 reaches the caller after two windows, not one, and gets twice the
// requests.
func TestStackedTransports(t *testing.T) {
	const window = 10 * time.Second
	var requests atomic.Int32
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		unavailable(w, "")
	}))
	t.Cleanup(server.Close)
	ctx := context.Background()
	measure := func(stacked bool) (int32, time.Duration) {
		requests.Store(0)
		clock := fakeclock.New(epoch)
		config := transport.Config{Clock: clock, Rand: func() float64 { return 0 }, InternalErrorWindow: window}
		cfg := &rest.Config{Host: server.URL}
		cfg.Wrap(transport.Wrapper(config)) // the proxy's, nearest the API server
		if stacked {
			cfg.Wrap(transport.Wrapper(config)) // the program's, above it
		}
		cs := clientsetWith(t, cfg, nil)
		_, err := cs.CoreV1().Pods("ns").List(ctx, metav1.ListOptions{})
		if !apierrors.IsServiceUnavailable(err) {
			t.Fatalf("stacked %t: err %v, want the 503", stacked, err)
		}
		return requests.Load(), clock.Since(epoch)
	}
	oneRequests, oneTook := measure(false)
	twoRequests, twoTook := measure(true)
	if twoTook < 2*window || twoRequests < 2*oneRequests {
		t.Errorf("stacked: the 503 after %v and %d requests; one kretry: %v and %d; want at least two windows and twice the requests", twoTook, twoRequests, oneTook, oneRequests)
	}
	t.Logf("a %v window: one kretry hands the 503 over after %v and %d requests, kretry under kretry after %v and %d", window, oneTook, oneRequests, twoTook, twoRequests)
}
