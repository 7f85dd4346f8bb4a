package watchretry_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/jarcoal/httpmock"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kretry/kretry/internal/harness/fakeclock"
	"github.com/kretry/kretry/internal/policy"
	"github.com/kretry/kretry/watchretry"
)

var encodings = []string{jsonStream, protoStream}

// history is the server's event log: ADDED, MODIFIED, DELETED of one
// object at resourceVersions 101, 102, 103.
func history(t testing.TB, ct string) (events [][]byte, rvs []int) {
	return [][]byte{
		event(t, ct, watch.Added, configMap("a", "101")),
		event(t, ct, watch.Modified, configMap("a", "102")),
		event(t, ct, watch.Deleted, configMap("a", "103")),
	}, []int{101, 102, 103}
}

// resumeFrom answers a resume with every event after its resourceVersion,
// then keeps the watch open.
func resumeFrom(t testing.TB, events [][]byte, rvs []int) func(url.Values) reply {
	return func(q url.Values) reply {
		from := rvAfter(t, q)
		var body []byte
		for i, rv := range rvs {
			if rv > from {
				body = append(body, events[i]...)
			}
		}
		return reply{body: body, hold: true}
	}
}

var wantHistory = []seen{{Type: watch.Added, RV: "101"}, {Type: watch.Modified, RV: "102"}, {Type: watch.Deleted, RV: "103"}}

// watchHistory watches from 100 through srv, whose scripted replies are
// followed by resumes answered from the history, and checks that the caller
// sees the history exactly once.
func watchHistory(t *testing.T, srv *server, events [][]byte, rvs []int) *harness {
	t.Helper()
	srv.next = resumeFrom(t, events, rvs)
	h := newHarness(t, srv, nil)
	w := h.watch(t, metav1.ListOptions{ResourceVersion: "100"})
	got := collect(t, w, 3)
	w.Stop()
	if !reflect.DeepEqual(got, wantHistory) {
		t.Fatalf("got %v, want %v", got, wantHistory)
	}
	return h
}

// TestCutAtEveryOffset cuts the stream at every byte and checks that the
// caller sees each event exactly once, in order, and that the resume asks
// for what follows the last whole event.
func TestCutAtEveryOffset(t *testing.T) {
	for _, ct := range encodings {
		t.Run(ct, func(t *testing.T) {
			events, rvs := history(t, ct)
			stream := bytes.Join(events, nil)
			for cut := 0; cut < len(stream); cut++ {
				srv := newServer(t, ct, reply{body: stream, cut: true, cutAt: cut})
				srv.next = resumeFrom(t, events, rvs)
				h := newHarness(t, srv, nil)
				w := h.watch(t, metav1.ListOptions{ResourceVersion: "100", TimeoutSeconds: timeout(60)})
				got := collect(t, w, 3)
				// The decoder reads on after the third event, into the cut.
				waitFor(t, func() bool { return srv.requestCount() == 2 })
				w.Stop()
				if !reflect.DeepEqual(got, wantHistory) {
					t.Fatalf("cut at %d: got %v, want %v", cut, got, wantHistory)
				}
				// A JSON event is whole at its closing brace; the newline
				// after it only separates it from the next.
				separator := map[string]int{jsonStream: 1, protoStream: 0}[ct]
				wantRV := 100
				for i, end := 0, 0; i < len(events); i++ {
					if end += len(events[i]); end-separator <= cut {
						wantRV = rvs[i]
					}
				}
				if q := srv.query(1); rvAfter(t, q) != wantRV {
					t.Fatalf("cut at %d: resumed at %s, want %d", cut, q.Get("resourceVersion"), wantRV)
				}
			}
		})
	}
}

