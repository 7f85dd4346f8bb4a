package watchretry

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/kretry/kretry/internal/frame"
	"github.com/kretry/kretry/internal/policy"
)

// The resuming stream is a loop of three steps (see stream.Read): do the
// current phase's I/O and report what happened as an event; ask the
// policy's Tracker the question the event raises (stream.consult); hand
// both to next, which decides the new state and what to do.
//
// next does no I/O and reads no clock: it updates the machine it is given
// and returns what to do, nothing else (it takes the machine and the event
// by pointer only because they are copied on every event otherwise). The
// Tracker is asked by the caller, not
// by next, because it reads the clock and spends the transport's shared
// retry budget: which question an event raises is decided here (question),
// the answer comes back in the event, and next decides what it means.

// phase is where a resuming stream is in its life.
type phase uint8

const (
	// streaming: whole frames of the current response reach the caller,
	// and each moves the resume point. A break (read error, early clean
	// end, invalid frame, absorbed ERROR event) moves to waiting, unless
	// the wait would outlast the caller's timeoutSeconds; that, a clean end
	// that was intended, an ERROR 429/5xx past its window or refused by
	// the retry budget, an oversized frame or a break without a resume
	// point moves to done (every retryable one reported to Hooks.GiveUp);
	// a terminal ERROR event moves to draining, after its hold (waiting)
	// when it is a 410 that ends a run of failures; a 410 retried on a new
	// connection moves to resuming.
	streaming phase = iota
	// waiting: the policy's wait runs (it ends at once if the caller closes
	// the body); the only phase that sleeps. Before a resume (held == nil)
	// the current response is closed and resuming follows; as the hold of
	// a 410 (held != nil) the 410 is delivered when it ends, then heldThen.
	waiting
	// resuming: the watch is reopened at the resume point, with retries.
	// A 200 in the stream's encoding moves back to streaming; a 410 is
	// retried on a new connection (resuming again), or delivered as an
	// ERROR event in the stream's encoding (after its hold), then done;
	// any other answer, or retries spent, is done with a clean end (with
	// the search's first 410 when one is under way).
	resuming
	// draining: a terminal ERROR event was delivered; whatever the server
	// sends after it reaches the caller up to the server's end, then done.
	draining
	// done: nothing more happens; Read returns err after the last bytes.
	done
)

var phaseNames = [...]string{"streaming", "waiting", "resuming", "draining", "done"}

func (p phase) String() string { return phaseNames[p] }

// machine is the stream's state: its phase and each phase's data.
type machine struct {
	phase phase
	// err is what Read returns in done, after the last bytes.
	err error

	// wait is waiting's duration; held, when set, is the 410 (as the ERROR
	// frame the caller gets) the wait holds, delivered when it ends, and
	// heldThen the phase after it.
	wait     time.Duration
	held     []byte
	heldThen phase
	// newConnection is resuming's: the last 410 came over the current
	// connection, and the reopen must reach another one.
	newConnection bool
	// resumed is streaming's: the response answers a resume and has
	// delivered no event yet.
	resumed bool

	// point is where a resume reopens; maxInvalid bounds the invalid frames
	// at one point.
	point      resumePoint
	maxInvalid int
	// run is the current run of failures, reset by progress only.
	run resumeRun
}

// resumeRun is what a stream knows about its current run of failures, from
// its first failure after progress. A whole event delivered ends it: the one
// place it is reset is next's frame edge.
type resumeRun struct {
	since    time.Time // the run's first failure; zero when not failing
	attempts int       // reopening requests sent in the run
	// lostConnection is set when the run's last failure was a lost
	// connection (a read error, an early end, a stall), rather than an
	// ERROR event or an invalid frame: a 410 to the resume after it is
	// retried on a new connection (see policy.Tracker.Gone).
	lostConnection bool
	// search, when set, is a search for an apiserver that holds the resume
	// point, retrying a 410 on new connections.
	search *goneSearch
}

// goneSearch is a search for an apiserver that holds the resume point: the
// first 410 of the search, as the ERROR frame the caller gets, is handed
// over at until (policy.GoneDecision.Until), whatever the retry in flight
// is doing.
type goneSearch struct {
	event []byte
	until time.Time
}

// failed notes a failure at now: the first one since progress starts the run.
func (r *resumeRun) failed(now time.Time) {
	if r.since.IsZero() {
		r.since = now
	}
}

// eventKind is what happened, as the current phase's I/O reports it.
type eventKind uint8

