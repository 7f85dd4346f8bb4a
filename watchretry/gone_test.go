package watchretry_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kretry/kretry/internal/policy"
	"github.com/kretry/kretry/watchretry"
)

// tooOld is the 410 a watch cache answers for a resourceVersion older than
// the oldest it holds (oldest).
func tooOld(rv, oldest string) *metav1.Status {
	return &metav1.Status{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"},
		Status:   metav1.StatusFailure, Code: http.StatusGone, Reason: metav1.StatusReasonExpired,
		Message: "too old resource version: " + rv + " (" + oldest + ")",
	}
}

// TestGoneOnAQuietStreamIsNotHeld: a reopened stream up and quiet for longer
// than the window has ended its run of failures, so an ERROR 410 on it is
// handed over at once. Fails before: it was held for a draw from the step
// the old run had reached (0.8 s here; up to MaxBackoff at the defaults),
// the run being ended only at the next failure.
func TestGoneOnAQuietStreamIsNotHeld(t *testing.T) {
	for _, ct := range encodings {
		t.Run(ct, func(t *testing.T) {
			var h *harness
			first := event(t, ct, watch.Added, configMap("a", "101"))
			gone := event(t, ct, watch.Error, errorStatus(410, metav1.StatusReasonExpired, 0))
			srv := newServer(t, ct,
				reply{body: first, cut: true, cutAt: len(first)},
				reply{connErr: refused},
				// Up, quiet for 2 s, then the 410.
				reply{body: gone, onStart: func() { h.clock.Advance(2 * time.Second) }})
			h = newHarness(t, srv, func(c *watchretry.TestConfig) {
				c.Policy = policy.New(policy.Config{Clock: c.Policy.Clock(), Rand: func() float64 { return 0.5 }, InternalErrorWindow: time.Second})
			})
			got := collect(t, h.watch(t, metav1.ListOptions{ResourceVersion: "100"}), -1)
			if want := []seen{{Type: watch.Added, RV: "101"}, {Type: watch.Error, Code: 410}}; !reflect.DeepEqual(got, want) {
				t.Fatalf("got %v, want %v", got, want)
			}
			// The wait after the refusal (1.2 s cut to the 1 s window), and no hold.
			if sleeps := h.clock.Sleeps(); !reflect.DeepEqual(sleeps, []time.Duration{time.Second}) {
				t.Errorf("waited %v, want only the 1s before the reopen", sleeps)
			}
		})
	}
}

// TestExpiredResumeRetriedOnANewConnection: a resume after a lost connection
// answered "too old resource version" (in the stream, as kube-apiserver
// answers it, or as an HTTP 410) is retried at once with Connection: close,
// so that a load balancer may route it to an apiserver that still holds the
// resume point; the events then continue with no 410 for the caller.
func TestExpiredResumeRetriedOnANewConnection(t *testing.T) {
	for _, inStream := range []bool{true, false} {
		for _, ct := range encodings {
			t.Run(ct+map[bool]string{true: "/ERROR event", false: "/HTTP 410"}[inStream], func(t *testing.T) {
				events, rvs := history(t, ct)
				fresh := expired(t, ct, inStream, tooOld("101", "500"))
				srv := newServer(t, ct, reply{body: events[0], cut: true, cutAt: len(events[0])}, fresh, fresh)
				h := watchHistory(t, srv, events, rvs)
				// The watch, its resume, two retries on new connections.
				if closes := srv.closed(); !reflect.DeepEqual(closes, []bool{false, false, true, true}) {
					t.Errorf("req.Close %v, want the two retries only", closes)
				}
				if len(h.clock.Sleeps()) != 0 {
					t.Errorf("waited %v, want retries at once", h.clock.Sleeps())
				}
			})
		}
	}
}

