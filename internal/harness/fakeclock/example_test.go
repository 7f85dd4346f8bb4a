package fakeclock_test

import (
	"context"
	"fmt"
	"time"

	"github.com/kretry/kretry/internal/harness/fakeclock"
)

// Sleep returns at once, advancing virtual time and recording the wait;
// AfterFunc callbacks fire when Advance (or Sleep) reaches them.
func Example() {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := fakeclock.New(start)

	_ = clock.Sleep(context.Background(), 800*time.Millisecond)
	_ = clock.Sleep(context.Background(), 1600*time.Millisecond)
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
