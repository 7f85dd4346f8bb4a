package transport_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kretry/kretry/internal/harness/fakeclock"
	"github.com/kretry/kretry/transport"
)

// printer is an Observer that prints what it hears (metrics.New is the
// Prometheus one).
type printer struct{}

func (printer) ObserveAttempt(e transport.AttemptEvent) {
	fmt.Println("attempt", e.Verb, e.Outcome)
}

func (printer) ObserveRetry(e transport.RetryEvent) {
	fmt.Println("retry", e.Verb, e.Reason, "after", e.Wait)
}

func (printer) ObserveGiveUp(e transport.GiveUpEvent) {
	fmt.Println("give-up", e.Verb, e.Reason, "after", e.Attempts, "attempts")
}

func (printer) ObserveBudgetRefusal(e transport.BudgetEvent) {
	fmt.Println("budget refused", e.Verb, e.Reason)
}

// An Observer hears every attempt, retry and give-up; RetryBudget bounds
// the retries. Here the server answers 503 to everything, and a budget of
// one retry per 10 s hands the second LIST's 503 over at once.
func ExampleConfig_observer() {
	var calls atomic.Int32
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"ServiceUnavailable","code":503}`)
	}))
	defer server.Close()

	cfg := &rest.Config{Host: server.URL}
	cfg.Wrap(transport.Wrapper(transport.Config{
		Observer:            printer{},
		RetryBudget:         transport.RetryBudget{Ratio: 0.01, MinPerSecond: 0.1, Window: 10 * time.Second},
		InternalErrorWindow: 5 * time.Second,
		Clock:               fakeclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), // waits take no time here
		Rand:                func() float64 { return 0 },
	}))
	pods := kubernetes.NewForConfigOrDie(cfg).CoreV1().Pods("default")
	for range 2 {
		_, err := pods.List(context.Background(), metav1.ListOptions{})
		fmt.Println("LIST:", apierrors.ReasonForError(err))
	}
	fmt.Println("requests:", calls.Load())
	// Output:
	// attempt list 5xx
	// retry list 5xx after 800ms
	// attempt list 5xx
	// budget refused list 5xx
	// give-up list 5xx after 2 attempts
	// LIST: ServiceUnavailable
	// attempt list 5xx
	// budget refused list 5xx
	// give-up list 5xx after 1 attempts
	// LIST: ServiceUnavailable
	// requests: 3
}
