package policy

import "time"

// throttle is the current run of 429s: how many in a row, since when. Only
// a success (Progress) ends it.
type throttle struct {
	since time.Time
	count int
}

// throttled notes a 429 at now and reports whether it is one of the 429s a
// row paces with the backoff too: every (pacedThrottles+1)-th.
func (t *throttle) throttled(now time.Time) (paced bool) {
	if t.since.IsZero() {
		t.since = now
	}
	t.count++
	return t.count%(pacedThrottles+1) == 0
}

// pacedThrottles is how many 429s in a row are retried after the wait the
// server named alone, as client-go's rest client retries them (its
// maxRetries, 10). The one after them waits at least the backoff too, as
// client-go's reflector backs off once before its rest client starts over,
// and so on: a run of 429s is paced as stock client-go paces it. Without
// the backoff, a fleet coming back every second through a 60 s overload sent
// 23% more requests than stock client-go; with a backoff after every 429
// past the tenth, a third as many, but its caches caught up a minute late
// (`make fleet FLEETFLAGS='-scenarios overload'`, BENCHMARKS.md).
const pacedThrottles = 10
