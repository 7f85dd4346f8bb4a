package reflector

import "time"

// step is what the reflector does next. Its whole life is a loop of
// "wait state.delay, do state.step, hand the outcome to policy.next".
type step int

const (
	// stepFetch: the store is empty or must be replaced. Fetch the whole collection at
	// state.from (a paged LIST, or a watch-list) and Replace the store with it.
	// fetched → stepWatch at once. gone → fetch again at "" at once, or, when from was
	// already "", back off and fetch again. failed → back off, fetch again at the same RV.
	// Watch-list only: unsupported → fetch again at once with a LIST, and from then on;
	// listInstead → fetch again at once with a LIST, and by watch-list again after that.
	stepFetch step = iota
	// stepWatch: the store holds the collection at state.rv. WATCH from rv (or keep reading
	// state.stream) and apply events; every event and bookmark moves rv.
	// ended → watch again at once. failed/broke → back off, watch again from rv.
	// gone → fetch at rv (NotOlderThan), after a backoff when 410s repeat.
	stepWatch
)

func (s step) String() string {
	if s == stepWatch {
		return "watch"
	}
	return "fetch"
}

// state is everything policy.next needs to decide what comes next.
type state struct {
	step  step
	delay time.Duration // wait this long before doing step

	// from is the RV stepFetch fetches at: "0" (any, cheap) at start, the last synced RV
	// after a 410 (not older than it), "" (most recent, consistent) when that is gone too.
	from string
	// rv is the RV the store is synced to: it moves with every fetch, event and bookmark.
	rv string
	// watchList fetches with a streaming list rather than a LIST.
	watchList bool
	// listOnce fetches with a LIST until one succeeds, watchList or not: the last
	// watch-list missed for a reason that a LIST may not share.
	listOnce bool
	// stream is an open watch for stepWatch to keep reading: the watch-list that fetched.
	stream *stream

	// gone counts 410s in a row: only a watch that delivered events resets it, since a
	// bookmark does not show that the collection moved on.
	gone int
	// failures counts failures in a row that a kretry transport would have absorbed.
	failures int
}

// result is how a step ended.
type result int

const (
	// fetched: the store was replaced with the collection at outcome.rv.
	fetched result = iota + 1 // the zero outcome means nothing
	// gone: the RV asked for is no longer (or not yet) available: 410 Gone/Expired, or
	// ResourceVersionTooLarge.
	gone
	// failed: any other error, in outcome.err.
	failed
	// ended: the watch ended cleanly once its timeoutSeconds had elapsed.
	ended
	// broke: the stream ended before its timeoutSeconds had elapsed.
	broke
	// unsupported: the server refuses watch-lists here (400, 405, 422); use LIST from now on.
	unsupported
	// listInstead: the watch-list did not deliver the initial state, for a reason a LIST
	// may not share: it reached its timeout before the initial-events-end bookmark (a
	// collection too big or a server too slow to stream it in time), or it was answered
	// with an error that is neither transient nor a refusal (401, 403, ...). Fetch with a
	// LIST this time; the next fetch tries a watch-list again.
	listInstead
)

func (r result) String() string {
	return [...]string{"none", "fetched", "gone", "failed", "ended", "broke", "unsupported", "listInstead"}[r]
}

// outcome is what a step reports back.
type outcome struct {
	result result
	rv     string // the RV the store is synced to now; "" leaves state.rv as it is
	// progressed: the watch delivered at least one ADDED, MODIFIED or DELETED event that
	// the store took, after the initial state: the collection moved on since the last 410.
	progressed bool
	// bookmarked: the watch delivered at least one bookmark: the connection works, but
	// that alone is no progress past a 410.
	bookmarked bool
	stream     *stream // fetched by a watch-list: the open stream to keep watching
	err        error
}

// policy turns an outcome into the next state. It is pure but for the jitter source.
type policy struct {
	relist    backoff // between relists when 410s repeat
	transient backoff // after failures the transport would have absorbed
	rand      func() float64
}

func newPolicy(cfg Config) policy {
	return policy{
		relist:    backoff{base: relistBackoffBase, max: cfg.MaxRelistBackoff},
		transient: backoff{base: transientBackoffBase, max: transientBackoffMax},
		rand:      cfg.Rand,
	}
}

// byWatchList reports whether stepFetch fetches with a watch-list.
func (s state) byWatchList() bool {
	return s.watchList && !s.listOnce
}

// initial is the state a reflector starts in.
func initial(watchList bool) state {
	s := state{step: stepFetch, from: "0", watchList: watchList}
	if watchList {
		// A watch-list at "" is served from the watch cache and still consistent.
		s.from = ""
	}
	return s
}

// next is the transition function: the one place that decides what the reflector does.
func (p policy) next(s state, o outcome) state {
	if o.rv != "" || o.result == fetched {
		s.rv = o.rv
	}
	if o.progressed || o.bookmarked {
		s.failures = 0
	}
	if o.progressed {
		s.gone = 0
	}
	s.delay, s.stream = 0, nil

	switch o.result {
	case fetched:
		s.failures, s.listOnce = 0, false
		s.step, s.stream = stepWatch, o.stream
	case ended:
		// re-watch from rv at once
	case failed, broke:
		s.failures++
		s.delay = p.transient.wait(s.failures, p.rand())
	case unsupported:
		s.watchList = false
	case listInstead:
		s.listOnce = true
	case gone:
		if s.step == stepFetch && s.from != "" {
			s.from = "" // the RV we asked for is gone too: ask for the most recent
			return s
		}
		s.gone++
		// The first relist after a watch that delivered events is immediate.
		s.delay = p.relist.wait(s.gone-1, p.rand())
		if s.step == stepWatch {
			s.step, s.from = stepFetch, s.rv
		}
	}
	return s
}
