package reflector

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

func checkOps(t *testing.T, s *recordingStore, want ...string) {
	t.Helper()
	if got := s.takeOps(); !reflect.DeepEqual(got, want) {
		t.Fatalf("store calls:\n got %q\nwant %q", got, want)
	}
}

func checkListOpts(t *testing.T, c *listCall, rv string, match metav1.ResourceVersionMatch, limit int64) {
	t.Helper()
	want := metav1.ListOptions{ResourceVersion: rv, ResourceVersionMatch: match, Limit: limit}
	if c.opts != want {
		t.Fatalf("LIST options = %+v, want %+v", c.opts, want)
	}
}

func checkWatchOpts(t *testing.T, c *watchCall, rv string) {
	t.Helper()
	want := metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true, TimeoutSeconds: ptr.To[int64](300)}
	if !reflect.DeepEqual(c.opts, want) {
		t.Fatalf("WATCH options = %+v, want %+v", c.opts, want)
	}
}

func TestListThenWatchAppliesEvents(t *testing.T) {
	h := start(t, Config{})
	l := h.expectList()
	checkListOpts(t, l, "0", "", 500)
	l.answer(cmList("10", "", cm("a", "9"), cm("b", "10")), nil)

	wc := h.expectWatch()
	checkWatchOpts(t, wc, "10")
	w := wc.stream()
	w.Add(cm("c", "11"))
	w.Modify(cm("a", "12"))
	w.Delete(cm("b", "13"))
	w.Action(watch.Bookmark, bookmark("14", false))
	h.endCleanly(w, defaultTimeout)

	checkWatchOpts(t, h.expectWatch(), "14") // a clean end: re-watch at once from the last RV
	h.expectNoTimer()
	checkOps(t, h.store, "replace [a b]@10", "add c@11", "update a@12", "delete b@13", "bookmark@14")
	if got := h.store.ListKeys(); !reflect.DeepEqual(sorted(got), []string{"ns/a", "ns/c"}) {
		t.Fatalf("store keys = %v", got)
	}
	if obj, _, _ := h.store.GetByKey("ns/a"); obj.(*corev1.ConfigMap).ResourceVersion != "12" {
		t.Fatalf("ns/a not updated: %v", obj)
	}
	if got := h.r.LastSyncResourceVersion(); got != "14" {
		t.Fatalf("LastSyncResourceVersion = %q, want 14", got)
	}
	if got, want := h.r.Stats(), (Stats{Lists: 1, Watches: 2}); got != want {
		t.Fatalf("Stats = %+v, want %+v", got, want)
	}
}

func TestBookmarksMoveTheResourceVersion(t *testing.T) {
	h := start(t, Config{})
	h.expectList().answer(cmList("10", ""), nil)
	w := h.expectWatch().stream()
	w.Action(watch.Bookmark, bookmark("15", false))
	w.Action(watch.Bookmark, bookmark("17", false))
	h.endCleanly(w, defaultTimeout)

	checkWatchOpts(t, h.expectWatch(), "17")
	if got := h.r.LastSyncResourceVersion(); got != "17" {
		t.Fatalf("LastSyncResourceVersion = %q, want 17", got)
	}
	checkOps(t, h.store, "replace []@10", "bookmark@15", "bookmark@17")
}

