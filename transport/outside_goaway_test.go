package transport_test

// Outside tests of the first reopen after an HTTP/2 GOAWAY (docs/behaviour.md,
// "WATCH stream breaks" and "Resume answered 410"): an established watch
// that had delivered events and is broken by the server's GOAWAY (an
// apiserver shutting down gracefully) reopens after a draw from [0, 3 s);
// every other break still reopens at once; the 410 search's cut-off counts
// from the end of that spread; timeoutSeconds still bounds it all. Written
// from the docs and `go doc` only, through a real kubernetes.Clientset over
// TLS with HTTP/2 against the rig's apiservers (outside_rig_test.go), which
// share one certificate, behind its front. Helpers are prefixed "ga".
//
// The GOAWAY is a real one (rigServer.goAway): net/http's HTTP/2 server
// sends it on every connection as it shuts down, and once the client has
// read it the connections close under the watches still open. The spread
// is waited on the rig's clock, kretry's Config.Clock: with Config.Rand
// pinned, every wait and every reopen's time is exact.

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kretry/kretry/transport"
)

const (
	gaNS     = "goaway"
	gaS      = 200 // the oldest RV a restarted apiserver's watch cache holds
	gaSpread = 3 * time.Second
)

// gaRig is an apiserver A that serves the watch, another B that holds the
// resume point, a front that routes to A until told otherwise, and a
// Clientset through kretry with the given Rand (nil: the default jitter).
type gaRig struct {
	*rig
	a, b *rigServer
	f    *rigFront
	cs   *kubernetes.Clientset
}

func gaNewRig(t *testing.T, rand func() float64) *gaRig {
	r := &gaRig{rig: newRig(t)}
	r.a, r.b = r.gaServer("A", false), r.gaServer("B", false)
	r.f = r.front(r.a)
	r.cs = r.clientset(r.f.url(), transport.Config{Rand: rand}, "")
	return r
}

// gaServer is an apiserver that speaks HTTP/2 only; a fresh one answers
// every watch 410 `too old resource version: X (gaS)`.
func (r *gaRig) gaServer(name string, fresh bool) *rigServer {
	return r.server(name, serverOpts{cert: "apiserver"}, func(q *rigRequest) rigAnswer {
		switch {
		case q.proto != 2:
			return answerStatus(http.StatusHTTPVersionNotSupported, metav1.StatusReasonBadRequest, "want HTTP/2")
		case fresh:
			return answerTooOld(gaS)
		}
		return nil
	})
}

func gaRand(v float64) func() float64 { return func() float64 { return v } }

// established starts a watch and waits for the events before the break.
func (r *gaRig) established(t *testing.T, timeoutSeconds int64) *rigWatch {
	t.Helper()
	w := r.watch(r.cs, gaNS, timeoutSeconds)
	w.waitHas(rigBreakRV)
	return w
}

// report says when each apiserver was asked to resume, from the break.
func (r *gaRig) report(broke time.Duration, w *rigWatch, servers ...*rigServer) string {
	s := ""
	for _, a := range append([]*rigServer{r.b}, servers...) {
		var rs []string
		for _, q := range a.resumes() {
			rs = append(rs, fmt.Sprintf("rv=%s timeoutSeconds=%s at +%v", q.rv(), q.timeout(), q.at-broke))
		}
		s += fmt.Sprintf("resumes at %s %v; ", a.name, rs)
	}
	if w != nil {
		s += "caller " + w.String() + "; "
	}
	return s + r.obs.String()
}

// secondsLeft is timeoutSeconds as kretry asks for what remains: rounded up.
func secondsLeft(d time.Duration) string {
	return strconv.Itoa(int((d + time.Second - 1) / time.Second))
}

