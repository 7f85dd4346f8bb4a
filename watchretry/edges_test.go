package watchretry_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"reflect"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// The outage edges of issue 8: each test failed on the code before it.

// refused is a dial to a stopped apiserver.
var refused = &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}

// TestFailureRunEndsWithAStreamUpForTheWindow: one refused dial, a reopen,
// an hour of a quiet healthy watch, then one more refused dial. Before, the
// InternalError window still ran from the first refused dial an hour ago,
// so the second one ended the watch at once.
func TestFailureRunEndsWithAStreamUpForTheWindow(t *testing.T) {
	for _, ct := range encodings {
		t.Run(ct, func(t *testing.T) {
			var h *harness
			first := event(t, ct, watch.Added, configMap("a", "101"))
			later := event(t, ct, watch.Modified, configMap("a", "102"))
			srv := newServer(t, ct,
				reply{body: first, cut: true, cutAt: len(first)},
				reply{connErr: refused},
				reply{cut: true, cutAt: 0, onEnd: func() { h.clock.Advance(time.Hour) }}, // up, silent, for an hour
				reply{connErr: refused},
				reply{body: later, hold: true})
			h = newHarness(t, srv, nil)
			wantAddedThenModified(t, h)
			// Immediate reopen, 1.2s after the first refusal, immediate again
			// after the hour (a new run), 1.2s after the second refusal.
			if sleeps := h.clock.Sleeps(); !reflect.DeepEqual(sleeps, []time.Duration{1200 * time.Millisecond, 1200 * time.Millisecond}) {
				t.Errorf("waited %v", sleeps)
			}
		})
	}
}

// TestEventWithoutResourceVersion: aggregated and virtual APIs may send
// objects without metadata.resourceVersion; the event is delivered and the
// resume point stays where it was. Before: an invalid frame (a resume, then
// an error after three).
func TestEventWithoutResourceVersion(t *testing.T) {
	for _, ct := range encodings {
		t.Run(ct, func(t *testing.T) {
			noRV := configMap("virtual", "")
			stream := append(event(t, ct, watch.Added, configMap("a", "101")), event(t, ct, watch.Added, noRV)...)
			stream = append(stream, event(t, ct, watch.Modified, noRV)...)
			srv := newServer(t, ct, reply{body: stream, cut: true, cutAt: len(stream)}, reply{body: event(t, ct, watch.Deleted, noRV), hold: true})
			h := newHarness(t, srv, nil)
			w := h.watch(t, metav1.ListOptions{ResourceVersion: "100"})
			got := collect(t, w, 4)
			w.Stop()
			want := []seen{{Type: watch.Added, RV: "101"}, {Type: watch.Added}, {Type: watch.Modified}, {Type: watch.Deleted}}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got %v, want %v", got, want)
			}
			if srv.requestCount() != 2 || srv.query(1).Get("resourceVersion") != "101" {
				t.Errorf("%d requests, resume at %q; want one resume at 101", srv.requestCount(), srv.query(1).Get("resourceVersion"))
			}
		})
	}
}

// TestWaitRespectsTheDeadline: a wait before a resume never runs past what
// is left of the caller's timeoutSeconds. Before, a Retry-After: 10 held a
// silent stream open up to ~66s past it.
func TestWaitRespectsTheDeadline(t *testing.T) {
	tooMany := func(ct string, seconds int32) reply {
		return reply{body: event(t, ct, watch.Error, errorStatus(429, metav1.StatusReasonTooManyRequests, seconds))}
	}
	for _, ct := range encodings {
		t.Run(ct, func(t *testing.T) {
			var h *harness
			first := event(t, ct, watch.Added, configMap("a", "101"))
			srv := newServer(t, ct,
				reply{body: first, cut: true, cutAt: len(first), onEnd: func() { h.clock.Advance(52 * time.Second) }},
				tooMany(ct, 10)) // 8s left of 60: a 10s wait would pass it
			h = newHarness(t, srv, nil)
			got := collect(t, h.watch(t, metav1.ListOptions{ResourceVersion: "100", TimeoutSeconds: timeout(60)}), -1)
			if len(got) != 1 || got[0].Type != watch.Added {
				t.Fatalf("got %v, want the event and a clean end", got)
			}
			if elapsed := h.clock.Now().Sub(epoch); elapsed > 60*time.Second {
				t.Errorf("the stream lived %v, past its 60s timeout", elapsed)
			}
			if n := srv.requestCount(); n != 2 {
				t.Errorf("%d requests, want the one resume", n)
			}
		})
	}
}