func TestUnexpectedTypeIsDropped(t *testing.T) {
	h := start(t, Config{})
	h.expectList().answer(cmList("10", ""), nil)
	w := h.expectWatch().stream()
	w.Add(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns", ResourceVersion: "11"}})
	w.Add(cm("a", "12"))
	h.endCleanly(w, defaultTimeout)
	checkWatchOpts(t, h.expectWatch(), "12")
	checkOps(t, h.store, "replace []@10", "add a@12")
}

func TestGoneRelistsOnceAtTheLastResourceVersion(t *testing.T) {
	for name, deliver := range map[string]func(h *harness, wc *watchCall){
		"ERROR event Expired": func(h *harness, wc *watchCall) {
			w := wc.stream()
			w.Add(cm("a", "11"))
			w.Error(statusOf(errGone()))
		},
		"ERROR event Gone": func(h *harness, wc *watchCall) {
			w := wc.stream()
			w.Add(cm("a", "11"))
			w.Error(statusOf(apierrors.NewGone("gone")))
		},
		"answer to WATCH": func(h *harness, wc *watchCall) {
			wc.fail(errGone())
		},
	} {
		t.Run(name, func(t *testing.T) {
			h := start(t, Config{})
			h.expectList().answer(cmList("10", ""), nil)
			wc := h.expectWatch()
			deliver(h, wc)
			rv := h.r.LastSyncResourceVersion()

			l := h.expectList()
			h.expectNoTimer() // the first relist is immediate
			checkListOpts(t, l, rv, metav1.ResourceVersionMatchNotOlderThan, 500)
			l.answer(cmList("20", "", cm("a", "20")), nil)
			checkWatchOpts(t, h.expectWatch(), "20")
			// The reflector is watching again: there was exactly one relist.
			if got, want := h.r.Stats(), (Stats{Lists: 2, Watches: 2, Relists410: 1}); got != want {
				t.Fatalf("Stats = %+v, want %+v", got, want)
			}
		})
	}
}

func TestGoneOnRelistFallsBackToMostRecent(t *testing.T) {
	h := start(t, Config{})
	h.expectList().answer(cmList("10", ""), nil)
	h.expectWatch().stream().Error(statusOf(errGone()))

	l := h.expectList()
	checkListOpts(t, l, "10", metav1.ResourceVersionMatchNotOlderThan, 500)
	l.answer(nil, errGone())

	l = h.expectList()
	h.expectNoTimer()
	checkListOpts(t, l, "", "", 500)
	l.answer(cmList("30", "", cm("a", "29")), nil)

	checkWatchOpts(t, h.expectWatch(), "30")
	checkOps(t, h.store, "replace []@10", "replace [a]@30")
	if got, want := h.r.Stats(), (Stats{Lists: 3, Watches: 2, Relists410: 2}); got != want {
		t.Fatalf("Stats = %+v, want %+v", got, want)
	}
}

func TestGoneStormBacksOffAndBoundsTheListRate(t *testing.T) {
	h := start(t, Config{Rand: func() float64 { return 0.5 }}) // waits are ¾ of nominal
	nominal := []time.Duration{0, 0, 1, 2, 4, 8, 16, 32, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60}
	var lists []time.Duration // when each LIST was made, from the start
	for i, n := range nominal {
		if n == 0 {
			// the first LIST, and the first relist after a 410: no wait
		} else {
			h.wait(n * time.Second * 3 / 4)
		}
		l := h.expectList()
		h.expectNoTimer()
		lists = append(lists, h.clock.Since(t0))
		l.answer(cmList(itoa(10+i), ""), nil)
		h.expectWatch().fail(errGone()) // every watch is told 410 at once
	}
	h.expectTimer() // the 21st LIST waits too

	inTenMinutes := 0
	for _, at := range lists {
		if at < 10*time.Minute {
			inTenMinutes++
		}
	}
	if inTenMinutes != 20 || lists[19] != 587250*time.Millisecond {
		t.Fatalf("LISTs at %v: %d in 10 minutes, want 20 (the last at 9m47.25s)", lists, inTenMinutes)
	}
}

func TestGoneCountResetsOnlyAfterAWatchDeliveredEvents(t *testing.T) {
	h := start(t, Config{})
	h.expectList().answer(cmList("10", ""), nil)
	h.expectWatch().fail(errGone())
	h.expectList().answer(cmList("11", ""), nil) // immediate
	h.expectWatch().fail(errGone())
	h.wait(500 * time.Millisecond) // second 410 in a row: 1s, jittered with Rand 0
	h.expectList().answer(cmList("12", ""), nil)

	// A watch that delivers an event, then 410: the count is reset, the relist immediate.
	w := h.expectWatch().stream()
	w.Add(cm("a", "13"))
	w.Error(statusOf(errGone()))
	checkListOpts(t, h.expectList(), "13", metav1.ResourceVersionMatchNotOlderThan, 500)
	h.expectNoTimer()
}

// TestOnlyEventsResetTheGoneCount: a watch that delivered bookmarks and nothing else has
// not shown that the collection moved on since the last 410, so the next 410 backs off.
func TestOnlyEventsResetTheGoneCount(t *testing.T) {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns", ResourceVersion: "12"}}
	for _, tc := range []struct {
		name    string
		deliver func(w *watch.FakeWatcher)
		from    string        // the relist's RV
		wait    time.Duration // before the relist
	}{
		{"nothing", func(w *watch.FakeWatcher) {}, "11", 500 * time.Millisecond},
		{"a bookmark", func(w *watch.FakeWatcher) {
			w.Action(watch.Bookmark, bookmark("12", false))
		}, "12", 500 * time.Millisecond},
		{"bookmarks at the same RV and newer ones", func(w *watch.FakeWatcher) {
			w.Action(watch.Bookmark, bookmark("11", false))
			w.Action(watch.Bookmark, bookmark("12", false))
			w.Action(watch.Bookmark, bookmark("13", false))
		}, "13", 500 * time.Millisecond},
		{"an object of an unexpected type (dropped)", func(w *watch.FakeWatcher) { w.Add(secret) }, "11", 500 * time.Millisecond},
		{"ADDED", func(w *watch.FakeWatcher) { w.Add(cm("b", "12")) }, "12", 0},
		{"MODIFIED", func(w *watch.FakeWatcher) { w.Modify(cm("a", "12")) }, "12", 0},
		{"DELETED", func(w *watch.FakeWatcher) { w.Delete(cm("a", "12")) }, "12", 0},
		{"a bookmark, then MODIFIED", func(w *watch.FakeWatcher) {
			w.Action(watch.Bookmark, bookmark("12", false))
			w.Modify(cm("a", "13"))
		}, "13", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t, Config{})
			h.expectList().answer(cmList("10", "", cm("a", "10")), nil)
			h.expectWatch().fail(errGone())
			h.expectList().answer(cmList("11", "", cm("a", "10")), nil) // the first 410: immediate

			w := h.expectWatch().stream()
			tc.deliver(w)
			w.Error(statusOf(errGone()))
			if tc.wait > 0 {
				h.wait(tc.wait) // the second 410 in a row: 1s, jittered with Rand 0
			}
			l := h.expectList()
			h.expectNoTimer()
			checkListOpts(t, l, tc.from, metav1.ResourceVersionMatchNotOlderThan, 500)
		})
	}
}

