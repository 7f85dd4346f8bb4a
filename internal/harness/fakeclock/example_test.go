package fakeclock_test

import (
	"context"
	"fmt"
	"time"

	"github.com/kretry/kretry/internal/harness/fakeclock"
	"github.com/kretry/kretry/internal/policy"
)

// A wait returns at once, advancing virtual time and recording the wait;
// AfterFunc callbacks fire when virtual time reaches them.
func Example() {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := fakeclock.New(start)

	_ = policy.Sleep(context.Background(), clock, 800*time.Millisecond)
	_ = policy.Sleep(context.Background(), clock, 1600*time.Millisecond)
	fmt.Println("slept:", clock.Sleeps(), "now:", clock.Now().Sub(start))

	fired := make(chan time.Time)
	clock.AfterFunc(time.Second, func() { fired <- clock.Now() })
	clock.Advance(500 * time.Millisecond)
	fmt.Println("pending after 500ms:", clock.PendingTimers())
	clock.Advance(500 * time.Millisecond)
	fmt.Println("fired at:", (<-fired).Sub(start))
	fmt.Println("pending:", clock.PendingTimers())
	// Output:
	// slept: [800ms 1.6s] now: 2.4s
	// pending after 500ms: 1
	// fired at: 3.4s
	// pending: 0
}
