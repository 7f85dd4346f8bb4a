package watchretry

import (
	"github.com/kretry/kretry/internal/policy"
)

// tell reports a step to the hooks: a resume about to wait (Hooks.Retry),
// or the stream giving up on resuming (Hooks.GiveUp).
func (s *stream) tell(r report) {
	run, rv := &s.m.run, string(s.m.point.rv)
	switch r.kind {
	case reportRetry:
		if hook := s.rt.hooks.Retry; hook != nil {
			hook(s.ctx, policy.Retry{
				Path: s.orig.URL.Path, Host: s.orig.URL.Host, Reason: r.reason, Code: r.code, Cause: r.cause, Wait: r.wait,
				Resume: true, Attempts: run.attempts, Elapsed: s.rt.policy.Clock().Since(run.since),
				ResourceVersion: rv,
			})
		}
	case reportGiveUp:
		if hook := s.rt.hooks.GiveUp; hook != nil {
			hook(s.orig.Context(), policy.GiveUp{
				Path: s.orig.URL.Path, Host: s.orig.URL.Host, Reason: r.reason, BudgetRefused: r.budget,
				Attempts: run.attempts, Elapsed: s.rt.policy.Clock().Since(run.since),
				Resume: true, ResourceVersion: rv,
			})
		}
	}
}
