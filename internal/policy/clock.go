package policy

import (
	"context"
	"time"
)

// Clock is the time source for every decision and every wait. The zero
// Config uses the real clock; tests substitute a virtual one so that a
// 30-second backoff takes no time at all.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// Sleep blocks for d, or until ctx ends, whichever comes first, and
	// returns ctx.Err() in the latter case.
	Sleep(ctx context.Context, d time.Duration) error
	// AfterFunc calls f in its own goroutine once d has elapsed, unless
	// stop is called first; stop reports whether it prevented the call.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// RealClock is the wall clock.
type RealClock struct{}

// Now returns time.Now().
func (RealClock) Now() time.Time { return time.Now() }

// Sleep waits on a timer or the context, whichever ends first.
func (RealClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// AfterFunc is time.AfterFunc.
func (RealClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}