// (1) A GOAWAY break resumes at the last event's resourceVersion, with
// nothing lost or duplicated, and the reopen reaches the other apiserver
// after the draw from [0, 3 s) (Config.Rand is "uniform jitter in [0,1)"):
// exactly Rand·3 s when it is pinned, with what remains of timeoutSeconds.
func TestOutsideGoAwayResumesAtLastRV(t *testing.T) {
	t.Parallel()
	for _, v := range []struct {
		name string
		rand func() float64
		draw float64 // -1: the default jitter
	}{{"default-rand", nil, -1}, {"rand=0.99", gaRand(0.99), 0.99}, {"rand=0", gaRand(0), 0}} {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			r := gaNewRig(t, v.rand)
			w := r.established(t, 60)
			r.f.setRoute(always(hopTo(r.b)))
			broke := r.a.goAway()
			w.waitHas(rigLastRV)
			w.end()
			rep := r.report(broke, w)
			w.wantEvents(t, rigInitialRV+1, rigLastRV, rep)
			res := r.b.resumes()
			if len(res) != 1 {
				t.Fatalf("want exactly one resume at B: %s", rep)
			}
			delay := res[0].at - broke
			if res[0].rv() != strconv.Itoa(rigBreakRV) {
				t.Errorf("want the resume at rv %d: %s", rigBreakRV, rep)
			}
			if want := secondsLeft(60*time.Second - delay); res[0].timeout() != want {
				t.Errorf("want the resume to carry what remains of timeoutSeconds=60, %s: %s", want, rep)
			}
			switch want := time.Duration(v.draw * float64(gaSpread)); {
			case v.draw < 0 && (delay < 0 || delay >= gaSpread):
				t.Errorf("reopen %v after the GOAWAY break, want a draw from [0, %v): %s", delay, gaSpread, rep)
			case v.draw >= 0 && delay != want:
				t.Errorf("with Rand %v the reopen came %v after the GOAWAY break, want the draw %v: %s", v.draw, delay, want, rep)
			}
			t.Logf("reopen %v after the break; %s", delay, rep)
		})
	}
}

// (2) Every other break of a stream that had delivered events reopens at
// once, even with Rand pinned where a GOAWAY's draw would wait ~3 s: a TCP
// reset, a FIN (unexpected EOF), an HTTP/2 stream reset (RST_STREAM), and
// a clean end before timeoutSeconds.
func TestOutsideGoAwayOtherBreaksAtOnce(t *testing.T) {
	t.Parallel()
	for _, v := range []struct {
		name string
		cut  func(r *gaRig)
	}{
		{"tcp-reset", func(r *gaRig) { r.f.cut(nil, true) }},
		{"tcp-fin", func(r *gaRig) { r.f.cut(nil, false) }},
		{"h2-rst-stream", func(r *gaRig) { r.a.abortWatches() }},
		{"clean-end", func(r *gaRig) { r.a.endWatches() }},
	} {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			r := gaNewRig(t, gaRand(0.99))
			w := r.established(t, 60)
			r.f.setRoute(always(hopTo(r.b)))
			broke := r.clock.elapsed()
			v.cut(r)
			w.waitHas(rigLastRV)
			w.end()
			rep := r.report(broke, w, r.a)
			w.wantEvents(t, rigInitialRV+1, rigLastRV, rep)
			// A cut connection's reopen dials anew (to B); a stream that
			// ended on a live HTTP/2 connection reopens on it (to A).
			res := append(r.a.resumes(), r.b.resumes()...)
			if len(res) != 1 || res[0].rv() != strconv.Itoa(rigBreakRV) {
				t.Fatalf("want exactly one resume, at rv %d: %s", rigBreakRV, rep)
			}
			if d := res[0].at - broke; d != 0 {
				t.Errorf("reopen %v after a %s break, want at once: %s", d, v.name, rep)
			}
		})
	}
}

