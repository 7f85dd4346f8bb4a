package transport_test

// Outside tests of the "cut-off" rule of the 410 search (docs/behaviour.md,
// "Resume answered 410"): a client one of whose reopenings failed, answered
// 410 3 s or more after the lost connection, searches on at most 6 new
// connections when something accepted a failed reopening, and not at all
// when every failed reopening was refused. Written from the docs only,
// through a real Clientset and srchFront (outside_search_test.go).

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/kretry/kretry/transport"
)

const cutMaxShort = 6 // the short search's new connections

// cutObserver records every retry and give-up, for the report of a run.
type cutObserver struct {
	mu      sync.Mutex
	retries []transport.RetryEvent
	giveups []transport.GiveUpEvent
	budget  int
}

func (o *cutObserver) ObserveAttempt(transport.AttemptEvent) {}
func (o *cutObserver) ObserveRetry(e transport.RetryEvent) {
	o.mu.Lock()
	o.retries = append(o.retries, e)
	o.mu.Unlock()
}
func (o *cutObserver) ObserveGiveUp(e transport.GiveUpEvent) {
	o.mu.Lock()
	o.giveups = append(o.giveups, e)
	o.mu.Unlock()
}
func (o *cutObserver) ObserveBudgetRefusal(transport.BudgetEvent) {
	o.mu.Lock()
	o.budget++
	o.mu.Unlock()
}

func (o *cutObserver) expired() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, e := range o.retries {
		if e.Reason == transport.ReasonExpiredResume {
			n++
		}
	}
	return n
}

func (o *cutObserver) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := "retries ["
	for _, e := range o.retries {
		s += fmt.Sprintf(" %s/%d", e.Reason, e.Code)
	}
	s += " ] give-ups ["
	for _, g := range o.giveups {
		s += fmt.Sprintf(" %s/%s after %d attempts, %.2fs", g.Reason, g.Verb, g.Attempts, g.Elapsed.Seconds())
	}
	return s + fmt.Sprintf(" ] budget refusals %d", o.budget)
}

// cutCase is a srchCase whose fresh apiserver A may sit behind wrapA (the
// balancer's own answers, e.g. its 503), and a budget for the client.
type cutCase struct {
	srchCase
	wrapA  func(f *srchFront, a http.Handler) http.Handler
	budget *transport.RetryBudget
}

type cutRun struct {
	*srchRun
	cobs *cutObserver
}

func (r *cutRun) String() string { return r.srchRun.String() + "; " + r.cobs.String() }

// cutWatch is srchWatch with cutCase's extras and the full observer.
func cutWatch(t *testing.T, c cutCase) *cutRun {
	a := &srchBackend{fresh: c.fresh, event: c.event}
	b := srchNewBackend(c.tls, nil, c.event)
	var f *srchFront
	var fmu sync.Mutex
	var h http.Handler = a
	if c.wrapA != nil {
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmu.Lock()
			ff := f
			fmu.Unlock()
			c.wrapA(ff, a).ServeHTTP(w, r)
		})
	}
	a.srv = httptest.NewUnstartedServer(h)
	if c.tls {
		a.srv.EnableHTTP2 = true
		a.srv.StartTLS()
	} else {
		a.srv.Start()
	}
	fmu.Lock()
	f = srchNewFront(t, a, b, c.route)
	fmu.Unlock()
	f.slow = c.slow
	run := &cutRun{srchRun: &srchRun{a: a, b: b, obs: &srchObserver{}}, cobs: &cutObserver{}}
	defer func() {
		f.stop()
		a.srv.Close()
		b.srv.Close()
		run.after = f.afterBreak()
	}()
	srchFollow(t, srchClientsetWith(t, f, c.tls, transport.JoinObservers(run.obs, run.cobs), c.budget), f, c.refused, run.srchRun, 40*time.Second)
	return run
}

// cutEOFThen: accepted and closed for d, then next(i) for the i-th
// connection after (1-based).
func cutEOFThen(d time.Duration, next func(i int) srchKind) func(int, time.Duration) srchKind {
	return cutEOFThenKind(d, srchEOF, next)
}