const (
	// evFrame: a whole frame that is not an ERROR event (streaming,
	// draining).
	evFrame eventKind = iota
	// evError: a whole ERROR event, with its code and Retry-After.
	evError
	// evEnd: the server ended the response cleanly once the caller's
	// timeoutSeconds had elapsed: the end the caller asked for.
	evEnd
	// evBroke: the response broke (read error, early clean end, stall,
	// invalid frame): err, reason and cause say how.
	evBroke
	// evTooLarge: a frame larger than MaxFrameSize.
	evTooLarge
	// evClosed: the stream's context ended (Close, or the caller's
	// context), during a read, a wait or a reopen.
	evClosed
	// evWaitOver: waiting's wait ran to its end.
	evWaitOver
	// evDeadline: a reopen would have under a second of the caller's
	// timeoutSeconds left.
	evDeadline
	// evSearchOver: the search for an apiserver that holds the resume
	// point reached its bound, before or during a reopen.
	evSearchOver
	// evOpened: the reopen was answered with a 200 in the stream's
	// encoding; body is the new response's.
	evOpened
	// evMismatch: the reopen was answered with a 200 in another encoding.
	evMismatch
	// evRefused: the reopen was answered with neither a 200 nor a 410.
	evRefused
	// evReopenFailed: the reopen's retries were spent without an answer.
	evReopenFailed
	// evGoneAnswer: the reopen was answered with a 410; raw is it as an
	// ERROR frame in the stream's encoding (err when it could not be
	// encoded).
	evGoneAnswer

	eventKinds // the number of kinds
)

var eventNames = [...]string{"frame", "error", "end", "broke", "tooLarge", "closed", "waitOver", "deadline",
	"searchOver", "opened", "mismatch", "refused", "reopenFailed", "goneAnswer"}

func (k eventKind) String() string { return eventNames[k] }

// event is what happened, with the facts next needs and the Tracker's
// answer to the question it raised (see question).
type event struct {
	kind eventKind
	at   time.Time // when it happened; zero for evFrame, which needs no time

	raw   []byte       // evFrame, evError: the frame; evGoneAnswer: the 410 as an ERROR frame
	frame *frame.Event // evFrame, evError
	err   error        // evBroke, evTooLarge: the error; evGoneAnswer: the encoding's failure

	reason, cause string // evBroke: the policy's reason and the hooks' cause

	attempts int           // resuming's events: the requests the reopen sent
	body     io.ReadCloser // evOpened
	oldest   string        // evGoneAnswer: the oldest resourceVersion the 410 named (policy.OldestInCache)

	decision policy.Decision     // the answer to askDecide or askBreak
	gone     policy.GoneDecision // the answer to askGone
}

// question is the report to the Tracker an event calls for.
type question uint8

const (
	askNothing question = iota
	askDecide           // Tracker.Decide with the ERROR event's outcome
	askBreak            // Tracker.Break
	askGone             // Tracker.Gone with the 410's expiry
)

// question says which report to the Tracker ev calls for in m: its answer
// is the input next decides on.
func (m *machine) question(ev *event) question {
	switch {
	case m.phase == streaming && ev.kind == evError:
		if absorbable(ev.frame.Code) && m.point.known {
			return askDecide
		}
		if ev.frame.Code == http.StatusGone {
			return askGone
		}
	case m.phase == streaming && ev.kind == evBroke:
		if !m.invalidSpent(ev) && m.point.known {
			return askBreak
		}
	case m.phase == resuming && ev.kind == evGoneAnswer && ev.err == nil:
		return askGone
	}
	return askNothing
}

// absorbable reports whether an ERROR event's code is one the policy may
// absorb (429, 5xx).
func absorbable(code int32) bool {
	return policy.ClassifyStatus(int(code)) != policy.Deliver
}

// invalidSpent reports whether the break ev is an invalid frame past
// MaxInvalidFrames at the resume point.
func (m *machine) invalidSpent(ev *event) bool {
	return ev.reason == policy.ReasonInvalidFrame && m.point.invalid+1 > m.maxInvalid
}

// action is what the caller does after next: every effect it has.
type action struct {
	// deliver, when set, are bytes the caller reads next.
	deliver []byte
	// progress: deliver is a whole event of the stream that moved it on
	// (policy.Tracker.Progress). delivered: it is an event delivered while
	// streaming (a JSON frame's separator is then owed to the caller).
	progress, delivered bool
	// closeBody: the current response is done with.
	closeBody bool
	// attach is the new response to stream (policy.Tracker.Opened).
	attach io.ReadCloser
	// report, when set, is what the hooks are told (a pointer: most steps
	// tell them nothing, and an action is copied on every event).
	report *report
}