// (3) A GOAWAY break with the caller's timeoutSeconds (3 s) nearly spent,
// a second after the watch was sent: with a draw that would end past the
// deadline, or less than a second before it, the wait is not made and the
// watch ends cleanly at once (no reopen, no ERROR, no hang until the
// deadline); with a draw that leaves a second or more, the reopen is made
// with what remains and the watch ends at the deadline.
func TestOutsideGoAwayNearDeadline(t *testing.T) {
	t.Parallel()
	const timeout = 3 * time.Second
	for _, rnd := range []float64{0.99, 0.4, 0} {
		t.Run(fmt.Sprintf("rand=%v", rnd), func(t *testing.T) {
			t.Parallel()
			r := gaNewRig(t, gaRand(rnd))
			sent := r.clock.elapsed()
			w := r.established(t, int64(timeout/time.Second))
			deadline := sent + timeout
			r.clock.advance(time.Second)
			r.f.setRoute(always(hopTo(r.b)))
			broke := r.a.goAway()
			wait := time.Duration(rnd * float64(gaSpread)) // the draw, as test (1) pins it
			left := deadline - (broke + wait)              // what the wait would leave
			if left < time.Second {                        // not waited
				w.waitClosed()
				closedAt, _ := w.closed()
				rep := r.report(broke, w) + fmt.Sprintf("; closed %v after the break, the draw would leave %v", closedAt-broke, left)
				w.wantEvents(t, rigInitialRV+1, rigBreakRV, rep)
				if closedAt != broke {
					t.Errorf("want the watch to end cleanly at once, it ended %v after the break: %s", closedAt-broke, rep)
				}
				if n := len(r.b.resumes()) + len(r.clock.pending(timerSleep)); n != 0 {
					t.Errorf("want no reopen, nor a wait for one, when the wait would end less than a second before the deadline: %s; %v", rep, r.clock)
				}
				return
			}
			w.waitHas(rigLastRV)
			r.clock.advanceTo(r.clock.start.Add(deadline))
			w.waitClosed()
			closedAt, _ := w.closed()
			rep := r.report(broke, w) + fmt.Sprintf("; closed %v after the break, the draw would leave %v", closedAt-broke, left)
			w.wantEvents(t, rigInitialRV+1, rigLastRV, rep)
			res := r.b.resumes()
			if len(res) != 1 || res[0].rv() != strconv.Itoa(rigBreakRV) || res[0].timeout() != secondsLeft(left) || res[0].at != broke+wait {
				t.Errorf("want one reopen at rv %d after the draw %v with timeoutSeconds %s: %s", rigBreakRV, wait, secondsLeft(left), rep)
			}
			if closedAt > deadline {
				t.Errorf("want the watch ended by its deadline: %s", rep)
			}
		})
	}
}

// (6) The caller stops the watch during the GOAWAY wait: the result
// channel closes at once and no reopen is sent later (goleak in TestMain
// checks that nothing of it outlives the test).
func TestOutsideGoAwayStopDuringSpread(t *testing.T) {
	t.Parallel()
	r := gaNewRig(t, gaRand(0.99))
	w := r.established(t, 60)
	r.autopilot(false)
	r.f.setRoute(always(hopTo(r.b)))
	broke := r.a.goAway()
	r.waitFor("kretry waiting the GOAWAY spread", func() bool { return len(r.clock.pending(timerSleep)) == 1 })
	if d := r.clock.pending(timerSleep)[0].d; d != time.Duration(0.99*float64(gaSpread)) {
		t.Errorf("the GOAWAY wait is %v, want the draw %v", d, time.Duration(0.99*float64(gaSpread)))
	}
	w.w.Stop()
	w.waitClosed()
	if at, _ := w.closed(); at != broke {
		t.Errorf("the result channel closed %v after the break, want at once on Stop during the GOAWAY wait: %s", at-broke, r.report(broke, w))
	}
	r.waitFor("the GOAWAY wait given up", func() bool { return len(r.clock.pending(timerSleep)) == 0 })
	r.clock.advance(gaSpread + 500*time.Millisecond)
	rep := r.report(broke, w)
	if n := len(r.b.resumes()); n != 0 {
		t.Errorf("want no reopen after Stop: %s", rep)
	}
	w.wantEvents(t, rigInitialRV+1, rigBreakRV, rep)
}

