package contract_test

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/kretry/kretry/transport"
)

// watchAnswer is how the raw server answers one watch request.
type watchAnswer struct {
	code   int           // 0: a 200 stream; else this status with body
	body   []byte        // the status body (default: a Status of code)
	extra  []string      // header pairs
	keep   bool          // a non-200: keep the connection open whatever the client asked
	stream []byte        // the stream's bytes after the head
	cut    int           // close after cut bytes of stream (-1: none)
	reset  bool          // the cut is a TCP RST
	end    bool          // after stream, end it cleanly (the terminating chunk, then keep or close)
	wait   time.Duration // answer only after this much virtual time (nothing if the client leaves first)
	// otherwise stay: the stream stays open until the client leaves or the
	// test cuts it (watchServer.cutStaying)
}

type watchServer struct {
	*rawServer
	held    atomic.Int64 // requests waiting out their watchAnswer.wait
	mu      sync.Mutex
	staying map[chan struct{}]bool // streams open, each with its cut
	media   string
}

// newWatchServer serves watches (and, by list, anything else) on HTTP/1.1.
func newWatchServer(t *testing.T, w *world, media string, script func(q rawReq) watchAnswer, list func(c *rawConn, q rawReq) bool) *watchServer {
	s := &watchServer{staying: map[chan struct{}]bool{}, media: media}
	s.rawServer = newRawServer(t, w.clk, func(c *rawConn, q rawReq) bool {
		if !isWatch(q) {
			if list == nil {
				return writeStatus(c, 404, metav1.StatusReasonNotFound, "no")
			}
			return list(c, q)
		}
		var a watchAnswer
		if q.url.Query().Has("sendInitialEvents") {
			// as a kube-apiserver without the WatchList feature: the
			// informer falls back to a LIST
			a = watchAnswer{code: 422, body: statusJSON(422, metav1.StatusReasonInvalid, "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled")}
		} else {
			a = script(q)
		}
		if a.wait > 0 && !s.waitOut(c, w.clk, a.wait) {
			return false
		}
		if a.code != 0 {
			b := a.body
			if b == nil {
				b = statusJSON(a.code, reasonOf(a.code), "answer "+strconv.Itoa(a.code))
			}
			if err := c.send(append(head(a.code, "application/json", len(b), a.extra...), b...)); err != nil {
				return false
			}
			return a.keep
		}
		// registered before a byte is sent: once the caller has the
		// events, cutStaying reaches this stream
		cut := make(chan struct{})
		s.mu.Lock()
		s.staying[cut] = true
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			delete(s.staying, cut)
			s.mu.Unlock()
		}()
		if err := c.send(head(200, watchCType(media), -1, a.extra...)); err != nil {
			return false
		}
		part := a.stream
		if a.cut >= 0 && a.cut < len(part) {
			part = part[:a.cut]
		}
		if err := c.send(chunk(part)); err != nil {
			return false
		}
		if a.cut >= 0 && a.cut < len(a.stream) {
			if a.reset {
				c.reset()
			} else {
				c.Close()
			}
			return false
		}
		if a.end {
			c.send([]byte("0\r\n\r\n"))
			return false
		}
		return s.stay(c, cut)
	})
	return s
}

func reasonOf(code int) metav1.StatusReason {
	switch code {
	case 410:
		return metav1.StatusReasonExpired
	case 429:
		return metav1.StatusReasonTooManyRequests
	case 500:
		return metav1.StatusReasonInternalError
	case 503:
		return metav1.StatusReasonServiceUnavailable
	}
	return metav1.StatusReasonUnknown
}

func isWatch(q rawReq) bool {
	v := q.q("watch")
	return (q.url.Query().Has("watch") && v != "0" && v != "false") || strings.Contains(q.url.Path, "/watch/")
}

// waitOut waits d of virtual time; false if the client left first.
func (s *watchServer) waitOut(c *rawConn, clk *vclock, d time.Duration) bool {
	done := make(chan struct{})
	clk.AfterFunc(d, func() { close(done) })
	gone := clientLeaves(c)
	s.held.Add(1)
	defer s.held.Add(-1)
	select {
	case <-done:
		c.Conn.SetReadDeadline(time.Now()) // end the watcher goroutine
		<-gone
		c.Conn.SetReadDeadline(time.Time{})
		return true
	case <-gone:
		return false
	case <-time.After(hang):
		return false
	}
}

// stay holds a stream open until the client leaves or cutStaying.
func (s *watchServer) stay(c *rawConn, cut chan struct{}) bool {
	select {
	case <-cut:
	case <-clientLeaves(c):
	}
	c.Close()
	return false
}

// clientLeaves is closed when a read on c returns: the client closed the
// connection, or the read's deadline passed.
func clientLeaves(c *rawConn) <-chan struct{} {
	gone := make(chan struct{})
	go func() {
		b := make([]byte, 1)
		c.Conn.Read(b)
		close(gone)
	}()
	return gone
}

// cutStaying closes every stream staying open.
func (s *watchServer) cutStaying() {
	s.mu.Lock()
	for cut := range s.staying {
		close(cut)
		delete(s.staying, cut)
	}
	s.mu.Unlock()
}

// quiet reports whether one stream is open and none of kretry's attempts
// waits for an answer: the watch is up, and nothing moves on it.
func (s *watchServer) quiet() bool { return s.stayingNow() == 1 && s.clk.inflight.Load() == 0 }