// TestExpiredEverywhereIsOne410 is the shape of a client looping on "too old
// resource version" after an HA restart: the resume point is older than
// every apiserver's cache. kretry delivers exactly one 410, after at most
// twenty retries within 3 s, and the watch ends: no loop. Apiservers that
// name other oldest resourceVersions than the first are others lacking the
// point: the retries end at the sixth 410 in a row from apiservers heard
// from already, the first one's counting once another has answered, behind
// two or three.
func TestExpiredEverywhereIsOne410(t *testing.T) {
	tests := []struct {
		name     string
		oldest   func(n int) string // the oldest resourceVersion named by the n-th resume's 410
		requests int
	}{
		{"the same cache each time: twenty retries", func(int) string { return "500" }, 22},
		// Before, the second apiserver's 410 ended the search (3 requests),
		// and behind three a client relisted though the third held its
		// point; then, when only the other's 410s counted, the two took
		// turns for 13 requests.
		{"two apiservers, each its own cache: six 410s in a row from both", func(n int) string { return []string{"500", "480"}[n%2] }, 8},
		{"three apiservers, each its own cache: six in a row once all were heard", func(n int) string { return []string{"500", "480", "490"}[n%3] }, 9},
	}
	for _, tt := range tests {
		for _, inStream := range []bool{true, false} {
			t.Run(tt.name+map[bool]string{true: "/ERROR event", false: "/HTTP 410"}[inStream], func(t *testing.T) {
				ct := jsonStream
				first := event(t, ct, watch.Added, configMap("a", "101"))
				srv := newServer(t, ct, reply{body: first, cut: true, cutAt: len(first)})
				resumes := 0
				srv.next = func(url.Values) reply {
					resumes++
					return expired(t, ct, inStream, tooOld("101", tt.oldest(resumes-1)))
				}
				h := newHarness(t, srv, nil)
				got := collect(t, h.watch(t, metav1.ListOptions{ResourceVersion: "100"}), -1)
				if want := []seen{{Type: watch.Added, RV: "101"}, {Type: watch.Error, Code: 410}}; !reflect.DeepEqual(got, want) {
					t.Fatalf("got %v, want %v: one 410, then the end", got, want)
				}
				if n := srv.requestCount(); n != tt.requests {
					t.Errorf("%d requests, want %d", n, tt.requests)
				}
			})
		}
	}
}

