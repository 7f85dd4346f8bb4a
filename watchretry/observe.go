package watchretry

import "github.com/kretry/kretry/internal/establish"

// tell reports a step: a resume about to wait (Reporter.Retry), or the
// stream giving up on resuming (Reporter.GiveUp), with the attempts and the
// time of the tracker's current run of failures.
func (s *stream) tell(r report) {
	since, attempts := s.tracker.Run()
	elapsed := s.rt.client.Policy.Clock().Since(since)
	if since.IsZero() {
		elapsed = 0
	}
	rv := string(s.m.point.rv)
	switch r.kind {
	case reportRetry:
		s.rt.client.Reporter().Retry(s.ctx, establish.Retry{
			Path: s.orig.URL.Path, Host: s.orig.URL.Host, Reason: r.reason, Code: r.code, Cause: r.cause, Wait: r.wait,
			Resume: true, Attempts: attempts, Elapsed: elapsed, ResourceVersion: rv,
		})
	case reportGiveUp:
		s.rt.client.Reporter().GiveUp(s.orig.Context(), establish.GiveUp{
			Path: s.orig.URL.Path, Host: s.orig.URL.Host, Reason: r.reason, BudgetRefused: r.budget,
			Attempts: attempts, Elapsed: elapsed, Resume: true, ResourceVersion: rv,
		})
	}
}
