package policy

import (
	"slices"
	"time"
)

// Bounds of the search for an apiserver that holds a watch's resume point,
// after a resume was answered 410 by a watch cache that starts past it. The
// search is bounded by time: a real compaction's 410 reaches the caller at
// most searchBound after the first 410, whatever the retries in flight are
// doing (Decision.Until); by the retry budget, each retry spending from it;
// and by what the 410s say (see search.goesOn). maxExpiredRetries only caps
// a search whose 410s come back at once: behind a round-robin balancer in
// front of two apiservers a new connection reaches the fresh one again
// about every other time, so six new connections left one resume in 64 its
// 410, and twenty leave one in a million. maxCutOffRetries bounds the
// search of a client that was cut off (see loss.searchLimit).
const (
	searchBound       = 3 * time.Second
	maxExpiredRetries = 20
	maxCutOffRetries  = 6
)

// maxHeardAgain is how many 410s in a row from apiservers the search has
// heard from already it retries: the next one ends it, no apiserver it can
// reach seeming to hold the point. The stream's own apiserver, restarted,
// counts once another has answered: until then its 410s say nothing of the
// others.
//
// A client cannot count the apiservers behind its balancer: it knows the
// one or two its connections reached. A 410 from an apiserver other than
// the stream's says that one lacks the point, not that every other does:
// behind three (kubeadm's stacked control plane), the one restarted before
// the stream's lacks it while the third holds it. So the search goes on
// after it, and every apiserver it hears from for the first time starts
// the count over. Behind two, every such search ends in the 410 after
// maxHeardAgain+1 more, the price of not knowing there is no third; behind
// three, each new connection reaches the third about every other time (the
// stopped apiserver's turns aside), so a search that met the other stale
// one first misses the third one time in 2^(maxHeardAgain+1). When every
// apiserver lacks the point (all restarted after etcd compacted past it),
// the stream's own and the other take turns: counting the own one's 410s
// once the other has answered ends that search as soon. Measured with
// `make fleet-ha` (docs/fleet.md, N = 1,000): behind three it spared 90% of
// the relists at the fast pace and 99% at the cloud pace, where a search
// that ended at the first other apiserver's 410 spared 5% and 94%; behind
// two at the fast pace, where every 410 is true, the five more connections
// cost the apiservers 36 CPU seconds against that rule's 28 and stock's 26.
const maxHeardAgain = 4

// search is a search for an apiserver that holds a watch's resume point:
// a resume's 410 retried on new connections. Only a success ends it.
type search struct {
	// first is its first 410; zero when no search is under way.
	first time.Time
	// retries counts the retries that reached a new connection, limit how
	// many may (fixed at the first 410).
	retries, limit int
	// conn is the connection the last 410 came over.
	conn any
	// own is the stream's own apiserver, restarted: the first to answer a
	// 410 that may be the one the stream lost (see mayBeOwn); zero until
	// one did. Until another answers, its 410s say nothing of the others:
	// one may hold the point.
	own apiserverID
	// heard are the other apiservers that answered a 410 in this search;
	// again counts the 410s in a row, each over a new connection, from one
	// of them or from own since the last was first heard from.
	heard []apiserverID
	again int
}

// apiserverID tells apart the apiservers that answer a search's 410s: by
// their serving certificate when known, and by the oldest resourceVersion
// their watch caches name (two apiservers sharing a certificate, or behind
// a balancer that ends TLS, start their caches at different points).
type apiserverID struct {
	server any
	oldest string
}

func idOf(f Failure) apiserverID { return apiserverID{f.Server, f.Oldest} }

// mayBeOwn reports whether the 410 f may come from the apiserver whose
// stream was lost, lost (nil when unknown): unless both certificates are
// known and differ.
func mayBeOwn(f Failure, lost any) bool {
	return f.Server == nil || lost == nil || f.Server == lost
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

// goesOn reports whether the search may go on after the 410 f at now, the
// stream having lost the apiserver lost (nil when unknown), a search that
// starts now being allowed limit new connections. It may while it is
// within its bound and its count, and while a new connection may still
// reach an apiserver it has not heard from: until maxHeardAgain+1 of its
// 410s in a row came from apiservers it had heard from already, the
// stream's own counting once another has answered.
func (s *search) goesOn(f Failure, lost any, now time.Time, limit int) bool {
	if s.active() {
		limit = s.limit
	}
	switch {
	case s.newConnection(f) && s.retries >= limit,
		s.active() && !now.Before(s.until()):
		return false
	}
	return s.heardAgain(f, lost) <= maxHeardAgain
}

// isOwn reports whether the 410 f comes from the stream's own apiserver.
func (s *search) isOwn(f Failure, lost any) bool {
	if s.own == (apiserverID{}) {
		return mayBeOwn(f, lost)
	}
	return idOf(f) == s.own
}

// heardAgain is what the count of 410s in a row from apiservers heard
// already becomes with the 410 f.
func (s *search) heardAgain(f Failure, lost any) int {
	switch own := s.isOwn(f, lost); {
	case own && len(s.heard) == 0:
		return s.again
	case !own && !slices.Contains(s.heard, idOf(f)):
		return 0
	case s.newConnection(f):
		return s.again + 1
	}
	return s.again
}

// retried notes the retry of the 410 f at now, the stream having lost the
// apiserver lost.
func (s *search) retried(f Failure, lost any, now time.Time, limit int) {
	s.again = s.heardAgain(f, lost)
	if !s.active() {
		s.first, s.limit = now, limit
	}
	switch id := idOf(f); {
	case s.isOwn(f, lost):
		s.own = id
	case !slices.Contains(s.heard, id):
		s.heard = append(s.heard, id)
	}
	if s.newConnection(f) {
		s.retries++
	}
	s.conn = f.Connection
}
