package conformance

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/kretry/kretry/internal/harness/fixture"
)

// watchSource is the recorded watch a scenario replays, split into events.
type watchSource struct {
	exchange     fixture.Exchange
	query        url.Values
	enc          encoding
	frames       []recordedFrame
	sendsInitial bool
	// timeoutSeconds is the recorded request's timeoutSeconds, 0 if none.
	timeoutSeconds int64
}

// cursor is what the server expects of the next watch request: the resourceVersion a
// correct client resumes from, and whether it may still ask for the initial state.
type cursor struct {
	rv             string
	initialAllowed bool
	// resumed is set once a stream made progress: the next request is a resume, not a
	// retried establishment.
	resumed bool
	// waitedSeconds is the least time the client must have waited since the original
	// request (retryAfterSeconds of absorbed ERROR events, Retry-After of retried 429/5xx
	// answers).
	waitedSeconds int64
	// final, when set, says what the caller was handed that ends its watch: no watch request
	// may follow, beyond Scenario.Search.
	final string
}

// newWatchSource splits a recorded watch exchange into its events.
func newWatchSource(ex fixture.Exchange) (*watchSource, error) {
	if ex.Response.Status != http.StatusOK {
		return nil, fmt.Errorf("recorded watch answered %d", ex.Response.Status)
	}
	enc, err := encodingOf(ex.Response.ContentType())
	if err != nil {
		return nil, err
	}
	frames, err := splitFrames(ex.Response.Body(), enc)
	if err != nil {
		return nil, err
	}
	q := ex.Request.Query()
	w := &watchSource{exchange: ex, query: q, enc: enc, frames: frames, sendsInitial: sendsInitialState(q)}
	markInitial(w.frames, w.sendsInitial)
	if t := q.Get("timeoutSeconds"); t != "" {
		w.timeoutSeconds, _ = strconv.ParseInt(t, 10, 64)
	}
	return w, nil
}

// checkFaultsFit makes sure every watch fault has a watch to hit and every LIST cut a byte
// offset. Whether each watch fault position exists in the responses a correct client gets
// is simulate's check: a re-recorded fixture with fewer events skips the scenario instead
// of replaying something else.
func (r *replay) checkFaultsFit() error {
	for _, f := range r.sc.Faults {
		switch f.Kind {
		case Cut, Close, ErrorEvent:
		default:
			continue
		}
		if f.On != WatchRequest {
			if f.On == ListRequest && f.Into != Half && f.Into <= 0 {
				return fmt.Errorf("%v: a LIST cut needs a byte offset", f)
			}
			continue
		}
		if r.watch == nil {
			return fmt.Errorf("%v: fixture %s has no watch", f, r.sc.Fixture)
		}
	}
	return nil
}

// isWatch reads the watch query parameter as kube-apiserver does.
func isWatch(q url.Values) bool {
	switch strings.ToLower(q.Get("watch")) {
	case "", "0", "f", "false":
		return false
	}
	return true
}

// sendsInitialState reports whether a watch with query q starts with the initial state.
func sendsInitialState(q url.Values) bool {
	rv := q.Get("resourceVersion")
	return q.Get("sendInitialEvents") == "true" || rv == "" || rv == "0"
}

// framesAfter is what the server streams to a watch resumed at rv: the recorded events
// newer than rv, never the initial state and never a recorded ERROR.
func (w *watchSource) framesAfter(rv string) []recordedFrame {
	var out []recordedFrame
	for _, f := range w.frames {
		if !f.initial && f.event.Type != "ERROR" && rvAfter(f.event.ResourceVersion, rv) {
			out = append(out, f)
		}
	}
	return out
}

// knows reports whether rv is a point the recorded stream can resume from.
func (w *watchSource) knows(rv string) bool {
	if rv == w.query.Get("resourceVersion") && rv != "" && rv != "0" {
		return true
	}
	for _, f := range w.frames {
		if (!f.initial || f.event.InitialEventsEnd) && f.event.Type != "ERROR" && f.event.ResourceVersion == rv {
			return true
		}
	}
	return false
}

