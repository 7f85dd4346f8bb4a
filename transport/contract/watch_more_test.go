package contract_test

import (
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func gaps(ws []rawReq) []time.Duration {
	var out []time.Duration
	for i := 1; i < len(ws); i++ {
		out = append(out, ws[i].at.Sub(ws[i-1].at))
	}
	return out
}

// TestWatchDeadlineBeforeFirst200: a watch with timeoutSeconds=5 answered
// 503 forever: each attempt carries what remains, no wait ends less than a
// second before the deadline, and the caller gets the last 503 (as stock
// client-go would have had it at once).
func TestWatchDeadlineBeforeFirst200(t *testing.T) {
	w := newWorld(t)
	srv := newWatchServer(t, w, mediaJSON, func(q rawReq) watchAnswer {
		return watchAnswer{code: 503, extra: []string{"Retry-After", "1"}}
	}, nil)
	cs := w.clientset(srv.url(), nil, mediaJSON)
	_, err := cs.CoreV1().Pods("ns").Watch(realCtx(t), metav1.ListOptions{ResourceVersion: "100", TimeoutSeconds: ptr(int64(5))})
	if !apierrors.IsServiceUnavailable(err) {
		t.Errorf("error %v, want the 503", err)
	}
	got := timeoutTrail(srv.watches(), srv.watches()[0].at)
	// the larger of the backoff and Retry-After: 1s, then 1.6s; then a
	// 3.2s wait would end at 5.8s: not waited
	want := []string{"5@0s", "4@1s", "3@2.6s"}
	if !slices.Equal(got, want) {
		t.Errorf("attempts %v, want %v", got, want)
	}
}

// TestWatchCleanEndBeforeAndAtDeadline: a clean end of the stream before
// the caller's timeoutSeconds is a break (resumed with what remains); at it,
// the intended end (no resume).
func TestWatchCleanEndBeforeAndAtDeadline(t *testing.T) {
	w := newWorld(t)
	srv := newWatchServer(t, w, mediaJSON, func(q rawReq) watchAnswer {
		return openStream(mediaJSON, q.rv(), q.rv()+1)
	}, nil)
	c := watchPods(t, w.clientset(srv.url(), nil, mediaJSON), metav1.ListOptions{ResourceVersion: "100", TimeoutSeconds: ptr(int64(10))})
	eventually(t, "1 event", func() bool { return c.count() == 1 && srv.quiet() })
	w.clk.advance(4 * time.Second)
	srv.cutStaying() // a clean close of the connection: EOF without the last chunk
	eventually(t, "the resume", func() bool { return c.count() == 2 && srv.quiet() })
	w.clk.advance(6 * time.Second)
	srv.cutStaying()
	c.waitClosed(t)
	ws := srv.watches()
	var got []string
	for _, q := range ws {
		got = append(got, q.q("resourceVersion")+"/"+q.q("timeoutSeconds"))
	}
	if !slices.Equal(got, []string{"100/10", "101/6"}) {
		t.Errorf("watches %v, want [100/10 101/6]", got)
	}
}

// TestWatchErrorEvent429RetryAfterSeconds: an ERROR 429 event naming
// details.retryAfterSeconds is waited exactly (Rand 0), then resumed.
func TestWatchErrorEvent429RetryAfterSeconds(t *testing.T) {
	w := newWorld(t)
	st := status(429, reasonOf(429), "throttled")
	st.Details = &metav1.StatusDetails{RetryAfterSeconds: 9}
	srv := newWatchServer(t, w, mediaJSON, func(q rawReq) watchAnswer {
		if q.n == 1 {
			return watchAnswer{stream: append(events(mediaJSON, 100, 101), event(mediaJSON, "ERROR", st)...), cut: -1, end: true}
		}
		return openStream(mediaJSON, 101, 103)
	}, nil)
	c := watchPods(t, w.clientset(srv.url(), nil, mediaJSON), metav1.ListOptions{ResourceVersion: "100"})
	if d := describe(c.eventsOrEnd(t, 3)); d != "MODIFIED@101 MODIFIED@102 MODIFIED@103" {
		t.Errorf("caller saw %q", d)
	}
	if g := gaps(srv.watches()); len(g) != 1 || g[0] != 9*time.Second {
		t.Errorf("gaps %v, want [9s]", g)
	}
}

// TestWatch410ResumeProtobufErrorFrame: a protobuf watch whose resume is
// answered 410 (a different S ends the search) gets the 410 as an ERROR
// event in protobuf, which client-go decodes.
func TestWatch410ResumeProtobufErrorFrame(t *testing.T) {
	w := newWorld(t)
	srv := newWatchServer(t, w, mediaProtobuf, func(q rawReq) watchAnswer {
		if q.n == 1 {
			return openStream(mediaProtobuf, 100, 102)
		}
		return watchAnswer{code: 410, body: tooOld(q.q("resourceVersion"), 200+q.n)}
	}, nil)
	c := watchPods(t, w.clientset(srv.url(), nil, mediaProtobuf), metav1.ListOptions{ResourceVersion: "100"})
	c.waitCount(t, 2)
	srv.cutStaying()
	if d := describe(c.waitClosed(t)); d != "MODIFIED@101 MODIFIED@102 ERROR:410" {
		t.Errorf("caller saw %q", d)
	}
}

// TestWatchBackoffAfterQuiet: a run grows the backoff (503s to reopens),
// then a reopened watch stays up quiet. After 31 s the next break starts a
// new run (reopened at once) but the backoff is only reset after 2 min
// quiet: the first wait of the new run is the grown step after 31 s, the
// initial 800 ms after 10 min.
func TestWatchBackoffAfterQuiet(t *testing.T) {
	for _, tc := range []struct {
		quiet time.Duration
		first time.Duration // the first wait after the new break's 503
	}{{31 * time.Second, 6400 * time.Millisecond}, {90 * time.Second, 6400 * time.Millisecond}, {10 * time.Minute, 800 * time.Millisecond}} {
		t.Run(tc.quiet.String(), func(t *testing.T) {
			w := newWorld(t)
			srv := newWatchServer(t, w, mediaJSON, func(q rawReq) watchAnswer {
				switch {
				case q.n == 1:
					return openStream(mediaJSON, 100, 102)
				case q.n <= 4: // 0.8s, 1.6s, 3.2s
					return watchAnswer{code: 503}
				case q.n == 5:
					return watchAnswer{cut: -1} // up, quiet
				case q.n == 6:
					return watchAnswer{code: 503}
				}
				return openStream(mediaJSON, 102, 103)
			}, nil)
			c := watchPods(t, w.clientset(srv.url(), nil, mediaJSON), metav1.ListOptions{ResourceVersion: "100"})
			c.waitCount(t, 2)
			srv.cutStaying()
			srv.waitQuiet(t, 5)
			w.clk.advance(tc.quiet)
			srv.cutStaying()
			eventually(t, "event 103", func() bool { return c.count() == 3 })
			g := gaps(srv.watches())
			t.Logf("gaps %v", g)
			// the new break is reopened at once (gap = the quiet), its 503
			// waits the step the backoff had reached unless 2 min passed
			want := []time.Duration{0, 800 * time.Millisecond, 1600 * time.Millisecond, 3200 * time.Millisecond, tc.quiet, tc.first}
			if !slices.Equal(g, want) {
				t.Errorf("gaps between attempts %v, want %v: after %v quiet the backoff must not be reset (client-go's: reset after 2 min)", g, want, tc.quiet)
			}
		})
	}
}

// TestWatchErrorEventsFreshRunAfterQuiet: a run of ERROR 500s ends with a
// reopened watch up quiet for longer than the window; a later break whose
// reopens all bring ERROR 500 is a fresh run: the ERROR is delivered one
// window after the new break, and the give-up counts from it.
func TestWatchErrorEventsFreshRunAfterQuiet(t *testing.T) {
	w := newWorld(t)
	srv := newWatchServer(t, w, mediaJSON, func(q rawReq) watchAnswer {
		switch q.n {
		case 1:
			return openStream(mediaJSON, 100, 102)
		case 3:
			return watchAnswer{cut: -1} // up, quiet
		}
		return watchAnswer{stream: errorEvent(mediaJSON, 500, "etcdserver: leader changed"), cut: -1, end: true}
	}, nil)
	c := watchPods(t, w.clientset(srv.url(), nil, mediaJSON), metav1.ListOptions{ResourceVersion: "100"})
	c.waitCount(t, 2)
	srv.cutStaying()
	srv.waitQuiet(t, 3)
	w.clk.advance(40 * time.Second)
	breakAt := w.clk.Now()
	srv.cutStaying()
	if d := describe(c.waitClosed(t)); d != "MODIFIED@101 MODIFIED@102 ERROR:500" {
		t.Errorf("caller saw %q", d)
	}
	ws := srv.watches()
	after := since(ws, breakAt)
	last := ws[len(ws)-1].at.Sub(breakAt)
	g := w.obs.onlyGiveUp(t)
	t.Logf("%d attempts after the break, the last %v after it; give-up %+v", after, last, g)
	if last < 29*time.Second {
		t.Errorf("the ERROR was delivered %v after the new break: the window was not fresh", last)
	}
	if g.Attempts != after || g.Elapsed > last+time.Second || g.Elapsed < last-time.Second {
		t.Errorf("give-up %+v, want %d attempts and about %v elapsed, counted from the new break", g, after, last)
	}
}