// TestExpiredAfterAnOutageNotRetried is a fleet's view of an apiserver that
// restarted alone: its resumes were refused for seconds, and the first one it
// answers is a 410 from its fresh watch cache. Another connection would reach
// the same apiserver, so the 410 is handed over (after its hold) with no retry.
// Fails before: every such resume was retried three more times, and 1,000
// informers through a restart sent 5,000 requests where stock client-go sent
// 2,018 (`make fleet`).
func TestExpiredAfterAnOutageNotRetried(t *testing.T) {
	ct := jsonStream
	first := event(t, ct, watch.Added, configMap("a", "101"))
	srv := newServer(t, ct, reply{body: first, cut: true, cutAt: len(first)},
		reply{connErr: refused}, reply{connErr: refused}, reply{connErr: refused},
		expired(t, ct, true, tooOld("101", "500")))
	h := newHarness(t, srv, nil)
	got := collect(t, h.watch(t, metav1.ListOptions{ResourceVersion: "100"}), -1)
	if want := []seen{{Type: watch.Added, RV: "101"}, {Type: watch.Error, Code: 410}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if n := srv.requestCount(); n != 5 {
		t.Errorf("%d requests, want 5: the watch, three refused resumes, the one answered 410; no retry", n)
	}
}

// TestExpiredAfterABalancerFailureSearched: the same outage seen through a
// balancer, whose reopenings were accepted and then closed (the balancer
// trying the stopped apiserver): the client was cut off, but a new
// connection may reach another apiserver, so the short search is made and
// the second retry finds the one that holds the resume point. Fails
// before: the 410 was handed over with no retry, as after a refused
// outage, and a rolling upgrade's resume that met the stopped apiserver
// first relisted.
func TestExpiredAfterABalancerFailureSearched(t *testing.T) {
	ct := jsonStream
	first := event(t, ct, watch.Added, configMap("a", "101"))
	closed := &url.Error{Op: "Get", URL: "https://balancer", Err: io.EOF}
	srv := newServer(t, ct, reply{body: first, cut: true, cutAt: len(first)},
		reply{connErr: closed}, reply{connErr: closed}, reply{connErr: closed},
		expired(t, ct, true, tooOld("101", "500")), expired(t, ct, true, tooOld("101", "500")),
		reply{body: event(t, ct, watch.Modified, configMap("a", "102")), hold: true})
	h := newHarness(t, srv, nil)
	wantAddedThenModified(t, h)
	if n := srv.requestCount(); n != 7 {
		t.Errorf("%d requests, want 7: the watch, three failed resumes, two 410s, the resumed stream", n)
	}
}

// TestExpiredFromAnotherApiserverSearchedOn: a resume's 410 from an
// apiserver other than the one whose stream was lost (told apart by their
// serving certificates) says that one lacks the point, not that every
// other does: behind three apiservers the third may hold it. The search
// goes on until the apiservers it heard from answer six 410s in a row, or
// one that holds the point answers; one from the stream's own apiserver,
// restarted, is searched past too. Before, another apiserver's 410 was
// handed over at once, and behind three a client relisted though the
// third held its resume point.
func TestExpiredFromAnotherApiserverSearchedOn(t *testing.T) {
	for _, inStream := range []bool{true, false} {
		t.Run(fmt.Sprintf("inStream=%v", inStream), func(t *testing.T) {
			ct := jsonStream
			first := event(t, ct, watch.Added, configMap("a", "101"))
			from := func(r reply, server string) reply { r.apiserver = server; return r }
			gone := expired(t, ct, inStream, tooOld("101", "500"))

			t.Run("another apiserver, again and again", func(t *testing.T) {
				srv := newServer(t, ct, from(reply{body: first, cut: true, cutAt: len(first)}, "a"), from(gone, "b"))
				srv.next = func(url.Values) reply { return from(gone, "b") }
				h := newHarness(t, srv, nil)
				got := collect(t, h.watch(t, metav1.ListOptions{ResourceVersion: "100"}), -1)
				if want := []seen{{Type: watch.Added, RV: "101"}, {Type: watch.Error, Code: 410}}; !reflect.DeepEqual(got, want) {
					t.Fatalf("got %v, want %v", got, want)
				}
				if n := srv.requestCount(); n != 7 {
					t.Errorf("%d requests, want 7: the watch, its resume, five retries reaching the same other apiserver", n)
				}
			})
			t.Run("behind three: the third holds the point", func(t *testing.T) {
				srv := newServer(t, ct, from(reply{body: first, cut: true, cutAt: len(first)}, "a"), from(gone, "b"), from(gone, "a"), from(gone, "b"),
					from(reply{body: event(t, ct, watch.Modified, configMap("a", "102")), hold: true}, "c"))
				h := newHarness(t, srv, nil)
				wantAddedThenModified(t, h)
				if n := srv.requestCount(); n != 5 {
					t.Errorf("%d requests, want 5: the watch, 410s from b, a (restarted), b, the third's stream", n)
				}
			})
			t.Run("the same apiserver, restarted", func(t *testing.T) {
				srv := newServer(t, ct, from(reply{body: first, cut: true, cutAt: len(first)}, "a"), from(gone, "a"), from(gone, "a"),
					from(reply{body: event(t, ct, watch.Modified, configMap("a", "102")), hold: true}, "b"))
				h := newHarness(t, srv, nil)
				wantAddedThenModified(t, h)
				if n := srv.requestCount(); n != 4 {
					t.Errorf("%d requests, want 4: the watch, two 410s from its restarted apiserver, the other's stream", n)
				}
			})
		})
	}
}

// TestExpiredNotRetried: a 410 that does not answer a resume after a lost
// connection, or whose message is not the watch cache's, is a compaction:
// handed over with no retry.
func TestExpiredNotRetried(t *testing.T) {
	ct := jsonStream
	first := event(t, ct, watch.Added, configMap("a", "101"))
	compacted := &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: metav1.StatusFailure,
		Code: 410, Reason: metav1.StatusReasonExpired, Message: "The resourceVersion for the provided watch is too old."}
	tests := []struct {
		name    string
		replies []reply
	}{
		{"on the first stream", []reply{{body: append(first, event(t, ct, watch.Error, tooOld("101", "500"))...)}}},
		{"after an event of the resumed stream", []reply{{body: first, cut: true, cutAt: len(first)},
			{body: append(event(t, ct, watch.Modified, configMap("a", "102")), event(t, ct, watch.Error, tooOld("102", "500"))...)}}},
		{"after an ERROR 500, not a lost connection", []reply{{body: append(first, event(t, ct, watch.Error, errorStatus(500, metav1.StatusReasonInternalError, 0))...)},
			expired(t, ct, true, tooOld("101", "500"))}},
		{"etcd's compaction message", []reply{{body: first, cut: true, cutAt: len(first)}, expired(t, ct, true, compacted)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, ct, tt.replies...)
			h := newHarness(t, srv, nil)
			got := collect(t, h.watch(t, metav1.ListOptions{ResourceVersion: "100"}), -1)
			if len(got) == 0 || got[len(got)-1] != (seen{Type: watch.Error, Code: 410}) {
				t.Fatalf("got %v, want the 410 last", got)
			}
			if n := srv.requestCount(); n != len(tt.replies) {
				t.Errorf("%d requests, want %d: no retry", n, len(tt.replies))
			}
		})
	}
}

