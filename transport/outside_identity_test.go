package transport_test

// Outside tests of how kretry tells apiservers apart by their TLS serving
// certificate when a resume after a lost watch stream is answered 410 `too
// old resource version: X (S)`: one from the lost stream's certificate (the
// apiserver restarted) is searched past on new connections; one from
// another certificate is an apiserver that lacks the point too, and the
// search goes on while another may hold it (behind three, the third),
// until the apiservers it heard from answer six 410s in a row; a shared
// certificate tells them apart by the oldest resourceVersion they name. Written from the contract
// only. The rig's apiservers (outside_rig_test.go), each with its own leaf
// certificate from the rig's CA, sit behind its front, which the test
// routes and cuts. Helpers are prefixed "idt". The resumes at an apiserver
// are counted by the new connections they came on (rig.wantRides): over
// HTTP/2 the search's retry after a 410 first rides the connection it came
// on to retire it, answered 410 at once by the same apiserver, and the
// retry after it dials.

import (
	"sync"
	"testing"
	"time"

	"github.com/kretry/kretry/transport"
)

const (
	idtNS     = "identity"
	idtS      = 300 // the oldest RV a fresh watch cache holds
	idtBound  = 3 * time.Second
	idtSlack  = 1500 * time.Millisecond
	idtMaxNew = 20
	// idtNoSearch bounds the time from the cut to a 410 handed over with
	// no search; the resume counts are the sharp check.
	idtNoSearch = 1500 * time.Millisecond
)

// idtServer is one apiserver: it holds every resume point (serves the
// events after it) unless tooOld is set, then it answers every watch 410
// `too old resource version: <rv> (s)`, or with msg when set.
type idtServer struct {
	*rigServer
	mu     sync.Mutex
	tooOld bool
	s      int
	msg    string
}

func idtNewServer(r *rig, name string, opts serverOpts) *idtServer {
	b := &idtServer{s: idtS}
	b.rigServer = r.server(name, opts, func(q *rigRequest) rigAnswer {
		b.mu.Lock()
		defer b.mu.Unlock()
		switch {
		case q.kind == "list" || !b.tooOld:
			return nil
		case b.msg != "":
			return answerGone(b.msg)
		}
		return answerTooOld(b.s)
	})
	return b
}

func (b *idtServer) setTooOld(v bool) { b.mu.Lock(); b.tooOld = v; b.mu.Unlock() }

// idtSetup is A, B and C (own certificates unless shared) behind a front
// that sends every connection to A, and a Clientset through it (Rand 0.5).
type idtSetup struct {
	*rig
	a, b, c *idtServer
	f       *rigFront
	w       *rigWatch
}

func idtMake(t *testing.T, opts serverOpts, shared bool) *idtSetup {
	s := &idtSetup{rig: newRig(t)}
	optsA, optsB, optsC := opts, opts, opts
	optsA.cert, optsB.cert, optsC.cert = "apiserver-a", "apiserver-b", "apiserver-c"
	if shared {
		optsB.cert, optsC.cert = optsA.cert, optsA.cert
	}
	s.a, s.b, s.c = idtNewServer(s.rig, "A", optsA), idtNewServer(s.rig, "B", optsB), idtNewServer(s.rig, "C", optsC)
	s.f = s.front(s.a.rigServer)
	return s
}

func (s *idtSetup) config() transport.Config {
	return transport.Config{Rand: func() float64 { return 0.5 }}
}

// follow watches from rigInitialRV and, as the event at rv arrives, runs
// then (which reroutes and cuts); it returns when it did.
func (s *idtSetup) follow(rv int, then func()) time.Duration {
	if s.w == nil {
		s.w = s.watch(s.clientset(s.f.url(), s.config(), ""), idtNS, 120)
	}
	s.w.waitHas(rv)
	at := s.clock.elapsed()
	then()
	return at
}

// reroute routes the next new connections, then cuts every live one to cut.
func (s *idtSetup) reroute(route func(n int) rigHop, cut *idtServer) {
	s.f.setRoute(route)
	s.f.cut(cut.rigServer, false)
}

func (s *idtSetup) String() string {
	return "caller saw " + s.w.String() + "; " + s.report()
}

var idtTLSVariants = []variant{
	{"h2/status-410", serverOpts{}},
	{"h2/error-event", serverOpts{event: true}},
	{"http1.1/status-410", serverOpts{http1: true}},
	{"http1.1/error-event", serverOpts{http1: true, event: true}},
}

