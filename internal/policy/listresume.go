package policy

import "time"

// ListBreak returns what to do after a LIST body broke mid-read once part of
// it reached the caller: resume it at its exact resourceVersion, after the
// wait, or hand the break over.
//
// It sits between Decide and Break. Like Decide, and unlike a watch's
// Break, it is bounded by the InternalErrorWindow from the first failure of
// the run: a LIST has a natural end, and a body that breaks again and again
// before any new byte arrives is a failure, not an idle stream. Like Break,
// and unlike Decide, it does not spend the retry budget: the resume replaces
// the relist client-go makes when a LIST fails, and costs the server the
// same one request. The first break after progress (new bytes past the
// point the last resume started from, see Progress) resumes at once; later
// ones back off as failures without an answer do.
func (t *Tracker) ListBreak() Decision {
	t.settled = false
	now := t.policy.cfg.Clock.Now()
	t.failed(now)
	if t.firstFailure.IsZero() {
		t.firstFailure = now
	}
	var wait time.Duration
	if !t.progressed {
		wait = t.spreadBackoff(now)
	}
	t.progressed = false
	return t.beforeDeadline(fitWindow(now, t.firstFailure.Add(t.policy.cfg.InternalErrorWindow), wait, 0))
}
