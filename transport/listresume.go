package transport

import (
	"time"

	"github.com/kretry/kretry/internal/establish"
)

// ListResumeObserver is an Observer that also hears what every resume of a
// LIST body broken mid-read came to. A Config.Observer that implements it
// is told; package github.com/kretry/kretry/metrics does.
type ListResumeObserver interface {
	// ObserveListResume is called when a resume of a LIST body ends:
	// resumed, or handed to the caller as the break it was.
	ObserveListResume(ListResumeEvent)
}

// ListResumeOutcome is what a LIST body resume came to: a closed, small
// set, fit for a metrics label.
type ListResumeOutcome string

// The outcomes of a LIST body resume.
const (
	// ListResumed: the list asked for again at its resourceVersion began
	// with the very bytes already delivered, and the body went on.
	ListResumed ListResumeOutcome = "resumed"
	// ListResumeMismatch: it began otherwise, ended sooner or came in
	// another content type; the caller got the break.
	ListResumeMismatch ListResumeOutcome = "mismatch"
	// ListResumeGone: 410, the resourceVersion was compacted; the caller
	// got the break.
	ListResumeGone ListResumeOutcome = "gone"
	// ListResumeGaveUp: the window or the caller's deadline ended it, or
	// the server gave another answer; the caller got the break.
	ListResumeGaveUp ListResumeOutcome = "gave-up"
)

// ListResumeEvent is one LIST body resume and what it came to.
type ListResumeEvent struct {
	// Outcome is what it came to.
	Outcome ListResumeOutcome
	// SkippedBytes is how much of the new answer was read and checked
	// against the bytes already delivered: all of them when it resumed.
	SkippedBytes int64
	// Requests is how many requests it sent.
	Requests int
	// Elapsed is the time from the break to the outcome.
	Elapsed time.Duration
}

// listResumeOutcomes names establish's outcomes of a LIST body resume.
var listResumeOutcomes = [...]ListResumeOutcome{
	establish.ListResumed:  ListResumed,
	establish.ListMismatch: ListResumeMismatch,
	establish.ListGone:     ListResumeGone,
	establish.ListGaveUp:   ListResumeGaveUp,
}

// ObserveListResume tells each observer that hears LIST resumes.
func (m multiObserver) ObserveListResume(e ListResumeEvent) {
	for _, o := range m {
		if lo, ok := o.(ListResumeObserver); ok {
			lo.ObserveListResume(e)
		}
	}
}
