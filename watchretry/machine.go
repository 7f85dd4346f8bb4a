package watchretry

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/kretry/kretry/internal/establish"
	"github.com/kretry/kretry/internal/frame"
	"github.com/kretry/kretry/internal/policy"
)

// The resuming stream is a loop of three steps (see stream.Read): do the
// current phase's I/O and report what happened as an event; report the
// failure it is, if any, to the policy (stream.decide), whose decision
// comes back in the event; hand the event to next, which does what the
// decision says and moves the machine on.
//
// next does no I/O, reads no clock and decides nothing of its own: it
// updates the machine it is given and returns what to do (it takes the
// machine and the event by pointer only because they are copied on every
// event otherwise).

// phase is where a resuming stream is in its life.
type phase uint8

const (
	// streaming: whole frames of the current response reach the caller,
	// and each moves the resume point. A break or an ERROR event is a
	// failure the policy decides on: resumed (waiting, or resuming at once
	// on a new connection for a 410 it searches past), held (waiting, then
	// draining), handed over (an ERROR event delivered, then draining; a
	// break's error, then done) or given up (done, a clean end). A clean
	// end that was intended and an oversized frame move to done.
	streaming phase = iota
	// waiting: the policy's wait runs (it ends at once if the caller closes
	// the body); the only phase that sleeps. Before a resume (held == nil)
	// the current response is closed and resuming follows; as the hold of
	// a 410 (held != nil) the 410 is delivered when it ends, then heldThen.
	waiting
	// resuming: the watch is reopened at the resume point, with retries.
	// A 200 in the stream's encoding moves back to streaming; a 410 is a
	// failure the policy decides on; any other answer, another encoding or
	// retries spent is done with a clean end (with the search's first 410
	// when one is under way).
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
	// enc is the stream's encoding: a resume answered in another ends it.
	enc frame.Encoding

	// wait is waiting's duration; held, when set, is the 410 (as the ERROR
	// frame the caller gets) the wait holds, delivered when it ends, and
	// heldThen the phase after it.
	wait     time.Duration
	held     []byte
	heldThen phase
	// newConnection is resuming's: the reopen must reach a new connection.
	newConnection bool
	// resumed is streaming's: the response answers a resume and has
	// delivered no event yet.
	resumed bool

	// point is where a resume reopens.
	point resumePoint
	// search, when set, is a search for an apiserver that holds the resume
	// point under way: its first 410 and its end. Progress ends it, and so
	// does a break of the stream a 200 opened.
	search *goneSearch
}

// goneSearch is the search for an apiserver that holds the resume point:
// the first 410 of the search, as the ERROR frame the caller gets, is
// handed over when the search ends (policy.Decision.Until), whatever the
// retry in flight is doing.
type goneSearch struct {
	event []byte
	until time.Time
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
	// evOpened: the reopen was answered with a 200; body is the new
	// response's, enc its encoding (zero: none kretry reads).
	evOpened
	// evRefused: the reopen was answered with neither a 200 nor a 410.
	evRefused
	// evReopenFailed: the reopen's retries were spent (or stopped: the
	// caller's deadline, the end of a search) without an answer.
	evReopenFailed
	// evGoneAnswer: the reopen was answered with a 410; raw is it as an
	// ERROR frame in the stream's encoding (err when it could not be
	// encoded).
	evGoneAnswer

	eventKinds // the number of kinds
)

var eventNames = [...]string{"frame", "error", "end", "broke", "tooLarge", "closed", "waitOver",
	"opened", "refused", "reopenFailed", "goneAnswer"}

func (k eventKind) String() string { return eventNames[k] }

// event is what happened, with the facts next needs and the policy's
// decision on the failure it is, if any (see stream.decide).
type event struct {
	kind eventKind

	raw   []byte       // evFrame, evError: the frame; evGoneAnswer: the 410 as an ERROR frame
	frame *frame.Event // evFrame, evError
	err   error        // evBroke, evTooLarge: the error; evGoneAnswer: the encoding's failure

	reason, cause string // evBroke: the reports' reason and cause

	body   io.ReadCloser  // evOpened
	enc    frame.Encoding // evOpened
	oldest string         // evGoneAnswer: the oldest resourceVersion the 410 named (policy.OldestInCache)

	decision policy.Decision // evError, evBroke while streaming; evGoneAnswer
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
	// report, when set, is what the reports are told (a pointer: most
	// steps tell them nothing, and an action is copied on every event).
	report *report
}

// report is what a step tells the reports.
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
	reportRetry              // Reporter.Retry: a resume about to wait
	reportGiveUp             // Reporter.GiveUp: the stream stops resuming
)

// next is the transition function: the one place that moves the stream on.
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
				return m.finish(io.EOF, action{deliver: held})
			}
			m.phase = m.heldThen
			return action{deliver: held}
		}
	case resuming:
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
			if m.search != nil { // a store only when there is one: this is every event's path
				m.search = nil
			}
		}
		return act
	case evError, evBroke:
		if ev.kind == evBroke {
			// The stream broke after its 200: the apiserver that answered
			// held the resume point, and a search under way found it (the
			// policy's search ends at the break too). Its first 410 is
			// nobody's now.
			m.search = nil
		}
		return m.decided(ev)
	case evEnd:
		return m.finish(io.EOF, action{})
	case evTooLarge:
		return m.finish(ev.err, action{closeBody: true})
	}
	return m.impossible(ev)
}

