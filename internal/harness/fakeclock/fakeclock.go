package fakeclock

import (
	"slices"
	"sort"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Clock is a jumping virtual clock. NewTimer, After and Sleep advance
// virtual time by their duration at once and record it (the timer's channel
// is ready when it is returned); AfterFunc callbacks fire when virtual time
// reaches them, by a jump or by Advance.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
	timers []*afterFunc
}

var _ clock.WithDelayedExecution = (*Clock)(nil)

// New returns a Clock reading start.
func New(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the virtual time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Since returns the virtual time elapsed since t.
func (c *Clock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// NewTimer records d, advances virtual time by it and returns a timer that
// has already fired.
func (c *Clock) NewTimer(d time.Duration) clock.Timer {
	c.mu.Lock()
	c.sleeps = append(c.sleeps, d)
	c.mu.Unlock()
	c.Advance(d)
	fired := &firedTimer{c: make(chan time.Time, 1)}
	fired.c <- c.Now()
	return fired
}

// After is NewTimer(d).C().
func (c *Clock) After(d time.Duration) <-chan time.Time { return c.NewTimer(d).C() }

// Sleep is a jump of d.
func (c *Clock) Sleep(d time.Duration) { c.NewTimer(d) }

// Tick fires once, after a jump of d: kretry never ticks, and a ticking
// jump clock would run away.
func (c *Clock) Tick(d time.Duration) <-chan time.Time { return c.After(d) }

// AfterFunc schedules f at virtual now+d, in its own goroutine.
func (c *Clock) AfterFunc(d time.Duration, f func()) clock.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &afterFunc{clock: c, at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return t
}

// Advance moves virtual time forward by d and runs, in their own
// goroutines, the AfterFunc callbacks that fall due.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	if d > 0 {
		c.now = c.now.Add(d)
	}
	var due []*afterFunc
	kept := c.timers[:0]
	for _, t := range c.timers {
		switch {
		case t.stopped:
		case !t.at.After(c.now):
			t.stopped = true
			due = append(due, t)
		default:
			kept = append(kept, t)
		}
	}
	c.timers = kept
	c.mu.Unlock()
	sort.Slice(due, func(i, j int) bool { return due[i].at.Before(due[j].at) })
	for _, t := range due {
		go t.f()
	}
}

// Sleeps returns every wait asked of the clock so far, in order.
func (c *Clock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

// PendingTimers returns how many AfterFunc callbacks are scheduled and
// neither fired nor stopped.
func (c *Clock) PendingTimers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.timers {
		if !t.stopped {
			n++
		}
	}
	return n
}

// firedTimer is a timer whose time has come.
type firedTimer struct{ c chan time.Time }

func (t *firedTimer) C() <-chan time.Time      { return t.c }
func (t *firedTimer) Stop() bool               { return false }
func (t *firedTimer) Reset(time.Duration) bool { return false }

// afterFunc is a callback scheduled by AfterFunc.
type afterFunc struct {
	clock   *Clock
	at      time.Time
	f       func()
	stopped bool
}

// C is nil: an AfterFunc timer delivers no time, as time.AfterFunc's.
func (t *afterFunc) C() <-chan time.Time { return nil }

// Stop prevents the call and reports whether it did.
func (t *afterFunc) Stop() bool {
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	was := !t.stopped
	t.stopped = true
	return was
}

// Reset reschedules the call d after the current virtual time.
func (t *afterFunc) Reset(d time.Duration) bool {
	t.clock.mu.Lock()
	was := !t.stopped
	t.stopped = false
	t.at = t.clock.now.Add(d)
	if !slices.Contains(t.clock.timers, t) {
		t.clock.timers = append(t.clock.timers, t)
	}
	t.clock.mu.Unlock()
	return was
}
