package establish_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/kretry/kretry/internal/establish"
	"github.com/kretry/kretry/internal/harness/fakeclock"
	"github.com/kretry/kretry/internal/policy"
)

// flaky answers its first attempt with 503 and every later one with 200.
type flaky struct{ attempts int }

func (f *flaky) RoundTrip(req *http.Request) (*http.Response, error) {
	f.attempts++
	code := http.StatusOK
	if f.attempts == 1 {
		code = http.StatusServiceUnavailable
	}
	return &http.Response{StatusCode: code, Header: http.Header{}, Request: req,
		Body: io.NopCloser(strings.NewReader(http.StatusText(code)))}, nil
}

// printRetries prints every retry it hears of.
type printRetries struct{ establish.Silent }

func (printRetries) Retry(_ context.Context, r establish.Retry) {
	fmt.Printf("retry %s after %s: wait %s\n", r.Path, r.Cause, r.Wait)
}

// Do retries a 503, waiting on the policy's clock, and returns the 200 that
// follows. The fake clock records the wait instead of sleeping.
func ExampleClient_Do() {
	clock := fakeclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	next := &flaky{}
	client := &establish.Client{
		Next:   next,
		Policy: policy.New(policy.Config{Clock: clock, Rand: func() float64 { return 0 }}),
		Report: printRetries{},
	}

	req, _ := http.NewRequest(http.MethodGet, "http://k8s.test/api/v1/pods", nil)
	resp, _, err := client.Do(req, client.Policy.NewTracker(), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println("attempts:", next.attempts)
	fmt.Println("status:", resp.StatusCode, string(body))
	fmt.Println("slept:", clock.Sleeps())
	// Output:
	// retry /api/v1/pods after 503: wait 800ms
	// attempts: 2
	// status: 200 OK
	// slept: [800ms]
}