// report is what a step tells the hooks.
type report struct {
	kind   reportKind
	reason string
	code   int // the ERROR event's or the answer's; 0 for a break
	cause  string
	wait   time.Duration // reportRetry
	budget bool          // reportGiveUp: refused by the retry budget
}

type reportKind uint8

const (
	reportNothing reportKind = iota
	reportRetry              // Hooks.Retry: a resume about to wait
	reportGiveUp             // Hooks.GiveUp: the stream stops resuming
)

// next is the transition function: the one place that decides what the
// stream does.
func next(m *machine, ev *event) action {
	if m.phase == done {
		return action{} // Read never asks; nothing more happens
	}
	if ev.kind == evClosed {
		// The caller ended the stream: a clean end, which is what client-go's
		// watch decoders take as "stopped".
		return m.finish(io.EOF, action{})
	}
	switch m.phase {
	case streaming:
		return m.streamed(ev)
	case draining:
		switch ev.kind {
		case evFrame, evError:
			return action{deliver: ev.raw}
		case evEnd:
			return m.finish(io.EOF, action{})
		case evBroke, evTooLarge:
			return m.finish(ev.err, action{})
		}
	case waiting:
		if ev.kind == evWaitOver {
			if m.held == nil {
				m.phase = resuming
				return action{}
			}
			held := m.held
			m.held = nil
			if m.heldThen == done {
				m.run.search = nil
				return m.finish(io.EOF, action{deliver: held})
			}
			m.phase = m.heldThen
			return action{deliver: held}
		}
	case resuming:
		m.run.attempts += ev.attempts
		return m.reopened(ev)
	}
	return m.impossible(ev)
}

// streamed is next in streaming.
func (m *machine) streamed(ev *event) action {
	switch ev.kind {
	case evFrame:
		act := action{deliver: ev.raw, delivered: true}
		m.resumed = false
		moved := m.point.observe(ev.frame)
		// A bookmark at the resourceVersion already held says nothing new:
		// were it progress, a server that sends one and closes would be
		// reopened at once, again and again.
		if moved || ev.frame.Type != frame.Bookmark {
			act.progress = true
			m.run = resumeRun{}
		}
		return act
	case evError:
		return m.errorEvent(ev)
	case evEnd:
		return m.finish(io.EOF, action{})
	case evTooLarge:
		return m.finish(ev.err, action{closeBody: true})
	case evBroke:
		return m.broke(ev)
	}
	return m.impossible(ev)
}

// errorEvent is next for an ERROR event while streaming: one the policy
// absorbs is a break, one it has stopped absorbing ends the stream; a 410
// is retried on a new connection, held or delivered; any other is the
// caller's.
func (m *machine) errorEvent(ev *event) action {
	code := int(ev.frame.Code)
	switch m.question(ev) {
	case askDecide:
		m.run.failed(ev.at)
		reason := policy.ReasonErrorEvent
		if policy.ClassifyStatus(code) == policy.TooManyRequests {
			reason = policy.ReasonTooManyRequests
		}
		decision := ev.decision
		if decision.Retry {
			m.run.lostConnection = false // the server answered, and may again
			m.phase, m.wait, m.held = waiting, decision.Wait, nil
			return action{closeBody: true, report: &report{kind: reportRetry, reason: reason, code: code,
				cause: fmt.Sprintf("ERROR event %d", code), wait: decision.Wait}}
		}
		giveUp := &report{kind: reportGiveUp, reason: decision.Reason(reason), budget: decision.Stopped == policy.StoppedByBudget}
		if policy.ClassifyStatus(code) == policy.InternalError && decision.Stopped == policy.StoppedByWindow {
			// A server that answers this watch but has sent ERROR 5xx for a
			// whole window cannot serve it: the ERROR is the caller's, and
			// client-go relists, as its own MaxInternalErrorRetryDuration
			// does. A clean end would make it re-watch into the same errors,
			// window after window, its cache stale.
			m.phase = draining
			return action{deliver: ev.raw, report: giveUp}
		}
		// Refused by the budget, or the caller's deadline near: end as the
		// cut would have ended without kretry; client-go re-watches from its
		// resourceVersion.
		return m.finish(io.EOF, action{report: giveUp})
	case askGone:
		return m.goneDecided(ev, "ERROR event 410", draining)
	}
	// Any other code, or no resume point: the caller's.
	m.phase = draining
	return action{deliver: ev.raw}
}

