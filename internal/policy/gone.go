package policy

import (
	"regexp"
	"time"
)

// Expiry is a 410 Gone/Expired that ended a watch stream or answered its
// reopening: an HTTP 410, or an ERROR event 410 inside a 200.
type Expiry struct {
	// Resume is set when the 410 answered a reopening after a lost
	// connection, before any event of the reopened stream: behind a load
	// balancer it may come from a freshly restarted apiserver whose watch
	// cache starts past the resume point while another one still holds it.
	Resume bool
	// Oldest is what the watch cache named as the oldest resourceVersion
	// it holds (the S of "too old resource version: X (S)", see
	// OldestInCache); "" when the message is not the watch cache's.
	Oldest string
	// Connection identifies the connection the 410 came over (a comparable
	// value, such as the net.Conn); nil when unknown. A 410 over the
	// connection the run's previous one came over answered a retry that
	// asked for a new connection and rode the old one: golang.org/x/net/http2
	// picks a connection before it looks at Connection: close, so that
	// retry only retired it.
	Connection any
	// Server identifies the apiserver that answered the 410, and Lost the
	// one the stream was reading when its connection was lost (comparable
	// values, such as a digest of each one's serving certificate); nil when
	// unknown, as behind a balancer that ends TLS itself, or the same when
	// the apiservers share one certificate.
	Server, Lost any
}

// GoneDecision is what to do with a 410.
type GoneDecision struct {
	// Retry is set when the reopening is retried at once, on a new
	// connection, so that a load balancer may route it to another
	// apiserver.
	Retry bool
	// Hold is how long to hold the 410 before it is handed over, when it
	// is not retried.
	Hold time.Duration
	// Until, when Retry is set, is the end of the search for an apiserver
	// that holds the resume point: the first 410 of the run plus the
	// bound. A retry still unanswered (or waiting) then is abandoned and
	// the first 410 handed over, whatever the retries in flight are doing.
	Until time.Time
}

// Bounds of the retries of 410s that answer resumes. The search for an
// apiserver that holds the resume point is bounded by time: a real
// compaction's 410 is handed over at most expiredRetryBound after the first
// 410, whatever the retries in flight are doing (GoneDecision.Until); by
// the retry budget, each retry spending from it; and by what the 410s say
// (another oldest resourceVersion ends it). maxExpiredRetries only caps a
// search whose 410s come back at once: behind a round-robin balancer in
// front of two apiservers a new connection reaches the fresh one again
// about every other time, so six new connections left one resume in 64 its
// 410, and twenty leave one in a million.
//
// A client that was cut off (see Tracker.cutOff: a reopening failed, and
// the 410 came expiredRetryBound or more after the loss) searches less, or
// not at all, because after a whole control plane's restart every watch
// cache starts past its resume point (at the same oldest resourceVersion
// when nothing was written between their starts), and each retry would
// only add a request per client to the herd that relists (`make fleet`,
// TestExpiredEverywhereIsOne410):
//   - if every failed reopening was refused, nothing listened at the
//     address it dials, so no balancer stood between that could send a new
//     connection elsewhere: the apiserver restarted alone (or all did), and
//     the 410 is handed over with no search;
//   - otherwise something accepted a reopening and failed it (a balancer
//     trying a stopped backend, its 503): behind it, a resume that met the
//     stopped apiserver before the restarted one (a rolling upgrade at a
//     cloud balancer's pace) is searched for on up to maxCutOffRetries new
//     connections, and a control plane down costs each client that many
//     immediate 410s (twice as many over HTTP/2: see Expiry.Connection).
//
// The search is for the apiserver the stream lost, restarted past the
// resume point (its watch cache starts afresh) while another one, not
// restarted, holds it. A 410 from an apiserver other than the one the
// stream lost (Expiry.Server and Expiry.Lost known, and different) says
// the opposite: the stream's apiserver is gone (stopping, or out of the
// balancer's rotation) and the one that answered was already running and
// lacks the point; with two apiservers no other is left to hold it. That
// 410 is handed over with no search: at a balancer that takes a stopping
// apiserver out before its watches end (a rolling upgrade with a shutdown
// delay), every new connection reached the same apiserver and each retry
// was an immediate 410 (docs/fleet.md: 15% more apiserver CPU than stock
// client-go, for 6% fewer relists). What it gives up: a third apiserver
// that holds the point, and an apiserver still running whose connections
// only were dropped.
//
// A client whose reopenings did not fail was not cut off, however long the
// answer took to come: a balancer trying a stopped backend before another,
// or a loaded machine, delays an answer from an apiserver that may be one
// of several.
const (
	maxExpiredRetries = 20
	maxCutOffRetries  = 6
	expiredRetryBound = 3 * time.Second
)

// maxGoneHold caps the hold of a 410 (see Gone). The hold spreads a fleet's
// relists over the span its reopens were already spread over; drawn from
// the whole step after a long outage (a step of 12.8 s after 10 s refused),
// it only delayed the last cache to be current (docs/fleet-model.py: 50 s
// after a 10 s restart against stock client-go's 37.5 s, 36 s with the cap,
// the peak unchanged).
const maxGoneHold = 8 * time.Second

