package transport_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kretry/kretry/internal/harness/fakeclock"
	"github.com/kretry/kretry/transport"
)

// apiServer is a loopback API server whose first failures answers to the
// pod LIST fail with fault; later ones succeed with podList(3).
func apiServer(t *testing.T, failures int, fault func(w http.ResponseWriter, body string)) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var lists atomic.Int32
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/namespaces/ns/pods" || r.Method != http.MethodGet {
			http.NotFound(w, r)
			return
		}
		body := podList(3)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Audit-Id", "audit-"+strconv.Itoa(int(lists.Load())))
		if int(lists.Add(1)) <= failures {
			fault(w, body)
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		fmt.Fprint(w, body)
	}))
	t.Cleanup(server.Close)
	return server, &lists
}

// unavailable answers 503 with a Status and no Retry-After, as an API
// server that is shutting down does.
func unavailable(w http.ResponseWriter, _ string) {
	w.WriteHeader(http.StatusServiceUnavailable)
	fmt.Fprint(w, statusBody(503, metav1.StatusReasonServiceUnavailable, "apiserver is shutting down", nil))
}

// cutMidBody announces the whole body, sends half of it and drops the
// connection.
func cutMidBody(w http.ResponseWriter, body string) {
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, body[:len(body)/2])
	w.(http.Flusher).Flush()
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		panic(err)
	}
	conn.Close()
}

func clientset(t *testing.T, server *httptest.Server, wrap func(http.RoundTripper) http.RoundTripper) kubernetes.Interface {
	t.Helper()
	return clientsetWith(t, &rest.Config{Host: server.URL}, wrap)
}

// clientsetWith is a typed clientset for cfg, wrapped with wrap if any.
func clientsetWith(t *testing.T, cfg *rest.Config, wrap func(http.RoundTripper) http.RoundTripper) kubernetes.Interface {
	t.Helper()
	if wrap != nil {
		cfg.Wrap(wrap)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func TestClientsetListThrough503s(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	t.Run("kretry", func(t *testing.T) {
		server, lists := apiServer(t, 2, unavailable)
		clock := fakeclock.New(epoch)
		cs := clientset(t, server, transport.Wrapper(transport.Config{Clock: clock}))
		pods, err := cs.CoreV1().Pods("ns").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		if len(pods.Items) != 3 || pods.ResourceVersion != "42" {
			t.Errorf("got %d pods at RV %q", len(pods.Items), pods.ResourceVersion)
		}
		if n := lists.Load(); n != 3 {
			t.Errorf("%d LISTs, want 3", n)
		}
		if sleeps := clock.Sleeps(); len(sleeps) != 2 {
			t.Errorf("waits %v, want 2 virtual backoffs", sleeps)
		}
	})
	t.Run("stock client-go", func(t *testing.T) {
		server, lists := apiServer(t, 2, unavailable)
		cs := clientset(t, server, nil)
		_, err := cs.CoreV1().Pods("ns").List(ctx, metav1.ListOptions{})
		if !apierrors.IsServiceUnavailable(err) {
			t.Errorf("List err = %v, want 503 ServiceUnavailable", err)
		}
		if n := lists.Load(); n != 1 {
			t.Errorf("%d LISTs, want 1", n)
		}
	})
}

func TestClientsetListGivesUpWithTheStatus(t *testing.T) {
	server, lists := apiServer(t, 1000, unavailable)
	clock := fakeclock.New(epoch)
	cs := clientset(t, server, transport.Wrapper(transport.Config{Clock: clock, InternalErrorWindow: 5 * time.Second}))
	_, err := cs.CoreV1().Pods("ns").List(context.Background(), metav1.ListOptions{})
	// client-go sees the server's own Status, and does not retry it again.
	if !apierrors.IsServiceUnavailable(err) || err.Error() != "apiserver is shutting down" {
		t.Errorf("List err = %v, want the server's 503 Status", err)
	}
	if n := lists.Load(); n != 4 { // 0.8 + 1.6 + 2.6: 4 LISTs in 5s
		t.Errorf("%d LISTs, want 4", n)
	}
}

func TestClientsetListCutMidBody(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	t.Run("kretry", func(t *testing.T) {
		server, lists := apiServer(t, 1, cutMidBody)
		cs := clientset(t, server, transport.Wrapper(transport.Config{Clock: fakeclock.New(epoch)}))
		pods, err := cs.CoreV1().Pods("ns").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		if len(pods.Items) != 3 {
			t.Fatalf("got %d pods, want 3", len(pods.Items))
		}
		for i, pod := range pods.Items {
			if want := "pod-" + strconv.Itoa(i); pod.Name != want {
				t.Errorf("item %d is %q, want %q", i, pod.Name, want)
			}
		}
		if n := lists.Load(); n != 2 {
			t.Errorf("%d LISTs, want 2", n)
		}
	})
	t.Run("stock client-go", func(t *testing.T) {
		server, _ := apiServer(t, 1, cutMidBody)
		cs := clientset(t, server, nil)
		if _, err := cs.CoreV1().Pods("ns").List(ctx, metav1.ListOptions{}); err == nil {
			t.Error("a LIST cut mid-body succeeded without kretry")
		}
	})
}

// dropConnection closes the connection before any answer: client-go sees
// EOF, which it retries itself up to 10 times for a GET.
func dropConnection(w http.ResponseWriter, _ string) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		panic(err)
	}
	conn.Close()
}

// TestClientsetGiveUpIsNotMultiplied: when kretry gives up on connection
// failures, client-go must not retry the GET 10 more times, each with a
// fresh window (measured before the fix: 77 attempts and 5.5 minutes for a
// 30s window). One LIST, and one WATCH, cost one window.
func TestClientsetGiveUpIsNotMultiplied(t *testing.T) {
	const window = 10 * time.Second
	for _, verb := range []string{"list", "watch"} {
		t.Run(verb, func(t *testing.T) {
			var attempts atomic.Int32
			server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				attempts.Add(1)
				dropConnection(w, "")
			}))
			t.Cleanup(server.Close)
			clock := fakeclock.New(epoch)
			cs := clientset(t, server, transport.Wrapper(transport.Config{
				Clock: clock, Rand: func() float64 { return 0 }, InternalErrorWindow: window,
			}))
			var err error
			if verb == "list" {
				_, err = cs.CoreV1().Pods("ns").List(context.Background(), metav1.ListOptions{})
			} else {
				var w interface{ Stop() }
				w, err = cs.CoreV1().Pods("ns").Watch(context.Background(), metav1.ListOptions{ResourceVersion: "5"})
				if err == nil {
					w.Stop()
				}
			}
			var giveUp *transport.GiveUpError
			if !errors.As(err, &giveUp) {
				t.Fatalf("err = %v, want the give-up", err)
			}
			// Refused connections: half steps at the draw of 0, 0.4 + 0.8 +
			// 1.6 + 3.2 + 4 = the 10s window: 6 attempts, once.
			if n := attempts.Load(); n != 6 {
				t.Errorf("%d attempts reached the server, want the 6 of one window", n)
			}
			if elapsed := clock.Since(epoch); elapsed != window {
				t.Errorf("took %v of virtual time, want the %v window", elapsed, window)
			}
		})
	}
}
