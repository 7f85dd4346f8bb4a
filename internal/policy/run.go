package policy

import "time"

// run is the current run of failures of a request or a stream: it starts at
// the first failure after a success and ends at the next success (Progress),
// or at the first failure of a stream that stayed up for a whole
// InternalErrorWindow first (a quiet, healthy watch is not a failing one).
// A bare 200 is not a success: "200, then ERROR 500" forever stays one run.
type run struct {
	// since is the run's first failure, of any kind; zero when there is none.
	since time.Time
	// windowFrom is its first failure that counts towards the
	// InternalErrorWindow (a 5xx, no answer, a LIST body's break); a watch
	// stream's breaks do not.
	windowFrom time.Time
	// attempts counts the requests sent since the run began, failures its
	// failures.
	attempts, failures int
	// broke is set once a stream or a LIST body broke in the run: the first
	// break of a run is resumed at once, later ones back off.
	broke bool
	// upSince is when the current stream opened; zero once it failed.
	upSince time.Time
}

// active reports whether a run of failures is going on.
func (r *run) active() bool { return !r.since.IsZero() }

// upForWindow reports whether the current stream has been up, without
// failing, for a whole window by now: that ends the run it opened in.
func (r *run) upForWindow(now time.Time, window time.Duration) bool {
	return !r.upSince.IsZero() && now.Sub(r.upSince) >= window
}

// failed notes a failure at now: the first one starts the run, and the
// current stream, if any, is no longer up.
func (r *run) failed(now time.Time, countsTowardsWindow bool) {
	if r.since.IsZero() {
		r.since = now
	}
	r.failures++
	if countsTowardsWindow && r.windowFrom.IsZero() {
		r.windowFrom = now
	}
	r.upSince = time.Time{}
}

// windowEnd is when the run's InternalErrorWindow ends.
func (r *run) windowEnd(window time.Duration) time.Time { return r.windowFrom.Add(window) }
