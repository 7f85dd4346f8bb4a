package transport_test

// Outside tests of the "cut-off" rule of the 410 search (docs/behaviour.md,
// "Resume answered 410"): a client one of whose reopenings failed, answered
// 410 3 s or more after the lost connection, searches on at most 6 new
// connections when something accepted a failed reopening, and not at all
// when every failed reopening was refused. Written from the docs only,
// through a real Clientset and the search tests' rig (srchWatch,
// outside_search_test.go). The search's retries are counted by the new
// connections they went to (rig.wantRides): over HTTP/2 the Observer's
// expired-resume retries also count the rides, each retry's ride of the
// connection the 410 before it came on.

import (
	"testing"
	"time"

	"github.com/kretry/kretry/transport"
)

const cutMaxShort = 6 // the short search's new connections

// cutEOFThen: accepted and closed for d, then next(i) for the i-th
// connection after (1-based).
func cutEOFThen(d time.Duration, next func(i int) srchKind) func(int, time.Duration) srchKind {
	return srchAfter(d, srchEOF, next)
}

func cutAThenB(i int) srchKind { return srchAThenB(i, 0) }

// (1) Accepted and closed for 3.5 s, then A, then B: cut off through
// something that accepted, so the short search is made and reaches B.
func TestOutsideCutoffEOFThenFreshThenHolder(t *testing.T) {
	t.Parallel()
	eachVariant(t, srchAll, func(t *testing.T, opts serverOpts) {
		r := srchWatch(t, srchCase{opts: opts, fresh: srchTooOld, route: cutEOFThen(3500*time.Millisecond, cutAThenB)})
		r.wantResumed(t)
		if c := r.wantRides(t); c.at(r.a) != 1 || c.at(r.b) != 1 || c.searched < 1 || c.searched > cutMaxShort {
			t.Errorf("want one resume at A, one at B, 1..%d expired-resume retries to a new connection: %v; %v", cutMaxShort, r, c)
		}
	})
}

// (2) Accepted and closed for 4 s, then only A (same S): one 410 within
// the bound, after at most 6 search retries, each on a new connection
// (over HTTP/2 each after the ride of the connection before).
func TestOutsideCutoffEOFThenOnlyFresh(t *testing.T) {
	t.Parallel()
	eachVariant(t, srchAll, func(t *testing.T, opts serverOpts) {
		r := srchWatch(t, srchCase{opts: opts, fresh: srchTooOld, route: cutEOFThen(4*time.Second, func(int) srchKind { return srchToA })})
		r.wantBoundedGone(t)
		if c := r.wantRides(t); c.searched < 1 || c.searched > cutMaxShort || c.at(r.a) != c.searched+1 {
			t.Errorf("want 1..%d expired-resume retries to a new connection and one more new connection at A than them: %v; %v", cutMaxShort, r, c)
		}
	})
}

// (3) Refused for 4 s, then only A: one 410, no search.
func TestOutsideCutoffRefusedThenOnlyFresh(t *testing.T) {
	t.Parallel()
	eachVariant(t, srchSome, func(t *testing.T, opts serverOpts) {
		r := srchWatch(t, srchCase{opts: opts, fresh: srchTooOld, refused: 4 * time.Second, route: srchOnlyA})
		r.wantBoundedGone(t)
		if len(r.a.resumes()) != 1 || r.obs.expired() != 0 {
			t.Errorf("want exactly one resume at A, no expired-resume retry: %v", r)
		}
	})
}

// (4) Refused for 4 s, then one accepted-and-closed, then A and B in
// turn: one failed reopening was accepted, so the short search is made.
func TestOutsideCutoffRefusedThenEOFThenSearch(t *testing.T) {
	t.Parallel()
	eachVariant(t, srchSome, func(t *testing.T, opts serverOpts) {
		r := srchWatch(t, srchCase{opts: opts, fresh: srchTooOld, refused: 4 * time.Second,
			route: func(n int, _ time.Duration) srchKind {
				switch {
				case n == 1:
					return srchEOF
				case n%2 == 0:
					return srchToA
				}
				return srchToB
			}})
		r.wantResumed(t)
		if c := r.wantRides(t); c.at(r.a) != 1 || c.at(r.b) != 1 || c.searched != 1 {
			t.Errorf("want one resume at A, one at B, one expired-resume retry to a new connection: %v; %v", r, c)
		}
	})
}

// (5) The balancer itself answers 503 for 3.5 s, then A, then B: a 5xx is
// a failed reopening that something accepted: the short search is made.
// (A connection the 503 came on may be reused, so A may answer more than
// once.)
func TestOutsideCutoffBalancer503ThenSearch(t *testing.T) {
	t.Parallel()
	const d = 3500 * time.Millisecond
	eachVariant(t, srchAll, func(t *testing.T, opts serverOpts) {
		r := srchWatch(t, srchCase{opts: opts, fresh: srchTooOld, balancer503: d,
			route: srchAfter(d, srchToA, cutAThenB)})
		r.wantResumed(t)
		answered := 0 // the resumes A answered, not its balancer
		for _, q := range r.a.resumes() {
			if q.at-r.broke >= d {
				answered++
			}
		}
		if n := r.obs.expired(); answered < 1 || len(r.b.resumes()) != 1 || n < 1 || n > cutMaxShort {
			t.Errorf("want resumes at A, one at B, 1..%d expired-resume retries: %v", cutMaxShort, r)
		}
	})
}

// (6a) Cut off through a balancer (EOF for 4 s), then A, then a search
// retry (over HTTP/2 the one after the ride of A's connection) that is
// accepted and never answered: the 410 still reaches the caller once,
// within the bound of the first 410.
func TestOutsideCutoffSilentShortRetry(t *testing.T) {
	t.Parallel()
	eachVariant(t, srchAll, func(t *testing.T, opts serverOpts) {
		r := srchWatch(t, srchCase{opts: opts, fresh: srchTooOld, route: cutEOFThen(4*time.Second, func(i int) srchKind {
			if i == 1 {
				return srchToA
			}
			return srchHang
		})})
		r.wantBoundedGone(t)
		if c := r.wantRides(t); c.at(r.a) != 1 || c.at(r.b) != 0 {
			t.Errorf("want one resume at A, none at B: %v; %v", r, c)
		}
	})
}

// (6b) A budget that allows almost nothing: no cut-off, A answers the same
// S forever; the 410 goes to the caller once, within the bound, never a
// second one.
func TestOutsideCutoffBudgetRefusesSearch(t *testing.T) {
	t.Parallel()
	eachVariant(t, srchAll, func(t *testing.T, opts serverOpts) {
		r := srchWatch(t, srchCase{opts: opts, fresh: srchTooOld, route: srchOnlyA,
			budget: &transport.RetryBudget{Ratio: 1e-9, MinPerSecond: 1e-9, Window: time.Second}})
		r.wantBoundedGone(t)
		if len(r.a.resumes()) > 21 {
			t.Errorf("want at most 21 resumes at A: %v", r)
		}
	})
}
