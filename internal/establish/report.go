package establish

import (
	"context"
	"time"
)

// Reasons a retry, a resume or a give-up is made: a closed, small set, for
// metrics labels and logs.
const (
	ReasonTooManyRequests = "429"           // a 429 answer or ERROR event 429
	ReasonServerError     = "5xx"           // a 500/502/503/504 answer
	ReasonConnection      = "connection"    // no answer: refused, reset, EOF, GOAWAY, timeout
	ReasonBrokenBody      = "broken-body"   // a LIST body or watch stream cut short
	ReasonErrorEvent      = "error-event"   // a watch ERROR event 5xx
	ReasonInvalidFrame    = "invalid-frame" // a watch frame that is not a valid event
	ReasonStall           = "stall"         // a watch that sent nothing for StallTimeout
	// ReasonExpiredResume is a 410 that answered a resume after a lost
	// connection, retried on a new connection.
	ReasonExpiredResume = "expired-resume"
	// ReasonDeadline is a give-up reason only: the next wait would run past
	// the caller's timeoutSeconds, so the watch ends cleanly instead.
	ReasonDeadline = "deadline"
)

// Reporter hears what the retry loops, the resuming watch streams and the
// LIST body resumes do, for metrics and logs: package transport implements
// it over its Observer and klog. Each method is called on the request's
// goroutine with a context that carries the caller's logger, and must not
// block. The reports carry no credentials, header values, query values or
// bodies.
type Reporter interface {
	// Attempt is called when an attempt has its answer or error.
	Attempt(context.Context, Attempt)
	// Retry is called before the wait of every retry and resume.
	Retry(context.Context, Retry)
	// GiveUp is called when a retryable failure goes to the caller (or
	// ends a watch cleanly) instead of being retried.
	GiveUp(context.Context, GiveUp)
	// ListResume is called when the resume of a LIST body broken mid-read
	// ends: resumed, or handed to the caller as the break it was.
	ListResume(context.Context, ListResume)
}

// Silent is the Reporter that hears nothing.
type Silent struct{}

func (Silent) Attempt(context.Context, Attempt)       {}
func (Silent) Retry(context.Context, Retry)           {}
func (Silent) GiveUp(context.Context, GiveUp)         {}
func (Silent) ListResume(context.Context, ListResume) {}

// Attempt is one request sent and what it came to.
type Attempt struct {
	// Path and Host are the request's URL path and host.
	Path, Host string
	// Code is the HTTP status; 0 when no whole answer arrived (no
	// response, or a LIST body broken mid-read).
	Code int
	// Canceled is set when the caller's context (or the watch's deadline,
	// or the end of a search) ended it first.
	Canceled bool
	// Number counts the attempts of this request from 1; for a resume, the
	// requests since the current run of failures began.
	Number int
	// Resume is set for the attempts that reopen a watch or resume a LIST
	// body.
	Resume bool
	// ResourceVersion is the resume point of a resume attempt, else "".
	ResourceVersion string
}

// Retry is one retry or resume about to be made.
type Retry struct {
	// Path and Host are the request's URL path and host.
	Path, Host string
	// Code is the HTTP status or ERROR event code that led to it, 0 when
	// there was none (a connection or stream break).
	Code int
	// Resume is set for the reopening of an established watch and the
	// re-request of a LIST body broken mid-read (and their retries),
	// rather than a retry of a request's establishment.
	Resume bool
	// Attempts is how many requests it follows: of the request, or, for a
	// resume, since the current run of failures began.
	Attempts int
	// Elapsed is the time since the request began, or, for a resume, since
	// the current run of failures began.
	Elapsed time.Duration
	// Reason is one of the Reason constants.
	Reason string
	// Cause says what failed in detail: an HTTP status ("503"), a watch
	// ERROR event ("ERROR event 429"), a connection error, a stream break.
	Cause string
	// Wait is how long kretry waits before the next attempt.
	Wait time.Duration
	// ResourceVersion is the resume point of a resume, else "".
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
	// Resume is set when an established watch ends here, or a LIST body
	// resume gives up.
	Resume bool
	// ResourceVersion is the resume point, else "".
	ResourceVersion string
}

// ListOutcome is what the resume of a LIST body came to.
type ListOutcome uint8

const (
	// ListResumed: the list asked for again at its resourceVersion began
	// with the very bytes delivered, and the body streams on.
	ListResumed ListOutcome = iota
	// ListMismatch: it began otherwise, ended sooner, or came in another
	// content type, encoding or length: the caller gets the give-up.
	ListMismatch
	// ListGone: 410, the resourceVersion is compacted.
	ListGone
	// ListGaveUp: the window or the caller's deadline ended the resume, or
	// the re-request got another answer.
	ListGaveUp
)

var listOutcomeNames = [...]string{"resumed", "mismatch", "gone", "gave-up"}

// String names the outcome, as the metrics label it.
func (o ListOutcome) String() string { return listOutcomeNames[o] }

// ListResume is one LIST body resumed at its resourceVersion, or a resume
// that failed.
type ListResume struct {
	// Path and Host are the request's URL path and host.
	Path, Host string
	// ResourceVersion is the list's.
	ResourceVersion string
	// Outcome is what the resume came to.
	Outcome ListOutcome
	// Skipped is how many bytes of the new answer were read and checked
	// against the delivered prefix: the whole prefix when it matched.
	Skipped int64
	// Requests is how many requests the resume sent.
	Requests int
	// Elapsed is the time from the break to the outcome.
	Elapsed time.Duration
}
