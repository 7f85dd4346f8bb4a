package policy_test

import (
	"fmt"
	"time"

	"github.com/kretry/kretry/internal/harness/fakeclock"
	"github.com/kretry/kretry/internal/policy"
)

// A tracker follows one request: each outcome gets a decision, and the
// InternalError window runs from the first failure since progress.
func ExampleTracker_Decide() {
	clock := fakeclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p := policy.New(policy.Config{
		InternalErrorWindow: 5 * time.Second,
		Clock:               clock,
		Rand:                func() float64 { return 0 }, // no jitter, for a stable output
	})
	tracker := p.NewTracker()

	// A 429 whose Retry-After named one second.
	wait, _ := policy.ParseRetryAfter("1", clock.Now())
	fmt.Println(tracker.Decide(policy.Outcome{Class: policy.TooManyRequests, RetryAfter: wait, HasRetryAfter: true}))

	// 503s without Retry-After back off until the window is spent.
	for {
		decision := tracker.Decide(policy.Outcome{Class: policy.ClassifyStatus(503)})
		fmt.Println(decision)
		if !decision.Retry {
			break
		}
		clock.Advance(decision.Wait)
	}

	// A 404 goes to the caller at once.
	fmt.Println(tracker.Decide(policy.Outcome{Class: policy.ClassifyStatus(404)}))
	// Output:
	// {true 1s none}
	// {true 800ms none}
	// {true 1.6s none}
	// {true 2.6s none}
	// {false 0s window}
	// {false 0s none}
}