func cutAThenB(i int) srchKind {
	if i == 1 {
		return srchToA
	}
	return srchToB
}

// wantBoundedGone checks one 410 within the bound of the first 410 at A.
func (r *cutRun) wantBoundedGone(t *testing.T) {
	t.Helper()
	at := r.wantGone(t)
	res := r.a.resumes()
	if len(res) > 0 && !at.IsZero() && at.Sub(res[0].at) > srchBound+srchSlack {
		t.Errorf("410 delivered %v after the first 410, bound %v+%v: %v", at.Sub(res[0].at), srchBound, srchSlack, r)
	}
}

// (1) Accepted and closed for 3.5 s, then A, then B: cut off through
// something that accepted, so the short search is made and reaches B.
func TestOutsideCutoffEOFThenFreshThenHolder(t *testing.T) {
	t.Parallel()
	srchVariants(t, func(t *testing.T, tls, event bool) {
		r := cutWatch(t, cutCase{srchCase: srchCase{tls: tls, event: event, fresh: srchAlwaysTooOld,
			route: cutEOFThen(3500*time.Millisecond, cutAThenB)}})
		r.wantResumed(t)
		if len(r.a.resumes()) != 1 || len(r.b.resumes()) != 1 || r.cobs.expired() < 1 || r.cobs.expired() > cutMaxShort {
			t.Errorf("want one resume at A, one at B, 1..%d expired-resume retries: %v", cutMaxShort, r)
		}
	})
}

// (2) Accepted and closed for 4 s, then only A (same S): one 410 within
// the bound, after at most 6 search retries, each on a new connection.
func TestOutsideCutoffEOFThenOnlyFresh(t *testing.T) {
	t.Parallel()
	srchVariants(t, func(t *testing.T, tls, event bool) {
		r := cutWatch(t, cutCase{srchCase: srchCase{tls: tls, event: event, fresh: srchAlwaysTooOld,
			route: cutEOFThen(4*time.Second, func(int) srchKind { return srchToA })}})
		r.wantBoundedGone(t)
		n := r.cobs.expired()
		if n < 1 || n > cutMaxShort || len(r.a.resumes()) != n+1 {
			t.Errorf("want 1..%d expired-resume retries and one more resume at A than retries: %v", cutMaxShort, r)
		}
		remotes := map[string]bool{}
		for _, q := range r.a.resumes() {
			remotes[q.remote] = true
		}
		if len(remotes) != len(r.a.resumes()) {
			t.Errorf("want every resume on a new connection: %d resumes on %d connections", len(r.a.resumes()), len(remotes))
		}
	})
}

// (3) Refused for 4 s, then only A: one 410, no search.
func TestOutsideCutoffRefusedThenOnlyFresh(t *testing.T) {
	t.Parallel()
	cutVariants(t, func(t *testing.T, tls, event bool) {
		r := cutWatch(t, cutCase{srchCase: srchCase{tls: tls, event: event, fresh: srchAlwaysTooOld, refused: 4 * time.Second,
			route: func(int, time.Duration) srchKind { return srchToA }}})
		r.wantBoundedGone(t)
		if len(r.a.resumes()) != 1 || r.cobs.expired() != 0 {
			t.Errorf("want exactly one resume at A, no expired-resume retry: %v", r)
		}
	})
}

