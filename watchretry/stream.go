package watchretry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/kretry/kretry/internal/establish"
	"github.com/kretry/kretry/internal/frame"
	"github.com/kretry/kretry/internal/policy"
)

// state is where a resuming stream is in its life. Read drives it: each
// call to step performs the current state's one action and moves on (Read
// performs streaming's and draining's, reading the next frame, itself).
type state uint8

const (
	// streaming: whole frames of the current response reach the caller, and
	// each moves the resume point. A break (read error, early clean end,
	// invalid frame, absorbed ERROR event) moves to waiting, unless the wait
	// would outlast the caller's timeoutSeconds; that, a clean end that was
	// intended, an ERROR 429/5xx past its window or refused by the retry
	// budget, an oversized frame or a break without a resume point moves to
	// done (every retryable one reported to Hooks.GiveUp); a terminal ERROR event
	// moves to draining.
	streaming state = iota
	// waiting: the current response is closed; the policy's wait runs (it
	// ends at once if the caller closes the body), then resuming.
	waiting
	// resuming: the watch is reopened at the resume point, with retries. A
	// 200 in the stream's encoding moves back to streaming; a 410 is
	// delivered as an ERROR event in the stream's encoding, then done; any
	// other answer, or retries spent, is done with a clean end.
	resuming
	// draining: a terminal ERROR event was delivered; whatever the server
	// sends after it reaches the caller up to the server's end, then done.
	draining
	// done: nothing more happens; Read returns err after the last bytes.
	done
)

// stream is the resuming Response.Body of one WATCH request.
type stream struct {
	rt       *roundTripper
	orig     *http.Request
	params   watchParams
	enc      frame.Encoding
	tracker  *policy.Tracker
	deadline time.Time // zero when the caller set no timeoutSeconds
	ctx      context.Context
	cancel   context.CancelFunc

	// mu guards body, and closed's change with it: Close may come from
	// another goroutine while Read is blocked on the connection. closed is
	// also read on its own, without the lock, at the top of every Read.
	mu     sync.Mutex
	body   io.ReadCloser
	closed atomic.Bool

	state   state
	scanner *frame.Scanner
	// pending[sent:] are the bytes of whole frames not yet read by the
	// caller. Read moves sent, not the slice: a pointer stored while the
	// collector runs costs a write barrier (see hold).
	pending []byte
	sent    int
	wait    time.Duration
	err     error
	point   *resumePoint
	invalid int // invalid frames since the resume point last moved
	run     failureRun

	// lostConnection is set when the current run of resumes follows a
	// lost connection (a read error, an early end, a stall), rather than
	// an ERROR event or an invalid frame; resumed while the current
	// response answers a resume and has delivered no event yet. A 410 in
	// both is retried on a new connection (see policy.Tracker.Gone).
	lostConnection, resumed bool
	// conn (guarded by mu) is the connection the last attempt went over,
	// when the transport below reports it; newConnection asks the next
	// resume for another one.
	conn          net.Conn
	newConnection bool
	// gone is the first 410 of a search for an apiserver that holds the
	// resume point, as the ERROR frame the caller gets, and goneUntil the
	// end of that search (policy.GoneDecision.Until): the 410 is handed
	// over then, whatever the retry in flight is doing. nil when no
	// search is under way.
	gone      []byte
	goneUntil time.Time
	// owesSeparator is set when the last frame delivered went without the
	// separator the server wrote after it (the caller's slice ended at
	// the frame's end): the next Read hands it over as soon as it is read.
	owesSeparator bool

	// skipInPlace counts reads of at least minInPlace bytes left to take
	// the buffered path after a frame did not fit in the caller's slice
	// (see readInPlace).
	skipInPlace int
}

