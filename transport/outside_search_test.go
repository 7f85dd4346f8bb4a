package transport_test

// Outside tests of the search for an apiserver that holds a watch's resume
// point after a resume was answered 410 `too old resource version: X (S)`
// (docs/behaviour.md, "Resume answered 410"), written from the docs only.
// A real kubernetes.Clientset (and an informer) goes through a loopback TCP
// "balancer" (srchFront) that routes every NEW connection to a fresh
// apiserver A (answers resumes 410) or to B (holds the resume point), or
// refuses, accepts and closes, or accepts and hangs. Helpers are prefixed
// "srch". Real time with generous slack; counts are preferred to timing.

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/kretry/kretry/transport"
)

const (
	srchNS        = "search"
	srchInitialRV = 100 // the watch's own resourceVersion
	srchBreakRV   = 102 // the last event before the connection is lost
	srchLastRV    = 105
	srchS         = 200 // the oldest RV a fresh watch cache holds
	srchBound     = 3 * time.Second
	srchSlack     = 1500 * time.Millisecond
	srchCompacted = "The resourceVersion for the provided watch is too old."
)

type srchKind int

const (
	srchToA   srchKind = iota
	srchToB            // the apiserver that holds the resume point
	srchSlowA          // A, reached only after srchFront.slow
	srchEOF            // accepted, closed at once
	srchHang           // accepted, never answered
)

// srchAnswer is what A answers its n-th watch with: a 410 with msg, or,
// with hold, what B would answer.
type srchAnswer struct {
	hold bool
	msg  string
}

func srchTooOld(s int) srchAnswer {
	return srchAnswer{msg: fmt.Sprintf("too old resource version: %d (%d)", srchBreakRV, s)}
}

type srchReq struct {
	rv     string
	at     time.Time
	remote string
}

type srchBackend struct {
	srv   *httptest.Server
	fresh func(n int) srchAnswer // nil: holds the resume point
	event bool                   // 410 as an ERROR event inside a 200
	mu    sync.Mutex
	reqs  []srchReq
	lists int
}