// (4) Refused for 4 s, then one accepted-and-closed, then A and B in
// turn: one failed reopening was accepted, so the short search is made.
func TestOutsideCutoffRefusedThenEOFThenSearch(t *testing.T) {
	t.Parallel()
	cutVariants(t, func(t *testing.T, tls, event bool) {
		r := cutWatch(t, cutCase{srchCase: srchCase{tls: tls, event: event, fresh: srchAlwaysTooOld, refused: 4 * time.Second,
			route: func(n int, _ time.Duration) srchKind {
				switch {
				case n == 1:
					return srchEOF
				case n%2 == 0:
					return srchToA
				}
				return srchToB
			}}})
		r.wantResumed(t)
		if len(r.a.resumes()) != 1 || len(r.b.resumes()) != 1 || r.cobs.expired() != 1 {
			t.Errorf("want one resume at A, one at B, one expired-resume retry: %v", r)
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
	srchVariants(t, func(t *testing.T, tls, event bool) {
		r := cutWatch(t, cutCase{srchCase: srchCase{tls: tls, event: event, fresh: srchAlwaysTooOld,
			route: cutEOFThenKind(d, srchToA, cutAThenB)},
			wrapA: cut503For(d)})
		r.wantResumed(t)
		n := r.cobs.expired()
		if len(r.a.resumes()) < 1 || len(r.b.resumes()) != 1 || n < 1 || n > cutMaxShort {
			t.Errorf("want resumes at A, one at B, 1..%d expired-resume retries: %v", cutMaxShort, r)
		}
	})
}

// cutEOFThenKind: first for d, then next(i) for the i-th connection after.
func cutEOFThenKind(d time.Duration, first srchKind, next func(i int) srchKind) func(int, time.Duration) srchKind {
	var mu sync.Mutex
	i := 0
	return func(_ int, since time.Duration) srchKind {
		if since < d {
			return first
		}
		mu.Lock()
		defer mu.Unlock()
		i++
		return next(i)
	}
}

// cut503For: the balancer's own 503 for d after the loss.
func cut503For(d time.Duration) func(*srchFront, http.Handler) http.Handler {
	return func(f *srchFront, a http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			f.mu.Lock()
			broke := f.broke
			f.mu.Unlock()
			if !broke.IsZero() && time.Since(broke) < d {
				w.Header().Set("Content-Type", "text/plain")
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprintln(w, "no server is available to handle this request")
				return
			}
			a.ServeHTTP(w, r)
		})
	}
}

// (6a) Cut off through a balancer (EOF for 4 s), then A, then a search
// retry that is accepted and never answered: the 410 still reaches the
// caller once, within the bound of the first 410.
func TestOutsideCutoffSilentShortRetry(t *testing.T) {
	t.Parallel()
	srchVariants(t, func(t *testing.T, tls, event bool) {
		r := cutWatch(t, cutCase{srchCase: srchCase{tls: tls, event: event, fresh: srchAlwaysTooOld,
			route: cutEOFThen(4*time.Second, func(i int) srchKind {
				if i == 1 {
					return srchToA
				}
				return srchHang
			})}})
		r.wantBoundedGone(t)
		if len(r.a.resumes()) != 1 || len(r.b.resumes()) != 0 {
			t.Errorf("want one resume at A, none at B: %v", r)
		}
	})
}

// (6b) A budget that allows almost nothing: no cut-off, A answers the same
// S forever; the 410 goes to the caller once, within the bound, never a
// second one.
func TestOutsideCutoffBudgetRefusesSearch(t *testing.T) {
	t.Parallel()
	srchVariants(t, func(t *testing.T, tls, event bool) {
		r := cutWatch(t, cutCase{srchCase: srchCase{tls: tls, event: event, fresh: srchAlwaysTooOld,
			route: func(int, time.Duration) srchKind { return srchToA }},
			budget: &transport.RetryBudget{Ratio: 1e-9, MinPerSecond: 1e-9, Window: time.Second}})
		r.wantBoundedGone(t)
		if len(r.a.resumes()) > 21 {
			t.Errorf("want at most 21 resumes at A: %v", r)
		}
	})
}

// cutVariants is srchVariants for the long (refused) cases, to keep the
// file's time down: http1 with the 410 answer, tls-h2 with the ERROR event,
// and http1 with the ERROR event.
func cutVariants(t *testing.T, f func(t *testing.T, tls, event bool)) {
	for _, v := range []struct {
		name       string
		tls, event bool
	}{{"http1/status-410", false, false}, {"http1/error-event", false, true}, {"tls-h2/error-event", true, true}} {
		t.Run(v.name, func(t *testing.T) { t.Parallel(); f(t, v.tls, v.event) })
	}
}