func TestErrorEventTooManyRequestsIsAbsorbed(t *testing.T) {
	for _, ct := range encodings {
		for _, tc := range []struct {
			name       string
			retryAfter int32
			wantWait   time.Duration
		}{
			{"retryAfterSeconds", 3, 3*time.Second + 150*time.Millisecond}, // +10% jitter at Rand 0.5
			{"no retryAfterSeconds", 0, 1200 * time.Millisecond},           // 800ms backoff +50% jitter
		} {
			t.Run(ct+"/"+tc.name, func(t *testing.T) {
				events, rvs := history(t, ct)
				first := append(append([]byte{}, events[0]...), event(t, ct, watch.Error, errorStatus(429, metav1.StatusReasonTooManyRequests, tc.retryAfter))...)
				h := watchHistory(t, newServer(t, ct, reply{body: first, hold: true}), events, rvs)
				if sleeps := h.clock.Sleeps(); !reflect.DeepEqual(sleeps, []time.Duration{tc.wantWait}) {
					t.Fatalf("waited %v, want [%v]", sleeps, tc.wantWait)
				}
				if rv := h.server.query(1).Get("resourceVersion"); rv != "101" {
					t.Fatalf("resumed at %q, want 101", rv)
				}
			})
		}
	}
}

// TestInternalErrorWindowExhausted: "200, then ERROR 500" forever is not
// progress; once the window is spent the last ERROR 500 is delivered and the
// stream ends, so that client-go relists, as its own
// MaxInternalErrorRetryDuration does. Fails before: a clean end, on which
// client-go re-watched at the same resourceVersion into the same errors,
// window after window, its cache stale.
func TestInternalErrorWindowExhausted(t *testing.T) {
	for _, ct := range encodings {
		t.Run(ct, func(t *testing.T) {
			internal := event(t, ct, watch.Error, errorStatus(500, metav1.StatusReasonInternalError, 0))
			first := append(event(t, ct, watch.Added, configMap("a", "101")), internal...)
			srv := newServer(t, ct, reply{body: first})
			// Each answer: the ERROR event, then the server's clean end.
			srv.next = func(url.Values) reply { return reply{body: internal} }
			h := newHarness(t, srv, nil)
			w := h.watch(t, metav1.ListOptions{ResourceVersion: "100"})
			got := collect(t, w, -1)
			want := []seen{{Type: watch.Added, RV: "101"}, {Type: watch.Error, Code: 500}}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got %v, want %v", got, want)
			}
			// 1.2s, 2.4s, 4.8s, 9.6s, then the 19.2s backoff is cut to
			// land on the window's end (30s after the first failure).
			waits := []time.Duration{1200 * time.Millisecond, 2400 * time.Millisecond, 4800 * time.Millisecond, 9600 * time.Millisecond, 12 * time.Second}
			if sleeps := h.clock.Sleeps(); !reflect.DeepEqual(sleeps, waits) {
				t.Fatalf("waited %v, want %v", sleeps, waits)
			}
			if n := srv.requestCount(); n != 6 {
				t.Fatalf("%d requests, want 6", n)
			}
		})
	}
}

func TestGoneInStreamIsDelivered(t *testing.T) {
	for _, ct := range encodings {
		t.Run(ct, func(t *testing.T) {
			body := append(event(t, ct, watch.Added, configMap("a", "101")), event(t, ct, watch.Error, errorStatus(410, metav1.StatusReasonExpired, 0))...)
			srv := newServer(t, ct, reply{body: body})
			h := newHarness(t, srv, nil)
			got := collect(t, h.watch(t, metav1.ListOptions{ResourceVersion: "100"}), -1)
			want := []seen{{Type: watch.Added, RV: "101"}, {Type: watch.Error, Code: 410}}
			if !reflect.DeepEqual(got, want) || srv.requestCount() != 1 {
				t.Fatalf("got %v after %d requests, want %v after 1", got, srv.requestCount(), want)
			}
		})
	}
}