func TestRelistBackoffIsCappedByConfig(t *testing.T) {
	h := start(t, Config{MaxRelistBackoff: 3 * time.Second})
	h.expectList().answer(cmList("10", ""), nil)
	for _, want := range []time.Duration{0, 500 * time.Millisecond, time.Second, 1500 * time.Millisecond, 1500 * time.Millisecond} {
		h.expectWatch().fail(errGone())
		if want > 0 {
			h.wait(want)
		}
		h.expectList().answer(cmList("10", ""), nil)
	}
}

func TestResyncIsScheduledFromListCompletion(t *testing.T) {
	h := start(t, Config{ResyncPeriod: 30 * time.Second})
	checkArmed := func(at, d time.Duration) {
		t.Helper()
		if got := h.expectTimer(); got.at != t0.Add(at) || got.d != d {
			t.Fatalf("resync timer started at %v for %v, want at %v for %v", got.at.Sub(t0), got.d, at, d)
		}
	}
	l := h.expectList()
	h.clock.Step(5 * time.Second) // the LIST takes 5s
	l.answer(cmList("10", ""), nil)
	checkArmed(5*time.Second, 30*time.Second) // due at 35s

	w := h.expectWatch().stream()
	h.clock.Step(20 * time.Second) // 25s
	w.Error(statusOf(errGone()))
	l = h.expectList()
	h.clock.Step(5 * time.Second) // 30s: the relist completes
	l.answer(cmList("20", ""), nil)
	checkArmed(30*time.Second, 30*time.Second) // rescheduled: due at 60s, not 35s
	h.expectWatch().stream()

	h.clock.Step(10 * time.Second) // 40s: past the old schedule, nothing
	h.clock.Step(20 * time.Second) // 60s
	if at := <-h.store.resyncs; at != t0.Add(60*time.Second) {
		t.Fatalf("resync at %v, want 60s", at.Sub(t0))
	}
	checkArmed(60*time.Second, 30*time.Second)
	h.clock.Step(30 * time.Second) // 90s
	if at := <-h.store.resyncs; at != t0.Add(90*time.Second) {
		t.Fatalf("resync at %v, want 90s", at.Sub(t0))
	}
	checkArmed(90*time.Second, 30*time.Second)

	h.stop()
	if got := h.r.Stats().Resyncs; got != 2 || len(h.store.resyncs) != 0 {
		t.Fatalf("%d resyncs (%d unread), want 2", got, len(h.store.resyncs))
	}
}

