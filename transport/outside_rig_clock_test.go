package transport_test

// The rig's virtual clock (see outside_rig_test.go): kretry's Config.Clock
// and the rig's own. Nothing on it fires by itself.

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// timerKind is who asked for a timer, and so who may end it.
type timerKind uint8

const (
	timerSleep timerKind = iota // kretry waits: NewTimer, After, Sleep
	timerBound                  // kretry bounds something in flight: AfterFunc
	timerDelay                  // the rig delays an answer, a connection or a watch's end
	timerHook                   // the rig changes at a set time (a front listens again)
	timerEnd                    // an apiserver ends a watch it serves at its timeoutSeconds
)

// rigClock is the rig's virtual clock, kretry's Config.Clock.
type rigClock struct {
	start time.Time
	poke  func()

	mu     sync.Mutex
	now    time.Time
	seq    int
	timers []*rigTimer // pending
}

var _ clock.WithDelayedExecution = (*rigClock)(nil)

func newRigClock(poke func()) *rigClock {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return &rigClock{start: start, now: start, poke: poke}
}

// rigTimer is one timer of the rig's clock. A sleep and a delay deliver on
// ch; a bound runs f in its own goroutine; a hook runs f in the goroutine
// that advances the clock, before anything due later.
type rigTimer struct {
	c       *rigClock
	kind    timerKind
	seq     int
	d       time.Duration
	at      time.Time
	ch      chan time.Time
	f       func()
	pending bool
}

func (c *rigClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *rigClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// elapsed is the virtual time since the rig began: the unit of every time
// the rig records.
func (c *rigClock) elapsed() time.Duration { return c.Since(c.start) }

func (c *rigClock) NewTimer(d time.Duration) clock.Timer {
	return c.add(timerSleep, d, make(chan time.Time, 1), nil)
}

func (c *rigClock) After(d time.Duration) <-chan time.Time { return c.NewTimer(d).C() }
func (c *rigClock) Sleep(d time.Duration)                  { <-c.After(d) }

// Tick fires once: kretry never ticks.
func (c *rigClock) Tick(d time.Duration) <-chan time.Time { return c.After(d) }

func (c *rigClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return c.add(timerBound, d, nil, f)
}

// hook runs f d of virtual time from now, as the clock gets there.
func (c *rigClock) hook(d time.Duration, f func()) { c.add(timerHook, d, nil, f) }

func (c *rigClock) add(kind timerKind, d time.Duration, ch chan time.Time, f func()) *rigTimer {
	t := &rigTimer{c: c, kind: kind, d: d, ch: ch, f: f}
	c.mu.Lock()
	c.schedule(t, d)
	c.mu.Unlock()
	if d <= 0 {
		c.advanceTo(c.Now())
	}
	c.poke()
	return t
}

func (c *rigClock) schedule(t *rigTimer, d time.Duration) {
	c.seq++
	t.seq, t.at, t.pending = c.seq, c.now.Add(d), true
	c.timers = append(c.timers, t)
}

func (c *rigClock) unschedule(t *rigTimer) bool {
	if !t.pending {
		return false
	}
	t.pending = false
	c.timers = slices.DeleteFunc(c.timers, func(o *rigTimer) bool { return o == t })
	return true
}

func (t *rigTimer) C() <-chan time.Time { return t.ch }

func (t *rigTimer) Stop() bool {
	t.c.mu.Lock()
	was := t.c.unschedule(t)
	t.c.mu.Unlock()
	if was {
		t.c.poke()
	}
	return was
}

func (t *rigTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	was := t.c.unschedule(t)
	t.c.schedule(t, d)
	t.c.mu.Unlock()
	if d <= 0 {
		t.c.advanceTo(t.c.Now())
	}
	t.c.poke()
	return was
}

func (t *rigTimer) fire(at time.Time) {
	switch {
	case t.ch != nil:
		select {
		case t.ch <- at:
		default:
		}
	case t.kind == timerBound:
		go t.f()
	default:
		t.f()
	}
}

// next is the earliest pending timer of the kinds, nil when there is none.
func (c *rigClock) next(kinds ...timerKind) *rigTimer {
	c.mu.Lock()
	defer c.mu.Unlock()
	var first *rigTimer
	for _, t := range c.timers {
		if slices.Contains(kinds, t.kind) && (first == nil || t.at.Before(first.at) || (t.at.Equal(first.at) && t.seq < first.seq)) {
			first = t
		}
	}
	return first
}

// advanceTo moves virtual time to target, firing every timer due on the
// way at its own instant, earliest first.
func (c *rigClock) advanceTo(target time.Time) {
	for {
		c.mu.Lock()
		var due *rigTimer
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
			break
		}
		c.unschedule(due)
		if due.at.After(c.now) {
			c.now = due.at
		}
		at := c.now
		c.mu.Unlock()
		due.fire(at)
	}
	c.poke()
}

// advance moves virtual time on by d.
func (c *rigClock) advance(d time.Duration) { c.advanceTo(c.Now().Add(d)) }

// advanceToNext moves virtual time to the earliest pending timer of the
// kinds and returns it (nil, and nothing moves, when there is none).
func (c *rigClock) advanceToNext(kinds ...timerKind) *rigTimer {
	t := c.next(kinds...)
	if t != nil {
		c.advanceTo(t.at)
	}
	return t
}

// pending returns the pending timers of kind.
func (c *rigClock) pending(kind timerKind) []*rigTimer {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*rigTimer
	for _, t := range c.timers {
		if t.kind == kind {
			out = append(out, t)
		}
	}
	return out
}

func (c *rigClock) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := fmt.Sprintf("virtual time %v, pending [", c.now.Sub(c.start))
	names := [...]string{"sleep", "bound", "delay", "hook", "end"}
	for _, t := range c.timers {
		s += fmt.Sprintf(" %s %v@%v", names[t.kind], t.d, t.at.Sub(c.start))
	}
	return s + " ]"
}
