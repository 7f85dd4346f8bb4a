package contract_test

import (
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kretry/kretry/transport"
)

// lastWholeRV is the resourceVersion of the last event of the stream
// (events from+1.., media) whose frame lies whole within its first cut
// bytes (the JSON separator not needed), or from.
func lastWholeRV(media string, from, to, cut int) int {
	at, last := 0, from
	for rv := from + 1; rv <= to; rv++ {
		f := event(media, "MODIFIED", pod("p", rv))
		n := len(f)
		if media != mediaProtobuf {
			n-- // the newline
		}
		if at+n > cut {
			break
		}
		at += len(f)
		last = rv
	}
	return last
}

func ptr[T any](v T) *T { return &v }

// TestWatchCutAtManyOffsets: a Clientset watch (JSON and protobuf) from RV
// 100, its stream cut (close or RST) at offsets all over its frames, then
// resumed: the caller sees 101..110 once each, in order; the resume asks
// the last whole event's RV.
func TestWatchCutAtManyOffsets(t *testing.T) {
	for _, media := range []string{mediaJSON, mediaProtobuf} {
		stream := events(media, 100, 110)
		for cut := 1; cut < len(stream); cut += len(stream) / 23 {
			for _, reset := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/cut%d/reset%v", media, cut, reset), func(t *testing.T) {
					w := newWorld(t)
					srv := newWatchServer(t, w, media, func(q rawReq) watchAnswer {
						if q.n == 1 {
							return watchAnswer{stream: stream, cut: cut, reset: reset}
						}
						return openStream(media, q.rv(), 110)
					}, nil)
					c := watchPods(t, w.clientset(srv.url(), nil, media), metav1.ListOptions{ResourceVersion: "100", TimeoutSeconds: ptr(int64(300))})
					evs := c.eventsOrEnd(t, 10)
					if got := rvs(evs); !slices.Equal(got, seq(101, 110)) {
						t.Fatalf("caller saw %s; %s", describe(evs), w.obs)
					}
					ws := srv.watches()
					if len(ws) != 2 {
						t.Fatalf("server asked %d watches", len(ws))
					}
					want := lastWholeRV(media, 100, 110, cut)
					if ws[1].q("resourceVersion") != strconv.Itoa(want) {
						t.Errorf("resume asked rv %s, want %d (%q)", ws[1].q("resourceVersion"), want, ws[1].url.RawQuery)
					}
					if !ws[1].close {
						t.Errorf("the resume over HTTP/1.1 did not ask Connection: close")
					}
				})
			}
		}
	}
}

// TestWatchTimeoutSecondsRemaining: each attempt of a watch carries the
// caller's timeoutSeconds minus the time gone, rounded up; a wait that
// would end less than a second before the deadline is not waited; past it
// the watch ends cleanly.
func TestWatchTimeoutSecondsRemaining(t *testing.T) {
	w := newWorld(t)
	var ans []watchAnswer
	srv := newWatchServer(t, w, mediaJSON, func(q rawReq) watchAnswer {
		if q.n > len(ans) {
			return watchAnswer{code: 503}
		}
		return ans[q.n-1]
	}, nil)
	ans = []watchAnswer{
		openStream(mediaJSON, 100, 102), // then cut by the test at 10s
		{code: 503},
		{code: 503},
		openStream(mediaJSON, 102, 103), // cut by the test at 58.5s
	}
	cs := w.clientset(srv.url(), nil, mediaJSON)
	start := w.clk.Now()
	c := watchPods(t, cs, metav1.ListOptions{ResourceVersion: "100", TimeoutSeconds: ptr(int64(60))})
	c.waitCount(t, 2)
	w.clk.advance(10 * time.Second)
	srv.cutStaying()
	eventually(t, "the 4th request", func() bool { return len(srv.watches()) == 4 && c.count() == 3 })
	w.clk.advanceTo(start.Add(58500 * time.Millisecond))
	srv.cutStaying()
	eventually(t, "the end of the watch", c.isClosed)
	got := timeoutTrail(srv.watches(), start)
	// 60 at 0; 50 at 10s (the first break of a run is reopened at once);
	// after 800ms: ceil(49.2)=50; after 1.6s more: ceil(47.6)=48; the break at
	// 58.5s reopens at once with ceil(1.5)=2, and its 503's backoff would end
	// less than a second before the deadline: not waited.
	want := []string{"60@0s", "50@10s", "50@10.8s", "48@12.4s", "2@58.5s"}
	if !slices.Equal(got, want) {
		t.Errorf("attempts (timeoutSeconds@time) %v, want %v; %s", got, want, w.obs)
	}
	evs, _ := c.snapshot()
	for _, ev := range evs {
		if ev.Type == watch.Error {
			t.Errorf("the deadline must end the watch cleanly, got %s", describe(evs))
		}
	}
}