// (5) A fleet: 50 watches broken by one apiserver's GOAWAY reopen spread
// over the draw's [0, 3 s), not in step: every one resumes at its last
// resourceVersion within the spread, nothing lost or duplicated, the
// reopens span a second or more and no 100 ms holds half of them.
// (Default Rand; for uniform draws either failing is beyond astronomically
// unlikely.) Control: the same fleet cut by a TCP reset reopens at once.
// The test, not the autopilot, ends each wait: every spread is drawn
// before the first ends, and each reopen reaches B at its own instant.
func TestOutsideGoAwayFleetSpreads(t *testing.T) {
	t.Parallel()
	const n = 50
	for _, goaway := range []bool{true, false} {
		name := "goaway"
		if !goaway {
			name = "tcp-reset-control"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := gaNewRig(t, nil)
			ws := make([]*rigWatch, n)
			for i := range ws {
				ws[i] = r.watch(r.cs, gaNS, 60)
			}
			r.waitFor("the fleet's first events", func() bool {
				return !slices.ContainsFunc(ws, func(w *rigWatch) bool { return !w.has(rigBreakRV) })
			})
			r.autopilot(false)
			r.f.setRoute(always(hopTo(r.b)))
			broke := r.clock.elapsed()
			if goaway {
				broke = r.a.goAway()
				r.waitFor("every watch waiting its spread", func() bool { return len(r.clock.pending(timerSleep))+len(r.b.resumes()) == n })
				for i := 1; i <= n; i++ {
					if len(r.b.resumes()) < i {
						r.clock.advanceToNext(timerSleep)
					}
					r.waitFor(fmt.Sprintf("resume %d at B", i), func() bool { return len(r.b.resumes()) >= i })
				}
			} else {
				r.f.cut(nil, true)
				r.waitFor("every watch's resume at B", func() bool { return len(r.b.resumes()) == n })
			}
			r.waitFor("the fleet's last events", func() bool {
				return !slices.ContainsFunc(ws, func(w *rigWatch) bool { return !w.has(rigLastRV) })
			})
			r.clock.advance(61 * time.Second) // past every timeoutSeconds: the watches end
			for i, w := range ws {
				w.waitClosed()
				w.wantEvents(t, rigInitialRV+1, rigLastRV, fmt.Sprintf("watch %d", i))
			}
			res := r.b.resumes()
			var at []time.Duration
			for _, q := range res {
				if q.rv() != strconv.Itoa(rigBreakRV) {
					t.Errorf("a resume at rv %s, want %d", q.rv(), rigBreakRV)
				}
				at = append(at, q.at-broke)
			}
			slices.Sort(at)
			if len(at) != n {
				t.Fatalf("want %d resumes at B, got %d: %v; %s", n, len(at), at, r.obs)
			}
			first, last := at[0], at[len(at)-1]
			most := 0 // the most reopens within any 100 ms
			for i := range at {
				j := i
				for j < len(at) && at[j]-at[i] < 100*time.Millisecond {
					j++
				}
				most = max(most, j-i)
			}
			t.Logf("reopens from +%v to +%v after the break, at most %d within 100 ms", first, last, most)
			if goaway {
				if last >= gaSpread {
					t.Errorf("last reopen %v after the GOAWAY, want within [0, %v)", last, gaSpread)
				}
				if last-first < time.Second || most > n/2 {
					t.Errorf("want the fleet's reopens spread over the draw: from +%v to +%v, %d of %d within one 100 ms", first, last, most, n)
				}
			} else if last != 0 {
				t.Errorf("after a TCP reset the fleet reopened until +%v, want at once", last)
			}
		})
	}
}