// expired is a 410 answer to a watch: an ERROR event in a 200, or an HTTP 410.
func expired(t testing.TB, ct string, inStream bool, st *metav1.Status) reply {
	if inStream {
		return reply{body: event(t, ct, watch.Error, st)}
	}
	body, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	return reply{status: http.StatusGone, contentType: "application/json", body: body}
}

// TestExpiredSearchEndsAtItsBound: the search for an apiserver that holds
// the resume point ends 3 s after its first 410, whatever the retry in
// flight is doing: a retry that gets no answer, or one still unanswered at
// the bound, is abandoned and the first 410 is handed over. Fails before:
// the bound was checked only when a retry was started, so a silent retry
// held the 410 for the answer timeout (never, here: the virtual clock is not
// moved past the bound), and a retry answered past the bound was taken.
func TestExpiredSearchEndsAtItsBound(t *testing.T) {
	for _, inStream := range []bool{true, false} {
		for _, tt := range []struct {
			name     string
			retry    func(h *harness, gone reply, n int) reply // the n-th retry's answer
			requests int
		}{
			{"a retry never answered", func(h *harness, _ reply, _ int) reply {
				return reply{silent: true, onRequest: func() { h.clock.Advance(3 * time.Second) }}
			}, 3},
			// Two retries answered 410 after 1.4 s each; the third, which
			// holds the resume point, answers after the bound: too late.
			{"answers that take 1.4s", func(h *harness, gone reply, n int) reply {
				late := reply{body: event(t, jsonStream, watch.Modified, configMap("a", "102")), hold: true}
				r := []reply{gone, gone, late}[min(n, 2)]
				r.onRequest = func() { h.clock.Advance(1400 * time.Millisecond) }
				return r
			}, 5},
		} {
			t.Run(tt.name+map[bool]string{true: "/ERROR event", false: "/HTTP 410"}[inStream], func(t *testing.T) {
				ct := jsonStream
				first := event(t, ct, watch.Added, configMap("a", "101"))
				gone := expired(t, ct, inStream, tooOld("101", "500"))
				srv := newServer(t, ct, reply{body: first, cut: true, cutAt: len(first)}, gone)
				var h *harness
				retries := 0
				srv.next = func(url.Values) reply {
					retries++
					return tt.retry(h, gone, retries-1)
				}
				h = newHarness(t, srv, nil)
				got := collect(t, h.watch(t, metav1.ListOptions{ResourceVersion: "100"}), -1)
				if want := []seen{{Type: watch.Added, RV: "101"}, {Type: watch.Error, Code: 410}}; !reflect.DeepEqual(got, want) {
					t.Fatalf("got %v, want %v: the first 410 at the bound", got, want)
				}
				if n := srv.requestCount(); n != tt.requests {
					t.Errorf("%d requests, want %d", n, tt.requests)
				}
			})
		}
	}
}