func TestGoneOnResumeBecomesErrorEvent(t *testing.T) {
	for _, ct := range encodings {
		t.Run(ct, func(t *testing.T) {
			gone, _ := json.Marshal(errorStatus(410, metav1.StatusReasonExpired, 0))
			first := event(t, ct, watch.Added, configMap("a", "101"))
			srv := newServer(t, ct,
				reply{body: first, cut: true, cutAt: len(first)},
				reply{status: http.StatusGone, contentType: "application/json", body: gone})
			h := newHarness(t, srv, nil)
			got := collect(t, h.watch(t, metav1.ListOptions{ResourceVersion: "100"}), -1)
			want := []seen{{Type: watch.Added, RV: "101"}, {Type: watch.Error, Code: 410}}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got %v, want %v", got, want)
			}
		})
	}
}

func TestWatchListResumesOnlyAfterInitialEventsEnd(t *testing.T) {
	opts := metav1.ListOptions{
		SendInitialEvents: ptr(true), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		AllowWatchBookmarks: true, TimeoutSeconds: timeout(60),
	}
	for _, ct := range encodings {
		t.Run(ct+"/before", func(t *testing.T) {
			initial := append(event(t, ct, watch.Added, configMap("a", "101")), event(t, ct, watch.Added, configMap("b", "102"))...)
			srv := newServer(t, ct, reply{body: initial, cut: true, cutAt: len(initial) - 5})
			h := newHarness(t, srv, nil)
			got := collect(t, h.watch(t, opts), -1)
			if want := []seen{{Type: watch.Added, RV: "101"}}; !reflect.DeepEqual(got, want) || srv.requestCount() != 1 {
				t.Fatalf("got %v after %d requests; want %v and no resume", got, srv.requestCount(), want)
			}
		})
		t.Run(ct+"/after", func(t *testing.T) {
			initial := bytes.Join([][]byte{
				event(t, ct, watch.Added, configMap("a", "101")),
				event(t, ct, watch.Added, configMap("b", "102")),
				event(t, ct, watch.Bookmark, bookmark("105", true)),
			}, nil)
			srv := newServer(t, ct, reply{body: initial, cut: true, cutAt: len(initial)},
				reply{body: event(t, ct, watch.Modified, configMap("a", "106")), hold: true})
			h := newHarness(t, srv, nil)
			w := h.watch(t, opts)
			got := collect(t, w, 4)
			w.Stop()
			want := []seen{{watch.Added, "101", 0}, {watch.Added, "102", 0}, {watch.Bookmark, "105", 0}, {watch.Modified, "106", 0}}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got %v, want %v", got, want)
			}
			q := srv.query(1)
			if q.Get("resourceVersion") != "105" || q.Has("sendInitialEvents") || q.Has("resourceVersionMatch") || q.Get("allowWatchBookmarks") != "true" {
				t.Fatalf("resume query %v", q)
			}
		})
	}
}

func TestUnsetResourceVersion(t *testing.T) {
	for _, rv := range []string{"", "0"} {
		ct := jsonStream
		t.Run("rv="+rv+"/initial ADDED only", func(t *testing.T) {
			body := append(event(t, ct, watch.Added, configMap("a", "101")), event(t, ct, watch.Added, configMap("b", "102"))...)
			srv := newServer(t, ct, reply{body: body, cut: true, cutAt: len(body)})
			h := newHarness(t, srv, nil)
			got := collect(t, h.watch(t, metav1.ListOptions{ResourceVersion: rv}), -1)
			if len(got) != 2 || srv.requestCount() != 1 {
				t.Fatalf("got %v after %d requests; want both events and no resume", got, srv.requestCount())
			}
		})
		t.Run("rv="+rv+"/after MODIFIED", func(t *testing.T) {
			body := append(event(t, ct, watch.Added, configMap("a", "101")), event(t, ct, watch.Modified, configMap("a", "103"))...)
			srv := newServer(t, ct, reply{body: body, cut: true, cutAt: len(body)})
			h := newHarness(t, srv, nil)
			w := h.watch(t, metav1.ListOptions{ResourceVersion: rv})
			collect(t, w, 2)
			waitFor(t, func() bool { return srv.requestCount() == 2 })
			w.Stop()
			if got := srv.query(1).Get("resourceVersion"); got != "103" {
				t.Fatalf("resumed at %q, want 103", got)
			}
		})
	}
}