// TestSameResourceVersionBookmarkIsNotProgress: a server that answers each
// resume with a bookmark at the same resourceVersion and closes must not be
// reopened at once, again and again. Before: every reopen was immediate.
func TestSameResourceVersionBookmarkIsNotProgress(t *testing.T) {
	ct := jsonStream
	first := event(t, ct, watch.Added, configMap("a", "101"))
	same := event(t, ct, watch.Bookmark, bookmark("101", false))
	replies := []reply{{body: first}}
	for range 4 {
		replies = append(replies, reply{body: same})
	}
	replies = append(replies, reply{body: event(t, ct, watch.Modified, configMap("a", "102")), hold: true})
	srv := newServer(t, ct, replies...)
	h := newHarness(t, srv, nil)
	w := h.watch(t, metav1.ListOptions{ResourceVersion: "100", AllowWatchBookmarks: true})
	got := collect(t, w, 6)
	w.Stop()
	if len(got) != 6 || got[5].RV != "102" {
		t.Fatalf("got %v", got)
	}
	// The first end is after progress: immediate. The bookmarks say nothing
	// new, so the backoff grows (jitter 0.5).
	want := []time.Duration{1200 * time.Millisecond, 2400 * time.Millisecond, 4800 * time.Millisecond, 9600 * time.Millisecond}
	if sleeps := h.clock.Sleeps(); !reflect.DeepEqual(sleeps, want) {
		t.Errorf("waited %v, want %v", sleeps, want)
	}
}

// TestReadContract: Read with an empty slice returns at once; Read after
// Close returns io.EOF.
func TestReadContract(t *testing.T) {
	ct := jsonStream
	srv := newServer(t, ct, reply{body: event(t, ct, watch.Added, configMap("a", "101")), hold: true})
	resp, _ := rawWatch(t, srv, "resourceVersion=100", nil)
	if n, err := resp.Body.Read(nil); n != 0 || err != nil {
		t.Errorf("Read(nil) = %d, %v; want 0, nil at once", n, err)
	}
	buf := make([]byte, 4096)
	if n, err := resp.Body.Read(buf); n == 0 || err != nil {
		t.Fatalf("Read = %d, %v", n, err)
	}
	if err := resp.Body.Close(); err != nil {
		t.Fatal(err)
	}
	if n, err := resp.Body.Read(buf); n != 0 || err != io.EOF {
		t.Errorf("Read after Close = %d, %v; want 0, io.EOF", n, err)
	}
}

// TestParametersAsTheServerReadsThem: the watch request's parameters are
// read with apimachinery's conversions. Before, "sendInitialEvents=yes" read
// as false, and a huge timeoutSeconds overflowed the deadline.
func TestParametersAsTheServerReadsThem(t *testing.T) {
	ct := jsonStream
	t.Run("sendInitialEvents=yes waits for the end bookmark", func(t *testing.T) {
		// Initial events and a plain bookmark: without the end bookmark the
		// initial state is incomplete, so the break has no resume point.
		stream := append(event(t, ct, watch.Added, configMap("a", "101")), event(t, ct, watch.Bookmark, bookmark("101", false))...)
		srv := newServer(t, ct, reply{body: stream, cut: true, cutAt: len(stream)})
		resp, _ := rawWatch(t, srv, "sendInitialEvents=yes&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true", nil)
		data, err := io.ReadAll(resp.Body)
		if !bytes.Equal(data, stream) || err != io.ErrUnexpectedEOF || srv.requestCount() != 1 {
			t.Fatalf("read %d bytes, %v after %d requests; want the break passed through, no resume", len(data), err, srv.requestCount())
		}
	})
	t.Run("huge timeoutSeconds", func(t *testing.T) {
		first := event(t, ct, watch.Added, configMap("a", "101"))
		srv := newServer(t, ct, reply{body: first, cut: true, cutAt: len(first)}, reply{hold: true})
		resp, _ := rawWatch(t, srv, "resourceVersion=100&timeoutSeconds=9223372036854775807", nil)
		done := make(chan struct{})
		go func() { _, _ = io.Copy(io.Discard, resp.Body); close(done) }()
		waitFor(t, func() bool { return srv.requestCount() == 2 })
		resp.Body.Close()
		<-done
		seconds, err := strconv.ParseInt(srv.query(1).Get("timeoutSeconds"), 10, 64)
		if err != nil || seconds <= 0 {
			t.Errorf("resume timeoutSeconds %q, want a positive number", srv.query(1).Get("timeoutSeconds"))
		}
	})
}

