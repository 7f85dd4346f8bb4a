package watchretry

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kretry/kretry/internal/establish"
	"github.com/kretry/kretry/internal/frame"
	"github.com/kretry/kretry/internal/policy"
)

// stream is the resuming Response.Body of one WATCH request. It does the
// I/O; what the I/O meets is decided by the policy and carried out by next
// (see machine.go).
type stream struct {
	rt       *roundTripper
	orig     *http.Request
	params   watchParams
	tracker  *policy.Tracker
	deadline time.Time // zero when the caller set no timeoutSeconds
	// http1 is set when the watch was answered over HTTP/1.1: its resumes
	// ask for their connection to be closed after them (see reopen).
	http1  bool
	ctx    context.Context
	cancel context.CancelFunc

	// mu guards body and conn, and closed's change with body: Close may
	// come from another goroutine while Read is blocked on the connection.
	// closed is also read on its own, without the lock, at the top of every
	// Read. conn is the connection the last attempt went over, when the
	// transport below reports it.
	mu     sync.Mutex
	body   io.ReadCloser
	closed atomic.Bool
	conn   net.Conn

	// server is the TLS state of the last answer, whose stream is being
	// read or whose 410 is being decided on. It names an apiserver (see
	// apiserver) only when a break or a resume's 410 is reported. Read's
	// goroutine alone uses it.
	server *tls.ConnectionState

	m       machine
	scanner *frame.Scanner
	// frame is the one the scanner read last: a field, so that scanning
	// into it allocates nothing (the event that reports it points at it).
	frame frame.Frame
	// pending[sent:] are the bytes of whole frames not yet read by the
	// caller. Read moves sent, not the slice: a pointer stored while the
	// collector runs costs a write barrier (see hold).
	pending []byte
	sent    int
	// owesNewline is set while the last JSON frame delivered has not had
	// the newline the server writes after it: the next Read hands the
	// separator over as soon as (and as far as) it is read, and a break
	// before it came hands over a newline of its own (see scanError), so
	// that a reader that splits lines never runs one event behind, nor
	// sees two events on one line.
	owesNewline bool
}

func newStream(rt *roundTripper, req *http.Request, resp *http.Response, enc frame.Encoding, tracker *policy.Tracker, params watchParams, deadline time.Time) *stream {
	ctx, cancel := context.WithCancel(req.Context())
	s := &stream{
		rt:       rt,
		orig:     req,
		params:   params,
		tracker:  tracker,
		deadline: deadline,
		http1:    resp.ProtoMajor == 1,
		ctx:      ctx,
		cancel:   cancel,
		m:        machine{phase: streaming, enc: enc, point: newResumePoint(params)},
		server:   resp.TLS,
	}
	s.attach(resp.Body)
	tracker.Opened()
	return s
}

// Read returns the bytes of whole frames, resuming the watch underneath as
// often as the policy allows. After Close it returns io.EOF; with an empty
// p it returns at once.
func (s *stream) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if s.isClosed() {
		return 0, io.EOF
	}
	if s.owesNewline && !s.hasPending() && s.m.phase == streaming {
		// Held like a frame, so that a slice shorter than it gets the rest
		// on the next Read; it stays valid until the next Scan, which comes
		// only once the caller has read it all. A separator that may not
		// be over leaves its newline owed (a break then hands one over).
		sep, open := s.scanner.Separator()
		s.owesNewline = open && bytes.IndexByte(sep, '\n') < 0
		s.hold(sep)
	}
	for !s.hasPending() {
		var ev event
		switch s.m.phase {
		case done:
			return 0, s.m.err
		case streaming, draining:
			s.readFrame(&ev)
		case waiting:
			ev = s.sleep()
		case resuming:
			ev = s.reopen()
		}
		s.handle(&ev)
	}
	n := copy(p, s.pending[s.sent:])
	s.sent += n
	return n, nil
}

// hold makes b the bytes Read hands the caller next.
func (s *stream) hold(b []byte) { s.pending, s.sent = b, 0 }

// hasPending reports whether held bytes remain for the caller.
func (s *stream) hasPending() bool { return s.sent < len(s.pending) }

// Close ends the stream at once: a wait in progress, a resume in flight and
// a blocked Read all return, and Read then reports a clean end. No
// goroutine outlives it.
func (s *stream) Close() error {
	s.mu.Lock()
	s.closed.Store(true)
	body := s.body
	s.body = nil
	s.mu.Unlock()
	s.cancel()
	if body != nil {
		return body.Close()
	}
	return nil
}

