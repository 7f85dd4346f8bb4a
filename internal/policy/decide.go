package policy

import "time"

// Decide returns what to do after the failure f: the one place kretry
// decides. It notes f in the history, reads the row of the table f falls
// in, and applies the two filters, the caller's deadline and the retry
// budget, once, at the end. The rows, in order (docs/behaviour.md says the
// same in words):
//
//  1. Final: handed over.
//  2. A stream's break or ERROR event without a resume point: handed over.
//  3. Throttled: retried after the named wait (capped, jittered), or the
//     backoff when none; every eleventh in a row waits at least the backoff
//     too; until TooManyRequestsWindow, when set.
//  4. ServerError, NoAnswer: retried after the backoff, at least the named
//     wait, within the InternalErrorWindow; past it given up, or, for a
//     stream's ERROR 5xx, handed over (the caller relists).
//  5. StreamBroke: resumed, never bounded by a window; the first break of a
//     run at once (a GOAWAY's after a draw from [0, 3 s)), later ones after
//     the backoff; the invalid frames at one resume point bounded by count.
//  6. ListBodyBroke: resumed, the first break of a run at once, later ones
//     after the backoff, within the window.
//  7. Gone, a resume's after a lost connection, the watch cache's: retried
//     at once on a new connection while the search goes on: within its
//     bound and count, while an apiserver not heard from may answer.
//  8. Gone otherwise: held for a draw from the step its run of failures
//     reached, or handed over at once.
//
// The filters: a retry or hold that would run into the caller's deadline,
// or a retry that would start past the end of a search, is not made; a
// retry the budget refuses is not made. A 410 whose search is not made
// falls back to row 8.
func (t *Tracker) Decide(f Failure) Decision {
	now := t.policy.cfg.Clock.Now()
	t.settled = false
	t.note(f, now)
	d := t.row(f, now)
	if d.Action != Retry && d.Action != Hold {
		return d
	}
	if stop := t.filter(f, d, now); stop != NotStopped {
		if d.NewConnection {
			return t.unlessPastDeadline(t.gone(now), now)
		}
		if d.Action == Hold {
			return handOver
		}
		return giveUp(stop)
	}
	t.commit(f, d, now)
	return d
}

// note adds what f says to the history, before the row is read.
func (t *Tracker) note(f Failure, now time.Time) {
	if f.Kind == Final {
		return
	}
	if t.run.upForWindow(now, t.policy.cfg.InternalErrorWindow) {
		t.endRuns()
	}
	if f.Kind == StreamBroke {
		// A stream breaks only after a 200: the apiserver that answered
		// it held the resume point, and a search under way found it.
		t.search = search{}
	}
	t.run.failed(now, f.Kind == ServerError || f.Kind == NoAnswer || f.Kind == ListBodyBroke)
	switch {
	case f.Kind == StreamBroke && f.InvalidFrames > 0,
		f.InStream && (f.Kind == Throttled || f.Kind == ServerError):
		// An invalid frame, or an ERROR event: the server answers the watch.
		t.loss = loss{}
	case t.loss.active() && (f.Kind == Throttled || f.Kind == ServerError || f.Kind == NoAnswer):
		t.loss.reopenFailed(f.Refused)
	}
}

// row is the table: the decision for f, before the filters.
func (t *Tracker) row(f Failure, now time.Time) Decision {
	cfg := &t.policy.cfg
	switch {
	case f.Kind == Final:
		return handOver // 1
	case f.NoResumePoint && f.Kind != Gone:
		return handOver // 2
	case f.Kind == Throttled: // 3
		named, ok := t.named(f)
		paced := t.throttle.throttled(now)
		wait := named
		switch {
		case !ok:
			wait = t.answered(now)
		case paced:
			wait = max(named, t.answered(now))
		}
		return t.within(now, t.throttle.since, cfg.TooManyRequestsWindow, wait, named)
	case f.Kind == ServerError, f.Kind == NoAnswer: // 4
		var wait time.Duration
		if f.Kind == NoAnswer {
			wait = t.unanswered(now)
		} else {
			wait = t.answered(now)
		}
		named, _ := t.named(f)
		d := t.within(now, t.run.windowFrom, cfg.InternalErrorWindow, max(wait, named), named)
		if d.Action == GiveUp && f.InStream && f.Kind == ServerError {
			// A server that answers the watch but has sent ERROR 5xx for a
			// whole window cannot serve it: the ERROR is the caller's, and
			// client-go relists, as its own MaxInternalErrorRetryDuration
			// does. A clean end would make it re-watch into the same errors,
			// window after window, its cache stale.
			d.Action = HandOver
		}
		return d
	case f.Kind == StreamBroke: // 5
		if f.InvalidFrames > cfg.MaxInvalidFrames {
			return Decision{Action: HandOver, Stop: StoppedByCount}
		}
		return retryAfter(t.resumeWait(f, now))
	case f.Kind == ListBodyBroke: // 6
		return t.within(now, t.run.windowFrom, cfg.InternalErrorWindow, t.resumeWait(f, now), 0)
	case t.searches(f, now): // 7
		return Decision{Action: Retry, NewConnection: true, Until: t.searchUntil(now)}
	}
	return t.gone(now) // 8
}