// TestWatchThrottledReopen: a reopen answered 429 with Retry-After waits
// what the server named (Rand 0: no jitter), spends no budget; a 503 with
// Retry-After waits the larger of it and the backoff; Retry-After: 0 is
// the backoff. (Under the default budget.)
func TestWatchThrottledReopen(t *testing.T) {
	w := newWorld(t)
	ans := []watchAnswer{
		{stream: events(mediaJSON, 100, 102), cut: 200},
		{code: 429, extra: []string{"Retry-After", "7"}},
		{code: 429, extra: []string{"Retry-After", "2"}},
		{code: 503, extra: []string{"Retry-After", "5"}},
		{code: 503, extra: []string{"Retry-After", "0"}},
		{code: 429, extra: []string{"Retry-After", "0"}},
		{},
	}
	srv := newWatchServer(t, w, mediaJSON, func(q rawReq) watchAnswer {
		a := ans[min(q.n, len(ans))-1]
		if a.code == 0 && q.n > 1 {
			a = openStream(mediaJSON, q.rv(), 104)
		}
		return a
	}, nil)
	c := watchPods(t, w.clientset(srv.url(), nil, mediaJSON), metav1.ListOptions{ResourceVersion: "100"})
	evs := c.eventsOrEnd(t, 4)
	if got := rvs(evs); !slices.Equal(got, seq(101, 104)) {
		t.Fatalf("caller saw %s; %s", describe(evs), w.obs)
	}
	g := gaps(srv.watches())
	// the first break reopens at once; 429s wait what they name; the 503's
	// 5s is more than its backoff; then backoffs (Rand 0: step, x2 ...)
	if len(g) != 6 || g[0] != 0 || g[1] != 7*time.Second || g[2] != 2*time.Second || g[3] != 5*time.Second || g[4] < 800*time.Millisecond || g[5] < 800*time.Millisecond {
		t.Errorf("gaps between attempts %v, want [0 7s 2s 5s >=800ms >=800ms]; sleeps %v", g, w.clk.sleepLog())
	}
	if o := w.obs.Events(); len(o.Refusals) != 0 || len(o.GiveUps) != 0 {
		t.Errorf("refusals %v give-ups %v", o.Refusals, o.GiveUps)
	}
}

// TestWatchErrorEvent500UntilWindow: every stream (the first and each
// resume) brings a 200, then an ERROR 500. kretry absorbs them for
// InternalErrorWindow from the first, then delivers the last ERROR 500 so
// that the caller relists; the stream then ends.
func TestWatchErrorEvent500UntilWindow(t *testing.T) {
	for _, media := range []string{mediaJSON, mediaProtobuf} {
		t.Run(media, func(t *testing.T) {
			w := newWorld(t)
			srv := newWatchServer(t, w, media, func(q rawReq) watchAnswer {
				s := errorEvent(media, 500, "etcdserver: leader changed")
				if q.n == 1 {
					s = append(events(media, 100, 102), s...)
				}
				return watchAnswer{stream: s, cut: -1, end: true}
			}, nil)
			cs := w.clientset(srv.url(), nil, media)
			start := w.clk.Now()
			c := watchPods(t, cs, metav1.ListOptions{ResourceVersion: "100"})
			if d := describe(c.waitClosed(t)); d != "MODIFIED@101 MODIFIED@102 ERROR:500" {
				t.Errorf("caller saw %q, want the events then the ERROR 500; %s", d, w.obs)
			}
			ws := srv.watches()
			for _, q := range ws[1:] {
				if q.q("resourceVersion") != "102" {
					t.Errorf("resume asked %q", q.url.RawQuery)
				}
			}
			last := ws[len(ws)-1].at.Sub(start)
			if last < 30*time.Second || len(ws) < 4 {
				t.Errorf("%d attempts, the last at %v: the window is 30s", len(ws), last)
			}
			if last > 60*time.Second {
				t.Errorf("the last attempt at %v: retried past the window", last)
			}
			o := w.obs.Events()
			if len(o.GiveUps) != 1 || o.GiveUps[0].Reason != transport.ReasonErrorEvent {
				t.Errorf("give-ups %+v", o.GiveUps)
			}
		})
	}
}