// TestExpiredSearchEndsWithAnEvent: a retry of a 410 that reached an
// apiserver holding the resume point and delivered an event has ended the
// search; a later break is resumed as any other, not answered with the
// search's old 410. Fails before: the first 410 stayed held, and the next
// resume, past the search's bound, handed it over.
func TestExpiredSearchEndsWithAnEvent(t *testing.T) {
	for _, inStream := range []bool{true, false} {
		t.Run(map[bool]string{true: "ERROR event", false: "HTTP 410"}[inStream], func(t *testing.T) {
			ct := jsonStream
			var h *harness
			first := event(t, ct, watch.Added, configMap("a", "101"))
			second := event(t, ct, watch.Modified, configMap("a", "102"))
			third := event(t, ct, watch.Modified, configMap("a", "103"))
			srv := newServer(t, ct,
				reply{body: first, cut: true, cutAt: len(first)},
				expired(t, ct, inStream, tooOld("101", "500")),
				// The retry reaches the other apiserver: an event, 5 s up, a cut.
				reply{body: second, cut: true, cutAt: len(second), onEnd: func() { h.clock.Advance(5 * time.Second) }},
				reply{body: third, hold: true})
			h = newHarness(t, srv, nil)
			w := h.watch(t, metav1.ListOptions{ResourceVersion: "100"})
			defer w.Stop()
			got := collect(t, w, 3)
			want := []seen{{Type: watch.Added, RV: "101"}, {Type: watch.Modified, RV: "102"}, {Type: watch.Modified, RV: "103"}}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got %v, want %v", got, want)
			}
		})
	}
}

// TestSearchEndsWhenTheStreamOpens: the search's retry reached an apiserver
// that holds the resume point (a 200), and the stream stayed quiet, no
// event to deliver, until it broke 10 s later. That break is resumed like
// any other: the search ended at the 200. Fails before: the search was
// still on at the break, the break's resume would start past its end, and
// the search's first 410 reached the caller, 10 s after a stream had been
// found (a relist, seen in `make fleet-ha` behind two and three
// apiservers: node agents whose pods did not change for seconds).
func TestSearchEndsWhenTheStreamOpens(t *testing.T) {
	for _, inStream := range []bool{true, false} {
		t.Run(map[bool]string{true: "ERROR event", false: "HTTP 410"}[inStream], func(t *testing.T) {
			ct := jsonStream
			first := event(t, ct, watch.Added, configMap("a", "101"))
			var h *harness
			quiet := reply{cut: true, cutAt: 0, onStart: func() { h.clock.Advance(10 * time.Second) }}
			srv := newServer(t, ct, reply{body: first, cut: true, cutAt: len(first)},
				expired(t, ct, inStream, tooOld("101", "500")), quiet,
				reply{body: event(t, ct, watch.Modified, configMap("a", "102")), hold: true})
			h = newHarness(t, srv, nil)
			wantAddedThenModified(t, h)
			if n := srv.requestCount(); n != 4 {
				t.Errorf("%d requests, want 4: the watch, the resume's 410, the search's quiet stream, its resume", n)
			}
		})
	}
}
