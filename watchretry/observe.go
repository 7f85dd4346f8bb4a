package watchretry

import (
	"time"

	"github.com/kretry/kretry/internal/policy"
)

// failureRun is a stream's current run of failures, from its first break
// after progress, for what the hooks are told.
type failureRun struct {
	since    time.Time // zero when the stream is not failing
	attempts int       // reopening requests sent in the run
}

// failed notes a failure: the first one since progress starts the run.
func (s *stream) failed() {
	if s.run.since.IsZero() {
		s.run.since = s.rt.policy.Clock().Now()
	}
}

// progress records a whole event delivered: the run of failures ends (the
// tracker's Progress is idempotent between other reports).
func (s *stream) progress() {
	// An event delivered ends a search for an apiserver that holds the
	// resume point: its 410 is no longer the caller's.
	s.gone = nil
	s.tracker.Progress()
	s.run = failureRun{}
}

// retried tells the hooks about a resume about to wait.
func (s *stream) retried(reason string, code int, cause string, wait time.Duration) {
	s.failed()
	if hook := s.rt.hooks.Retry; hook != nil {
		hook(s.ctx, policy.Retry{
			Path: s.orig.URL.Path, Host: s.orig.URL.Host, Reason: reason, Code: code, Cause: cause, Wait: wait,
			Resume: true, Attempts: s.run.attempts, Elapsed: s.rt.policy.Clock().Since(s.run.since),
			ResourceVersion: string(s.point.rv),
		})
	}
}

// gaveUp tells the hooks the stream stops resuming after a failure of
// reason (the failure's own, or policy.ReasonDeadline).
func (s *stream) gaveUp(reason string, budgetRefused bool) {
	s.failed()
	if hook := s.rt.hooks.GiveUp; hook != nil {
		hook(s.orig.Context(), policy.GiveUp{
			Path: s.orig.URL.Path, Host: s.orig.URL.Host, Reason: reason, BudgetRefused: budgetRefused,
			Attempts: s.run.attempts, Elapsed: s.rt.policy.Clock().Since(s.run.since),
			Resume: true, ResourceVersion: string(s.point.rv),
		})
	}
}