func TestResyncHappensDuringABackoffWait(t *testing.T) {
	h := start(t, Config{ResyncPeriod: 30 * time.Second})
	h.expectList().answer(cmList("10", ""), nil)
	h.expectTimer() // resync due at 30s
	h.expectWatch().fail(apierrors.NewServiceUnavailable("upgrading"))
	h.wait(400 * time.Millisecond)
	h.expectWatch().fail(apierrors.NewServiceUnavailable("upgrading"))
	if got := h.expectTimer(); got.d != 800*time.Millisecond {
		t.Fatalf("backoff %v, want 800ms", got.d)
	}
	h.clock.Step(30 * time.Second) // both the backoff and the resync are due
	if at := <-h.store.resyncs; at != t0.Add(30400*time.Millisecond) {
		t.Fatalf("resync at %v", at.Sub(t0))
	}
	checkWatchOpts(t, h.expectWatch(), "10")
}

func TestWatchList(t *testing.T) {
	h := start(t, Config{WatchList: true})
	wc := h.expectWatch()
	want := metav1.ListOptions{
		ResourceVersion:      "",
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		SendInitialEvents:    ptr.To(true),
		AllowWatchBookmarks:  true,
		TimeoutSeconds:       ptr.To[int64](300),
	}
	if !reflect.DeepEqual(wc.opts, want) {
		t.Fatalf("watch-list options = %+v, want %+v", wc.opts, want)
	}
	w := wc.stream()
	w.Add(cm("a", "5"))
	w.Add(cm("b", "7"))
	w.Action(watch.Bookmark, bookmark("8", false)) // not the end of the initial events
	w.Add(cm("c", "9"))
	w.Action(watch.Bookmark, bookmark("10", true))
	w.Modify(cm("a", "11")) // the same stream goes on as the watch
	h.endCleanly(w, defaultTimeout)

	checkWatchOpts(t, h.expectWatch(), "11")
	// Nothing reached the store before the initial-events-end bookmark, then all at once.
	checkOps(t, h.store, "replace [a b c]@10", "update a@11")
	if got, want := h.r.Stats(), (Stats{Lists: 1, Watches: 2}); got != want {
		t.Fatalf("Stats = %+v, want %+v", got, want)
	}
}

func TestWatchListRelistsWithAWatchListOn410(t *testing.T) {
	h := start(t, Config{WatchList: true})
	w := h.expectWatch().stream()
	w.Add(cm("a", "5"))
	w.Action(watch.Bookmark, bookmark("10", true))
	w.Error(statusOf(errGone()))

	wc := h.expectWatch()
	if wc.opts.ResourceVersion != "10" || !ptr.Deref(wc.opts.SendInitialEvents, false) ||
		wc.opts.ResourceVersionMatch != metav1.ResourceVersionMatchNotOlderThan {
		t.Fatalf("relist options = %+v, want a watch-list at 10", wc.opts)
	}
	wc.fail(errGone())
	wc = h.expectWatch()
	if wc.opts.ResourceVersion != "" || !ptr.Deref(wc.opts.SendInitialEvents, false) {
		t.Fatalf("relist options = %+v, want a watch-list at \"\"", wc.opts)
	}
	w = wc.stream()
	w.Action(watch.Bookmark, bookmark("30", true))
	h.endCleanly(w, defaultTimeout)
	checkWatchOpts(t, h.expectWatch(), "30")
	checkOps(t, h.store, "replace [a]@10", "replace []@30")
}

