package policy

import (
	"math"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// maxGoAwaySpread bounds the wait before the first reopen of a stream
// whose apiserver went away (see Tracker.Break). An apiserver that shuts
// down sends its GOAWAY to every client at once, and drops their watches
// together when it exits: reopened at once, they all arrive at the
// balancer in the same second. Behind a round-robin balancer kretry's
// resumes gather a fleet on the apiserver not restarted (stock client-go's
// relists scatter it over both), so the next restart drops all of it at
// once. Spreading the first reopen costs a mean of half the spread of
// staleness, once per restart, and nothing on other breaks.
const maxGoAwaySpread = 3 * time.Second

// retryAfterJitter spreads a server-named wait by up to 10%, so a fleet of
// clients told "Retry-After: 1" does not come back in step.
const retryAfterJitter = 0.1

// Decision is what to do after an outcome.
type Decision struct {
	// Retry is false when the outcome goes to the caller as it is.
	Retry bool
	// Wait is how long to wait before the next attempt.
	Wait time.Duration
	// Stopped says why a retryable outcome is not retried; NotStopped
	// when Retry is set or the outcome goes to the caller as it is.
	Stopped Stop
}

// Reason names why a decision stopped retrying a failure of reason: the
// failure's own, or ReasonDeadline.
func (d Decision) Reason(reason string) string {
	if d.Stopped == StoppedByDeadline {
		return ReasonDeadline
	}
	return reason
}

// Stop is why a retryable failure is handed over instead of retried.
type Stop uint8

const (
	// NotStopped: the outcome is retried, or is not a failure to retry.
	NotStopped Stop = iota
	// StoppedByWindow: the failure's window is spent.
	StoppedByWindow
	// StoppedByDeadline: the wait would run into the caller's deadline.
	StoppedByDeadline
	// StoppedByBudget: the transport's retry budget refused the retry.
	StoppedByBudget
)

// String names the stop for logs and test failures.
func (s Stop) String() string {
	switch s {
	case StoppedByWindow:
		return "window"
	case StoppedByDeadline:
		return "deadline"
	case StoppedByBudget:
		return "budget"
	}
	return "none"
}

// Tracker is the failure history of one LIST request or one watch stream:
// when the current run of failures began, and how far the backoff has
// grown. It is not safe for concurrent use; each request owns one.
//
// A run of failures starts at the first failure after a success and ends at
// the next success: Progress (a whole event delivered, new bytes of a LIST
// body), or a reopened watch that stayed up, without failing, for as long
// as the InternalErrorWindow (see Opened). A bare 200 is not a success, so
// "200, then ERROR 500" forever still spends the window.
type Tracker struct {
	policy *Policy

	// firstFailure starts the current run of 5xx/connection failures;
	// zero when there is none. Only Progress ends a run.
	firstFailure time.Time
	// firstThrottle starts the current run of 429 answers; throttles
	// counts them.
	firstThrottle time.Time
	throttles     int
	// lastFailure is when the backoff last grew; after BackoffReset of
	// quiet it starts over.
	lastFailure time.Time
	// backoff is the exponential step without jitter (wait.Backoff's
	// arithmetic; the jitter comes from Config.Rand, which wait.Jitter
	// cannot take).
	backoff wait.Backoff
	// upSince is when the current stream opened, zero once it failed: a
	// stream up for a whole window ends the run of failures.
	upSince time.Time
	// deadline is when the caller's request ends (a watch's timeoutSeconds);
	// zero when it set none.
	deadline time.Time
	// progressed is set by Progress and cleared by Break: the first
	// break after progress reopens at once.
	progressed bool
	// settled is set by Progress and cleared by every report that changes
	// what Progress resets (Decide, Break, ListBreak, Gone): a Progress in
	// between finds nothing to end, and returns at once.
	settled bool
	// expired is the run of 410s that answered resumes (see Gone).
	expired expiredRun
	// lostAt is when the stream last broke (see Break), reopenFailed when
	// one of its reopenings last failed since (zero: none did), and
	// reopenAccepted whether one of those failures was not a refused
	// connection (something accepted it: a load balancer, or an apiserver
	// that then failed). They decide how far a resume's 410 is searched
	// for (Gone).
	lostAt         time.Time
	reopenFailed   time.Time
	reopenAccepted bool
}

// Decide returns what to do after an attempt ended with o. It is the one
// place a retry is decided. A retry it allows spends the retry budget,
// unless the server paced it (a 429 naming a wait): that wait is the
// server's own load shedding, and is always honoured.
func (t *Tracker) Decide(o Outcome) Decision {
	t.settled = false
	d := t.beforeDeadline(t.decide(o))
	serverPaced := o.Class == TooManyRequests && o.HasRetryAfter && o.RetryAfter >= time.Second
	if d.Retry && !serverPaced && !t.policy.budget.Spend() {
		return Decision{Stopped: StoppedByBudget}
	}
	return d
}

// pacedThrottles is how many 429s in a row are retried after the wait the
// server named alone, as client-go's rest client retries them (its
// maxRetries, 10). The one after them waits at least the backoff too, as
// client-go's reflector backs off once before its rest client starts over,
// and so on: a run of 429s is paced as stock client-go paces it. Without
// the backoff, a fleet coming back every second through a 60 s overload sent
// 23% more requests than stock client-go; with a backoff after every 429
// past the tenth, a third as many, but its caches caught up a minute late
// (`make fleet FLEETFLAGS='-scenarios overload'`, BENCHMARKS.md).
const pacedThrottles = 10

// deadlineMargin is how long before the caller's deadline a wait must end
// for the attempt after it to be worth making.
const deadlineMargin = time.Second

// SetDeadline records when the caller's request ends: no wait is chosen that
// would end less than a second before it (the caller's watch is over by
// then; waiting would only hold a silent stream open past it).
func (t *Tracker) SetDeadline(deadline time.Time) { t.deadline = deadline }

// beforeDeadline refuses a retry whose wait would run into the deadline.
func (t *Tracker) beforeDeadline(d Decision) Decision {
	if d.Retry && t.pastDeadline(d.Wait) {
		return Decision{Stopped: StoppedByDeadline}
	}
	return d
}

// pastDeadline reports whether a wait from now would end less than
// deadlineMargin before the caller's deadline, if there is one.
func (t *Tracker) pastDeadline(wait time.Duration) bool {
	return !t.deadline.IsZero() && t.policy.cfg.Clock.Now().Add(wait).After(t.deadline.Add(-deadlineMargin))
}

func (t *Tracker) decide(o Outcome) Decision {
	cfg := t.policy.cfg
	now := cfg.Clock.Now()
	if o.Class != Deliver {
		t.failed(now)
		// Break starts these over: only a reopening's failure counts.
		t.reopenFailed = now
		t.reopenAccepted = t.reopenAccepted || !o.Refused
	}
	switch o.Class {
	case TooManyRequests:
		if t.firstThrottle.IsZero() {
			t.firstThrottle = now
		}
		t.throttles++
		named, ok := t.retryAfter(o)
		wait := named
		switch {
		case !ok:
			wait = t.nextBackoff(now)
		case t.throttles%(pacedThrottles+1) == 0:
			wait = max(named, t.nextBackoff(now))
		}
		if cfg.TooManyRequestsWindow <= 0 {
			return Decision{Retry: true, Wait: wait}
		}
		return fitWindow(now, t.firstThrottle.Add(cfg.TooManyRequestsWindow), wait, named)
	case InternalError:
		if t.firstFailure.IsZero() {
			t.firstFailure = now
		}
		var wait time.Duration
		if o.NoAnswer {
			wait = t.spreadBackoff(now)
		} else {
			wait = t.nextBackoff(now)
		}
		named, _ := t.retryAfter(o)
		wait = max(wait, named)
		return fitWindow(now, t.firstFailure.Add(cfg.InternalErrorWindow), wait, named)
	default:
		return Decision{}
	}
}

// Break returns what to do after an established watch stream broke with
// cause (a read error, or io.EOF for a clean end before its time; nil when
// unknown). Breaks are never bounded and never count towards the
// InternalError window: an idle watch behind a flaky link legitimately
// breaks again and again. The first break after progress reopens at once;
// later ones back off. Only the caller's deadline stops them (see
// SetDeadline).
//
// The one exception is a server going away (see GoingAway): the first
// reopen after its GOAWAY waits a draw from [0, maxGoAwaySpread).
//
// A resume after a break does not spend the retry budget: it replaces the
// re-watch from the same resourceVersion that client-go makes as soon as a
// stream ends, so refusing it would save the server no request, only move
// it to client-go. The retries of the reopening itself (a 503, a refused
// connection) are decided by Decide and do spend it.
func (t *Tracker) Break(cause error) Decision {
	t.settled = false
	now := t.policy.cfg.Clock.Now()
	t.failed(now)
	t.lostAt, t.reopenFailed, t.reopenAccepted = now, time.Time{}, false
	if t.progressed {
		t.progressed = false
		if GoingAway(cause) {
			// The spread is kretry's own wait, not a time cut off from the
			// apiservers: the loss that decides how far a 410 is searched
			// for (cutOff) is counted from its end.
			spread := time.Duration(t.policy.cfg.Rand() * float64(maxGoAwaySpread))
			t.lostAt = now.Add(spread)
			return t.beforeDeadline(Decision{Retry: true, Wait: spread})
		}
		return t.beforeDeadline(Decision{Retry: true})
	}
	return t.beforeDeadline(Decision{Retry: true, Wait: t.spreadBackoff(now)})
}

// Opened records that a watch stream (re)opened with a 200. If it then stays
// up for InternalErrorWindow before its next failure, that failure starts a
// new run: a quiet, healthy watch is not a failing one.
func (t *Tracker) Opened() {
	t.upSince = t.policy.cfg.Clock.Now()
}

// failed is called on every failure: a stream that was up for a whole window
// first ends the run it was opened in.
func (t *Tracker) failed(now time.Time) {
	t.endRunIfUp(now)
	t.upSince = time.Time{}
}

// endRunIfUp ends the run of failures if the current stream has been up
// for a whole window: a quiet, healthy watch is not a failing one.
func (t *Tracker) endRunIfUp(now time.Time) {
	if !t.upSince.IsZero() && now.Sub(t.upSince) >= t.policy.cfg.InternalErrorWindow {
		t.endRuns()
	}
}

// Progress records that the request moved forward: a whole non-ERROR watch
// event reached the caller, or new bytes of a LIST body. It ends the current
// runs of failures. It is idempotent between other reports: a caller tells
// it every event it delivers, and all but the first of a row cost a branch.
func (t *Tracker) Progress() {
	if t.settled {
		return
	}
	t.endRuns()
	t.settled = true
}

// endRuns ends the current runs of failures (see Progress).
func (t *Tracker) endRuns() {
	t.firstFailure = time.Time{}
	t.firstThrottle = time.Time{}
	t.throttles = 0
	// The backoff starts over too: a new run of failures gets a whole window,
	// and a backoff left at its cap would spend that window in one wait.
	t.resetBackoff()
	t.progressed = true
	t.expired = expiredRun{}
}

// fitWindow bounds a retry by the end of its window. A backoff that would
// overshoot is cut short so that the last attempt lands on the window's
// end (the window is how long failures are retried, not a budget of whole
// backoff steps); a wait the server named (named, zero if none) is never
// cut, so a retry it pushes past the end is not made.
func fitWindow(now, end time.Time, wait, named time.Duration) Decision {
	remaining := end.Sub(now)
	if remaining <= 0 || named > remaining {
		return Decision{Stopped: StoppedByWindow}
	}
	return Decision{Retry: true, Wait: min(wait, remaining)}
}

// retryAfter is the server-named wait, capped and jittered. A wait under a
// second (an HTTP-date almost due, a rounding proxy) is treated as none, so
// the backoff applies rather than a near-hot loop.
func (t *Tracker) retryAfter(o Outcome) (time.Duration, bool) {
	if !o.HasRetryAfter || o.RetryAfter < time.Second {
		return 0, false
	}
	cfg := t.policy.cfg
	wait := min(o.RetryAfter, cfg.MaxRetryAfter)
	return wait + time.Duration(cfg.Rand()*retryAfterJitter*float64(wait)), true
}

// resetBackoff starts the exponential backoff over from InitialBackoff.
func (t *Tracker) resetBackoff() {
	cfg := t.policy.cfg
	t.backoff = wait.Backoff{Duration: cfg.InitialBackoff, Factor: 2, Steps: math.MaxInt32, Cap: cfg.MaxBackoff}
}

// nextBackoff returns the next jittered exponential wait and grows the
// step: InitialBackoff doubling up to MaxBackoff, starting over after
// BackoffReset without failures, and the wait drawn from [step, 2·step)
// (client-go's numbers). Answers that say "later" (5xx, 429 without a
// Retry-After) wait this.
func (t *Tracker) nextBackoff(now time.Time) time.Duration {
	step := t.nextStep(now)
	return step + time.Duration(t.policy.cfg.Rand()*float64(step))
}

// spreadBackoff is nextBackoff drawn from [step/2, 5·step/2): client-go's
// mean (1.5 steps) with twice its spread. Failures without an answer (a
// refused or reset connection, a broken watch stream) wait this: they are
// how a fleet meets a server that went away, and the whole fleet retries
// until it comes back. `make fleet` (BENCHMARKS.md) measured kretry's
// reopens, drawn as client-go draws them, arriving as densely as
// client-go's re-watches, and with the relists that follow them a restarted
// server met a higher peak than without kretry; with this spread and the
// 410 hold (Gone), a lower one.
func (t *Tracker) spreadBackoff(now time.Time) time.Duration {
	step := t.nextStep(now)
	return step/2 + time.Duration(t.policy.cfg.Rand()*2*float64(step))
}

// nextStep returns the next exponential step, unjittered, and grows it.
func (t *Tracker) nextStep(now time.Time) time.Duration {
	if !t.lastFailure.IsZero() && now.Sub(t.lastFailure) >= t.policy.cfg.BackoffReset {
		t.resetBackoff()
	}
	t.lastFailure = now
	return t.backoff.Step()
}