// TestOutsideIdentity: the stream's connection to A is cut at rigBreakRV and
// new connections are routed as each case says; kretry resumes, searches
// or hands the 410 over by whose certificate answered.
func TestOutsideIdentity(t *testing.T) {
	t.Parallel()
	const whenever = -1 // no bound on the time to the 410
	for _, tc := range []struct {
		name     string
		variants []variant
		shared   bool // one certificate for both backends
		// prepare sets the backends' answers at the cut; route then routes
		// the new connections.
		prepare func(s *idtSetup)
		route   func(s *idtSetup) func(int) rigHop
		resumed bool // the watch resumes; otherwise one 410 reaches the caller
		// a, b, c are the new connections A, B and C must see resumes on:
		// their resumes, but for HTTP/2's rides (rig.wantRides)
		a, b, c int
		within  time.Duration
	}{
		// (1) Fast pace: A leaves the front; every new connection reaches
		// B, which answers 410 with another certificate: B lacks the point
		// too, and the search goes on for an apiserver it has not heard
		// from, until B has answered six 410s in a row, then hands the
		// 410 over within the bound. Before: handed over at once.
		{name: "fast pace: another certificate's 410", variants: idtTLSVariants,
			prepare: func(s *idtSetup) { s.b.setTooOld(true) },
			route:   func(s *idtSetup) func(int) rigHop { return always(hopTo(s.b.rigServer)) },
			a:       0, b: 6, within: idtBound + idtSlack},
		// (1b) Fast pace behind three: A leaves the front; B (restarted
		// before A) lacks the point, C holds it: round robin reaches C on
		// the search's next new connection.
		{name: "fast pace behind three: another certificate's 410, then the third", variants: idtTLSVariants,
			prepare: func(s *idtSetup) { s.b.setTooOld(true) },
			route: func(s *idtSetup) func(int) rigHop {
				return roundRobin(hopTo(s.b.rigServer), hopTo(s.c.rigServer))
			},
			resumed: true, a: 0, b: 1, c: 1},
		// (2) Restart in place: A answers 410 with the same certificate;
		// round robin reaches B, which holds the point.
		{name: "restart in place", variants: idtTLSVariants,
			prepare: func(s *idtSetup) { s.a.setTooOld(true) },
			route:   func(s *idtSetup) func(int) rigHop { return roundRobin(hopTo(s.a.rigServer), hopTo(s.b.rigServer)) },
			resumed: true, a: 1, b: 1},
		// (2b) A rolling upgrade's second restart behind three: A
		// (restarted) and B (restarted before it) both lack the point,
		// and the search reaches C, which holds it.
		{name: "behind three: the stream's restarted, another fresh, the third holds it", variants: idtTLSVariants,
			prepare: func(s *idtSetup) { s.a.setTooOld(true); s.b.setTooOld(true) },
			route: func(s *idtSetup) func(int) rigHop {
				return roundRobin(hopTo(s.a.rigServer), hopTo(s.b.rigServer), hopTo(s.b.rigServer), hopTo(s.c.rigServer))
			},
			resumed: true, a: 1, b: 2, c: 1},
		// (3) The search ends at the sixth 410 in a row once another
		// certificate answered: A (restarted) 410s, and B, fresh too,
		// answers the new connections after it two in three times; once B
		// has answered, A's 410s count too (every apiserver lacks the
		// point). Before, only B's counted: A 3, B 6.
		{name: "the search ends at the sixth 410 in a row once another certificate answered", variants: idtTLSVariants,
			prepare: func(s *idtSetup) { s.a.setTooOld(true); s.b.setTooOld(true) },
			route: func(s *idtSetup) func(int) rigHop {
				return roundRobin(hopTo(s.a.rigServer), hopTo(s.b.rigServer), hopTo(s.b.rigServer))
			},
			a: 3, b: 4, within: idtBound + idtSlack},
		// (6) The search meets A's 410 twice more (same certificate, same
		// S) before B answers: it goes on and resumes at B.
		{name: "the same certificate's 410 again: the search goes on", variants: idtTLSVariants,
			prepare: func(s *idtSetup) { s.a.setTooOld(true) },
			route: func(s *idtSetup) func(int) rigHop {
				a := hopTo(s.a.rigServer)
				return roundRobin(a, a, a, hopTo(s.b.rigServer))
			},
			resumed: true, a: 3, b: 1},
		// (7) A's 410 is not the watch cache's (etcd's compaction
		// message): handed over at once, no search.
		{name: "a compaction's 410 from the same certificate", variants: idtTLSVariants,
			prepare: func(s *idtSetup) {
				s.a.mu.Lock()
				s.a.msg = "The resourceVersion for the provided watch is too old."
				s.a.mu.Unlock()
				s.a.setTooOld(true)
			},
			route: func(s *idtSetup) func(int) rigHop { return roundRobin(hopTo(s.a.rigServer), hopTo(s.b.rigServer)) },
			a:     1, b: 0, within: whenever},
		// (8) Shared certificate: A's 410 (S) then B's with another S: B is
		// another apiserver (its S tells it apart), and the search ends at
		// the sixth 410 in a row after it answered, A's (its own) counting
		// from then on.
		{name: "shared certificate, another S", variants: idtTLSVariants[:2], shared: true,
			prepare: func(s *idtSetup) {
				s.b.mu.Lock()
				s.b.s = idtS + 7
				s.b.mu.Unlock()
				s.a.setTooOld(true)
				s.b.setTooOld(true)
			},
			route: func(s *idtSetup) func(int) rigHop { return roundRobin(hopTo(s.a.rigServer), hopTo(s.b.rigServer)) },
			a:     4, b: 3, within: whenever},
		// (9) The first new connection is accepted and closed (A still
		// coming up) before A's 410 and B: the failed connection does not
		// change whose stream was lost; the search resumes at B.
		{name: "a failed connection, then the same certificate's 410", variants: idtTLSVariants,
			prepare: func(s *idtSetup) { s.a.setTooOld(true) },
			route: func(s *idtSetup) func(int) rigHop {
				return roundRobin(hopEOF, hopTo(s.a.rigServer), hopTo(s.b.rigServer))
			},
			resumed: true, a: 1, b: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			eachVariant(t, tc.variants, func(t *testing.T, opts serverOpts) {
				s := idtMake(t, opts, tc.shared)
				cut := s.follow(rigBreakRV, func() {
					tc.prepare(s)
					s.reroute(tc.route(s), s.a)
				})
				s.w.waitSettled()
				if tc.resumed {
					s.w.wantResumed(t, s.String())
				} else if at := s.w.wantGone(t, rigBreakRV, s.String()); tc.within != whenever && at-cut > tc.within {
					t.Errorf("the 410 took %v after the cut, want at most %v", at-cut, tc.within)
				}
				c := s.wantRides(t)
				if a, b, cc := c.at(s.a.rigServer), c.at(s.b.rigServer), c.at(s.c.rigServer); a != tc.a || b != tc.b || cc != tc.c {
					t.Errorf("resumes on new connections: A %d, B %d, C %d; want A %d, B %d, C %d; %v; %v", a, b, cc, tc.a, tc.b, tc.c, c, s)
				}
			})
		})
	}
}

