package policy_test

import (
	"fmt"
	"time"

	"github.com/kretry/kretry/internal/harness/fakeclock"
	"github.com/kretry/kretry/internal/policy"
)

// A tracker follows one request: each failure gets a decision, and the
// InternalError window runs from the first failure of the run.
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
	fmt.Println(tracker.Decide(policy.Answer(429, wait)))

	// 503s without Retry-After back off until the window is spent.
	for {
		decision := tracker.Decide(policy.Answer(503, 0))
		fmt.Println(decision)
		if decision.Action != policy.Retry {
			break
		}
		clock.Advance(decision.Wait)
	}

	// A 404 goes to the caller at once.
	fmt.Println(tracker.Decide(policy.Answer(404, 0)))
	// Output:
	// retry after 1s
	// retry after 800ms
	// retry after 1.6s
	// retry after 2.6s
	// give up (window)
	// hand over
}