func newStream(rt *roundTripper, req *http.Request, resp *http.Response, enc frame.Encoding, tracker *policy.Tracker, params watchParams, deadline time.Time) *stream {
	ctx, cancel := context.WithCancel(req.Context())
	s := &stream{
		rt:       rt,
		orig:     req,
		params:   params,
		enc:      enc,
		tracker:  tracker,
		deadline: deadline,
		ctx:      ctx,
		cancel:   cancel,
		point:    newResumePoint(params),
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
	if s.owesSeparator && !s.hasPending() && s.state == streaming {
		s.owesSeparator = false
		if sep := s.scanner.Separator(); len(sep) > 0 {
			return copy(p, sep), nil
		}
	}
	for !s.hasPending() {
		switch s.state {
		case done:
			return 0, s.err
		case streaming, draining:
			// A slice too small to scan in place (client-go's protobuf
			// framer reads the 4-byte length first) takes the buffered
			// path at once.
			if len(p) >= minInPlace {
				if n, ok := s.readInPlace(p); ok {
					return n, nil
				}
				if s.state != streaming && s.state != draining {
					// It met a break or an end, and handled it: the new
					// state acts next. Reading on would report the
					// scanner's error a second time.
					continue
				}
			}
			s.readFrame()
		default:
			s.step()
		}
	}
	n := copy(p, s.pending[s.sent:])
	s.sent += n
	return n, nil
}

// hold makes b the bytes Read hands the caller next.
func (s *stream) hold(b []byte) { s.pending, s.sent = b, 0 }

// hasPending reports whether held bytes remain for the caller.
func (s *stream) hasPending() bool { return s.sent < len(s.pending) }

// unheld drops what remains of the held bytes and returns how many there
// were.
func (s *stream) unheld() int {
	n := len(s.pending) - s.sent
	s.sent = len(s.pending)
	return n
}

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

// step performs the action of the current state: the transition function.
func (s *stream) step() {
	switch s.state {
	case streaming, draining:
		s.readFrame()
	case waiting:
		if err := policy.Sleep(s.ctx, s.rt.policy.Clock(), s.wait); err != nil {
			s.finish(s.endError(io.EOF))
			return
		}
		s.state = resuming
	case resuming:
		s.resume()
	}
}

// readFrame reads one frame of the current response and decides what it
// means for the stream.
func (s *stream) readFrame() {
	var f frame.Frame
	err := s.scanner.Scan(&f)
	if err == nil {
		s.onFrame(&f)
		return
	}
	s.onScanError(err)
}

// onScanError decides what an error from the scanner means for the stream.
func (s *stream) onScanError(err error) {
	// Separators read after the last whole frame are the caller's, whatever
	// the error; a torn frame's own bytes are not.
	s.hold(s.scanner.Trailing())
	var invalid *frame.InvalidFrameError
	switch {
	case s.ended():
		s.finish(s.endError(err))
	case errors.Is(err, io.EOF):
		if s.state == draining || s.intendedEnd() {
			s.finish(io.EOF)
			return
		}
		s.broke(io.EOF, policy.ReasonBrokenBody, "watch ended early")
	case errors.Is(err, frame.ErrFrameTooLarge), s.state == draining:
		s.finish(err)
	case errors.As(err, &invalid):
		if s.invalid++; s.invalid > s.rt.cfg.MaxInvalidFrames {
			s.gaveUp(policy.ReasonInvalidFrame, false)
			s.finish(err)
			return
		}
		s.broke(err, policy.ReasonInvalidFrame, err.Error())
	case errors.As(err, new(*stallError)):
		s.broke(err, policy.ReasonStall, err.Error())
	default:
		s.broke(err, policy.ReasonBrokenBody, err.Error())
	}
}

// onFrame handles one whole frame: an ERROR event the policy absorbs is a
// break, and one it has stopped absorbing ends the stream cleanly; any other
// frame is delivered.
func (s *stream) onFrame(f *frame.Frame) {
	event := &f.Event
	s.owesSeparator = false
	if s.state == draining {
		s.hold(f.Raw)
		return
	}
	if event.Type == frame.Error {
		class := policy.ClassifyStatus(int(event.Code))
		if class != policy.Deliver && s.point.known {
			outcome := policy.Outcome{Class: class}
			outcome.RetryAfter, outcome.HasRetryAfter = policy.SecondsToDuration(int64(event.RetryAfterSeconds))
			reason := policy.ReasonErrorEvent
			if class == policy.TooManyRequests {
				reason = policy.ReasonTooManyRequests
			}
			decision := s.tracker.Decide(outcome)
			if decision.Retry {
				s.closeBody()
				s.lostConnection = false // the server answered, and may again
				s.waitFor(decision.Wait, reason, int(event.Code), fmt.Sprintf("ERROR event %d", event.Code))
				return
			}
			s.gaveUp(decision.Reason(reason), decision.Stopped == policy.StoppedByBudget)
			if class == policy.InternalError && decision.Stopped == policy.StoppedByWindow {
				// A server that answers this watch but has sent ERROR 5xx
				// for a whole window cannot serve it: the ERROR is the
				// caller's, and client-go relists, as its own
				// MaxInternalErrorRetryDuration does. A clean end would
				// make it re-watch into the same errors, window after
				// window, its cache stale.
				s.hold(f.Raw)
				s.state = draining
				return
			}
			// Refused by the budget, or the caller's deadline near: end as
			// the cut would have ended without kretry; client-go re-watches
			// from its resourceVersion.
			s.finish(io.EOF)
			return
		}
		// 410 Expired, any other code, or no resume point: the caller's.
		if event.Code == http.StatusGone && !s.onGone(s.inStreamExpiry(f), "ERROR event 410", f.Raw) {
			return
		}
		s.hold(f.Raw)
		s.state = draining
		return
	}
	s.hold(f.Raw)
	s.resumed = false
	// A JSON frame whose newline has not arrived yet: the caller gets the
	// newline on its next Read, not with the next frame.
	s.owesSeparator = s.enc == frame.JSON && !endsWithSpace(f.Raw)
	moved := s.point.observe(event)
	if moved {
		s.invalid = 0
	}
	// A bookmark at the resourceVersion already held says nothing new: were
	// it progress, a server that sends one and closes would be reopened
	// at once, again and again.
	if moved || event.Type != frame.Bookmark {
		s.progress()
	}
}

// broke handles a stream that ended before its time: resume from the resume
// point, or, without one, hand the caller the break as it was.
func (s *stream) broke(err error, reason, cause string) {
	s.closeBody()
	s.lostConnection = reason != policy.ReasonInvalidFrame
	if !s.point.known {
		s.finish(err)
		return
	}
	decision := s.tracker.Break()
	if !decision.Retry {
		// The caller's timeoutSeconds is (all but) over: its watch ends
		// here, as the server would have ended it.
		s.gaveUp(decision.Reason(reason), false)
		s.finish(io.EOF)
		return
	}
	s.waitFor(decision.Wait, reason, 0, cause)
}

// waitFor moves to waiting before a resume; code is the ERROR event's, or
// 0 for a break.
func (s *stream) waitFor(wait time.Duration, reason string, code int, cause string) {
	s.wait = wait
	s.state = waiting
	s.retried(reason, code, cause, wait)
}

// resume reopens the watch at the resume point with what remains of the
// caller's timeout, and splices the new stream on.
func (s *stream) resume() {
	var remaining time.Duration
	if s.params.timeout > 0 {
		remaining = s.deadline.Sub(s.rt.policy.Clock().Now())
		if remaining < time.Second {
			s.gaveUp(policy.ReasonDeadline, false)
			s.finish(io.EOF) // the caller's watch is over
			return
		}
	}
	ctx := s.traced()
	var searchEnd clock.Timer
	if s.gone != nil {
		// A search for an apiserver that holds the resume point: it ends at
		// its bound, the attempt in flight (or its wait) abandoned.
		left := s.goneUntil.Sub(s.rt.policy.Clock().Now())
		if left <= 0 {
			s.handOverGone()
			return
		}
		var abandon context.CancelFunc
		ctx, abandon = context.WithCancel(ctx)
		searchEnd = s.rt.policy.Clock().AfterFunc(left, abandon)
	}
	req := resumeRequest(ctx, s.orig, string(s.point.rv), remaining)
	// A 410 came from the apiserver this connection reaches: ask for
	// another one (see stream.onGone).
	req.Close, s.newConnection = s.newConnection, false
	resp, attempts, err := s.rt.client.Resume(req, s.tracker, establish.Run{
		ResourceVersion: string(s.point.rv), Since: s.run.since, Attempts: s.run.attempts,
	}, s.rt.bounds(s.deadline))
	s.run.attempts += attempts
	if searchEnd != nil && !searchEnd.Stop() && !s.ended() {
		// The search's bound: the first 410 goes to the caller now.
		if err == nil {
			establish.DrainAndClose(resp.Body)
		}
		s.handOverGone()
		return
	}
	switch {
	case err != nil && s.gone != nil && !s.ended():
		// The retries of a 410 spent: the 410 is the caller's.
		s.handOverGone()
	case err != nil:
		// Retries spent (or the caller gone): a clean close after the last
		// whole frame, as the cut would have ended without kretry. Any error
		// here would reach client-go's reflector as a decoding error, and
		// it would relist where it can re-watch from its resourceVersion.
		s.finish(io.EOF)
	case resp.StatusCode == http.StatusOK:
		if enc, ok := frame.EncodingFor(resp.Header.Get("Content-Type")); !ok || enc != s.enc {
			_ = resp.Body.Close() // a stream: nothing to drain to
			s.finish(io.EOF)      // the caller's re-watch negotiates afresh
			return
		}
		s.attach(resp.Body)
		s.tracker.Opened()
		s.resumed = true
		s.state = streaming
	case resp.StatusCode == http.StatusGone:
		// The resume point has expired here: retried on a new connection,
		// or the caller must relist, as if the server had said it in the
		// stream.
		st := responseStatus(resp)
		event, err := frame.EncodeError(s.enc, st)
		if err != nil {
			s.finish(err)
			return
		}
		if !s.onGone(policy.Expiry{Resume: s.lostConnection, Oldest: policy.OldestInCache(st.Message)}, "410", event) {
			return
		}
		s.gone = nil
		s.hold(event)
		s.finish(io.EOF)
	case s.gone != nil:
		// Another answer to a retry of a 410: the 410 is the caller's.
		establish.DrainAndClose(resp.Body)
		s.handOverGone()
	default:
		// 401/403 (the auth layers above kretry act only on an answer they
		// see: the caller's re-watch gets it), another 4xx, a 5xx after its
		// window: a clean close, so client-go re-watches through its own
		// stack instead of relisting.
		establish.DrainAndClose(resp.Body)
		s.finish(io.EOF)
	}
}

// onGone decides on a 410 (see policy.Tracker.Gone) and reports whether
// it goes to the caller now. A 410 that answered a resume after a lost
// connection may come from a freshly restarted apiserver behind a load
// balancer: the resume is retried at once on a new connection, and onGone
// reports false with the stream resuming. Otherwise the 410 is held first
// if it ends a run of failures, so that a fleet's relists spread out as
// client-go's reflector spreads them; onGone reports false when the caller
// ended the stream during the hold: the stream is then done.
//
// event is the 410 as the ERROR frame the caller would get: the first of a
// search is kept, to be handed over at the search's bound.
func (s *stream) onGone(expiry policy.Expiry, cause string, event []byte) bool {
	s.mu.Lock()
	conn := s.conn
	s.mu.Unlock()
	if expiry.Resume {
		expiry.Connection = connKey(conn)
	}
	decision := s.tracker.Gone(expiry)
	if decision.Retry {
		s.closeBody()
		if s.gone == nil {
			s.gone = bytes.Clone(event)
		}
		s.goneUntil = decision.Until
		// The retry must reach a new connection, which a balancer routes
		// again.
		switch {
		case http1(conn):
			// Its connection goes back to net/http's pool once its answer
			// is read, and the retry would be handed it again: close it.
			_ = conn.Close()
			s.newConnection = false
		case conn != nil && retireIdle(s.rt.client.Next, conn):
			// HTTP/2, the connection carrying nothing else: closed.
			s.newConnection = false
		default:
			// It carries other requests (other watches): the retry's
			// req.Close retires it (see marks), and the retry after it
			// dials anew.
			s.newConnection = s.rt.conns.mark(conn)
		}
		s.retried(policy.ReasonExpiredResume, http.StatusGone, cause, 0)
		s.state = resuming
		return false
	}
	if decision.Hold == 0 {
		return true
	}
	if err := policy.Sleep(s.ctx, s.rt.policy.Clock(), decision.Hold); err != nil {
		s.finish(s.endError(io.EOF))
		return false
	}
	return true
}

// handOverGone ends the stream with the first 410 of a search for an
// apiserver that holds the resume point.
func (s *stream) handOverGone() {
	s.hold(s.gone)
	s.gone = nil
	s.finish(io.EOF)
}

// inStreamExpiry is what an ERROR event 410 says for policy.Tracker.Gone.
// Its Status is decoded only when it answered a resume after a lost
// connection, the one case its message matters.
func (s *stream) inStreamExpiry(f *frame.Frame) policy.Expiry {
	if !s.resumed || !s.lostConnection {
		return policy.Expiry{}
	}
	expiry := policy.Expiry{Resume: true}
	if st, ok := errorEventStatus(s.enc, f.Raw); ok {
		expiry.Oldest = policy.OldestInCache(st.Message)
	}
	return expiry
}

// traced is the stream's context with a trace that records the connection
// each attempt goes over, for onGone.
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
	return s.params.timeout > 0 && !s.rt.policy.Clock().Now().Before(s.deadline)
}

// endError is what Read returns once the stream's context has ended, by
// Close or by the caller's context: a clean end, which is what client-go's
// watch decoders take as "stopped" without reporting an error.
func (s *stream) endError(err error) error {
	if s.ended() {
		return io.EOF
	}
	return err
}

// ended reports whether the stream's context has ended, by Close or by the
// caller's context. It asks the caller's context as well: a parent reports
// its cancellation (and wakes the reads it cancels) a moment before its
// children do, and a read woken that way must not be taken for a break.
func (s *stream) ended() bool {
	return s.ctx.Err() != nil || s.orig.Context().Err() != nil
}

// finish ends the stream; Read returns err once pending bytes are read.
func (s *stream) finish(err error) {
	s.state = done
	s.err = err
	s.closeBody()
	s.cancel()
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
		r = &stallReader{r: body, clock: s.rt.policy.Clock(), timeout: s.rt.cfg.StallTimeout}
	}
	if s.scanner == nil {
		s.scanner = frame.NewScanner(r, s.enc, s.rt.cfg.MaxFrameSize)
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
