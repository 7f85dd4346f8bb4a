package contract_test

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func tooOld(rv string, s int) []byte {
	return statusJSON(410, reasonOf(410), fmt.Sprintf("too old resource version: %s (%d)", rv, s))
}

// TestWatch410ResumeHTTP1NeverPooled: a watch's resume over HTTP/1.1 is
// answered 410 `too old resource version` by a server that keeps every
// connection open whatever the client asked. Every resume asks
// Connection: close, every retry of the search comes on a connection never
// used before, and no connection that brought a 410 is used again, by the
// search or by the transport's next request.
func TestWatch410ResumeHTTP1NeverPooled(t *testing.T) {
	for _, sameS := range []bool{false, true} {
		t.Run(fmt.Sprintf("sameS=%v", sameS), func(t *testing.T) {
			w := newWorld(t)
			listBytes := listBody(mediaJSON, 200, 3)
			srv := newWatchServer(t, w, mediaJSON, func(q rawReq) watchAnswer {
				if q.n == 1 {
					return openStream(mediaJSON, 100, 102)
				}
				// Two apiservers' watch caches, told apart by their S
				// (plain HTTP: no certificate), answer in turn.
				s := 105
				if !sameS {
					s = 105 + q.n%2
				}
				return watchAnswer{code: 410, body: tooOld(q.q("resourceVersion"), s), keep: true}
			}, func(c *rawConn, q rawReq) bool {
				return writeBody(c, mediaJSON, listBytes, false, -1, false)
			})
			cs := w.clientset(srv.url(), nil, mediaJSON)
			c := watchPods(t, cs, metav1.ListOptions{ResourceVersion: "100"})
			c.waitCount(t, 2)
			srv.cutStaying()
			if d := describe(c.waitClosed(t)); d != "MODIFIED@101 MODIFIED@102 ERROR:410" {
				t.Errorf("caller saw %q", d)
			}
			// the transport's next requests
			for i := 0; i < 3; i++ {
				if _, err := cs.CoreV1().Pods("ns").List(realCtx(t), metav1.ListOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			reqs := srv.requests()
			goneConns := map[int]int{}
			usedConns := map[int]bool{reqs[0].conn: true}
			resumes := 0
			for _, q := range reqs[1:] {
				if isWatch(q) {
					resumes++
					if !q.close {
						t.Errorf("watch request %d over HTTP/1.1 did not ask Connection: close", q.n)
					}
					if usedConns[q.conn] {
						t.Errorf("watch request %d came on connection %d, used before", q.n, q.conn)
					}
					usedConns[q.conn] = true
					goneConns[q.conn] = q.n
					continue
				}
				if n, ok := goneConns[q.conn]; ok {
					t.Errorf("the LIST (request %d) came on connection %d that brought the 410 of request %d: it went back to the pool", q.n, q.conn, n)
				}
			}
			if !sameS && resumes != 7 {
				t.Errorf("%d resumes: the search ends at the sixth 410 in a row from either S once both answered (want 7)", resumes)
			}
			if sameS && (resumes < 2 || resumes > 21) {
				t.Errorf("%d resumes: the search is bounded by 20 new connections", resumes)
			}
			t.Logf("%d resumes; %s", resumes, w.obs)
		})
	}
}

// TestWatch410RealCompactionBound: every resume is answered 410 with the
// same S and the server answers the search's retries slowly (2.5 s of
// virtual time each): the caller gets the 410 at most 3 s after the first.
func TestWatch410RealCompactionBound(t *testing.T) {
	w := newWorld(t)
	var firstGone time.Time
	srv := newWatchServer(t, w, mediaJSON, func(q rawReq) watchAnswer {
		if q.n == 1 {
			return openStream(mediaJSON, 100, 102)
		}
		a := watchAnswer{code: 410, body: tooOld(q.q("resourceVersion"), 105), keep: true}
		if q.n == 2 {
			firstGone = w.clk.Now()
		} else {
			a.wait = 2500 * time.Millisecond
		}
		return a
	}, nil)
	c := watchPods(t, w.clientset(srv.url(), nil, mediaJSON), metav1.ListOptions{ResourceVersion: "100"})
	c.waitCount(t, 2)
	w.clk.mu.Lock()
	w.clk.manual = true
	w.clk.mu.Unlock()
	srv.cutStaying()
	// the search's retries are in flight: move virtual time by hand, in
	// steps, giving kretry a moment of real time after each to deliver
	eventually(t, "the first slow retry", func() bool { return srv.held.Load() > 0 })
	steps := []time.Duration{2500 * time.Millisecond, 3 * time.Second}
	for d := 3500 * time.Millisecond; d <= 25*time.Second; d += 500 * time.Millisecond {
		steps = append(steps, d)
	}
	for _, d := range steps {
		w.clk.advanceTo(firstGone.Add(d))
		settle := time.Now().Add(time.Second)
		for !c.isClosed() && time.Now().Before(settle) {
			time.Sleep(time.Millisecond)
		}
		if c.isClosed() {
			break
		}
	}
	if d := describe(c.waitClosed(t)); d != "MODIFIED@101 MODIFIED@102 ERROR:410" {
		t.Errorf("caller saw %q", d)
	}
	if late := w.clk.Now().Sub(firstGone); late > 3*time.Second+500*time.Millisecond {
		t.Errorf("the 410 reached the caller %v after the first 410: the bound is 3s; sleeps %v; %d requests; %s", late, w.clk.sleepLog(), len(srv.requests()), w.obs)
	}
}

// TestWatchResumeAsksCloseEvenWhenAnswered200: every resume over HTTP/1.1
// asks Connection: close, whatever it gets; a 200 stream is read through.
func TestWatchResumeAsksCloseEvenWhenAnswered200(t *testing.T) {
	w := newWorld(t)
	srv := newWatchServer(t, w, mediaJSON, func(q rawReq) watchAnswer {
		return openStream(mediaJSON, q.rv(), q.rv()+2)
	}, nil)
	c := watchPods(t, w.clientset(srv.url(), nil, mediaJSON), metav1.ListOptions{ResourceVersion: "100"})
	for i := 1; i <= 3; i++ {
		eventually(t, "events", func() bool { return c.count() == 2*i && srv.quiet() })
		srv.cutStaying()
	}
	eventually(t, "events", func() bool { return c.count() == 8 })
	for _, q := range srv.watches()[1:] {
		if !q.close {
			t.Errorf("resume %d did not ask Connection: close", q.n)
		}
	}
}