// advance moves the cursor over whole frames a client received.
func (c *cursor) advance(frames []recordedFrame) {
	for _, f := range frames {
		switch {
		case f.event.Type == "ERROR":
		case f.initial && !f.event.InitialEventsEnd:
		default:
			c.rv, c.initialAllowed, c.resumed = f.event.ResourceVersion, false, true
		}
	}
}

// inInitialState reports whether a break now leaves no resume point.
func (c *cursor) inInitialState() bool { return c.initialAllowed && !c.resumed }

// retryable reports whether a correct client retries an answer with this status code.
func retryable(code int32) bool {
	return code == http.StatusTooManyRequests || code == 500 || code == 502 || code == 503 || code == 504
}

// expectedWatch is what a correct transport hands a RawWatch caller.
type expectedWatch struct {
	events []Event
	// ends: the result channel closes after the events (the server ended the stream and
	// nothing may reopen it); otherwise the stream stays open.
	ends bool
	// establishErr is the status Watch() itself returns, 0 if it returns a watch.
	establishErr int32
}

// simulate walks the fault schedule as a correct transport does, over the same responses
// the server serves, and returns what the caller sees.
func (r *replay) simulate() (expectedWatch, error) {
	var exp expectedWatch
	if r.watch == nil {
		return exp, nil
	}
	c := cursor{rv: r.watch.query.Get("resourceVersion"), initialAllowed: r.watch.sendsInitial}
	frames := r.watch.frames
	established := false // a 200 was served
	for nth := 0; nth < 64; nth++ {
		f, ok := r.sc.faultFor(WatchRequest, nth)
		if !ok {
			for _, fr := range frames {
				exp.events = append(exp.events, fr.event)
			}
			exp.ends = len(frames) > 0 && frames[len(frames)-1].event.Type == "ERROR"
			return exp, nil
		}
		if f.Always && nth > 0 && f.retryable() && (f.Kind != ErrorEvent || f.Frame == 0) {
			exp.ends = true
			switch {
			case !established && f.Kind == Status:
				// Every attempt to establish the watch answered 429/5xx: the
				// caller gets the last answer.
				exp.establishErr = f.Code
			case f.Kind == ErrorEvent && f.Code != http.StatusTooManyRequests && r.watch.timeoutSeconds == 0:
				// 200, then ERROR 5xx forever, with no deadline before the
				// window ends: the server answers the watch but cannot serve
				// it; the last ERROR is the caller's, and a relist with it.
				exp.events = append(exp.events, Event{Type: "ERROR", Code: f.Code, Reason: string(statusFor(f.Code, r.resource, 0).Reason)})
			}
			// Otherwise a resume that never succeeds (an outage, 5xx answers,
			// or ERROR events until the caller's deadline): the transport
			// gives up and ends the stream cleanly after the events before,
			// as the break would have without it.
			return exp, nil
		}
		switch f.Kind {
		case Refused, Reset:
			continue
		case Status:
			if retryable(f.Code) {
				continue
			}
			if nth == 0 {
				exp.establishErr = f.Code
				return exp, nil
			}
			exp.ends = true
			if f.Code == http.StatusGone {
				// Only a 410 reaches the caller, as an ERROR event: it must relist.
				exp.events = append(exp.events, Event{Type: "ERROR", Code: f.Code, Reason: string(statusFor(f.Code, r.resource, 0).Reason)})
			}
			// Any other answer to a resume (401/403, 404, ...) ends the stream
			// cleanly: the caller's own re-watch meets it through its own stack.
			return exp, nil
		case Cut, Close, ErrorEvent:
			established = true
			if f.Frame > len(frames) || (f.Kind == Cut && f.Frame == len(frames) && f.Into != 0) {
				return exp, errSkip{fmt.Sprintf("%v: the response has only %d frames", f, len(frames))}
			}
			whole := frames[:f.Frame]
			for _, fr := range whole {
				exp.events = append(exp.events, fr.event)
			}
			c.advance(whole)
			if f.Kind == ErrorEvent && !retryable(f.Code) {
				exp.events = append(exp.events, Event{Type: "ERROR", Code: f.Code, Reason: string(statusFor(f.Code, r.resource, 0).Reason)})
				exp.ends = true
				return exp, nil
			}
			if c.inInitialState() {
				exp.ends = true
				return exp, nil
			}
			frames = r.watch.framesAfter(c.rv)
		}
	}
	return exp, errors.New("fault schedule never ends")
}