func TestResumeCarriesRemainingTimeout(t *testing.T) {
	for _, tc := range []struct {
		elapsed     time.Duration
		wantTimeout string // "" = the watch is over, no resume
	}{
		{10*time.Second + 500*time.Millisecond, "50"},
		{59 * time.Second, "1"},
		{59*time.Second + 100*time.Millisecond, ""},
	} {
		t.Run(tc.elapsed.String(), func(t *testing.T) {
			ct := jsonStream
			var h *harness
			first := event(t, ct, watch.Added, configMap("a", "101"))
			srv := newServer(t, ct, reply{body: first, cut: true, cutAt: len(first), onEnd: func() { h.clock.Advance(tc.elapsed) }})
			h = newHarness(t, srv, nil)
			w := h.watch(t, metav1.ListOptions{ResourceVersion: "100", TimeoutSeconds: timeout(60)})
			collect(t, w, 1)
			if tc.wantTimeout == "" {
				if rest := collect(t, w, -1); len(rest) != 0 || srv.requestCount() != 1 {
					t.Fatalf("got %v after %d requests; want a clean end", rest, srv.requestCount())
				}
				return
			}
			waitFor(t, func() bool { return srv.requestCount() == 2 })
			w.Stop()
			if got := srv.query(1).Get("timeoutSeconds"); got != tc.wantTimeout {
				t.Fatalf("resume timeoutSeconds=%s, want %s", got, tc.wantTimeout)
			}
		})
	}
}

func TestCleanEndAfterTimeoutIsTheEnd(t *testing.T) {
	ct := jsonStream
	var h *harness
	first := event(t, ct, watch.Added, configMap("a", "101"))
	srv := newServer(t, ct, reply{body: first, onEnd: func() { h.clock.Advance(60 * time.Second) }})
	h = newHarness(t, srv, nil)
	got := collect(t, h.watch(t, metav1.ListOptions{ResourceVersion: "100", TimeoutSeconds: timeout(60)}), -1)
	if len(got) != 1 || srv.requestCount() != 1 {
		t.Fatalf("got %v after %d requests; want one event and no resume", got, srv.requestCount())
	}
}

func TestEarlyCleanEndResumes(t *testing.T) {
	ct := jsonStream
	events, rvs := history(t, ct)
	srv := newServer(t, ct, reply{body: events[0]}) // clean EOF, no timeout elapsed
	srv.next = resumeFrom(t, events, rvs)
	h := newHarness(t, srv, nil)
	w := h.watch(t, metav1.ListOptions{ResourceVersion: "100", TimeoutSeconds: timeout(60)})
	got := collect(t, w, 3)
	w.Stop()
	if !reflect.DeepEqual(got, wantHistory) {
		t.Fatalf("got %v", got)
	}
}

func TestMalformedFrame(t *testing.T) {
	malformed := map[string][]byte{
		jsonStream:  []byte(`{"type":"NOPE","object":{"metadata":{"resourceVersion":"999"}}}` + "\n"),
		protoStream: {0, 0, 0, 4, 0xff, 0xff, 0xff, 0xff},
	}
	for _, ct := range encodings {
		t.Run(ct+"/resumes from last good", func(t *testing.T) {
			events, rvs := history(t, ct)
			srv := newServer(t, ct, reply{body: append(append([]byte{}, events[0]...), malformed[ct]...), hold: true})
			srv.next = resumeFrom(t, events, rvs)
			h := newHarness(t, srv, nil)
			w := h.watch(t, metav1.ListOptions{ResourceVersion: "100"})
			got := collect(t, w, 3)
			w.Stop()
			if !reflect.DeepEqual(got, wantHistory) || srv.query(1).Get("resourceVersion") != "101" {
				t.Fatalf("got %v, resumed at %s", got, srv.query(1).Get("resourceVersion"))
			}
		})
		t.Run(ct+"/bounded", func(t *testing.T) {
			srv := newServer(t, ct)
			srv.next = func(url.Values) reply { return reply{body: malformed[ct], hold: true} }
			h := newHarness(t, srv, nil)
			got := collect(t, h.watch(t, metav1.ListOptions{ResourceVersion: "100"}), -1)
			if len(got) != 1 || got[0].Type != watch.Error {
				t.Fatalf("got %v, want one decode error", got)
			}
			if n := srv.requestCount(); n != 1+policy.DefaultMaxInvalidFrames {
				t.Fatalf("%d requests, want %d", n, 1+policy.DefaultMaxInvalidFrames)
			}
		})
	}
}

