package policy

import "time"

// Bounds of the search for an apiserver that holds a watch's resume point,
// after a resume was answered 410 by a watch cache that starts past it. The
// search is bounded by time: a real compaction's 410 reaches the caller at
// most searchBound after the first 410, whatever the retries in flight are
// doing (Decision.Until); by the retry budget, each retry spending from it;
// and by what the 410s say (another oldest resourceVersion ends it).
// maxExpiredRetries only caps a search whose 410s come back at once: behind
// a round-robin balancer in front of two apiservers a new connection reaches
// the fresh one again about every other time, so six new connections left
// one resume in 64 its 410, and twenty leave one in a million.
// maxCutOffRetries bounds the search of a client that was cut off (see
// loss.searchLimit).
const (
	searchBound       = 3 * time.Second
	maxExpiredRetries = 20
	maxCutOffRetries  = 6
)

// search is a search for an apiserver that holds a watch's resume point:
// a resume's 410 retried on new connections. Only a success ends it.
type search struct {
	// first is its first 410; zero when no search is under way.
	first time.Time
	// retries counts the retries that reached a new connection, limit how
	// many may (fixed at the first 410).
	retries, limit int
	// oldest is the oldest resourceVersion the first 410 named; conn the
	// connection the last one came over.
	oldest string
	conn   any
}

// active reports whether a search is under way.
func (s *search) active() bool { return !s.first.IsZero() }

// until is when the search ends.
func (s *search) until() time.Time { return s.first.Add(searchBound) }

// newConnection reports whether a retry after the 410 f reaches a new
// connection: it did unless it rode the previous 410's (golang.org/x/net/http2
// picks a connection before it looks at Connection: close, so the retry that
// asks for a new one lands on the old one and only retires it).
func (s *search) newConnection(f Failure) bool {
	return f.Connection == nil || f.Connection != s.conn
}

// goesOn reports whether the search may go on after the 410 f at now, a
// search that starts now being allowed limit new connections. It may while
// it is within its bound and its count, and the 410 came from the very
// apiserver the stream lost (when both are known: a 410 from another says
// the stream's is gone and the one that answered lacks the point) and
// names the oldest resourceVersion the first one named (another is a
// second apiserver lacking the point: an expiry everywhere).
func (s *search) goesOn(f Failure, lost any, now time.Time, limit int) bool {
	if s.active() {
		limit = s.limit
	}
	switch {
	case f.Server != nil && lost != nil && f.Server != lost,
		s.newConnection(f) && s.retries >= limit,
		s.active() && !now.Before(s.until()),
		s.active() && s.oldest != f.Oldest:
		return false
	}
	return true
}

// retried notes the retry of the 410 f at now.
func (s *search) retried(f Failure, now time.Time, limit int) {
	if !s.active() {
		s.first, s.oldest, s.limit = now, f.Oldest, limit
	}
	if s.newConnection(f) {
		s.retries++
	}
	s.conn = f.Connection
}
