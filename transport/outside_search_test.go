package transport_test

// Outside tests of the search for an apiserver that holds a watch's resume
// point after a resume was answered 410 `too old resource version: X (S)`
// (docs/behaviour.md, "Resume answered 410"), written from the docs only.
// A real kubernetes.Clientset (and an informer) goes through the rig's
// front (outside_rig_test.go), which routes every NEW connection to a fresh
// apiserver A (answers resumes 410) or to B (holds the resume point), or
// refuses, accepts and closes, or accepts and hangs. A and B share one
// certificate, so kretry cannot tell them apart by it. Helpers are prefixed
// "srch". Times are the rig's virtual ones; counts are preferred to them.
//
// The resumes at an apiserver are counted by the new connections they came
// on (rig.wantRides, which checks every resume of a run): over HTTP/1.1
// every resume is on a new connection; over HTTP/2 the search's retry
// after a 410 first rides the connection that 410 came on to retire it
// (answered 410 at once by the same apiserver, and counted by the Observer
// as an expired-resume retry like any), and the retry after it dials.

import (
	"fmt"
	"testing"
	"time"

	"github.com/kretry/kretry/transport"
)

const (
	srchNS        = "search"
	srchS         = 200 // the oldest RV a fresh watch cache holds
	srchBound     = 3 * time.Second
	srchSlack     = 1500 * time.Millisecond
	srchSlow      = 3200 * time.Millisecond // how long the front holds srchSlowA
	srchCompacted = "The resourceVersion for the provided watch is too old."
)

// srchKind is where the front sends a new connection after the loss.
type srchKind int

const (
	srchToA   srchKind = iota
	srchToB            // the apiserver that holds the resume point
	srchSlowA          // A, reached only after srchSlow
	srchEOF            // accepted, closed at once
	srchHang           // accepted, never answered
)

// srchCase is one run: what A answers a watch q with (nil: what B would),
// where the n-th new connection after the loss goes (since: the
// time since the loss), how long nothing listens after it, how long A sits
// behind the balancer's own 503 after it, and the client's retry budget.
type srchCase struct {
	opts        serverOpts
	fresh       func(q *rigRequest) rigAnswer
	route       func(n int, since time.Duration) srchKind
	refused     time.Duration
	balancer503 time.Duration
	budget      *transport.RetryBudget
}

// srchRun is a run's rig: A, B, the front (every connection to B until
// the loss), the watch and when its connection was lost.
type srchRun struct {
	*rig
	a, b  *rigServer
	f     *rigFront
	w     *rigWatch
	broke time.Duration
}

func srchTooOld(*rigRequest) rigAnswer { return answerTooOld(srchS) }

// srchSetup builds the run's rig for c: A, B and the front.
func srchSetup(t *testing.T, c srchCase) *srchRun {
	run := &srchRun{rig: newRig(t)}
	opts := c.opts
	if !opts.plain {
		opts.cert = "apiserver"
	}
	run.a = run.server("A", opts, func(q *rigRequest) rigAnswer {
		switch {
		case q.kind != "watch":
		case c.balancer503 > 0 && run.since() < c.balancer503:
			return answerBalancer503
		case c.fresh != nil:
			return c.fresh(q)
		}
		return nil
	})
	run.b = run.server("B", opts, nil)
	run.f = run.front(run.b)
	return run
}

// since is the time since the loss.
func (run *srchRun) since() time.Duration { return run.clock.elapsed() - run.broke }

// lose cuts the watch's connection and routes the new ones by c.
func (run *srchRun) lose(c srchCase) {
	run.broke = run.clock.elapsed()
	run.f.lose(func(n int) rigHop {
		switch c.route(n, run.since()) {
		case srchToA:
			return hopTo(run.a)
		case srchSlowA:
			return hopSlow(run.a, srchSlow)
		case srchEOF:
			return hopEOF
		case srchHang:
			return hopHang
		}
		return hopTo(run.b)
	}, c.refused)
}

// config is the client's: c's budget, Rand 0.5.
func (run *srchRun) config(c srchCase) transport.Config {
	// Rand 0.5: every jittered wait and hold is the middle of its range.
	kc := transport.Config{Rand: func() float64 { return 0.5 }}
	if c.budget != nil {
		kc.RetryBudget = *c.budget
	}
	return kc
}

