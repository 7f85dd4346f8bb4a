package policy

import "time"

// backoff is client-go's exponential backoff, unjittered: the step the
// next wait is drawn from, doubling up to its cap, starting over after a
// quiet period. The jitter is the Tracker's (Config.Rand).
type backoff struct {
	// next is the step the next wait is drawn from; zero until the first.
	next time.Duration
	// last is when a step was last taken; the quiet period runs from it.
	last time.Time
}

// step takes the next step at now, starting over from InitialBackoff after
// BackoffReset of quiet, and grows it.
func (b *backoff) step(now time.Time, cfg *Config) time.Duration {
	if b.next == 0 || (!b.last.IsZero() && now.Sub(b.last) >= cfg.BackoffReset) {
		b.next = cfg.InitialBackoff
	}
	b.last = now
	step := b.next
	b.next = min(2*b.next, cfg.MaxBackoff)
	return step
}

// reached is the step the backoff has grown to at now: InitialBackoff when
// it never grew or has been quiet for BackoffReset.
func (b *backoff) reached(now time.Time, cfg *Config) time.Duration {
	if b.next == 0 || now.Sub(b.last) >= cfg.BackoffReset {
		return cfg.InitialBackoff
	}
	return b.next
}