func TestOversizeFrameEndsStream(t *testing.T) {
	for _, ct := range encodings {
		t.Run(ct, func(t *testing.T) {
			big := configMap("big", "102")
			big.Data["blob"] = string(bytes.Repeat([]byte("x"), 4096))
			body := append(event(t, ct, watch.Added, configMap("a", "101")), event(t, ct, watch.Added, big)...)
			srv := newServer(t, ct, reply{body: body, hold: true})
			h := newHarness(t, srv, func(c *watchretry.TestConfig) { c.MaxFrameSize = 1024 })
			got := collect(t, h.watch(t, metav1.ListOptions{ResourceVersion: "100"}), -1)
			if len(got) != 2 || got[0].RV != "101" || got[1].Type != watch.Error || srv.requestCount() != 1 {
				t.Fatalf("got %v after %d requests", got, srv.requestCount())
			}
		})
	}
}

// TestResumeGiveUpsEndCleanly: a resume answered with anything but a 200 in
// the stream's encoding or a 410 (401/403, which the auth layers above must
// see on the caller's own re-watch; another 4xx; a 5xx past its window;
// another content type) ends the stream as the cut would have without
// kretry: a clean end after the last whole frame, no error, no ERROR event,
// so client-go re-watches instead of relisting. Before: an ERROR event or a
// Status error, which make client-go relist.
func TestResumeGiveUpsEndCleanly(t *testing.T) {
	ct := jsonStream
	first := event(t, ct, watch.Added, configMap("a", "101"))
	status := func(code int32, reason metav1.StatusReason) reply {
		body, _ := json.Marshal(errorStatus(code, reason, 0))
		return reply{status: int(code), contentType: "application/json", body: body}
	}
	tests := []struct {
		name   string
		answer reply
	}{
		{"401", status(401, metav1.StatusReasonUnauthorized)},
		{"403", status(403, metav1.StatusReasonForbidden)},
		{"404", status(404, metav1.StatusReasonNotFound)},
		{"500 past the window", status(500, metav1.StatusReasonInternalError)},
		{"another content type", reply{contentType: "application/cbor-seq", body: []byte{0xa1}, hold: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, ct, reply{body: first, cut: true, cutAt: len(first)})
			srv.next = func(url.Values) reply { return tt.answer }
			resp, _ := rawWatch(t, srv, "resourceVersion=100", func(c *watchretry.TestConfig) {
				c.Policy = policy.New(policy.Config{Clock: fakeclock.New(epoch), InternalErrorWindow: 5 * time.Second})
			})
			data, err := io.ReadAll(resp.Body)
			if !bytes.Equal(data, first) || err != nil {
				t.Fatalf("read %q, %v; want the first event, then a clean end", data, err)
			}
			waitFor(t, srv.allClosed)
		})
	}
	// Through client-go's decoder: the channel closes, no ERROR event.
	srv := newServer(t, ct, reply{body: first, cut: true, cutAt: len(first)}, status(403, metav1.StatusReasonForbidden))
	h := newHarness(t, srv, nil)
	if got := collect(t, h.watch(t, metav1.ListOptions{ResourceVersion: "100"}), -1); len(got) != 1 || got[0].Type != watch.Added {
		t.Fatalf("got %v, want the one event and a closed channel", got)
	}
}