// srchWatch runs a typed watch through the case: two events, the loss,
// then everything the caller sees until its watch ends, or it has had
// every event and its timeoutSeconds end it.
func srchWatch(t *testing.T, c srchCase) *srchRun {
	run := srchSetup(t, c)
	run.w = run.watch(run.clientset(run.f.url(), run.config(c), ""), srchNS, 120)
	run.w.waitHas(rigBreakRV)
	run.lose(c)
	run.w.waitSettled()
	return run
}

func (run *srchRun) String() string {
	return fmt.Sprintf("caller saw %v; A resumes %d, B resumes %d, routes after break %v, expired-resume retries %d; %s",
		run.w, len(run.a.resumes()), len(run.b.resumes()), run.f.routed(), run.obs.expired(), run.obs)
}

func (run *srchRun) wantResumed(t *testing.T) {
	t.Helper()
	run.w.wantResumed(t, run.String())
}

// wantGone: 101, 102, then one ERROR 410, then the end; it returns its
// time since the loss.
func (run *srchRun) wantGone(t *testing.T) time.Duration {
	t.Helper()
	return run.w.wantGone(t, rigBreakRV, run.String())
}

// wantBoundedGone checks one 410 within the bound of the first 410 at A.
func (run *srchRun) wantBoundedGone(t *testing.T) {
	t.Helper()
	at := run.wantGone(t)
	if res := run.a.resumes(); len(res) > 0 && at != 0 && at-res[0].at > srchBound+srchSlack {
		t.Errorf("410 delivered %v after the first 410, bound %v+%v: %v", at-res[0].at, srchBound, srchSlack, run)
	}
}

var (
	srchAll = []variant{
		{"http1/status-410", serverOpts{plain: true}},
		{"http1/error-event", serverOpts{plain: true, event: true}},
		{"tls-h2/status-410", serverOpts{}},
		{"tls-h2/error-event", serverOpts{event: true}},
	}
	// srchSome is three of them, for the cases that cost more.
	srchSome = []variant{srchAll[0], srchAll[1], srchAll[3]}
)

// srchAThenB: the first connection to A, the others to B.
func srchAThenB(n int, _ time.Duration) srchKind {
	if n == 1 {
		return srchToA
	}
	return srchToB
}

func srchOnlyA(int, time.Duration) srchKind { return srchToA }

// (1) The first reopen reaches A through a balancer that took 3.2 s (no
// failure before it): the search is made, its retry reaches B (over HTTP/2
// the one after the ride of A's connection).
func TestOutsideSearchSlowFirstAnswer(t *testing.T) {
	t.Parallel()
	eachVariant(t, srchAll, func(t *testing.T, opts serverOpts) {
		r := srchWatch(t, srchCase{opts: opts, fresh: srchTooOld, route: func(n int, _ time.Duration) srchKind {
			if n == 1 {
				return srchSlowA
			}
			return srchToB
		}})
		r.wantResumed(t)
		if c := r.wantRides(t); c.at(r.a) != 1 || c.at(r.b) != 1 || len(r.f.routed()) != 2 {
			t.Errorf("want one resume at A, one at B, on two new connections: %v; %v", r, c)
		}
	})
}

// (2) Refused for 4 s (nothing listening), then only a fresh A: the client
// was cut off from every apiserver, the 410 is handed over, no search.
func TestOutsideSearchRefusedThenFresh(t *testing.T) {
	t.Parallel()
	eachVariant(t, srchAll, func(t *testing.T, opts serverOpts) {
		r := srchWatch(t, srchCase{opts: opts, fresh: srchTooOld, refused: 4 * time.Second, route: srchOnlyA})
		r.wantGone(t)
		if len(r.a.resumes()) != 1 || r.obs.expired() != 0 {
			t.Errorf("want exactly one resume at A and no search: %v", r)
		}
	})
}

// (2b) Control: refused for only ~1 s, then A then B: the search is made.
func TestOutsideSearchRefusedBriefly(t *testing.T) {
	t.Parallel()
	eachVariant(t, srchAll, func(t *testing.T, opts serverOpts) {
		r := srchWatch(t, srchCase{opts: opts, fresh: srchTooOld, refused: time.Second, route: srchAThenB})
		r.wantResumed(t)
		if c := r.wantRides(t); c.at(r.a) != 1 || c.at(r.b) != 1 {
			t.Errorf("want one resume at A, then one at B, each on a new connection: %v; %v", r, c)
		}
	})
}

