package policy

import "time"

// Tracker is the history of one LIST request or one watch stream, what its
// decisions are made from: the current run of failures and of 429s, the
// backoff, the lost connection and the search for an apiserver that holds
// the resume point. It is not safe for concurrent use; each request owns
// one.
type Tracker struct {
	policy *Policy

	run      run
	throttle throttle
	backoff  backoff
	loss     loss
	search   search

	// deadline is when the caller's request ends (a watch's timeoutSeconds);
	// zero when it set none.
	deadline time.Time
	// settled is set by Progress and cleared by Decide: a Progress in
	// between finds nothing to end, and returns at once.
	settled bool
}

// SetDeadline records when the caller's request ends: no retry is decided
// whose wait would end less than a second before it, nor a hold past it.
func (t *Tracker) SetDeadline(deadline time.Time) { t.deadline = deadline }

// Progress records a success: a whole non-ERROR watch event reached the
// caller, or new bytes of a LIST body. It ends the current runs of
// failures, the lost connection and the search. It is idempotent between
// other reports: a caller tells it every event it delivers, and all but the
// first of a row cost a branch.
func (t *Tracker) Progress() {
	if t.settled {
		return
	}
	t.endRuns()
	// The backoff starts over too: the server is serving, and a backoff
	// left at its cap would spend the next run's window in one wait.
	t.backoff = backoff{}
	t.settled = true
}

// endRuns ends what a success ends: the runs of failures, the lost
// connection and the search. The backoff has its own reset (BackoffReset
// of quiet): a stream that stayed up a window, quiet, has ended its run but
// may be on a server that fails again and again.
func (t *Tracker) endRuns() {
	t.run = run{upSince: t.run.upSince}
	t.throttle = throttle{}
	t.loss = loss{}
	t.search = search{}
}

// Opened records that a watch stream (re)opened with a 200. If it then stays
// up for the InternalErrorWindow before its next failure, that failure
// starts a new run (see run).
func (t *Tracker) Opened() { t.run.upSince = t.policy.cfg.Clock.Now() }

// Sent records a request sent for the request or stream: a first attempt, a
// retry, a reopening.
func (t *Tracker) Sent() {
	if t.run.active() {
		t.run.attempts++
	}
}

// Run describes the current run of failures: when its first failure was
// (zero when there is none) and how many requests were sent since.
func (t *Tracker) Run() (since time.Time, attempts int) { return t.run.since, t.run.attempts }