// expiredRun is the history of the 410s that answered resumes since the
// last progress.
type expiredRun struct {
	first   time.Time // the first such 410; zero when none
	retries int       // the retries that reached a new connection
	limit   int       // how many it may reach, fixed at the first 410
	oldest  string    // the first one's Oldest
	conn    any       // the last one's Connection
}

// Gone decides what to do with a 410 that ended a watch stream or answered
// its reopening. It is the one place that decision is made.
//
// First, whether the run of failures is still going: a stream up for the
// InternalErrorWindow has ended its run, and a backoff quiet for
// BackoffReset starts over, before anything is held (a 410 on a long quiet
// stream is handed over at once).
//
// A 410 that answered a resume after a lost connection (e.Resume) with the
// watch cache's message is retried at once on a new connection, on
// up to maxExpiredRetries new connections (fewer, or none, for a client
// cut off from every apiserver: see searchLimit) (a retry that rode the previous
// 410's connection, see Expiry.Connection, is not counted), until
// expiredRetryBound after the first 410 (GoneDecision.Until, which also
// ends a retry still in flight then), under the retry budget and the
// caller's deadline, as long as the 410s come from the apiserver the stream
// lost, when that is known (see Expiry.Server), and the watch cache they
// come from names the same oldest resourceVersion (the same fresh
// apiserver again): a different one
// means a second apiserver lacks the resume point too, an expiry
// everywhere, and a message that is not the watch cache's (etcd's own
// compaction) is authoritative. Progress starts the count over.
//
// Any other 410 is held for a draw from [0, min(step, maxGoneHold)), step
// being the backoff the current run reached: zero when the run did not grow
// it (a resume straight after a cut, the usual way to learn of a
// compaction), and when the hold would run into the caller's deadline. Why
// hold at all:
// client-go's reflector waits one step of its own backoff before it
// relists, a step grown by every failed re-watch it saw. Behind kretry it
// saw none (kretry absorbed them), so it would relist at once, and a fleet
// whose resumes meet a restarted server would send its relists right behind
// its reopens. The hold is the reflector's wait, restored.
func (t *Tracker) Gone(e Expiry) GoneDecision {
	t.settled = false
	cfg := t.policy.cfg
	now := cfg.Clock.Now()
	t.endRunIfUp(now)
	if !t.lastFailure.IsZero() && now.Sub(t.lastFailure) >= cfg.BackoffReset {
		t.resetBackoff()
	}
	if t.retryExpired(now, e) {
		return GoneDecision{Retry: true, Until: t.expired.first.Add(expiredRetryBound)}
	}
	step := t.backoff.Duration
	if step <= cfg.InitialBackoff {
		return GoneDecision{}
	}
	hold := time.Duration(cfg.Rand() * float64(min(step, maxGoneHold)))
	if t.pastDeadline(hold) {
		return GoneDecision{}
	}
	return GoneDecision{Hold: hold}
}

// retryExpired reports whether a 410 is retried on a new connection, and
// counts the retry.
func (t *Tracker) retryExpired(now time.Time, e Expiry) bool {
	run := &t.expired
	if run.first.IsZero() {
		run.limit = t.searchLimit(now)
	}
	counted := e.Connection == nil || e.Connection != run.conn
	switch {
	case !e.Resume, e.Oldest == "",
		e.Server != nil && e.Lost != nil && e.Server != e.Lost,
		counted && run.retries >= run.limit,
		!run.first.IsZero() && now.Sub(run.first) >= expiredRetryBound,
		run.oldest != "" && run.oldest != e.Oldest,
		t.pastDeadline(0):
		return false
	}
	if !t.policy.budget.Spend() {
		return false
	}
	if run.first.IsZero() {
		run.first, run.oldest = now, e.Oldest
	}
	if counted {
		run.retries++
	}
	run.conn = e.Connection
	return true
}

// searchLimit is how many new connections the search that a resume's first
// 410 starts now may reach (see maxCutOffRetries).
func (t *Tracker) searchLimit(now time.Time) int {
	switch {
	case !t.cutOff(now):
		return maxExpiredRetries
	case t.reopenAccepted:
		return maxCutOffRetries
	}
	return 0
}

// cutOff reports whether the reopenings since the stream broke say the
// client was cut off from every apiserver it can reach: one of them failed,
// and expiredRetryBound has passed since the loss.
func (t *Tracker) cutOff(now time.Time) bool {
	return !t.reopenFailed.IsZero() && now.Sub(t.lostAt) >= expiredRetryBound
}

// tooOld is the watch cache's message for a resourceVersion older than the
// oldest it holds (k8s.io/apiserver's cacher: "too old resource version:
// %d (%d)").
var tooOld = regexp.MustCompile(`^too old resource version: \d+ \((\d+)\)$`)

// OldestInCache returns the S of a "too old resource version: X (S)"
// message, or "" for any other message.
func OldestInCache(message string) string {
	m := tooOld.FindStringSubmatch(message)
	if m == nil {
		return ""
	}
	return m[1]
}
