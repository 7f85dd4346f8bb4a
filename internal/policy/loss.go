package policy

import "time"

// loss is what a stream knows about the connection it lost: when it began
// to reopen, and how its reopenings failed since. It decides how far a
// resume's 410 is searched for (see searchLimit). A loss begins at a
// stream's break that lost its connection (not an invalid frame) and ends
// at a success, at an ERROR event 429 or 5xx (the server answers the
// watch, and may again), or at the next break.
type loss struct {
	// from is when the first reopening was sent: the break plus kretry's
	// own wait before it (a GOAWAY's spread is not time cut off from the
	// apiservers). Zero: no connection lost.
	from time.Time
	// failed is set once a reopening failed (a 429, a 5xx, no answer);
	// accepted once one of those failures was not a refused connection:
	// something accepted it (a balancer, or an apiserver that then failed).
	failed, accepted bool
	// server is the apiserver whose stream was lost, when known.
	server any
}

// active reports whether the stream's last failure lost its connection.
func (l *loss) active() bool { return !l.from.IsZero() }

// reopenFailed notes a reopening's failure; refused when nothing listened.
func (l *loss) reopenFailed(refused bool) {
	l.failed = true
	l.accepted = l.accepted || !refused
}

// cutOff reports whether the client was cut off from every apiserver it
// can reach: a reopening failed, and searchBound has passed since the
// reopenings began.
func (l *loss) cutOff(now time.Time) bool {
	return l.failed && now.Sub(l.from) >= searchBound
}

// searchLimit is how many new connections a search that a resume's first
// 410 starts at now may reach. After a whole control plane's restart every
// watch cache starts past the resume point, and each retry would only add a
// request per client to the herd that relists (`make fleet`,
// TestExpiredEverywhereIsOne410), so a client cut off searches less:
//   - not at all if every failed reopening was refused: nothing listened at
//     the address it dials, so no balancer stood between that could send a
//     new connection elsewhere (the apiserver restarted alone, or all did);
//   - on up to maxCutOffRetries if something accepted one and failed it (a
//     balancer trying a stopped backend): a rolling upgrade's resume that
//     met the stopped apiserver before the restarted one still finds the
//     other.
//
// A client whose reopenings did not fail was not cut off, however long its
// answer took: a balancer trying a stopped backend first, or a loaded
// machine, delays an answer from an apiserver that may be one of several.
func (l *loss) searchLimit(now time.Time) int {
	switch {
	case !l.cutOff(now):
		return maxExpiredRetries
	case l.accepted:
		return maxCutOffRetries
	}
	return 0
}