// TestAbsorbedErrorNotDeliveredInALargeRead: a caller reading with large slices
// (a proxy's io.Copy) gets many frames a read; an ERROR 500 event
// the stream absorbs must not be among the bytes handed over. Found by the
// kretry-proxy e2e: kubectl and the Python client saw the ERROR events.
func TestAbsorbedErrorNotDeliveredInALargeRead(t *testing.T) {
	for _, ct := range encodings {
		t.Run(ct, func(t *testing.T) {
			added := event(t, ct, watch.Added, configMap("a", "101"))
			internal := event(t, ct, watch.Error, errorStatus(500, metav1.StatusReasonInternalError, 0))
			modified := event(t, ct, watch.Modified, configMap("a", "102"))
			srv := newServer(t, ct, reply{body: append(append([]byte{}, added...), internal...)}, reply{body: modified})
			resp, _ := rawWatch(t, srv, "resourceVersion=100", nil)
			var got []byte
			buf := make([]byte, 32<<10)
			for len(got) < len(added)+len(modified) {
				n, err := resp.Body.Read(buf)
				got = append(got, buf[:n]...)
				if err != nil {
					t.Fatalf("after %q: %v", got, err)
				}
			}
			resp.Body.Close()
			if want := append(append([]byte{}, added...), modified...); !bytes.Equal(got, want) {
				t.Fatalf("read %q\nwant %q", got, want)
			}
		})
	}
}

// TestGoneAfterAnOutageIsHeld: a resume that meets refused dials and then a
// 410 (a restarted apiserver) hands the 410 over after a hold drawn from the
// backoff step the outage reached, so that a fleet's relists spread out as
// client-go's reflector spreads them; a 410 straight after a cut is not held.
func TestGoneAfterAnOutageIsHeld(t *testing.T) {
	gone, _ := json.Marshal(errorStatus(410, metav1.StatusReasonExpired, 0))
	// Rand 0.5: reopen at once, then 1.2s, 2.4s, 4.8s after the three
	// refusals (the steps 0.8, 1.6, 3.2); the hold is half the 6.4s step
	// reached.
	held := []time.Duration{1200 * time.Millisecond, 2400 * time.Millisecond, 4800 * time.Millisecond, 3200 * time.Millisecond}
	tests := []struct {
		name     string
		refused  int
		inStream bool            // a 200 and an ERROR event 410, as kube-apiserver answers
		want     []time.Duration // the clock's sleeps, in order
	}{
		{"410 after a cut: at once", 0, false, nil},
		{"ERROR 410 after a cut: at once", 0, true, nil},
		{"410 after three refused dials: held", 3, false, held},
		{"ERROR 410 after three refused dials: held", 3, true, held},
	}
	for _, tt := range tests {
		for _, ct := range encodings {
			t.Run(tt.name+"/"+ct, func(t *testing.T) {
				first := event(t, ct, watch.Added, configMap("a", "101"))
				replies := []reply{{body: first, cut: true, cutAt: len(first)}}
				for range tt.refused {
					replies = append(replies, reply{connErr: refused})
				}
				if tt.inStream {
					replies = append(replies, reply{body: event(t, ct, watch.Error, errorStatus(410, metav1.StatusReasonExpired, 0))})
				} else {
					replies = append(replies, reply{status: http.StatusGone, contentType: "application/json", body: gone})
				}
				h := newHarness(t, newServer(t, ct, replies...), nil)
				w := h.watch(t, metav1.ListOptions{ResourceVersion: "100"})
				got := collect(t, w, 2)
				w.Stop()
				if want := []seen{{Type: watch.Added, RV: "101"}, {Type: watch.Error, Code: 410}}; !reflect.DeepEqual(got, want) {
					t.Fatalf("got %v, want %v", got, want)
				}
				if sleeps := h.clock.Sleeps(); !reflect.DeepEqual(sleeps, tt.want) {
					t.Errorf("waited %v, want %v", sleeps, tt.want)
				}
			})
		}
	}
}

// TestGoAwaySpreadsTheFirstReopen: a stream that ends with its server's
// GOAWAY (an apiserver shutting down drops every watch it serves at once)
// reopens after a draw from [0, 3s), here 1.5s; one that ends any other way
// reopens at once. Either way the events after the break arrive once.
func TestGoAwaySpreadsTheFirstReopen(t *testing.T) {
	tests := []struct {
		name  string
		cause error
		want  []time.Duration
	}{
		{"GOAWAY", http2.GoAwayError{LastStreamID: 3, ErrCode: http2.ErrCodeNo}, []time.Duration{1500 * time.Millisecond}},
		{"reset", io.ErrUnexpectedEOF, nil},
	}
	for _, ct := range encodings {
		for _, tt := range tests {
			t.Run(ct+"/"+tt.name, func(t *testing.T) {
				first := event(t, ct, watch.Added, configMap("a", "101"))
				later := event(t, ct, watch.Modified, configMap("a", "102"))
				srv := newServer(t, ct,
					reply{body: first, cut: true, cutAt: len(first), readErr: tt.cause},
					reply{body: later, hold: true})
				h := newHarness(t, srv, nil)
				wantAddedThenModified(t, h)
				if q := srv.query(1); q.Get("resourceVersion") != "101" {
					t.Errorf("resumed at %q, want 101", q.Get("resourceVersion"))
				}
				if sleeps := h.clock.Sleeps(); !reflect.DeepEqual(sleeps, tt.want) {
					t.Errorf("waited %v, want %v", sleeps, tt.want)
				}
			})
		}
	}
}
