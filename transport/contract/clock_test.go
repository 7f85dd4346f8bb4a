package contract_test

// vclock is the trial's virtual clock, given to kretry as Config.Clock.
// kretry's sleeps (NewTimer, After, Sleep) end as soon as none of its
// attempts waits for an answer (inflight, wrapped below kretry, counts
// them): virtual time jumps to the sleep's end, firing every bound
// (AfterFunc) due on the way. Bounds fire only when time moves past them.
// In frozen mode every sleep ends at once and time never moves: no window,
// bound or deadline ever runs out.

import (
	"slices"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/kretry/kretry/internal/harness/observe"
)

type vclock struct {
	mu       sync.Mutex
	now      time.Time
	seq      int
	timers   []*vtimer
	frozen   bool
	manual   bool             // sleeps end only when the test moves time
	inflight observe.InFlight // kretry's attempts waiting for their answers; each end kicks
	sleeps   []time.Duration  // every sleep kretry asked for, in order
}

var _ clock.WithDelayedExecution = (*vclock)(nil)

func newVClock() *vclock {
	c := &vclock{now: time.Now()}
	c.inflight.OnDone = c.kick
	return c
}

type vtimer struct {
	c       *vclock
	sleep   bool
	seq     int
	at      time.Time
	ch      chan time.Time
	f       func()
	pending bool
}

func (c *vclock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}
func (c *vclock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

func (c *vclock) NewTimer(d time.Duration) clock.Timer {
	t := &vtimer{c: c, sleep: true, ch: make(chan time.Time, 1)}
	c.mu.Lock()
	c.sleeps = append(c.sleeps, d)
	c.schedule(t, d)
	c.mu.Unlock()
	c.kick()
	return t
}
func (c *vclock) After(d time.Duration) <-chan time.Time { return c.NewTimer(d).C() }
func (c *vclock) Sleep(d time.Duration)                  { <-c.After(d) }
func (c *vclock) Tick(d time.Duration) <-chan time.Time  { return c.After(d) }

func (c *vclock) AfterFunc(d time.Duration, f func()) clock.Timer {
	t := &vtimer{c: c, f: f}
	c.mu.Lock()
	c.schedule(t, d)
	c.mu.Unlock()
	if d <= 0 {
		c.advance(0)
	}
	return t
}

func (c *vclock) schedule(t *vtimer, d time.Duration) {
	c.seq++
	t.seq, t.at, t.pending = c.seq, c.now.Add(d), true
	c.timers = append(c.timers, t)
}

func (c *vclock) unschedule(t *vtimer) bool {
	if !t.pending {
		return false
	}
	t.pending = false
	c.timers = slices.DeleteFunc(c.timers, func(o *vtimer) bool { return o == t })
	return true
}

func (t *vtimer) C() <-chan time.Time { return t.ch }
func (t *vtimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	return t.c.unschedule(t)
}
func (t *vtimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	was := t.c.unschedule(t)
	t.c.schedule(t, d)
	t.c.mu.Unlock()
	if t.sleep {
		t.c.kick()
	} else if d <= 0 {
		t.c.advance(0)
	}
	return was
}

func (t *vtimer) fire(at time.Time) {
	if t.ch != nil {
		select {
		case t.ch <- at:
		default:
		}
		return
	}
	go t.f()
}

// kick ends kretry's earliest sleep when nothing of its is in flight.
func (c *vclock) kick() {
	c.mu.Lock()
	if c.frozen {
		var due []*vtimer
		for _, t := range c.timers {
			if t.sleep {
				due = append(due, t)
			}
		}
		for _, t := range due {
			c.unschedule(t)
		}
		now := c.now
		c.mu.Unlock()
		for _, t := range due {
			t.fire(now)
		}
		return
	}
	if c.manual || c.inflight.Load() != 0 {
		c.mu.Unlock()
		return
	}
	var first *vtimer
	for _, t := range c.timers {
		if t.sleep && (first == nil || t.at.Before(first.at) || (t.at.Equal(first.at) && t.seq < first.seq)) {
			first = t
		}
	}
	c.mu.Unlock()
	if first != nil {
		c.advanceTo(first.at)
	}
}

// advance moves virtual time on by d, firing every timer due on the way.
func (c *vclock) advance(d time.Duration) { c.advanceTo(c.Now().Add(d)) }

func (c *vclock) advanceTo(target time.Time) {
	for {
		c.mu.Lock()
		var due *vtimer
		for _, t := range c.timers {
			if !t.at.After(target) && (due == nil || t.at.Before(due.at) || (t.at.Equal(due.at) && t.seq < due.seq)) {
				due = t
			}
		}
		if due == nil {
			if target.After(c.now) {
				c.now = target
			}
			c.mu.Unlock()
			return
		}
		c.unschedule(due)
		if due.at.After(c.now) {
			c.now = due.at
		}
		at := c.now
		c.mu.Unlock()
		due.fire(at)
	}
}

func (c *vclock) pendingSleeps() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.timers {
		if t.sleep {
			n++
		}
	}
	return n
}

func (c *vclock) sleepLog() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.sleeps)
}