// TestWatchListFallsBackToList: a watch-list that does not deliver the initial state is
// replaced by a LIST. Only a server that refuses watch-lists turns them off for good; any
// other miss (its timeout reached before the initial-events-end bookmark, 401, 403) costs
// one LIST, and the next fetch (after a 410) tries a watch-list again, as client-go does.
func TestWatchListFallsBackToList(t *testing.T) {
	invalid := apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("ConfigMap").GroupKind(), "", nil)
	answerWith := func(err error) func(*harness, *watchCall) {
		return func(_ *harness, wc *watchCall) { wc.fail(err) }
	}
	for _, tc := range []struct {
		name           string
		miss           func(*harness, *watchCall)
		watchListAgain bool // a one-time fallback: the fetch after a 410 is a watch-list again
	}{
		{"refused: 422 Invalid (a server without the WatchList feature)", answerWith(invalid), false},
		{"refused: 400 Bad Request", answerWith(apierrors.NewBadRequest("sendInitialEvents")), false},
		{"refused: 405 Method Not Allowed", answerWith(apierrors.NewMethodNotSupported(configMaps, "watch")), false},
		{"timeout before the initial-events-end bookmark", func(h *harness, wc *watchCall) {
			w := wc.stream()
			w.Add(cm("a", "5"))
			w.Action(watch.Bookmark, bookmark("6", false)) // an ordinary bookmark is not the end
			h.endCleanly(w, defaultTimeout)
		}, true},
		{"401", answerWith(apierrors.NewUnauthorized("token expired")), true},
		{"403", answerWith(apierrors.NewForbidden(configMaps, "", errors.New("no"))), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t, Config{WatchList: true})
			wc := h.expectWatch()
			if !ptr.Deref(wc.opts.SendInitialEvents, false) {
				t.Fatalf("first fetch %+v, want a watch-list", wc.opts)
			}
			tc.miss(h, wc)

			l := h.expectList() // at once, from the same RV
			h.expectNoTimer()
			checkListOpts(t, l, "", "", 500)
			l.answer(cmList("10", "", cm("a", "9")), nil)
			h.expectWatch().fail(errGone())

			wantFetch := "LIST"
			if tc.watchListAgain {
				wantFetch = "watch-list"
			}
			select {
			case wc := <-h.srv.watches:
				if !tc.watchListAgain {
					t.Fatalf("relist by watch-list %+v, want a LIST: watch-list is off for good", wc.opts)
				}
				if wc.opts.ResourceVersion != "10" || !ptr.Deref(wc.opts.SendInitialEvents, false) ||
					wc.opts.ResourceVersionMatch != metav1.ResourceVersionMatchNotOlderThan {
					t.Fatalf("relist options = %+v, want a watch-list at 10", wc.opts)
				}
			case l := <-h.srv.lists:
				if tc.watchListAgain {
					t.Fatalf("relist by LIST %+v, want a watch-list: watch-list was turned off for good", l.opts)
				}
				checkListOpts(t, l, "10", metav1.ResourceVersionMatchNotOlderThan, 500)
			case <-time.After(guard):
				t.Fatalf("no relist, want a %s", wantFetch)
			}
			h.expectNoTimer()
			checkOps(t, h.store, "replace [a]@10")
			logged, notLogged := "not supported", "LIST this time"
			if tc.watchListAgain {
				logged, notLogged = notLogged, logged
			}
			if n := h.logs.count(logged); n != 1 {
				t.Fatalf("%q logged %d times, want once:\n%v", logged, n, h.logs.lines)
			}
			if n := h.logs.count(notLogged); n != 0 {
				t.Fatalf("%q logged:\n%v", notLogged, h.logs.lines)
			}
		})
	}
	t.Run("client without watch-list semantics", func(t *testing.T) {
		srv := newFakeServer()
		r := New(noWatchList{srv}, nil, cache.NewStore(cache.MetaNamespaceKeyFunc), Config{WatchList: true})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		select {
		case <-srv.lists:
		case <-srv.watches:
			t.Fatalf("watch-list used by a client that does not support it")
		case <-time.After(guard):
			t.Fatalf("no request")
		}
		cancel()
		<-done
	})
}

