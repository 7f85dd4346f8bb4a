package transport

import (
	"context"
	"time"

	"k8s.io/klog/v2"

	"github.com/kretry/kretry/internal/policy"
)

// ListResumeObserver is an Observer that also hears what every resume of a
// LIST body broken mid-read came to. An Config.Observer that implements it
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

// listHooks are the hooks of LIST requests (see hooks), with their body
// resumes reported as a V(2) log line and the Observer's ListResumeEvent.
func (c Config) listHooks() policy.Hooks {
	hooks := c.hooks(VerbList)
	hooks.ListResume = c.onListResume()
	return hooks
}

// onListResume adapts listretry's resume reports into a V(2) log line and
// the Observer's ListResumeEvent.
func (c Config) onListResume() func(context.Context, policy.ListResume) {
	observer, _ := c.Observer.(ListResumeObserver)
	return func(ctx context.Context, r policy.ListResume) {
		if logger := klog.FromContext(ctx).V(logGiveUps); logger.Enabled() {
			logger.Info("kretry: list resume", "verb", VerbList, "path", r.Path, "outcome", r.Outcome,
				"skippedBytes", r.Skipped, "requests", r.Requests, "elapsed", r.Elapsed.Round(time.Millisecond),
				"resourceVersion", r.ResourceVersion)
		}
		if observer != nil {
			observer.ObserveListResume(ListResumeEvent{
				Outcome: ListResumeOutcome(r.Outcome), SkippedBytes: r.Skipped, Requests: r.Requests, Elapsed: r.Elapsed,
			})
		}
	}
}

// ObserveListResume tells each observer that hears LIST resumes.
func (m multiObserver) ObserveListResume(e ListResumeEvent) {
	for _, o := range m {
		if lo, ok := o.(ListResumeObserver); ok {
			lo.ObserveListResume(e)
		}
	}
}
