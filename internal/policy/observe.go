package policy

import (
	"context"
	"time"
)

// Reasons a retry or resume is made: a closed, small set, for metrics
// labels and logs.
const (
	ReasonTooManyRequests = "429"           // a 429 answer or ERROR event 429
	ReasonServerError     = "5xx"           // a 500/502/503/504 answer
	ReasonConnection      = "connection"    // no answer: refused, reset, EOF, GOAWAY, timeout
	ReasonBrokenBody      = "broken-body"   // a LIST body or watch stream cut short
	ReasonErrorEvent      = "error-event"   // a watch ERROR event 5xx
	ReasonInvalidFrame    = "invalid-frame" // a watch frame that is not a valid event
	ReasonStall           = "stall"         // a watch that sent nothing for StallTimeout
	// ReasonExpiredResume is a 410 that answered a resume after a lost
	// connection, retried on a new connection (see Tracker.Gone).
	ReasonExpiredResume = "expired-resume"
	// ReasonDeadline is a give-up reason only: the next wait would run past
	// the caller's timeoutSeconds, so the watch ends cleanly instead.
	ReasonDeadline = "deadline"
)

// Hooks are how the retry loops report what they do, for metrics and logs;
// a nil hook costs nothing. Each is called on the request's goroutine with
// its context (which carries the caller's logger) and must not block. The
// events carry no credentials, header values, query values or bodies.
type Hooks struct {
	// Attempt is called when an attempt has its answer or error.
	Attempt func(context.Context, Attempt)
	// Retry is called before the wait of every retry and watch resume.
	Retry func(context.Context, Retry)
	// GiveUp is called when a retryable failure goes to the caller (or
	// ends a watch cleanly) instead of being retried.
	GiveUp func(context.Context, GiveUp)
	// ListResume is called when a resume of a LIST body broken mid-read
	// ends: resumed, or handed to the caller as the break it was.
	ListResume func(context.Context, ListResume)
}

// ListResumeOutcome is what a resume of a LIST body came to: a closed,
// small set, fit for a metrics label.
type ListResumeOutcome string

// The outcomes of a LIST body resume.
const (
	// ListResumed: the list asked for again at its resourceVersion began
	// with the very bytes delivered, and the body streams on.
	ListResumed ListResumeOutcome = "resumed"
	// ListResumeMismatch: it began otherwise (or ended sooner, or came in
	// another length, content type or encoding): the caller gets the
	// give-up, which unwraps to the break.
	ListResumeMismatch ListResumeOutcome = "mismatch"
	// ListResumeGone: 410, the resourceVersion is compacted: the caller
	// gets the give-up.
	ListResumeGone ListResumeOutcome = "gone"
	// ListResumeGaveUp: the window or the caller's deadline ended the
	// resume, or the re-request got another answer: the caller gets the
	// give-up.
	ListResumeGaveUp ListResumeOutcome = "gave-up"
)

// ListResume is one LIST body resumed at its resourceVersion, or a resume
// that failed. It carries no query, header or body.
type ListResume struct {
	// Path and Host are the request's URL path and host.
	Path, Host string
	// ResourceVersion is the list's.
	ResourceVersion string
	// Outcome is what the resume came to.
	Outcome ListResumeOutcome
	// Skipped is how many bytes of the new answer were read and checked
	// against the delivered prefix: the whole prefix when it matched.
	Skipped int64
	// Requests is how many requests the resume sent.
	Requests int
	// Elapsed is the time from the break to the outcome.
	Elapsed time.Duration
}

// Attempt is one request sent and what it came to.
type Attempt struct {
	// Path and Host are the request's URL path and host.
	Path, Host string
	// Code is the HTTP status; 0 when no whole answer arrived (no
	// response, or a LIST body broken mid-read).
	Code int
	// Canceled is set when the caller's context ended first.
	Canceled bool
	// Number counts the attempts of this request from 1; for a watch
	// resume, the reopening requests since the watch's first break after
	// progress.
	Number int
	// Resume is set for the attempts that reopen an established watch.
	Resume bool
	// ResourceVersion is the resume point of a resume attempt, else "".
	ResourceVersion string
}

// GiveUp is a retryable failure handed over instead of retried.
type GiveUp struct {
	// Path and Host are the request's URL path and host.
	Path, Host string
	// Reason is the last failure's reason, or ReasonDeadline.
	Reason string
	// BudgetRefused is set when the retry budget refused the retry.
	BudgetRefused bool
	// Attempts is how many requests were sent in the run that ends here.
	Attempts int
	// Elapsed is the time since the run began.
	Elapsed time.Duration
	// Resume is set when an established watch ends cleanly here.
	Resume bool
	// ResourceVersion is the watch's resume point, else "".
	ResourceVersion string
}

// Retry describes one retry kretry is about to make, for observability
// hooks (metrics, logs). It never carries credentials, queries or bodies.
type Retry struct {
	// Path is the request's URL path.
	Path string
	// Host is the request's host (host:port).
	Host string
	// Code is the HTTP status or ERROR event code that led to the retry, 0
	// when there was none (a connection or stream break).
	Code int
	// Resume is set for the reopening of an established watch (and the
	// retries of that reopening), rather than a retry of its establishment.
	Resume bool
	// Attempts is how many requests the retry follows: of the request, or,
	// for a resume, since the watch last made progress.
	Attempts int
	// Elapsed is the time since the request began, or, for a resume,
	// since the watch's first break after progress.
	Elapsed time.Duration
	// Reason is one of the Reason constants.
	Reason string
	// Cause says what failed in detail: an HTTP status ("503"), a watch
	// ERROR event ("ERROR event 429"), a connection error, a stream break.
	Cause string
	// Wait is how long kretry waits before the next attempt.
	Wait time.Duration
	// ResourceVersion is the resume point of a watch resume, else "".
	ResourceVersion string
}