// resumeWait is the wait before resuming a broken stream or LIST body: none
// for the first break of a run, a draw from [0, maxGoAwaySpread) when the
// server went away, and the backoff for later breaks.
func (t *Tracker) resumeWait(f Failure, now time.Time) time.Duration {
	if t.run.broke {
		return t.unanswered(now)
	}
	t.run.broke = true
	if f.GoingAway {
		return time.Duration(t.policy.cfg.Rand() * float64(maxGoAwaySpread))
	}
	return 0
}

// maxGoAwaySpread bounds the wait before the first reopen of a stream
// whose apiserver went away. An apiserver that shuts down sends its GOAWAY
// to every client at once, and drops their watches together when it exits:
// reopened at once, they all arrive at the balancer in the same second.
// Behind a round-robin balancer kretry's resumes gather a fleet on the
// apiserver not restarted (stock client-go's relists scatter it over both),
// so the next restart drops all of it at once. Spreading the first reopen
// costs a mean of half the spread of staleness, once per restart, and
// nothing on other breaks.
const maxGoAwaySpread = 3 * time.Second

// searches reports whether the 410 f starts or continues a search: it
// answered a resume after a lost connection, with the watch cache's
// message (another is authoritative: etcd compacted), and the search may
// go on (see search.goesOn).
func (t *Tracker) searches(f Failure, now time.Time) bool {
	return f.Resume && f.Oldest != "" && t.loss.active() &&
		t.search.goesOn(f, t.loss.server, now, t.loss.searchLimit(now))
}

// searchUntil is the end of the search a 410 at now continues or starts.
func (t *Tracker) searchUntil(now time.Time) time.Time {
	if t.search.active() {
		return t.search.until()
	}
	return now.Add(searchBound)
}

// gone is the decision for a 410 that is not searched for: when it ends a
// run of failures that grew the backoff, held for a draw from [0, min(step,
// maxGoneHold)), step being the backoff the run reached; else handed over
// at once. client-go's
// reflector waits a step of its own backoff before it relists, a step grown
// by every failed re-watch it saw. Behind kretry it saw none (kretry
// absorbed them), so it would relist at once, and a fleet whose resumes meet
// a restarted server would send its relists right behind its reopens. The
// hold is the reflector's wait, restored.
func (t *Tracker) gone(now time.Time) Decision {
	cfg := &t.policy.cfg
	step := t.backoff.reached(now, cfg)
	if t.run.failures < 2 || step <= cfg.InitialBackoff {
		return handOver
	}
	hold := time.Duration(cfg.Rand() * float64(min(step, maxGoneHold)))
	if hold <= 0 {
		return handOver
	}
	return Decision{Action: Hold, Wait: hold}
}

// maxGoneHold caps the hold of a 410. The hold spreads a fleet's relists
// over the span its reopens were already spread over; drawn from the whole
// step after a long outage (a step of 12.8 s after 10 s refused), it only
// delayed the last cache to be current (docs/fleet-model.py: 50 s after a
// 10 s restart against stock client-go's 37.5 s, 36 s with the cap, the
// peak unchanged).
const maxGoneHold = 8 * time.Second

// filter applies the caller's deadline, the end of a search and the retry
// budget to a retry or hold d of f, and says what stops it, if anything.
// The budget is asked last: a retry it allows is spent.
func (t *Tracker) filter(f Failure, d Decision, now time.Time) Stop {
	switch {
	case t.pastDeadline(now, d.Wait):
		return StoppedByDeadline
	case d.Action == Hold:
		return NotStopped
	case t.search.active() && !d.NewConnection && !now.Add(d.Wait).Before(t.search.until()):
		return StoppedBySearch
	case spends(f) && !t.policy.budget.Spend():
		return StoppedByBudget
	}
	return NotStopped
}