// (4) After a GOAWAY, the reopen reaches a restarted apiserver A2 (same
// certificate as A, as an apiserver restarted on its node) whose watch
// cache answers 410 `too old resource version: 102 (200)`, and the next
// new connection reaches B, which holds the resume point. The search must
// find B: with no failed reopening at all, and when the reopens were
// refused past the end of the spread but the 410 came less than 3 s after
// it (the cut-off counts from the end of the first reopen's spread, not
// from the lost connection, so this client is not cut off). Control: the
// 410 comes 3 s or more after the spread's end and every failed reopening
// was refused: cut off, the 410 is handed over with no retry. Which of the
// two is expected is decided from when A2 was reached. The search's retry
// first rides A2's connection to retire it (HTTP/2: answered 410 at once
// by A2, rig.wantRides), then dials the new connection that reaches B.
func TestOutsideGoAwaySearchAfterSpread(t *testing.T) {
	t.Parallel()
	for _, v := range []struct {
		name   string
		rand   float64
		refuse time.Duration // from the break: nothing listens at the front
	}{
		{"fresh-then-holder", 0.5, 0},
		{"refused-past-spread-end", 0.9, 3300 * time.Millisecond},
		{"refused-long-cut-off", 0.3, 6200 * time.Millisecond},
	} {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			r := gaNewRig(t, gaRand(v.rand))
			a2 := r.gaServer("A2", true)
			w := r.established(t, 60)
			r.f.setRoute(func(i int) rigHop {
				if i == 1 {
					return hopTo(a2)
				}
				return hopTo(r.b)
			})
			if v.refuse > 0 {
				r.f.refuse(v.refuse)
			}
			broke := r.a.goAway()
			w.waitSettled()
			a2reqs := a2.resumes()
			rep := r.report(broke, w, a2)
			if len(a2reqs) == 0 {
				t.Fatalf("the reopen never reached the restarted apiserver: %s", rep)
			}
			tA2 := a2reqs[0].at - broke
			cutOff := time.Duration(v.rand*float64(gaSpread)) + 3*time.Second // 3 s after the end of the spread
			rep += fmt.Sprintf("; A2 first reached at +%v, the cut-off at +%v; refused dials %d", tA2, cutOff, r.refusedDials())
			t.Logf("%s", rep)
			if v.refuse > 0 && r.refusedDials() == 0 {
				t.Errorf("want a refused reopening first: %s", rep)
			}
			c := r.wantRides(t)
			if tA2 < cutOff {
				w.wantEvents(t, rigInitialRV+1, rigLastRV, rep)
				if c.at(r.b) != 1 || c.at(a2) != 1 || c.searched < 1 {
					t.Errorf("want one 410 at A2 (a new connection), then the search's retry resumed at B: %s; %v", rep, c)
				}
				return
			}
			w.wantGone(t, rigBreakRV, rep)
			if len(r.b.resumes()) != 0 || len(a2reqs) != 1 || r.obs.expired() != 0 {
				t.Errorf("cut off and only refused: want the 410 handed over with no retry: %s", rep)
			}
		})
	}
}

// (7) Two GOAWAYs in a row: A's, then, after the resume at B delivered
// 103..105 (progress), B's. The reopen after B's is again the first reopen
// after progress, so it waits the GOAWAY draw (Rand pinned at 0.99: 2.97 s,
// well above the ~2 s the backoff of a later reopen would give), not the
// backoff, and reaches C at 105; nothing is lost or duplicated.
func TestOutsideGoAwayTwiceInARow(t *testing.T) {
	t.Parallel()
	r := gaNewRig(t, gaRand(0.99))
	c := r.gaServer("C", false)
	w := r.established(t, 60)
	r.f.setRoute(always(hopTo(r.b)))
	broke := r.a.goAway()
	w.waitHas(rigLastRV)
	r.f.setRoute(always(hopTo(c)))
	broke2 := r.b.goAway()
	r.waitFor("a resume at C", func() bool { return len(c.resumes()) > 0 })
	w.end()
	rep := r.report(broke, w, c)
	w.wantEvents(t, rigInitialRV+1, rigLastRV, rep)
	res := c.resumes()
	if len(res) != 1 || res[0].rv() != strconv.Itoa(rigLastRV) {
		t.Fatalf("want one resume at C at rv %d: %s", rigLastRV, rep)
	}
	want := time.Duration(0.99 * float64(gaSpread))
	if d := res[0].at - broke2; d != want {
		t.Errorf("second reopen %v after B's GOAWAY, want the GOAWAY draw with Rand 0.99, %v: %s", d, want, rep)
	}
}
