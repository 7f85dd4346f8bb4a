package reflector

import (
	"errors"
	"testing"
	"time"
)

// TestTransitions walks every edge of the state machine.
func TestTransitions(t *testing.T) {
	p := newPolicy(Config{Rand: func() float64 { return 0 }}.withDefaults()) // waits are half of nominal
	open := &stream{}
	errX := errors.New("x")
	fetchAt := func(from string) state { return state{step: stepFetch, from: from, rv: "10"} }
	watching := state{step: stepWatch, from: "10", rv: "10"}
	with := func(s state, f func(*state)) state { f(&s); return s }

	for _, tc := range []struct {
		name string
		s    state
		o    outcome
		want state
	}{
		{"start", initial(false), outcome{}, state{step: stepFetch, from: "0"}},
		{"start with watch-list", initial(true), outcome{}, state{step: stepFetch, from: "", watchList: true}},

		{"fetch: fetched → watch at once, failures reset, 410 count kept",
			with(fetchAt("0"), func(s *state) { s.failures, s.gone = 3, 2 }), outcome{result: fetched, rv: "20"},
			state{step: stepWatch, from: "0", rv: "20", gone: 2}},
		{"fetch: fetched by a watch-list → keep watching its stream",
			fetchAt(""), outcome{result: fetched, rv: "20", stream: open},
			state{step: stepWatch, from: "", rv: "20", stream: open}},
		{"fetch: fetched with no RV → rv follows the store",
			fetchAt("0"), outcome{result: fetched},
			state{step: stepWatch, from: "0"}},
		{"fetch at a specific RV: gone → fetch at \"\" at once, not counted",
			with(fetchAt("10"), func(s *state) { s.gone = 1 }), outcome{result: gone},
			state{step: stepFetch, from: "", rv: "10", gone: 1}},
		{"fetch at \"0\": gone → fetch at \"\" at once",
			fetchAt("0"), outcome{result: gone},
			state{step: stepFetch, from: "", rv: "10"}},
		{"fetch at \"\": first gone → fetch at \"\" again at once",
			fetchAt(""), outcome{result: gone},
			state{step: stepFetch, from: "", rv: "10", gone: 1}},
		{"fetch at \"\": gone again → back off",
			with(fetchAt(""), func(s *state) { s.gone = 2 }), outcome{result: gone},
			state{step: stepFetch, from: "", rv: "10", gone: 3, delay: time.Second}},
		{"fetch: failed → back off, same RV",
			fetchAt("10"), outcome{result: failed, err: errX},
			state{step: stepFetch, from: "10", rv: "10", failures: 1, delay: 400 * time.Millisecond}},
		{"fetch: failed again → longer",
			with(fetchAt("10"), func(s *state) { s.failures = 2 }), outcome{result: failed, err: errX},
			state{step: stepFetch, from: "10", rv: "10", failures: 3, delay: 1600 * time.Millisecond}},
		{"fetch: broke (watch-list) → back off, same RV",
			fetchAt(""), outcome{result: broke, err: errX},
			state{step: stepFetch, from: "", rv: "10", failures: 1, delay: 400 * time.Millisecond}},
		{"fetch: unsupported → LIST at once, and from then on",
			with(fetchAt(""), func(s *state) { s.watchList = true }), outcome{result: unsupported},
			state{step: stepFetch, from: "", rv: "10"}},
		{"fetch: listInstead → LIST at once, watch-list kept for later",
			with(fetchAt(""), func(s *state) { s.watchList = true }), outcome{result: listInstead},
			state{step: stepFetch, from: "", rv: "10", watchList: true, listOnce: true}},
		{"fetch by LIST once: failed → LIST again after a backoff",
			with(fetchAt(""), func(s *state) { s.watchList, s.listOnce = true, true }), outcome{result: failed, err: errX},
			state{step: stepFetch, from: "", rv: "10", watchList: true, listOnce: true, failures: 1, delay: 400 * time.Millisecond}},
		{"fetch by LIST once: gone → LIST again at \"\"",
			with(fetchAt("10"), func(s *state) { s.watchList, s.listOnce = true, true }), outcome{result: gone},
			state{step: stepFetch, from: "", rv: "10", watchList: true, listOnce: true}},
		{"fetch by LIST once: fetched → the next fetch is a watch-list again",
			with(fetchAt(""), func(s *state) { s.watchList, s.listOnce = true, true }), outcome{result: fetched, rv: "20"},
			state{step: stepWatch, from: "", rv: "20", watchList: true}},

		{"watch: ended → watch again at once from the last RV",
			watching, outcome{result: ended, rv: "15", progressed: true},
			state{step: stepWatch, from: "10", rv: "15"}},
		{"watch: ended without events → the same",
			with(watching, func(s *state) { s.gone = 2 }), outcome{result: ended, rv: "10"},
			state{step: stepWatch, from: "10", rv: "10", gone: 2}},
		{"watch: broke → back off, watch again from the last RV",
			watching, outcome{result: broke, rv: "12", progressed: true},
			state{step: stepWatch, from: "10", rv: "12", failures: 1, delay: 400 * time.Millisecond}},
		{"watch: broke again without events → longer",
			with(watching, func(s *state) { s.failures = 1 }), outcome{result: broke, rv: "10"},
			state{step: stepWatch, from: "10", rv: "10", failures: 2, delay: 800 * time.Millisecond}},
		{"watch: failed to open → back off",
			watching, outcome{result: failed, err: errX},
			state{step: stepWatch, from: "10", rv: "10", failures: 1, delay: 400 * time.Millisecond}},
		{"watch: a kept stream is used once",
			with(watching, func(s *state) { s.stream = open }), outcome{result: ended, rv: "11"},
			state{step: stepWatch, from: "10", rv: "11"}},
		{"watch: gone after events → relist at the last RV at once",
			with(watching, func(s *state) { s.gone, s.failures = 4, 2 }), outcome{result: gone, rv: "13", progressed: true},
			state{step: stepFetch, from: "13", rv: "13", gone: 1}},
		{"watch: broke after only bookmarks → failures reset, 410 count kept",
			with(watching, func(s *state) { s.gone, s.failures = 1, 3 }), outcome{result: broke, rv: "12", bookmarked: true},
			state{step: stepWatch, from: "10", rv: "12", gone: 1, failures: 1, delay: 400 * time.Millisecond}},
		{"watch: gone after only bookmarks → relist after a backoff: a bookmark is no progress",
			with(watching, func(s *state) { s.gone = 1 }), outcome{result: gone, rv: "12", bookmarked: true},
			state{step: stepFetch, from: "12", rv: "12", gone: 2, delay: 500 * time.Millisecond}},
		{"watch: gone without events → relist after a backoff",
			with(watching, func(s *state) { s.gone = 1 }), outcome{result: gone, rv: "10"},
			state{step: stepFetch, from: "10", rv: "10", gone: 2, delay: 500 * time.Millisecond}},
		{"watch: gone in a storm → capped",
			with(watching, func(s *state) { s.gone = 30 }), outcome{result: gone},
			state{step: stepFetch, from: "10", rv: "10", gone: 31, delay: 30 * time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.s
			if tc.o.result != 0 {
				got = p.next(tc.s, tc.o)
			}
			if got != tc.want {
				t.Fatalf("\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestFetchByWatchList(t *testing.T) {
	for _, tc := range []struct {
		watchList, listOnce, want bool
	}{{false, false, false}, {true, false, true}, {true, true, false}, {false, true, false}} {
		if got := (state{watchList: tc.watchList, listOnce: tc.listOnce}).byWatchList(); got != tc.want {
			t.Errorf("watchList %v, listOnce %v: byWatchList = %v, want %v", tc.watchList, tc.listOnce, got, tc.want)
		}
	}
}