type noWatchList struct{ *fakeServer }

func (noWatchList) IsWatchListSemanticsUnSupported() bool { return true }

func TestPagedList(t *testing.T) {
	t.Run("pages", func(t *testing.T) {
		h := start(t, Config{PageSize: 2})
		l := h.expectList()
		checkListOpts(t, l, "0", "", 2)
		l.answer(cmList("10", "next", cm("a", "1"), cm("b", "2")), nil)
		l = h.expectList()
		if l.opts.Continue != "next" || l.opts.Limit != 2 {
			t.Fatalf("second page options = %+v", l.opts)
		}
		l.answer(cmList("10", "", cm("c", "3")), nil)
		checkWatchOpts(t, h.expectWatch(), "10")
		checkOps(t, h.store, "replace [a b c]@10")
		if got := h.r.Stats().Lists; got != 1 {
			t.Fatalf("Lists = %d, want 1 (pages do not count)", got)
		}
	})
	t.Run("continue token expires: one full LIST", func(t *testing.T) {
		h := start(t, Config{})
		h.expectList().answer(cmList("10", ""), nil)
		h.expectWatch().stream().Error(statusOf(errGone()))

		l := h.expectList()
		l.answer(cmList("20", "next", cm("a", "1")), nil)
		l = h.expectList()
		l.answer(nil, apierrors.NewResourceExpired("continue token expired"))
		l = h.expectList()
		checkListOpts(t, l, "10", metav1.ResourceVersionMatchNotOlderThan, 0)
		l.answer(cmList("21", "", cm("a", "1"), cm("b", "2")), nil)
		checkWatchOpts(t, h.expectWatch(), "21")
		checkOps(t, h.store, "replace []@10", "replace [a b]@21")
	})
	t.Run("paging off", func(t *testing.T) {
		h := start(t, Config{PageSize: -1})
		checkListOpts(t, h.expectList(), "0", "", 0)
	})
}

func TestWithoutTransportRewatchesFromTheResourceVersion(t *testing.T) {
	h := start(t, Config{})
	h.expectList().answer(cmList("10", ""), nil)

	// A stream that breaks before its timeout: re-watch from its RV after a short backoff.
	w := h.expectWatch().stream()
	w.Add(cm("a", "11"))
	h.clock.Step(time.Minute)
	w.Stop()
	h.wait(400 * time.Millisecond)

	// 503 on establishment, then an InternalError event: the same, backing off.
	h.expectWatch().fail(apierrors.NewServiceUnavailable("upgrading"))
	h.wait(800 * time.Millisecond)
	w = h.expectWatch().stream()
	w.Error(statusOf(apierrors.NewInternalError(errors.New("etcdserver: leader changed"))))
	h.wait(1600 * time.Millisecond)
	checkWatchOpts(t, h.expectWatch(), "11")

	if got, want := h.r.Stats(), (Stats{Lists: 1, Watches: 4, TransientFailures: 3}); got != want {
		t.Fatalf("Stats = %+v, want %+v", got, want)
	}
	if n := h.logs.count("is it installed?"); n != 1 {
		t.Fatalf("transport hint logged %d times, want once:\n%v", n, h.logs.lines)
	}
}