// TestOutsideIdentityRestartInPlaceInformer: (2) with an informer: one
// LIST, no relist, each object added once.
func TestOutsideIdentityRestartInPlaceInformer(t *testing.T) {
	t.Parallel()
	eachVariant(t, idtTLSVariants[:3], func(t *testing.T, opts serverOpts) {
		s := idtMake(t, opts, false)
		inf := s.informer(s.clientset(s.f.url(), s.config(), ""), idtNS)
		inf.waitObjects(rigBreakRV - rigInitialRV)
		s.a.setTooOld(true)
		s.reroute(roundRobin(hopTo(s.a.rigServer), hopTo(s.b.rigServer)), s.a)
		inf.waitObjects(rigLastRV - rigInitialRV)
		inf.wantAddedOnce(t, rigLastRV-rigInitialRV)
		if lists := len(s.a.requests("list")) + len(s.b.requests("list")); lists != 1 {
			t.Errorf("want one LIST (no relist): %d LISTs; A resumes %d, B resumes %d", lists, len(s.a.resumes()), len(s.b.resumes()))
		}
	})
}

// (4) Shared certificate and plain HTTP: the old search, bounded by 3 s and
// 20 new connections, then one 410.
func TestOutsideIdentitySharedCertSearches(t *testing.T) {
	t.Parallel()
	vs := append([]variant{{"plain-http/status-410", serverOpts{plain: true}}}, idtTLSVariants...)
	eachVariant(t, vs, func(t *testing.T, opts serverOpts) {
		s := idtMake(t, opts, true)
		s.b.setTooOld(true)
		cut := s.follow(rigBreakRV, func() { s.reroute(always(hopTo(s.b.rigServer)), s.a) })
		s.w.waitSettled()
		d := s.w.wantGone(t, rigBreakRV, s.String()) - cut
		c := s.wantRides(t)
		t.Logf("search: %d resumes at B on %d new connections, 410 %v after the cut", len(s.b.resumes()), c.at(s.b.rigServer), d)
		if n := c.at(s.b.rigServer); n < 2 || n > idtMaxNew+1 {
			t.Errorf("want a search (resumes at B on 2..%d new connections): %d; %v; %v", idtMaxNew+1, n, c, s)
		}
		if d > idtBound+idtSlack {
			t.Errorf("the 410 took %v after the cut, want at most %v", d, idtBound)
		}
	})
}

// (5) The stream broke on A and resumed on B; then it breaks on B and the
// resume reaches A, which answers 410 (A's certificate is not the lost
// stream's, B's): another apiserver that lacks the point, heard from; the
// search ends at its sixth 410 in a row, within the bound. Before: handed
// over at once.
func TestOutsideIdentityLostStreamIsTheLatest(t *testing.T) {
	t.Parallel()
	eachVariant(t, idtTLSVariants, func(t *testing.T, opts serverOpts) {
		s := idtMake(t, opts, false)
		s.follow(rigBreakRV, func() { s.reroute(always(hopTo(s.b.rigServer)), s.a) })
		cut := s.follow(rigLastRV, func() {
			s.a.setTooOld(true)
			s.reroute(always(hopTo(s.a.rigServer)), s.b)
		})
		s.w.waitClosed()
		d := s.w.wantGone(t, rigLastRV, s.String()) - cut
		if c := s.wantRides(t); c.at(s.a.rigServer) != 6 || len(s.b.resumes()) != 1 {
			t.Errorf("want one resume at B, then six new connections at A: %v; %v", c, s)
		}
		if d > idtBound+idtSlack {
			t.Errorf("the 410 took %v after the second cut, want at most %v", d, idtBound)
		}
	})
}