// srchAfter: first for the time d after the loss, then next(i) for the
// i-th connection after it.
func srchAfter(d time.Duration, first srchKind, next func(i int) srchKind) func(int, time.Duration) srchKind {
	i := 0 // the front asks one connection at a time
	return func(_ int, since time.Duration) srchKind {
		if since < d {
			return first
		}
		i++
		return next(i)
	}
}

// srchEOFThen: the balancer accepts and closes for d, then one connection
// to A, then B.
func srchEOFThen(d time.Duration) func(int, time.Duration) srchKind {
	return srchAfter(d, srchEOF, func(i int) srchKind { return srchAThenB(i, 0) })
}

// (3) Reopens a balancer accepts and closes (EOF) for ~4 s or ~11 s, then A,
// then B: the client was cut off (a reopening failed and the 410 came 3 s or
// more after the loss), but through something that accepted its reopenings,
// so the short search is made (as behind a balancer that tried the stopped
// apiserver before the restarted one) and reaches B. Over HTTP/1.1 such a
// reopen may fail with net/http's "server closed idle connection", which
// is retried like any connection failure (it ended the watch cleanly once).
func TestOutsideSearchAcceptedThenEOF(t *testing.T) {
	t.Parallel()
	for _, eof := range []time.Duration{4 * time.Second, 11 * time.Second} {
		t.Run(eof.String(), func(t *testing.T) {
			t.Parallel()
			eachVariant(t, srchAll, func(t *testing.T, opts serverOpts) {
				r := srchWatch(t, srchCase{opts: opts, fresh: srchTooOld, route: srchEOFThen(eof)})
				r.wantResumed(t)
				if c := r.wantRides(t); c.at(r.a) != 1 || c.at(r.b) != 1 {
					t.Errorf("want one resume at A, then one at B, each on a new connection: %v; %v", r, c)
				}
			})
		})
	}
}

// (4) A answers the same S on its first 25 connections (no B reachable):
// at most 20 new connections for the search, each retry on its own
// connection (over HTTP/2, but for the ride of the connection the last 410
// came on), then the 410, within the bound.
func TestOutsideSearchSameSBoundsConnections(t *testing.T) {
	t.Parallel()
	eachVariant(t, srchAll, func(t *testing.T, opts serverOpts) {
		r := srchWatch(t, srchCase{opts: opts, route: srchOnlyA, fresh: func(q *rigRequest) rigAnswer {
			if q.conn <= 25 {
				return answerTooOld(srchS)
			}
			return nil
		}})
		r.wantBoundedGone(t)
		if c := r.wantRides(t); c.at(r.a) < 2 || c.at(r.a) > 21 || len(r.f.routed()) > 21 {
			t.Errorf("want resumes at A on 2..21 new connections, at most 21 routed: %v; %v", r, c)
		}
	})
}

// (5) The second 410, on the search's new connection, names another S:
// another apiserver lacks the point too (behind three, the one restarted
// before the stream's), and the search goes on; the third connection holds
// it, and the events go on with no 410 for the caller. (Over HTTP/2 the
// ride of the first connection is answered with the first S, and is not
// the search's new connection.) Before, the other S ended the search at
// once, and a client behind three apiservers relisted though the third
// held its resume point.
func TestOutsideSearchDifferentS(t *testing.T) {
	t.Parallel()
	eachVariant(t, srchAll, func(t *testing.T, opts serverOpts) {
		// The next connection answers another S, the one after serves the
		// watch.
		r := srchWatch(t, srchCase{opts: opts, route: srchOnlyA, fresh: srchFirstThen(func(n int) rigAnswer {
			if n == 1 {
				return answerTooOld(srchS + 1)
			}
			return nil
		})})
		r.wantResumed(t)
		if c := r.wantRides(t); c.at(r.a) != 3 || c.searched != 2 {
			t.Errorf("want resumes at A on exactly three new connections, two search retries: %v; %v", r, c)
		}
	})
}

