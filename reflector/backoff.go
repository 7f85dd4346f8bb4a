package reflector

import "time"

// backoff is a capped exponential wait with jitter: the nth wait (n ≥ 1) is base·2^(n-1),
// capped at max, then scaled into [½, 1) of that so that a fleet does not return in step
// and the cap is never exceeded.
type backoff struct {
	base, max time.Duration
}

// wait returns the nth wait; jitter is a number in [0, 1). n ≤ 0 means no wait.
func (b backoff) wait(n int, jitter float64) time.Duration {
	if n <= 0 {
		return 0
	}
	d := b.base
	for i := 1; i < n && d < b.max; i++ {
		d *= 2
	}
	d = min(d, b.max)
	return time.Duration(float64(d) * (0.5 + jitter/2))
}