// TestBreakWithoutResumePointIsTheSameError: with nothing to resume from, the
// caller gets the very error the connection gave.
func TestBreakWithoutResumePointIsTheSameError(t *testing.T) {
	ct := jsonStream
	broken := errors.New("connection reset by peer (injected)")
	body := event(t, ct, watch.Added, configMap("a", "101"))
	srv := newServer(t, ct, reply{body: body, cut: true, cutAt: len(body) - 3, readErr: broken})
	resp, _ := rawWatch(t, srv, "resourceVersion=0", nil)
	data, err := io.ReadAll(resp.Body)
	if len(data) != 0 || err != broken {
		t.Fatalf("read %q, %v; want nothing and the connection's own error", data, err)
	}
}

// TestBytesPassThroughUnchanged: separators and everything between frames
// reach the caller byte for byte.
func TestBytesPassThroughUnchanged(t *testing.T) {
	ct := jsonStream
	events, _ := history(t, ct)
	var stream []byte
	for _, e := range events {
		stream = append(append(stream, " \n\t"...), bytes.TrimSuffix(e, []byte("\n"))...)
	}
	stream = append(stream, "\n\n"...)
	// The clean end comes before timeoutSeconds: a break, resumed into an
	// idle watch; the caller must have every byte by then.
	srv := newServer(t, ct, reply{body: stream})
	resp, _ := rawWatch(t, srv, "resourceVersion=100&timeoutSeconds=5", nil)
	buf := make([]byte, len(stream))
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if !bytes.Equal(buf, stream) {
		t.Fatalf("delivered %q\nwant      %q", buf, stream)
	}
}

func TestCloseDuringWait(t *testing.T) {
	ct := jsonStream
	first := event(t, ct, watch.Added, configMap("a", "101"))
	broke := make(chan struct{})
	srv := newServer(t, ct, reply{body: first, cut: true, cutAt: len(first)},
		reply{body: nil, cut: true, cutAt: 0, onEnd: func() { close(broke) }}) // breaks again at once: the next wait is a backoff
	clock := clocktesting.NewFakeClock(epoch) // never stepped: a wait lasts until Close
	h := newHarness(t, srv, func(c *watchretry.TestConfig) {
		c.Policy = policy.New(policy.Config{Clock: clock, Rand: func() float64 { return 0.5 }})
	})
	w := h.watch(t, metav1.ListOptions{ResourceVersion: "100"})
	collect(t, w, 1)
	waitingOn(t, clock, broke)
	w.Stop()
	if rest := collect(t, w, -1); len(rest) != 0 {
		t.Fatalf("after Stop: %v", rest)
	}
	waitFor(t, srv.allClosed)
}

// waitingOn returns once a wait has started on clock.
// after is closed once the break the wait follows has been read: before
// it, the clock's waiter may be the bound of the attempt in flight.
func waitingOn(t testing.TB, clock *clocktesting.FakeClock, after <-chan struct{}) {
	t.Helper()
	<-after
	waitFor(t, clock.HasWaiters)
}

// rawWatch sends one watch request straight through watchretry.
func rawWatch(t testing.TB, srv *server, query string, tune func(*watchretry.TestConfig)) (*http.Response, *fakeclock.Clock) {
	t.Helper()
	mock := httpmock.NewMockTransport()
	mock.RegisterNoResponder(srv.respond)
	clock := fakeclock.New(epoch)
	cfg := watchretry.TestConfig{Policy: policy.New(policy.Config{Clock: clock, Rand: func() float64 { return 0.5 }})}
	if tune != nil {
		tune(&cfg)
	}
	req, err := http.NewRequest(http.MethodGet, "http://kretry.test/api/v1/namespaces/demo/configmaps?watch=true&"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := watchretry.NewForTest(mock, cfg).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp, clock
}

// waitFor polls cond; it only bounds a hang, nothing here depends on timing.
func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition never became true")
		}
	}
}

func ptr[T any](v T) *T { return &v }