func TestWithoutTransportRetriesTheList(t *testing.T) {
	h := start(t, Config{})
	h.expectList().answer(nil, apierrors.NewTooManyRequests("slow down", 0))
	h.wait(400 * time.Millisecond)
	l := h.expectList()
	checkListOpts(t, l, "0", "", 500)
	l.answer(nil, errors.New("read tcp: connection reset by peer"))
	h.wait(800 * time.Millisecond)
	h.expectList().answer(cmList("10", ""), nil)
	checkWatchOpts(t, h.expectWatch(), "10")
	if n := h.logs.count("is it installed?"); n != 1 {
		t.Fatalf("transport hint logged %d times, want once", n)
	}
}

func TestPermanentErrorsBackOffWithoutTheTransportHint(t *testing.T) {
	h := start(t, Config{})
	h.expectList().answer(nil, apierrors.NewForbidden(configMaps, "", errors.New("no")))
	h.wait(400 * time.Millisecond)
	h.expectList().answer(cmList("10", ""), nil)
	h.expectWatch()
	if n := h.logs.count("is it installed?"); n != 0 {
		t.Fatalf("403 taken for a transient failure")
	}
	if got := h.r.Stats().TransientFailures; got != 0 {
		t.Fatalf("TransientFailures = %d", got)
	}
}

func TestRunReturnsPromptlyOnCancel(t *testing.T) {
	t.Run("blocked watch", func(t *testing.T) {
		h := start(t, Config{})
		h.expectList().answer(cmList("10", ""), nil)
		w := h.expectWatch().stream()
		w.Add(cm("a", "11")) // taken: the reflector is reading the stream
		h.stop()
		if !w.IsStopped() {
			t.Fatalf("watch not stopped")
		}
	})
	t.Run("backoff wait", func(t *testing.T) {
		h := start(t, Config{})
		h.expectList().answer(cmList("10", ""), nil)
		h.expectWatch().fail(errGone())
		h.expectList().answer(cmList("10", ""), nil)
		h.expectWatch().fail(errGone())
		if got := h.expectTimer(); got.d != 500*time.Millisecond {
			t.Fatalf("no relist backoff: %v", got)
		}
		h.stop()
	})
	t.Run("LIST in flight", func(t *testing.T) {
		h := start(t, Config{})
		h.expectList() // never answered
		h.stop()
	})
	t.Run("ListerWatcher that ignores its context", func(t *testing.T) {
		release := make(chan struct{})
		defer close(release)
		lw := &cache.ListWatch{
			ListFunc: func(metav1.ListOptions) (runtime.Object, error) {
				<-release
				return cmList("1", ""), nil
			},
			WatchFunc: func(metav1.ListOptions) (watch.Interface, error) { panic("not reached") },
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- New(lw, nil, cache.NewStore(cache.MetaNamespaceKeyFunc), Config{}).Run(ctx) }()
		cancel()
		select {
		case err := <-done:
			if err != context.Canceled {
				t.Fatalf("Run = %v", err)
			}
		case <-time.After(guard):
			t.Fatalf("Run did not return")
		}
	})
	t.Run("WATCH that ignores its context is stopped when it arrives", func(t *testing.T) {
		release := make(chan struct{})
		watching := make(chan struct{})
		late := watch.NewFake()
		lw := &cache.ListWatch{
			ListFunc: func(metav1.ListOptions) (runtime.Object, error) { return cmList("1", ""), nil },
			WatchFunc: func(metav1.ListOptions) (watch.Interface, error) {
				close(watching)
				<-release
				return late, nil
			},
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- New(lw, nil, cache.NewStore(cache.MetaNamespaceKeyFunc), Config{}).Run(ctx) }()
		<-watching
		cancel()
		select {
		case <-done:
		case <-time.After(guard):
			t.Fatalf("Run did not return")
		}
		close(release)
		select {
		case _, open := <-late.ResultChan():
			if open {
				t.Fatalf("event on a late watch")
			}
		case <-time.After(guard):
			t.Fatalf("late watch never stopped")
		}
	})
}

func TestRunTwice(t *testing.T) {
	h := start(t, Config{})
	h.expectList()
	if err := h.r.Run(context.Background()); err != errRunning {
		t.Fatalf("second Run = %v, want errRunning", err)
	}
}