// waitQuiet waits until the server has had n watches and the last is up,
// quiet.
func (s *watchServer) waitQuiet(t *testing.T, n int) {
	t.Helper()
	eventually(t, "the quiet stream", func() bool { return len(s.watches()) == n && s.quiet() })
}

// stayingNow is how many streams are open (a 200 sent, not cut).
func (s *watchServer) stayingNow() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.staying)
}

func (s *watchServer) watches() []rawReq {
	var out []rawReq
	for _, q := range s.requests() {
		if isWatch(q) && !q.url.Query().Has("sendInitialEvents") {
			out = append(out, q)
		}
	}
	return out
}

// events encodes MODIFIED events of pod "p" at from+1..to in media.
func events(media string, from, to int) []byte {
	var b []byte
	for rv := from + 1; rv <= to; rv++ {
		b = append(b, event(media, "MODIFIED", pod("p", rv))...)
	}
	return b
}

// openStream is a 200 that sends the MODIFIED events of pod "p" at
// from+1..to in media, then stays open.
func openStream(media string, from, to int) watchAnswer {
	return watchAnswer{stream: events(media, from, to), cut: -1}
}

func errorEvent(media string, code int, msg string) []byte {
	return event(media, "ERROR", status(code, reasonOf(code), msg))
}

// watchPods watches the pods of "ns" through cs with opts, collecting what
// the watch delivers; the watch is stopped when the test ends.
func watchPods(t *testing.T, cs kubernetes.Interface, opts metav1.ListOptions) *collector {
	t.Helper()
	wi, err := cs.CoreV1().Pods("ns").Watch(realCtx(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(wi.Stop)
	return collect(wi)
}

// collector gathers what a watch.Interface delivers.
type collector struct {
	mu     sync.Mutex
	evs    []watch.Event
	closed bool
}

func collect(wi watch.Interface) *collector {
	c := &collector{}
	go func() {
		for ev := range wi.ResultChan() {
			c.mu.Lock()
			c.evs = append(c.evs, ev)
			c.mu.Unlock()
		}
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
	}()
	return c
}

func (c *collector) snapshot() ([]watch.Event, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]watch.Event(nil), c.evs...), c.closed
}

func (c *collector) count() int {
	evs, _ := c.snapshot()
	return len(evs)
}

func (c *collector) isClosed() bool {
	_, closed := c.snapshot()
	return closed
}

// waitCount waits until the caller has had exactly n events.
func (c *collector) waitCount(t *testing.T, n int) {
	t.Helper()
	eventually(t, fmt.Sprintf("%d events", n), func() bool { return c.count() == n })
}

// eventsOrEnd waits until the caller has had n events or the watch has
// ended, and returns the events it has.
func (c *collector) eventsOrEnd(t *testing.T, n int) []watch.Event {
	t.Helper()
	eventually(t, fmt.Sprintf("%d events", n), func() bool { return c.count() >= n || c.isClosed() })
	evs, _ := c.snapshot()
	return evs
}

// waitClosed waits until the watch ends and returns every event the caller
// had.
func (c *collector) waitClosed(t *testing.T) []watch.Event {
	t.Helper()
	eventually(t, "the end", c.isClosed)
	evs, _ := c.snapshot()
	return evs
}

// describe is the caller's events in short: MODIFIED@101 ERROR:500 ...
func describe(evs []watch.Event) string {
	var parts []string
	for _, ev := range evs {
		switch o := ev.Object.(type) {
		case *corev1.Pod:
			parts = append(parts, fmt.Sprintf("%s@%s", ev.Type, o.ResourceVersion))
		case *metav1.Status:
			parts = append(parts, fmt.Sprintf("%s:%d", ev.Type, o.Code))
		default:
			parts = append(parts, fmt.Sprintf("%s:%T", ev.Type, ev.Object))
		}
	}
	return strings.Join(parts, " ")
}

// rvs is the resourceVersions of the caller's pod events.
func rvs(evs []watch.Event) []int {
	var out []int
	for _, ev := range evs {
		if p, ok := ev.Object.(*corev1.Pod); ok {
			n, _ := strconv.Atoi(p.ResourceVersion)
			out = append(out, n)
		}
	}
	return out
}

// since is how many of the requests arrived at or after at.
func since(reqs []rawReq, at time.Time) int {
	n := 0
	for _, q := range reqs {
		if !q.at.Before(at) {
			n++
		}
	}
	return n
}

// timeoutTrail is each request's timeoutSeconds and its arrival after
// start: ["60@0s", "50@10s", ...].
func timeoutTrail(reqs []rawReq, start time.Time) []string {
	var out []string
	for _, q := range reqs {
		out = append(out, q.q("timeoutSeconds")+"@"+q.at.Sub(start).String())
	}
	return out
}

// onlyGiveUp is the one give-up kretry reported; the test ends unless
// there is exactly one.
func (o *observer) onlyGiveUp(t *testing.T) transport.GiveUpEvent {
	t.Helper()
	s := o.Events()
	if len(s.GiveUps) != 1 {
		t.Fatalf("give-ups %+v", s.GiveUps)
	}
	return s.GiveUps[0]
}

func seq(from, to int) []int {
	var out []int
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}