// checkWatchRequest compares a watch request with what the last response left a correct
// client to ask for.
func (r *replay) checkWatchRequest(nth int, q url.Values) {
	if r.watch == nil {
		r.problem(true, "WATCH #%d: the fixture has no watch", nth)
		return
	}
	r.mu.Lock()
	c := r.cursor
	r.mu.Unlock()
	if nth == 0 {
		if !sameWatch(q, r.watch.query) {
			r.problem(true, "WATCH #0 %s is not the recorded watch %s", shortQuery(q), shortQuery(r.watch.query))
		}
		return
	}
	if c.final != "" {
		r.mu.Lock()
		r.afterFinal++
		n := r.afterFinal
		r.mu.Unlock()
		if n > r.sc.Search {
			r.problem(true, "WATCH #%d after the caller was handed %s: the watch must end there", nth, c.final)
			return
		}
		// The search for another apiserver (Scenario.Search): the same resume, checked as any.
	}
	if !c.initialAllowed {
		if sendsInitialState(q) {
			r.problem(true, "relist: WATCH #%d asks for the initial state again (%s)", nth, shortQuery(q))
			return
		}
		if q.Has("resourceVersionMatch") {
			r.problem(true, "WATCH #%d resumes with resourceVersionMatch=%s", nth, q.Get("resourceVersionMatch"))
			return
		}
	}
	if got := q.Get("resourceVersion"); got != c.rv {
		r.problem(true, "WATCH #%d at resourceVersion=%q, want %q (the last whole event the caller got)", nth, got, c.rv)
		return
	}
	if r.sc.Caller != RawWatch || r.watch.timeoutSeconds == 0 {
		return
	}
	// A resume, or a retry of the establishment, is the caller's one watch continued: the
	// server must not hold it open past the caller's timeoutSeconds, nor be asked for it
	// once they have passed.
	t, err := strconv.ParseInt(q.Get("timeoutSeconds"), 10, 64)
	limit := r.watch.timeoutSeconds - c.waitedSeconds
	switch {
	case limit < 1:
		r.problem(false, "WATCH #%d sent after the caller's timeoutSeconds=%d (%ds waited)", nth, r.watch.timeoutSeconds, c.waitedSeconds)
	case err != nil:
		r.problem(false, "WATCH #%d resumes without timeoutSeconds (the caller asked for %d)", nth, r.watch.timeoutSeconds)
	case t < 1:
		r.problem(false, "WATCH #%d resumes with timeoutSeconds=%d (0 means no timeout)", nth, t)
	case t > limit:
		r.problem(false, "WATCH #%d resumes with timeoutSeconds=%d, want at most %d (%ds asked for, %ds waited)",
			nth, t, limit, r.watch.timeoutSeconds, c.waitedSeconds)
	}
}

// sameWatch reports whether q asks for the recorded watch: the same starting point, the
// same initial-state options.
func sameWatch(q, recorded url.Values) bool {
	for _, k := range []string{"resourceVersion", "resourceVersionMatch", "sendInitialEvents", "allowWatchBookmarks", "labelSelector", "fieldSelector"} {
		if q.Get(k) != recorded.Get(k) {
			return false
		}
	}
	return true
}