// goneDecided is next for a 410 the Tracker decided on (ev.gone), given as
// the ERROR frame ev.raw: retried on a new connection, or held, then
// delivered and followed by then.
func (m *machine) goneDecided(ev *event, cause string, then phase) action {
	decision := ev.gone
	if decision.Retry {
		m.run.failed(ev.at)
		if m.run.search == nil {
			m.run.search = &goneSearch{event: bytes.Clone(ev.raw)}
		}
		m.run.search.until = decision.Until
		m.phase, m.newConnection = resuming, true
		return action{closeBody: true, report: &report{kind: reportRetry, reason: policy.ReasonExpiredResume,
			code: http.StatusGone, cause: cause}}
	}
	if decision.Hold > 0 {
		// The 410 ends a run of failures: held, so that a fleet's relists
		// spread out as client-go's reflector spreads them.
		m.phase, m.wait, m.held, m.heldThen = waiting, decision.Hold, ev.raw, then
		return action{}
	}
	if then == done {
		m.run.search = nil
		return m.finish(io.EOF, action{deliver: ev.raw})
	}
	m.phase = then
	return action{deliver: ev.raw}
}

// broke is next for a response that ended before its time: resume from the
// resume point, or, without one, hand the caller the break as it was.
func (m *machine) broke(ev *event) action {
	act := action{closeBody: true}
	m.run.lostConnection = ev.reason != policy.ReasonInvalidFrame
	if ev.reason == policy.ReasonInvalidFrame {
		if m.invalidSpent(ev) {
			m.run.failed(ev.at)
			act.report = &report{kind: reportGiveUp, reason: policy.ReasonInvalidFrame}
			return m.finish(ev.err, act)
		}
		m.point.invalid++
	}
	if !m.point.known {
		return m.finish(ev.err, act)
	}
	m.run.failed(ev.at)
	if !ev.decision.Retry {
		// The caller's timeoutSeconds is (all but) over: its watch ends
		// here, as the server would have ended it.
		act.report = &report{kind: reportGiveUp, reason: ev.decision.Reason(ev.reason)}
		return m.finish(io.EOF, act)
	}
	m.phase, m.wait, m.held = waiting, ev.decision.Wait, nil
	act.report = &report{kind: reportRetry, reason: ev.reason, cause: ev.cause, wait: ev.decision.Wait}
	return act
}

// reopened is next for what a reopen met.
func (m *machine) reopened(ev *event) action {
	m.newConnection = false
	switch ev.kind {
	case evDeadline:
		m.run.failed(ev.at)
		return m.finish(io.EOF, action{report: &report{kind: reportGiveUp, reason: policy.ReasonDeadline}})
	case evOpened:
		m.phase, m.resumed = streaming, true
		return action{attach: ev.body}
	case evMismatch:
		return m.finish(io.EOF, action{}) // the caller's re-watch negotiates afresh
	case evSearchOver:
		return m.handOverGone()
	case evReopenFailed, evRefused:
		if m.run.search != nil {
			return m.handOverGone()
		}
		// Retries spent, or 401/403 (the auth layers above kretry act only
		// on an answer they see: the caller's re-watch gets it), another
		// 4xx, a 5xx after its window: a clean close after the last whole
		// frame, so client-go re-watches through its own stack instead of
		// relisting.
		return m.finish(io.EOF, action{})
	case evGoneAnswer:
		if ev.err != nil {
			return m.finish(ev.err, action{})
		}
		// The resume point has expired here: retried on a new connection,
		// or the caller must relist, as if the server had said it in the
		// stream.
		return m.goneDecided(ev, "410", done)
	}
	return m.impossible(ev)
}

// handOverGone ends the stream with the first 410 of the search for an
// apiserver that holds the resume point (nothing when there is none).
func (m *machine) handOverGone() action {
	var held []byte
	if m.run.search != nil {
		held = m.run.search.event
	}
	m.run.search = nil
	return m.finish(io.EOF, action{deliver: held})
}

// finish moves to done; Read returns err once the bytes delivered are read.
func (m *machine) finish(err error, act action) action {
	m.phase, m.err = done, err
	m.held = nil
	return act
}

// impossible is next's answer to an event the phase's I/O never reports:
// the stream ends with an error that names the edge.
func (m *machine) impossible(ev *event) action {
	return m.finish(fmt.Errorf("watchretry: internal error: event %s in phase %s", ev.kind, m.phase), action{closeBody: true})
}