// (5b) Behind two apiservers that both lack the point, each naming its own
// S and told apart by it (plain HTTP: no certificate), the search ends when
// the ones it heard from answer six 410s in a row (the stream's own
// apiserver's aside): the 410 is then the caller's, within the bound. Over
// TLS the one certificate says both S came from the stream's own
// apiserver, restarted: searched as in (4).
func TestOutsideSearchTwoSsEnd(t *testing.T) {
	t.Parallel()
	eachVariant(t, srchAll, func(t *testing.T, opts serverOpts) {
		r := srchWatch(t, srchCase{opts: opts, route: srchOnlyA, fresh: srchFirstThen(func(int) rigAnswer {
			return answerTooOld(srchS + 1)
		})})
		r.wantBoundedGone(t)
		c := r.wantRides(t)
		switch {
		case opts.plain && (c.at(r.a) != 7 || c.searched != 6):
			t.Errorf("want resumes at A on seven new connections (the first S, then six of the other), six search retries: %v; %v", r, c)
		case !opts.plain && (c.at(r.a) < 2 || c.at(r.a) > 21):
			t.Errorf("want resumes at A on 2..21 new connections: %v; %v", r, c)
		}
	})
}

// srchFirstThen answers the connection of the resume after the loss (its
// ride too) with S, and the n-th connection after it with then(n).
func srchFirstThen(then func(n int) rigAnswer) func(*rigRequest) rigAnswer {
	first := 0
	return func(q *rigRequest) rigAnswer {
		if first == 0 || q.conn == first {
			first = q.conn
			return answerTooOld(srchS)
		}
		return then(q.conn - first)
	}
}

// (6) The search's retry (over HTTP/2 the one after the ride of A's
// connection) is accepted and never answered: the 410 is handed over
// within the bound of the first 410.
func TestOutsideSearchSilentRetry(t *testing.T) {
	t.Parallel()
	eachVariant(t, srchAll, func(t *testing.T, opts serverOpts) {
		r := srchWatch(t, srchCase{opts: opts, fresh: srchTooOld, route: func(n int, _ time.Duration) srchKind {
			switch n {
			case 1:
				return srchToA
			case 2:
				return srchHang
			}
			return srchToB
		}})
		r.wantBoundedGone(t)
		if c := r.wantRides(t); c.at(r.a) != 1 || len(r.f.routed()) < 2 {
			t.Errorf("want one resume at A, then the silent retry: %v; %v", r, c)
		}
	})
}

// (7) etcd's compaction message, not the watch cache's: at once, no search.
func TestOutsideSearchCompactionMessage(t *testing.T) {
	t.Parallel()
	eachVariant(t, srchAll, func(t *testing.T, opts serverOpts) {
		r := srchWatch(t, srchCase{opts: opts, route: srchAThenB,
			fresh: func(*rigRequest) rigAnswer { return answerGone(srchCompacted) }})
		at := r.wantGone(t)
		res := r.a.resumes()
		if len(res) != 1 || len(r.b.resumes()) != 0 || r.obs.expired() != 0 {
			t.Errorf("want one resume at A, none at B, no search: %v", r)
		}
		if len(res) == 1 && at != 0 && at-res[0].at > srchSlack {
			t.Errorf("410 delivered %v after it came, want at once (<%v)", at-res[0].at, srchSlack)
		}
		if ev := r.w.events(); len(ev) > 0 && ev[len(ev)-1].msg != srchCompacted {
			t.Errorf("want the server's own message, got %q", ev[len(ev)-1].msg)
		}
	})
}

// (1) through an informer: the slow first answer from A, then B; the
// informer never relists and gets every object once.
func TestOutsideSearchInformerSlowFirstAnswer(t *testing.T) {
	t.Parallel()
	for _, tls := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", tls), func(t *testing.T) {
			t.Parallel()
			c := srchCase{opts: serverOpts{plain: !tls, event: true}, fresh: srchTooOld, route: func(n int, _ time.Duration) srchKind {
				if n == 1 {
					return srchSlowA
				}
				return srchToB
			}}
			r := srchSetup(t, c)
			inf := r.informer(r.clientset(r.f.url(), r.config(c), ""), srchNS)
			inf.waitObjects(rigBreakRV - rigInitialRV)
			r.lose(c)
			inf.waitObjects(rigLastRV - rigInitialRV)
			inf.wantAddedOnce(t, rigLastRV-rigInitialRV)
			if lists := len(r.a.requests("list")) + len(r.b.requests("list")); lists != 1 {
				t.Errorf("want one LIST: %d LISTs; A resumes %d, B resumes %d", lists, len(r.a.resumes()), len(r.b.resumes()))
			}
		})
	}
}