// watchResponse serves the recorded watch, or its continuation after a resume point, with
// the fault applied.
func (r *replay) watchResponse(req *http.Request, q url.Values, f Fault, faulted bool, answer func(string)) (*http.Response, error) {
	w := r.watch
	var frames []recordedFrame
	var chunks [][]byte
	if sameWatch(q, w.query) {
		frames, chunks = w.frames, w.exchange.Response.Chunks
		if w.sendsInitial {
			r.countInitialFetch("WATCH " + shortQuery(q))
		}
	} else {
		rv := q.Get("resourceVersion")
		if !w.knows(rv) || sendsInitialState(q) {
			answer("not in the recording")
			r.problem(true, "WATCH %s: the recording cannot answer it", shortQuery(q))
			return r.statusResponse(req, Fault{Kind: Status, Code: http.StatusBadRequest}), nil
		}
		frames = w.framesAfter(rv)
		for _, fr := range frames {
			chunks = append(chunks, fr.raw)
		}
	}
	body := &streamBody{replay: r, ctx: req.Context(), closed: make(chan struct{})}
	served := frames
	switch {
	case !faulted || (f.Kind != Cut && f.Kind != Close && f.Kind != ErrorEvent):
		body.chunks = cloneChunks(chunks)
		if n := len(frames); n > 0 && frames[n-1].event.Type == "ERROR" {
			body.end = io.EOF
			answer(fmt.Sprintf("200, %s, ends after the ERROR", plural(n, "frame")))
		} else {
			answer(fmt.Sprintf("200, %s, then held open", plural(n, "frame")))
		}
	default:
		if f.Frame > len(frames) {
			answer("fault does not fit")
			r.problem(true, "%v: this response has only %d frames", f, len(frames))
			return r.statusResponse(req, Fault{Kind: Status, Code: http.StatusBadRequest}), nil
		}
		offset := 0
		for _, fr := range frames[:f.Frame] {
			offset += len(fr.raw)
		}
		served = frames[:f.Frame]
		switch f.Kind {
		case Cut:
			into := f.Into
			if into == Half {
				into = len(frames[f.Frame].raw) / 2
			}
			body.chunks, body.end = cloneChunks(truncate(chunks, offset+into)), io.ErrUnexpectedEOF
			answer(fmt.Sprintf("200, %s, cut at byte %d", plural(f.Frame, "frame"), offset+into))
		case Close:
			body.chunks, body.end = cloneChunks(truncate(chunks, offset)), io.EOF
			answer(fmt.Sprintf("200, %s, clean close at byte %d", plural(f.Frame, "frame"), offset))
		case ErrorEvent:
			st := statusFor(f.Code, r.resource, f.RetryAfter)
			frame, err := errorFrame(st, w.enc)
			if err != nil {
				return nil, err
			}
			body.chunks, body.end = append(cloneChunks(truncate(chunks, offset)), frame), io.EOF
			answer(fmt.Sprintf("200, %s, ERROR %d, end", plural(f.Frame, "frame"), f.Code))
		}
	}

	r.mu.Lock()
	r.cursor.advance(served)
	switch {
	case len(served) > 0 && served[len(served)-1].event.Type == "ERROR":
		r.cursor.final = "ERROR " + strconv.Itoa(int(served[len(served)-1].event.Code))
	case faulted && f.Kind == ErrorEvent:
		if retryable(f.Code) {
			r.cursor.waitedSeconds += int64(f.RetryAfter)
		} else {
			r.cursor.final = fmt.Sprintf("ERROR %d", f.Code)
		}
	case faulted && (f.Kind == Cut || f.Kind == Close) && r.cursor.inInitialState() && r.sc.Outcome == PassThrough:
		r.cursor.final = "a break inside the initial state"
	}
	if len(body.chunks) > 0 {
		r.pending[body] = true
	}
	r.mu.Unlock()

	resp := &http.Response{
		Status:        "200 OK",
		StatusCode:    http.StatusOK,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.exchange.Response.Header.Clone(),
		Body:          body,
		ContentLength: -1,
		Request:       req,
	}
	return resp, nil
}