// handle asks the policy about the failure ev is, if any, hands both to
// next and does what it returns.
func (s *stream) handle(ev *event) {
	if ev.kind != evFrame {
		s.decide(ev)
	}
	from := s.m.phase
	act := next(&s.m, ev)
	if act.deliver != nil {
		s.hold(act.deliver)
	}
	if ev.kind == evFrame || ev.kind == evError {
		// A JSON frame whose newline has not arrived yet: the caller gets
		// the newline on its next Read, not with the next frame.
		s.owesNewline = act.delivered && s.m.enc == frame.JSON && !endsWithNewline(ev.raw)
	}
	if act.progress {
		s.tracker.Progress()
	}
	if act.closeBody {
		s.closeBody()
	}
	switch {
	case act.attach != nil:
		s.attach(act.attach)
		s.tracker.Opened()
	case ev.body != nil:
		_ = ev.body.Close() // a response the machine did not take
	}
	if act.report != nil {
		s.tell(*act.report)
	}
	if s.m.phase == done && from != done {
		s.closeBody()
		s.cancel()
	}
}

// decide reports the failure ev is, if any, to the policy, and puts its
// decision in ev: a break or an ERROR event while streaming, a 410 that
// answered a reopen.
func (s *stream) decide(ev *event) {
	var f policy.Failure
	switch {
	case ev.kind == evBroke && s.m.phase == streaming:
		f = policy.Failure{Kind: policy.StreamBroke, GoingAway: policy.GoingAway(ev.err),
			NoResumePoint: !s.m.point.known, Server: apiserver(s.server)}
		if ev.reason == establish.ReasonInvalidFrame {
			f.InvalidFrames = s.m.point.invalid + 1
		}
	case ev.kind == evError && s.m.phase == streaming && ev.frame.Code == http.StatusGone:
		f = policy.Failure{Kind: policy.Gone, InStream: true, Resume: s.m.resumed}
		if f.Resume {
			// Its message matters only to a resume's 410: decoded then alone.
			if st, ok := errorEventStatus(s.m.enc, ev.raw); ok {
				f.Oldest = policy.OldestInCache(st.Message)
			}
			f.Server, f.Connection = apiserver(s.server), s.connection()
		}
	case ev.kind == evError && s.m.phase == streaming:
		wait, _ := policy.SecondsToDuration(int64(ev.frame.RetryAfterSeconds))
		f = policy.Answer(int(ev.frame.Code), wait)
		f.InStream, f.NoResumePoint = true, !s.m.point.known
	case ev.kind == evGoneAnswer && ev.err == nil:
		f = policy.Failure{Kind: policy.Gone, Resume: true, Oldest: ev.oldest, Server: apiserver(s.server), Connection: s.connection()}
	default:
		return
	}
	ev.decision = s.tracker.Decide(f)
}

// connection is the connection the last attempt went over, as a comparable
// identity (nil: unknown).
func (s *stream) connection() any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return connKey(s.conn)
}

// readFrame reads one frame of the current response and reports it in ev,
// which is zero. (It fills ev rather than returning one: this is the path
// of every event, and an event is a few hundred bytes to copy.)
func (s *stream) readFrame(ev *event) {
	if err := s.scanner.Scan(&s.frame); err != nil {
		*ev = s.scanError(err)
		return
	}
	ev.kind, ev.raw, ev.frame = evFrame, s.frame.Raw, &s.frame.Event
	if s.frame.Event.Type == frame.Error {
		ev.kind = evError
	}
}

// scanError is the event of an error from the scanner.
func (s *stream) scanError(err error) event {
	// Separators read after the last whole frame are the caller's, whatever
	// the error; a torn frame's own bytes are not. So is the newline the
	// server writes after an event, when the break came before it: the
	// stream after a resume starts with the next event.
	trailing := s.scanner.Trailing()
	if s.owesNewline && bytes.IndexByte(trailing, '\n') < 0 {
		trailing = append(append(make([]byte, 0, len(trailing)+1), trailing...), '\n')
	}
	s.owesNewline = false
	s.hold(trailing)
	var invalid *frame.InvalidFrameError
	switch {
	case s.ended():
		return event{kind: evClosed}
	case errors.Is(err, io.EOF):
		if s.intendedEnd() {
			return event{kind: evEnd}
		}
		return event{kind: evBroke, err: io.EOF, reason: establish.ReasonBrokenBody, cause: "watch ended early"}
	case errors.Is(err, frame.ErrFrameTooLarge):
		return event{kind: evTooLarge, err: err}
	case errors.As(err, &invalid):
		return event{kind: evBroke, err: err, reason: establish.ReasonInvalidFrame, cause: err.Error()}
	case errors.As(err, new(*stallError)):
		return event{kind: evBroke, err: err, reason: establish.ReasonStall, cause: err.Error()}
	default:
		return event{kind: evBroke, err: err, reason: establish.ReasonBrokenBody, cause: err.Error()}
	}
}

// sleep runs waiting's wait.
func (s *stream) sleep() event {
	if err := policy.Sleep(s.ctx, s.rt.client.Policy.Clock(), s.m.wait); err != nil {
		return event{kind: evClosed}
	}
	return event{kind: evWaitOver}
}