// reopened is next for what a reopen met.
func (m *machine) reopened(ev *event) action {
	m.newConnection = false
	switch ev.kind {
	case evOpened:
		if ev.enc != m.enc {
			// Another content type: the caller's re-watch negotiates afresh.
			return m.giveUp(action{})
		}
		m.phase, m.resumed = streaming, true
		return action{attach: ev.body}
	case evReopenFailed, evRefused:
		// Retries spent or stopped, or 401/403 (the auth layers above
		// kretry act only on an answer they see: the caller's re-watch gets
		// it), another 4xx, a 5xx after its window: a clean close after the
		// last whole frame, so client-go re-watches through its own stack
		// instead of relisting.
		return m.giveUp(action{})
	case evGoneAnswer:
		if ev.err != nil {
			return m.finish(ev.err, action{})
		}
		return m.decided(ev)
	}
	return m.impossible(ev)
}

// decided is next for a failure the policy decided on (ev.decision): a
// break or an ERROR event while streaming, or a 410 answering a reopen.
func (m *machine) decided(ev *event) action {
	d := ev.decision
	reason, code, cause := m.described(ev)
	switch d.Action {
	case policy.Retry:
		act := action{closeBody: true, report: &report{kind: reportRetry, reason: reason, code: code, cause: cause, wait: d.Wait}}
		if ev.kind == evBroke && ev.reason == establish.ReasonInvalidFrame {
			m.point.invalid++
		}
		if d.NewConnection {
			// A 410 from an apiserver whose cache starts past the resume
			// point: reopen at once on a new connection, which a balancer
			// may route to another that holds it.
			if m.search == nil {
				m.search = &goneSearch{event: bytes.Clone(ev.raw)}
			}
			m.search.until = d.Until
			m.phase, m.newConnection = resuming, true
			return act
		}
		m.phase, m.wait, m.held = waiting, d.Wait, nil
		return act
	case policy.Hold:
		// A 410 that ends a run of failures: held, so that a fleet's
		// relists spread out as client-go's reflector spreads them.
		m.phase, m.wait, m.held, m.heldThen = waiting, d.Wait, ev.raw, m.afterHandOver(ev)
		return action{}
	case policy.GiveUp:
		act := action{closeBody: ev.kind == evBroke}
		if d.Stop != policy.StoppedBySearch {
			act.report = m.gaveUp(reason, d)
		}
		return m.giveUp(act)
	}
	// Handed over: the ERROR event (or the 410 answer) reaches the caller,
	// a break's error ends the stream.
	act := action{}
	if d.Stop != policy.NotStopped {
		act.report = m.gaveUp(reason, d)
	}
	switch ev.kind {
	case evBroke:
		act.closeBody = true
		return m.finish(ev.err, act)
	case evGoneAnswer:
		act.deliver = ev.raw
		return m.finish(io.EOF, act)
	}
	m.phase, act.deliver = draining, ev.raw
	return act
}

// described is what the reports say of the failure ev: its reason, the code
// and the cause.
func (m *machine) described(ev *event) (reason string, code int, cause string) {
	switch {
	case ev.decision.NewConnection && ev.kind == evGoneAnswer:
		return establish.ReasonExpiredResume, http.StatusGone, "410"
	case ev.decision.NewConnection:
		return establish.ReasonExpiredResume, http.StatusGone, "ERROR event 410"
	case ev.kind == evBroke:
		return ev.reason, 0, ev.cause
	case ev.kind == evError:
		code = int(ev.frame.Code)
		reason = establish.ReasonErrorEvent
		if code == http.StatusTooManyRequests {
			reason = establish.ReasonTooManyRequests
		}
		return reason, code, fmt.Sprintf("ERROR event %d", code)
	}
	return "", http.StatusGone, "410"
}

// gaveUp is the report of a failure of reason that the decision d stopped.
func (m *machine) gaveUp(reason string, d policy.Decision) *report {
	if d.Stop == policy.StoppedByDeadline {
		reason = establish.ReasonDeadline
	}
	return &report{kind: reportGiveUp, reason: reason, budget: d.Stop == policy.StoppedByBudget}
}

// afterHandOver is the phase after the failure ev reaches the caller: an
// ERROR event's stream goes on to the server's end, a 410 answer is all.
func (m *machine) afterHandOver(ev *event) phase {
	if ev.kind == evGoneAnswer {
		return done
	}
	return draining
}

// giveUp ends the stream as the break would have ended it without kretry:
// cleanly, after the last whole frame; or, when a search for an apiserver
// that holds the resume point is under way, with its first 410.
func (m *machine) giveUp(act action) action {
	if m.search != nil {
		act.deliver = m.search.event
		m.search = nil
	}
	return m.finish(io.EOF, act)
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
