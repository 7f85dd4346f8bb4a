package policy

import (
	"context"
	"time"

	"k8s.io/utils/clock"
)

// Clock is the time source of every decision and every wait: client-go's
// own clock abstraction, so that k8s.io/utils/clock/testing.FakeClock drives
// kretry exactly as it drives a reflector. AfterFunc times a stalled watch
// read without a goroutine per read.
type Clock = clock.WithDelayedExecution

// Sleep waits d on c, or until ctx ends, whichever comes first, and returns
// ctx.Err(): nil only when the wait ran its course with ctx still live.
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	if err := ctx.Err(); err != nil || d <= 0 {
		return err
	}
	timer := c.NewTimer(d)
	select {
	case <-ctx.Done():
		timer.Stop()
	case <-timer.C():
	}
	return ctx.Err()
}
