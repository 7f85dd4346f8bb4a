package transport_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kretry/kretry/transport"
)

// Plug kretry into a rest.Config once; every client built from it has its
// LISTs and WATCHes retried. Here the API server is restarting: its first
// answer is a 503, which stock client-go would return as an error.
func ExampleWrapper() {
	var calls atomic.Int32
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"ServiceUnavailable","code":503}`)
			return
		}
		fmt.Fprint(w, `{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"7"},"items":[{"metadata":{"name":"web-0"}},{"metadata":{"name":"web-1"}}]}`)
	}))
	defer server.Close()

	cfg := &rest.Config{Host: server.URL} // or from a kubeconfig
	cfg.Wrap(transport.Wrapper(transport.Config{
		// A zero Config is the recommended setup; the shorter first wait
		// only keeps this example fast.
		InitialBackoff: 10 * time.Millisecond,
		Observer:       retryPrinter{},
	}))
	clientset := kubernetes.NewForConfigOrDie(cfg)

	pods, err := clientset.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, pod := range pods.Items {
		fmt.Println(pod.Name)
	}
	// Output:
	// retrying a list after a 503
	// web-0
	// web-1
}

// retryPrinter is a transport.Observer that prints every retry.
type retryPrinter struct{}

func (retryPrinter) ObserveRetry(e transport.RetryEvent) {
	fmt.Printf("retrying a %s after a %d\n", e.Verb, e.Code)
}
func (retryPrinter) ObserveAttempt(transport.AttemptEvent)      {}
func (retryPrinter) ObserveGiveUp(transport.GiveUpEvent)        {}
func (retryPrinter) ObserveBudgetRefusal(transport.BudgetEvent) {}