func (b *srchBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("watch") != "true" {
		b.mu.Lock()
		b.lists++
		b.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"%d"},"items":[]}`, srchInitialRV)
		return
	}
	rv := q.Get("resourceVersion")
	b.mu.Lock()
	b.reqs = append(b.reqs, srchReq{rv: rv, at: time.Now(), remote: r.RemoteAddr})
	n := len(b.reqs)
	b.mu.Unlock()
	if b.fresh != nil {
		if a := b.fresh(n); !a.hold {
			st, _ := json.Marshal(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
				Status: metav1.StatusFailure, Message: a.msg, Reason: metav1.StatusReasonExpired, Code: http.StatusGone})
			w.Header().Set("Content-Type", "application/json")
			if b.event {
				w.WriteHeader(http.StatusOK)
				fmt.Fprintf(w, `{"type":"ERROR","object":%s}`+"\n", st)
				return
			}
			w.WriteHeader(http.StatusGone)
			w.Write(st)
			return
		}
	}
	from, err := strconv.Atoi(rv)
	if err != nil {
		http.Error(w, "bad rv", http.StatusBadRequest)
		return
	}
	last := srchLastRV
	if from == srchInitialRV {
		last = srchBreakRV
	}
	writeAddedSince(w, srchNS, from, last)
	<-r.Context().Done()
}

// watches returns the watch requests at resume points (not the first watch).
func (b *srchBackend) resumes() []srchReq {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []srchReq
	for _, r := range b.reqs {
		if r.rv != strconv.Itoa(srchInitialRV) {
			out = append(out, r)
		}
	}
	return out
}

func srchNewBackend(tls bool, fresh func(int) srchAnswer, event bool) *srchBackend {
	b := &srchBackend{fresh: fresh, event: event}
	b.srv = httptest.NewUnstartedServer(b)
	if tls {
		b.srv.EnableHTTP2 = true
		b.srv.StartTLS()
	} else {
		b.srv.Start()
	}
	return b
}

// srchFront is the balancer: before the break every new connection goes to
// B; after it, route decides for the n-th new connection.
type srchFront struct {
	a, b    *srchBackend
	route   func(n int, since time.Duration) srchKind
	slow    time.Duration
	addr    string
	mu      sync.Mutex
	ln      net.Listener
	conns   map[net.Conn]struct{}
	broke   time.Time
	after   []srchKind
	stopped chan struct{}
	wg      sync.WaitGroup
}

func srchNewFront(t *testing.T, a, b *srchBackend, route func(int, time.Duration) srchKind) *srchFront {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &srchFront{a: a, b: b, route: route, addr: ln.Addr().String(), conns: map[net.Conn]struct{}{}, stopped: make(chan struct{})}
	f.serve(ln)
	return f
}

func (f *srchFront) serve(ln net.Listener) {
	f.mu.Lock()
	f.ln = ln
	f.mu.Unlock()
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.mu.Lock()
			k := srchToB
			if !f.broke.IsZero() {
				k = f.route(len(f.after)+1, time.Since(f.broke))
				f.after = append(f.after, k)
			}
			f.conns[c] = struct{}{}
			f.mu.Unlock()
			f.wg.Add(1)
			go f.handle(c, k)
		}
	}()
}

func (f *srchFront) handle(c net.Conn, k srchKind) {
	defer f.wg.Done()
	defer func() {
		c.Close()
		f.mu.Lock()
		delete(f.conns, c)
		f.mu.Unlock()
	}()
	be := f.a
	switch k {
	case srchEOF:
		return
	case srchHang:
		io.Copy(io.Discard, c)
		return
	case srchToB:
		be = f.b
	case srchSlowA:
		select {
		case <-time.After(f.slow):
		case <-f.stopped:
			return
		}
	}
	bc, err := net.Dial("tcp", be.srv.Listener.Addr().String())
	if err != nil {
		return
	}
	done := make(chan struct{}, 2)
	go func() { io.Copy(bc, c); done <- struct{}{} }()
	go func() { io.Copy(c, bc); done <- struct{}{} }()
	<-done
	c.Close()
	bc.Close()
	<-done
}

// lose cuts every connection (the apiserver behind went away) and, with
// refused > 0, leaves nothing listening for that long.
func (f *srchFront) lose(t *testing.T, refused time.Duration) {
	f.mu.Lock()
	f.broke = time.Now()
	if refused > 0 {
		f.ln.Close()
	}
	for c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	if refused <= 0 {
		return
	}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		select {
		case <-time.After(refused):
		case <-f.stopped:
			return
		}
		ln, err := net.Listen("tcp", f.addr)
		if err != nil {
			t.Errorf("relisten: %v", err)
			return
		}
		f.serve(ln)
	}()
}

func (f *srchFront) afterBreak() []srchKind {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]srchKind(nil), f.after...)
}

func (f *srchFront) stop() {
	close(f.stopped)
	f.mu.Lock()
	f.ln.Close()
	for c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
	f.mu.Lock() // a relisten racing stop
	f.ln.Close()
	f.mu.Unlock()
}

type srchObserver struct {
	mu      sync.Mutex
	expired int
}

func (o *srchObserver) ObserveAttempt(transport.AttemptEvent) {}
func (o *srchObserver) ObserveRetry(e transport.RetryEvent) {
	if e.Reason == transport.ReasonExpiredResume {
		o.mu.Lock()
		o.expired++
		o.mu.Unlock()
	}
}
func (o *srchObserver) ObserveGiveUp(transport.GiveUpEvent)        {}
func (o *srchObserver) ObserveBudgetRefusal(transport.BudgetEvent) {}
func (o *srchObserver) count() int                                 { o.mu.Lock(); defer o.mu.Unlock(); return o.expired }

func srchClientset(t *testing.T, f *srchFront, tls bool, obs *srchObserver) *kubernetes.Clientset {
	return srchClientsetWith(t, f, tls, obs, nil)
}

// srchClientsetWith is a Clientset through kretry to f with obs and, when
// set, budget.
func srchClientsetWith(t *testing.T, f *srchFront, tls bool, obs transport.Observer, budget *transport.RetryBudget) *kubernetes.Clientset {
	cfg := &rest.Config{Host: "http://" + f.addr, QPS: 1000, Burst: 1000}
	cfg.ContentType = "application/json"
	cfg.AcceptContentTypes = "application/json"
	if tls {
		cfg.Host = "https://" + f.addr
		cfg.TLSClientConfig.CAData = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.a.srv.Certificate().Raw})
	}
	// An own dialer keeps client-go from sharing one cached transport
	// between tests.
	cfg.Dial = (&net.Dialer{}).DialContext
	// Rand 0.5: every jittered wait and hold is the middle of its range.
	tc := transport.Config{Observer: obs, Rand: func() float64 { return 0.5 }}
	if budget != nil {
		tc.RetryBudget = *budget
	}
	cfg.Wrap(transport.Wrapper(tc))
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

type srchCase struct {
	tls, event bool
	fresh      func(n int) srchAnswer
	route      func(n int, since time.Duration) srchKind
	slow       time.Duration
	refused    time.Duration
}

type srchSeen struct {
	typ  watch.EventType
	rv   string
	code int32
	msg  string
	at   time.Time
}

type srchRun struct {
	a, b   *srchBackend
	after  []srchKind
	seen   []srchSeen
	broke  time.Time
	closed bool
	obs    *srchObserver
}

func (r *srchRun) String() string {
	var s string
	for _, e := range r.seen {
		s += fmt.Sprintf(" %s:%s%d@%.2fs", e.typ, e.rv, e.code, e.at.Sub(r.broke).Seconds())
	}
	return fmt.Sprintf("caller saw [%s ]; A resumes %d, B resumes %d, routes after break %v, expired-resume retries %d",
		s, len(r.a.resumes()), len(r.b.resumes()), r.after, r.obs.count())
}

func srchVariants(t *testing.T, f func(t *testing.T, tls, event bool)) {
	for _, tls := range []bool{false, true} {
		for _, event := range []bool{false, true} {
			name := "http1"
			if tls {
				name = "tls-h2"
			}
			if event {
				name += "/error-event"
			} else {
				name += "/status-410"
			}
			t.Run(name, func(t *testing.T) { t.Parallel(); f(t, tls, event) })
		}
	}
}

// srchWatch runs a typed watch through the case: two events, the loss,
// then everything the caller sees until its channel closes or it has had
// every event and a second of quiet.
func srchWatch(t *testing.T, c srchCase) *srchRun {
	a := srchNewBackend(c.tls, c.fresh, c.event)
	b := srchNewBackend(c.tls, nil, c.event)
	f := srchNewFront(t, a, b, c.route)
	f.slow = c.slow
	run := &srchRun{a: a, b: b, obs: &srchObserver{}}
	defer func() {
		f.stop()
		a.srv.Close()
		b.srv.Close()
		run.after = f.afterBreak()
	}()
	srchFollow(t, srchClientset(t, f, c.tls, run.obs), f, c.refused, run, 50*time.Second)
	return run
}

// srchFollow watches through cs from the initial resourceVersion, has f
// lose the stream (refused for the given time) once the break's event has
// arrived, and records in run what the caller saw, until a quiet second
// after the last event or the 410, the end of the watch, or wait.
func srchFollow(t *testing.T, cs *kubernetes.Clientset, f *srchFront, refused time.Duration, run *srchRun, wait time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w, err := cs.CoreV1().ConfigMaps(srchNS).Watch(ctx, metav1.ListOptions{ResourceVersion: strconv.Itoa(srchInitialRV), TimeoutSeconds: ptrTo(int64(120))})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	deadline := time.After(wait)
	var quiet <-chan time.Time
	for {
		select {
		case e, ok := <-w.ResultChan():
			if !ok {
				run.closed = true
				return
			}
			s := srchSeen{typ: e.Type, at: time.Now()}
			if st, ok := e.Object.(*metav1.Status); ok {
				s.code, s.msg = st.Code, st.Message
			} else if m, err := metaAccessor(e.Object); err == nil {
				s.rv = m
			}
			run.seen = append(run.seen, s)
			if s.rv == strconv.Itoa(srchBreakRV) && run.broke.IsZero() {
				f.lose(t, refused)
				run.broke = time.Now()
			}
			if s.rv == strconv.Itoa(srchLastRV) || e.Type == watch.Error {
				quiet = time.After(time.Second)
			}
		case <-quiet:
			return
		case <-deadline:
			t.Errorf("the caller still waits %v on: %v", wait, run)
			return
		}
	}
}

func metaAccessor(o interface{}) (string, error) {
	m, ok := o.(metav1.Object)
	if !ok {
		return "", fmt.Errorf("no meta")
	}
	return m.GetResourceVersion(), nil
}

// wantResumed: 101..105 once each, in order, no ERROR.
func (r *srchRun) wantResumed(t *testing.T) {
	t.Helper()
	ok := len(r.seen) == srchLastRV-srchInitialRV
	for i, e := range r.seen {
		if e.typ != watch.Added || e.rv != strconv.Itoa(srchInitialRV+1+i) {
			ok = false
		}
	}
	if !ok {
		t.Errorf("want events %d..%d once each and no ERROR: %v", srchInitialRV+1, srchLastRV, r)
	}
}

// wantGone: 101, 102, then one ERROR 410, then the end; returns its time.
func (r *srchRun) wantGone(t *testing.T) time.Time {
	t.Helper()
	n := srchBreakRV - srchInitialRV
	if len(r.seen) != n+1 || r.seen[n].typ != watch.Error || r.seen[n].code != http.StatusGone || !r.closed {
		t.Errorf("want %d events, one ERROR 410, then the end: %v (closed %v)", n, r, r.closed)
		return time.Time{}
	}
	return r.seen[n].at
}

func srchAlwaysTooOld(int) srchAnswer { return srchTooOld(srchS) }

// (1) The first reopen reaches A through a balancer that took 3.2 s (no
// failure before it): the search is made, its retry reaches B.
func TestOutsideSearchSlowFirstAnswer(t *testing.T) {
	t.Parallel()
	srchVariants(t, func(t *testing.T, tls, event bool) {
		r := srchWatch(t, srchCase{tls: tls, event: event, fresh: srchAlwaysTooOld, slow: 3200 * time.Millisecond,
			route: func(n int, _ time.Duration) srchKind {
				if n == 1 {
					return srchSlowA
				}
				return srchToB
			}})
		r.wantResumed(t)
		if len(r.a.resumes()) != 1 || len(r.b.resumes()) != 1 || len(r.after) != 2 {
			t.Errorf("want one resume at A, one at B, on two new connections: %v", r)
		}
	})
}

// (2) Refused for 4 s (nothing listening), then only a fresh A: the client
// was cut off from every apiserver, the 410 is handed over, no search.
func TestOutsideSearchRefusedThenFresh(t *testing.T) {
	t.Parallel()
	srchVariants(t, func(t *testing.T, tls, event bool) {
		r := srchWatch(t, srchCase{tls: tls, event: event, fresh: srchAlwaysTooOld, refused: 4 * time.Second,
			route: func(int, time.Duration) srchKind { return srchToA }})
		r.wantGone(t)
		if len(r.a.resumes()) != 1 || r.obs.count() != 0 {
			t.Errorf("want exactly one resume at A and no search: %v", r)
		}
	})
}

// (2b) Control: refused for only ~1 s, then A then B: the search is made.
func TestOutsideSearchRefusedBriefly(t *testing.T) {
	t.Parallel()
	srchVariants(t, func(t *testing.T, tls, event bool) {
		r := srchWatch(t, srchCase{tls: tls, event: event, fresh: srchAlwaysTooOld, refused: time.Second,
			route: func(n int, _ time.Duration) srchKind {
				if n == 1 {
					return srchToA
				}
				return srchToB
			}})
		r.wantResumed(t)
		if len(r.a.resumes()) != 1 || len(r.b.resumes()) != 1 {
			t.Errorf("want one resume at A, then one at B: %v", r)
		}
	})
}

// srchEOFThen: the balancer accepts and closes for d, then one connection
// to A, then B.
func srchEOFThen(d time.Duration) func(int, time.Duration) srchKind {
	sawA := false
	return func(_ int, since time.Duration) srchKind {
		switch {
		case since < d:
			return srchEOF
		case !sawA:
			sawA = true
			return srchToA
		}
		return srchToB
	}
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
			srchVariants(t, func(t *testing.T, tls, event bool) {
				r := srchWatch(t, srchCase{tls: tls, event: event, fresh: srchAlwaysTooOld, route: srchEOFThen(eof)})
				r.wantResumed(t)
				if len(r.a.resumes()) != 1 || len(r.b.resumes()) != 1 {
					t.Errorf("want one resume at A, then one at B: %v", r)
				}
			})
		})
	}
}

// (4) A answers the same S 25 times (no B reachable): at most 20 new
// connections for the search, each retry on its own connection, then the
// 410, within the bound.
func TestOutsideSearchSameSBoundsConnections(t *testing.T) {
	t.Parallel()
	srchVariants(t, func(t *testing.T, tls, event bool) {
		r := srchWatch(t, srchCase{tls: tls, event: event,
			fresh: func(n int) srchAnswer {
				if n <= 25 {
					return srchTooOld(srchS)
				}
				return srchAnswer{hold: true}
			},
			route: func(int, time.Duration) srchKind { return srchToA }})
		at := r.wantGone(t)
		res := r.a.resumes()
		if len(res) < 2 || len(res) > 21 || len(r.after) > 21 {
			t.Errorf("want 2..21 resumes at A on at most 21 new connections: %v", r)
		}
		remotes := map[string]bool{}
		for _, q := range res {
			remotes[q.remote] = true
		}
		if len(remotes) != len(res) {
			t.Errorf("want every resume on a new connection: %d resumes on %d connections", len(res), len(remotes))
		}
		if len(res) > 0 && !at.IsZero() && at.Sub(res[0].at) > srchBound+srchSlack {
			t.Errorf("410 delivered %v after the first 410, bound %v+%v", at.Sub(res[0].at), srchBound, srchSlack)
		}
	})
}

// (5) The second 410 names another S: handed over at once.
func TestOutsideSearchDifferentS(t *testing.T) {
	t.Parallel()
	srchVariants(t, func(t *testing.T, tls, event bool) {
		r := srchWatch(t, srchCase{tls: tls, event: event,
			fresh: func(n int) srchAnswer {
				switch n {
				case 1:
					return srchTooOld(srchS)
				case 2:
					return srchTooOld(srchS + 1)
				}
				return srchAnswer{hold: true}
			},
			route: func(int, time.Duration) srchKind { return srchToA }})
		at := r.wantGone(t)
		res := r.a.resumes()
		if len(res) != 2 {
			t.Errorf("want exactly two resumes at A: %v", r)
		}
		if len(res) == 2 && !at.IsZero() && at.Sub(res[1].at) > srchSlack {
			t.Errorf("410 delivered %v after the second 410, want at once (<%v)", at.Sub(res[1].at), srchSlack)
		}
	})
}

// (6) The search's retry is accepted and never answered: the 410 is
// handed over within the bound of the first 410.
func TestOutsideSearchSilentRetry(t *testing.T) {
	t.Parallel()
	srchVariants(t, func(t *testing.T, tls, event bool) {
		r := srchWatch(t, srchCase{tls: tls, event: event, fresh: srchAlwaysTooOld,
			route: func(n int, _ time.Duration) srchKind {
				switch n {
				case 1:
					return srchToA
				case 2:
					return srchHang
				}
				return srchToB
			}})
		at := r.wantGone(t)
		res := r.a.resumes()
		if len(res) != 1 || len(r.after) < 2 {
			t.Errorf("want one resume at A, then the silent retry: %v", r)
		}
		if len(res) > 0 && !at.IsZero() && at.Sub(res[0].at) > srchBound+srchSlack {
			t.Errorf("410 delivered %v after the first 410, bound %v+%v", at.Sub(res[0].at), srchBound, srchSlack)
		}
	})
}

// (7) etcd's compaction message, not the watch cache's: at once, no search.
func TestOutsideSearchCompactionMessage(t *testing.T) {
	t.Parallel()
	srchVariants(t, func(t *testing.T, tls, event bool) {
		r := srchWatch(t, srchCase{tls: tls, event: event,
			fresh: func(int) srchAnswer { return srchAnswer{msg: srchCompacted} },
			route: func(n int, _ time.Duration) srchKind {
				if n == 1 {
					return srchToA
				}
				return srchToB
			}})
		at := r.wantGone(t)
		res := r.a.resumes()
		if len(res) != 1 || len(r.b.resumes()) != 0 || r.obs.count() != 0 {
			t.Errorf("want one resume at A, none at B, no search: %v", r)
		}
		if len(res) == 1 && !at.IsZero() && at.Sub(res[0].at) > srchSlack {
			t.Errorf("410 delivered %v after it came, want at once (<%v)", at.Sub(res[0].at), srchSlack)
		}
		if len(r.seen) > 0 && r.seen[len(r.seen)-1].msg != srchCompacted {
			t.Errorf("want the server's own message, got %q", r.seen[len(r.seen)-1].msg)
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
			a := srchNewBackend(tls, srchAlwaysTooOld, true)
			b := srchNewBackend(tls, nil, true)
			f := srchNewFront(t, a, b, func(n int, _ time.Duration) srchKind {
				if n == 1 {
					return srchSlowA
				}
				return srchToB
			})
			f.slow = 3200 * time.Millisecond
			defer func() { f.stop(); a.srv.Close(); b.srv.Close() }()
			obs := &srchObserver{}
			cs := srchClientset(t, f, tls, obs)
			var mu sync.Mutex
			adds := map[string]int{}
			inf := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(srchNS)).Core().V1().ConfigMaps().Informer()
			inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(o interface{}) {
				m := o.(metav1.Object)
				mu.Lock()
				adds[m.GetName()]++
				mu.Unlock()
			}})
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() { inf.Run(stop); close(done) }()
			defer func() { close(stop); <-done }()
			count := func() int { mu.Lock(); defer mu.Unlock(); return len(adds) }
			waitFor := func(n int, d time.Duration) bool {
				for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
					if count() >= n {
						return true
					}
				}
				return false
			}
			if !waitFor(srchBreakRV-srchInitialRV, 20*time.Second) {
				t.Fatalf("informer never got the first events: %v", adds)
			}
			f.lose(t, 0)
			if !waitFor(srchLastRV-srchInitialRV, 30*time.Second) {
				t.Errorf("informer has %v after 30 s", adds)
			}
			time.Sleep(time.Second)
			a.mu.Lock()
			b.mu.Lock()
			lists := a.lists + b.lists
			b.mu.Unlock()
			a.mu.Unlock()
			mu.Lock()
			defer mu.Unlock()
			for n, c := range adds {
				if c != 1 {
					t.Errorf("%s added %d times", n, c)
				}
			}
			if lists != 1 || len(adds) != srchLastRV-srchInitialRV {
				t.Errorf("want one LIST and %d objects: %d LISTs, %v; A resumes %d, B resumes %d", srchLastRV-srchInitialRV, lists, adds, len(a.resumes()), len(b.resumes()))
			}
		})
	}
}

// writeAddedSince answers a watch with 200 and the ADDED events of
// ConfigMaps at resourceVersions from+1..last in namespace ns, flushed.
func writeAddedSince(w http.ResponseWriter, ns string, from, last int) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	for v := from + 1; v <= last; v++ {
		fmt.Fprintf(w, `{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm-%d","namespace":%q,"resourceVersion":"%d"}}}`+"\n", v, ns, v)
	}
	w.(http.Flusher).Flush()
}