func TestStallTimeoutResumes(t *testing.T) {
	ct := jsonStream
	events, rvs := history(t, ct)
	srv := newServer(t, ct, reply{body: events[0], hold: true}) // then silence
	srv.next = resumeFrom(t, events, rvs)
	h := newHarness(t, srv, func(c *watchretry.TestConfig) { c.StallTimeout = 10 * time.Second })
	w := h.watch(t, metav1.ListOptions{ResourceVersion: "100"})
	collect(t, w, 1)
	// The stream now waits for a byte with its stall timer armed.
	waitFor(t, func() bool { return h.clock.PendingTimers() == 1 })
	h.clock.Advance(10 * time.Second)
	got := collect(t, w, 2)
	w.Stop()
	if want := wantHistory[1:]; !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if rv := srv.query(1).Get("resourceVersion"); rv != "101" {
		t.Fatalf("resumed at %q, want 101", rv)
	}
}

// TestUnknownEncodingPassesThrough: a stream kretry cannot frame reaches
// the caller as the server sent it, break included, without resume.
func TestUnknownEncodingPassesThrough(t *testing.T) {
	body := []byte("type: ADDED\n")
	srv := newServer(t, "application/yaml", reply{body: body, cut: true, cutAt: len(body)})
	resp, _ := rawWatch(t, srv, "resourceVersion=100", nil)
	data, err := io.ReadAll(resp.Body)
	if !bytes.Equal(data, body) || err != io.ErrUnexpectedEOF || srv.requestCount() != 1 {
		t.Fatalf("read %x, %v after %d requests; want the bytes and the break as they were, no resume", data, err, srv.requestCount())
	}
}

// TestEstablishmentIsRetried: a watch answered 503 is opened again before
// the caller sees anything.
func TestEstablishmentIsRetried(t *testing.T) {
	ct := jsonStream
	unavailable, _ := json.Marshal(errorStatus(503, metav1.StatusReasonServiceUnavailable, 0))
	events, rvs := history(t, ct)
	srv := newServer(t, ct, reply{status: http.StatusServiceUnavailable, contentType: "application/json", body: unavailable})
	srv.next = resumeFrom(t, events, rvs)
	h := newHarness(t, srv, nil)
	w := h.watch(t, metav1.ListOptions{ResourceVersion: "100"})
	got := collect(t, w, 3)
	w.Stop()
	if !reflect.DeepEqual(got, wantHistory) || srv.query(1).Get("resourceVersion") != "100" {
		t.Fatalf("got %v, second request %v", got, srv.query(1))
	}
	if sleeps := h.clock.Sleeps(); !reflect.DeepEqual(sleeps, []time.Duration{1200 * time.Millisecond}) {
		t.Fatalf("waited %v, want [1.2s]", sleeps)
	}
}

// TestCloseLeavesNoGoroutine: Close during a backoff wait returns the
// blocked Read at once, and nothing kretry started outlives it.
func TestCloseLeavesNoGoroutine(t *testing.T) {
	ct := jsonStream
	first := event(t, ct, watch.Added, configMap("a", "101"))
	broke := make(chan struct{})
	srv := newServer(t, ct, reply{body: first, cut: true, cutAt: len(first)}, reply{cut: true, cutAt: 0, onEnd: func() { close(broke) }})
	clock := clocktesting.NewFakeClock(epoch) // never stepped: a wait lasts until Close
	baseline := runtime.NumGoroutine()
	resp, _ := rawWatch(t, srv, "resourceVersion=100", func(c *watchretry.TestConfig) {
		c.Policy = policy.New(policy.Config{Clock: clock, Rand: func() float64 { return 0.5 }})
	})
	read := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(resp.Body)
		read <- err
	}()
	waitingOn(t, clock, broke) // the second break is backing off
	if err := resp.Body.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-read; err != nil {
		t.Fatalf("Read after Close: %v, want a clean end", err)
	}
	waitFor(t, func() bool { return runtime.NumGoroutine() <= baseline })
	if !srv.allClosed() {
		t.Fatal("a response body was left open")
	}
}