// quietThen503s scripts a watch that brings 101..102 and stays open; its
// first reopen is answered 503, the next stays up quiet, and every later
// one is answered 503.
func quietThen503s(q rawReq) watchAnswer {
	switch q.n {
	case 1:
		return openStream(mediaJSON, 100, 102)
	case 2:
		return watchAnswer{code: 503} // the first break's run: one failure
	case 3:
		return watchAnswer{cut: -1} // up, quiet
	}
	return watchAnswer{code: 503}
}

// TestWatchFreshRunAfterQuiet: a watch breaks, is resumed at once, then
// stays up quiet longer than the window; a new break whose reopens all fail
// starts a fresh run: the give-up's Attempts and Elapsed count from it.
func TestWatchFreshRunAfterQuiet(t *testing.T) {
	for _, quiet := range []time.Duration{31 * time.Second, 10 * time.Minute} {
		t.Run(quiet.String(), func(t *testing.T) {
			w := newWorld(t)
			srv := newWatchServer(t, w, mediaJSON, quietThen503s, nil)
			c := watchPods(t, w.clientset(srv.url(), nil, mediaJSON), metav1.ListOptions{ResourceVersion: "100"})
			c.waitCount(t, 2)
			srv.cutStaying()
			srv.waitQuiet(t, 3)
			w.clk.advance(quiet)
			breakAt := w.clk.Now()
			srv.cutStaying()
			if d := describe(c.waitClosed(t)); d != "MODIFIED@101 MODIFIED@102" {
				t.Errorf("caller saw %q: a give-up on 503s to the reopen is a clean close", d)
			}
			ws := srv.watches()
			after := since(ws, breakAt)
			g := w.obs.onlyGiveUp(t)
			lastAt := ws[len(ws)-1].at.Sub(breakAt)
			if g.Attempts != after || g.Elapsed > 31*time.Second+lastAt-lastAt+30*time.Second || g.Elapsed < 30*time.Second-time.Second {
				t.Errorf("give-up %+v; %d attempts since the new break, the last %v after it", g, after, lastAt)
			}
			if g.Elapsed > 45*time.Second {
				t.Errorf("give-up Elapsed %v counts from before the new break (quiet %v)", g.Elapsed, quiet)
			}
			if lastAt < 29*time.Second {
				t.Errorf("gave up %v after the new break: the window was not fresh", lastAt)
			}
		})
	}
}

// TestWatchQuietShorterThanWindowSameRun: the same, but quiet less than
// the window: one run, so the give-up comes within the window of the
// first break.
func TestWatchQuietShorterThanWindowSameRun(t *testing.T) {
	w := newWorld(t)
	srv := newWatchServer(t, w, mediaJSON, quietThen503s, nil)
	c := watchPods(t, w.clientset(srv.url(), nil, mediaJSON), metav1.ListOptions{ResourceVersion: "100"})
	c.waitCount(t, 2)
	first := w.clk.Now()
	srv.cutStaying()
	srv.waitQuiet(t, 3)
	w.clk.advance(20 * time.Second)
	srv.cutStaying()
	c.waitClosed(t)
	ws := srv.watches()
	if end := ws[len(ws)-1].at.Sub(first); end > 31*time.Second {
		t.Errorf("last attempt %v after the first break of the run: the window is 30s from it", end)
	}
}

// TestWatchGiveUpRefusedIsCleanClose: a watch whose server goes away
// (refused) for longer than the window ends as a clean close, no ERROR.
func TestWatchGiveUpRefusedIsCleanClose(t *testing.T) {
	w := newWorld(t)
	var srv *watchServer
	srv = newWatchServer(t, w, mediaJSON, func(q rawReq) watchAnswer {
		return openStream(mediaJSON, 100, 102)
	}, nil)
	c := watchPods(t, w.clientset(srv.url(), nil, mediaJSON), metav1.ListOptions{ResourceVersion: "100"})
	c.waitCount(t, 2)
	srv.ln.Close()
	srv.cutStaying()
	if d := describe(c.waitClosed(t)); d != "MODIFIED@101 MODIFIED@102" {
		t.Errorf("caller saw %q", d)
	}
	o := w.obs.Events()
	if len(o.GiveUps) != 1 || o.GiveUps[0].Reason != transport.ReasonConnection {
		t.Errorf("give-ups %+v", o.GiveUps)
	}
}