// spends reports whether retrying f spends the retry budget. A resume after
// a break does not: it replaces the re-watch (or relist) client-go would
// make at once, so refusing it would save the server no request. Nor does
// a 429 whose server named a wait of a second or more: that is the server's
// own load shedding, and is always honoured.
func spends(f Failure) bool {
	switch f.Kind {
	case StreamBroke, ListBodyBroke:
		return false
	case Throttled:
		return f.RetryAfter < time.Second
	}
	return true
}

// unlessPastDeadline is d, or a hand-over at once if d holds past the
// caller's deadline.
func (t *Tracker) unlessPastDeadline(d Decision, now time.Time) Decision {
	if d.Action == Hold && t.pastDeadline(now, d.Wait) {
		return handOver
	}
	return d
}

// commit notes what a retry that will be made changes.
func (t *Tracker) commit(f Failure, d Decision, now time.Time) {
	switch {
	case d.NewConnection:
		t.search.retried(f, t.loss.server, now, t.loss.searchLimit(now))
	case f.Kind == StreamBroke && f.InvalidFrames == 0:
		t.loss = loss{from: now.Add(d.Wait), server: f.Server}
	}
}

// deadlineMargin is how long before the caller's deadline a wait must end
// for the attempt after it to be worth making.
const deadlineMargin = time.Second

// pastDeadline reports whether a wait from now would end less than
// deadlineMargin before the caller's deadline, if there is one.
func (t *Tracker) pastDeadline(now time.Time, wait time.Duration) bool {
	return !t.deadline.IsZero() && now.Add(wait).After(t.deadline.Add(-deadlineMargin))
}

// within bounds a retry after wait by the window that began at from (none
// when window is zero). A backoff that would overshoot is cut short so that
// the last attempt lands on the window's end (the window is how long
// failures are retried, not a budget of whole steps); a wait the server
// named (named, zero if none) is never cut, so a retry it pushes past the
// end is not made.
func (t *Tracker) within(now, from time.Time, window, wait, named time.Duration) Decision {
	if window <= 0 {
		return retryAfter(wait)
	}
	remaining := from.Add(window).Sub(now)
	if remaining <= 0 || named > remaining {
		return giveUp(StoppedByWindow)
	}
	return retryAfter(min(wait, remaining))
}

// retryAfterJitter spreads a server-named wait by up to 10%, so a fleet of
// clients told "Retry-After: 1" does not come back in step.
const retryAfterJitter = 0.1

// named is the wait the server named, capped and jittered. A wait under a
// second (an HTTP-date almost due, a rounding proxy) is treated as none, so
// the backoff applies rather than a near-hot loop.
func (t *Tracker) named(f Failure) (time.Duration, bool) {
	if f.RetryAfter < time.Second {
		return 0, false
	}
	cfg := &t.policy.cfg
	wait := min(f.RetryAfter, cfg.MaxRetryAfter)
	return wait + time.Duration(cfg.Rand()*retryAfterJitter*float64(wait)), true
}

// answered is the backoff after an answer that says "later" (a 5xx, a 429
// naming no wait): client-go's draw from [step, 2·step).
func (t *Tracker) answered(now time.Time) time.Duration {
	step := t.backoff.step(now, &t.policy.cfg)
	return step + time.Duration(t.policy.cfg.Rand()*float64(step))
}

// unanswered is the backoff after a failure without an answer (a refused or
// reset connection, a broken stream): drawn from [step/2, 5·step/2),
// client-go's mean (1.5 steps) with twice its spread. They are how a fleet
// meets a server that went away, and the whole fleet retries until it comes
// back. `make fleet` (BENCHMARKS.md) measured kretry's reopens, drawn as
// client-go draws them, arriving as densely as client-go's re-watches, and
// with the relists that follow them a restarted server met a higher peak
// than without kretry; with this spread and the 410 hold, a lower one.
func (t *Tracker) unanswered(now time.Time) time.Duration {
	step := t.backoff.step(now, &t.policy.cfg)
	return step/2 + time.Duration(t.policy.cfg.Rand()*2*float64(step))
}