// reopen reopens the watch at the resume point, and reports what it met.
// Every attempt is bounded by what remains of the caller's timeoutSeconds
// (which it asks for), the wait for an answer and, during a search, the
// search's end.
func (s *stream) reopen() event {
	rv := string(s.m.point.rv)
	req := resumeRequest(s.traced(), s.orig, rv)
	// A new connection: over HTTP/1.1 every resume's, so that a 410's
	// connection never goes back to net/http's pool, where the search's
	// retry (or any other request) would be handed it; over HTTP/2 the
	// 410's connection is retired by the search's retry (see marks).
	req.Close = s.http1 || (s.m.newConnection && s.rt.conns.mark(s.lastConn()))
	bounds := establish.Bounds{Deadline: s.deadline, AnswerTimeout: policy.AnswerTimeout}
	if s.m.search != nil {
		bounds.Until = s.m.search.until
	}
	resp, _, err := s.rt.client.Resume(req, s.tracker, rv, bounds)
	switch {
	case err != nil && s.ended():
		return event{kind: evClosed}
	case err != nil:
		return event{kind: evReopenFailed}
	}
	s.server = resp.TLS
	switch resp.StatusCode {
	case http.StatusOK:
		enc, _ := frame.EncodingFor(resp.Header.Get("Content-Type"))
		return event{kind: evOpened, body: resp.Body, enc: enc}
	case http.StatusGone:
		st := responseStatus(resp)
		raw, err := frame.EncodeError(s.m.enc, st)
		return event{kind: evGoneAnswer, raw: raw, err: err, oldest: policy.OldestInCache(st.Message)}
	}
	establish.DrainAndClose(resp.Body)
	return event{kind: evRefused}
}

// lastConn is the connection the last attempt went over; nil: unknown.
func (s *stream) lastConn() net.Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conn
}

// traced is the stream's context with a trace that records the connection
// each attempt goes over, for the decision on a 410.
func (s *stream) traced() context.Context {
	return httptrace.WithClientTrace(s.ctx, &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			s.mu.Lock()
			s.conn = info.Conn
			s.mu.Unlock()
		},
	})
}

// intendedEnd reports whether a clean end of the server's stream is the end
// the caller asked for: its timeoutSeconds has elapsed.
func (s *stream) intendedEnd() bool {
	return s.params.timeout > 0 && !s.rt.client.Policy.Clock().Now().Before(s.deadline)
}

// ended reports whether the stream's context has ended, by Close or by the
// caller's context. It asks the caller's context as well: a parent reports
// its cancellation (and wakes the reads it cancels) a moment before its
// children do, and a read woken that way must not be taken for a break.
func (s *stream) ended() bool {
	return s.ctx.Err() != nil || s.orig.Context().Err() != nil
}

// attach makes body the current response body, unless the caller closed
// the stream meanwhile.
func (s *stream) attach(body io.ReadCloser) {
	s.mu.Lock()
	closed := s.closed.Load()
	if !closed {
		s.body = body
	}
	s.mu.Unlock()
	var r io.Reader = body
	switch {
	case closed:
		_ = body.Close()
		r = http.NoBody
	case s.rt.cfg.StallTimeout > 0:
		r = &stallReader{r: body, clock: s.rt.client.Policy.Clock(), timeout: s.rt.cfg.StallTimeout}
	}
	if s.scanner == nil {
		s.scanner = frame.NewScanner(r, s.m.enc, s.rt.cfg.MaxFrameSize)
		return
	}
	s.scanner.Reset(r) // reuses the buffer grown so far
}

// isClosed reports whether the caller has closed the stream.
func (s *stream) isClosed() bool { return s.closed.Load() }

func (s *stream) closeBody() {
	s.mu.Lock()
	body := s.body
	s.body = nil
	s.mu.Unlock()
	if body != nil {
		_ = body.Close()
	}
}

// stallReader breaks a read that waits longer than timeout for a byte, by
// closing the body under it.
type stallReader struct {
	r       io.ReadCloser
	clock   policy.Clock
	timeout time.Duration
	stalled atomic.Bool
}

func (r *stallReader) Read(p []byte) (int, error) {
	timer := r.clock.AfterFunc(r.timeout, func() {
		r.stalled.Store(true)
		_ = r.r.Close()
	})
	n, err := r.r.Read(p)
	timer.Stop()
	if err != nil && r.stalled.Load() {
		err = &stallError{timeout: r.timeout, err: err}
	}
	return n, err
}

// stallError is a read broken because the stream sent nothing for timeout.
type stallError struct {
	timeout time.Duration
	err     error
}

func (e *stallError) Error() string {
	return fmt.Sprintf("watchretry: no data for %s: %v", e.timeout, e.err)
}

func (e *stallError) Unwrap() error { return e.err }

// endsWithNewline reports whether a JSON frame came with the newline the
// server writes after it: its trailing whitespace holds one.
func endsWithNewline(raw []byte) bool {
	for i := len(raw) - 1; i >= 0; i-- {
		switch raw[i] {
		case '\n':
			return true
		case ' ', '\r', '\t':
		default:
			return false
		}
	}
	return false
}
