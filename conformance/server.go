package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/jarcoal/httpmock"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/kretry/kretry/internal/fixture"
)

// baseURL is the replayed server's address; no request ever leaves the process.
const baseURL = "http://kube-apiserver.conformance.invalid"

// collectionPath matches the namespaced collection path of a recorded request.
var collectionPath = regexp.MustCompile(`^/api/v1/namespaces/([^/]+)/([^/]+)$`)

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
	// waited is the least time the client must have waited since the original request
	// (retryAfterSeconds of absorbed ERROR events).
	waitedSeconds int64
	// final, when set, says what the caller was handed that ends its watch: no watch request
	// may follow.
	final string
}

// replay is the fake kube-apiserver of one scenario run: an httpmock transport that answers
// from the fixture, applies the scenario's faults, and checks every request it sees.
type replay struct {
	sc         Scenario
	file       *fixture.File
	aux        map[string]*fixture.File
	namespace  string
	resource   schema.GroupResource
	collection string
	watch      *watchSource
	lists      []fixture.Exchange
	mock       *httpmock.MockTransport

	mu             sync.Mutex
	log            []string
	counts         map[RequestKind]int
	initialFetches int
	cursor         cursor
	listFinal      string
	problems       []string
	aborted        chan struct{}
	pending        map[*streamBody]bool
	changed        chan struct{}
}

// newReplay prepares the server of sc from its fixtures (in fixtures by name).
func newReplay(sc Scenario, fixtures map[string]*fixture.File) (*replay, error) {
	file := fixtures[sc.Fixture]
	if file == nil {
		return nil, errSkip{fmt.Sprintf("fixture %s.json is not recorded", sc.Fixture)}
	}
	r := &replay{
		sc:      sc,
		file:    file,
		aux:     map[string]*fixture.File{},
		counts:  map[RequestKind]int{},
		aborted: make(chan struct{}),
		pending: map[*streamBody]bool{},
		changed: make(chan struct{}),
	}
	for _, f := range sc.Faults {
		if f.Recorded == "" {
			continue
		}
		aux := fixtures[f.Recorded]
		if aux == nil {
			return nil, errSkip{fmt.Sprintf("fixture %s.json (the recorded %d) is not recorded", f.Recorded, f.Code)}
		}
		r.aux[f.Recorded] = aux
	}
	if len(file.Exchanges) == 0 {
		return nil, fmt.Errorf("fixture %s has no exchanges", sc.Fixture)
	}
	m := collectionPath.FindStringSubmatch(file.Exchanges[0].Request.Path())
	if m == nil {
		return nil, fmt.Errorf("fixture %s: %s is not a namespaced core/v1 collection", sc.Fixture, file.Exchanges[0].Request.Path())
	}
	r.namespace, r.resource, r.collection = m[1], schema.GroupResource{Resource: m[2]}, m[0]
	if r.resource.Resource != "configmaps" {
		return nil, fmt.Errorf("fixture %s: resource %s: the callers know ConfigMaps only", sc.Fixture, r.resource.Resource)
	}
	for _, ex := range file.Exchanges {
		if ex.Request.Path() != r.collection {
			return nil, fmt.Errorf("fixture %s: exchanges on two collections, %s and %s", sc.Fixture, r.collection, ex.Request.Path())
		}
		switch {
		case ex.Request.Method != http.MethodGet:
			return nil, fmt.Errorf("fixture %s: recorded %s, only GETs are replayed", sc.Fixture, ex.Request.Method)
		case isWatch(ex.Request.Query()):
			if r.watch != nil {
				return nil, fmt.Errorf("fixture %s: more than one watch recorded", sc.Fixture)
			}
			w, err := newWatchSource(ex)
			if err != nil {
				return nil, fmt.Errorf("fixture %s: %w", sc.Fixture, err)
			}
			r.watch = w
		default:
			r.lists = append(r.lists, ex)
		}
	}
	if r.watch != nil {
		r.cursor = cursor{rv: r.watch.query.Get("resourceVersion"), initialAllowed: r.watch.sendsInitial}
	}
	if err := r.checkFaultsFit(); err != nil {
		return nil, err
	}

	r.mock = httpmock.NewMockTransport()
	onCollection := regexp.MustCompile("^" + regexp.QuoteMeta(baseURL+r.collection) + `(\?|$)`)
	r.mock.RegisterRegexpResponder(http.MethodGet, onCollection, r.respond)
	r.mock.RegisterRegexpResponder(http.MethodPost, onCollection, r.respond)
	r.mock.RegisterNoResponder(func(req *http.Request) (*http.Response, error) {
		r.problem(true, "%s %s: a request outside the recorded collection", req.Method, req.URL.RequestURI())
		return r.statusResponse(req, Fault{Kind: Status, Code: http.StatusNotFound}), nil
	})
	return r, nil
}

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

// errSkip marks a scenario that cannot run, e.g. because its fixture is not recorded.
type errSkip struct{ reason string }

func (e errSkip) Error() string { return e.reason }

// checkFaultsFit makes sure every watch fault position exists in the responses a correct
// client gets; a re-recorded fixture with fewer events skips the scenario instead of
// replaying something else.
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
	_, err := r.simulate()
	return err
}

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
	for nth := 0; nth < 64; nth++ {
		f, ok := r.sc.faultFor(WatchRequest, nth)
		if !ok {
			for _, fr := range frames {
				exp.events = append(exp.events, fr.event)
			}
			exp.ends = len(frames) > 0 && frames[len(frames)-1].event.Type == "ERROR"
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
			exp.events = append(exp.events, Event{Type: "ERROR", Code: f.Code, Reason: string(statusFor(f.Code, r.resource, 0).Reason)})
			exp.ends = true
			return exp, nil
		case Cut, Close, ErrorEvent:
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

// problem records a violation seen by the server; abort ends the scenario at once because
// nothing the caller does later can make it pass.
func (r *replay) problem(abort bool, format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.problems = append(r.problems, fmt.Sprintf(format, args...))
	if abort {
		select {
		case <-r.aborted:
		default:
			close(r.aborted)
		}
	}
}

// record appends a line to the request log.
func (r *replay) record(format string, args ...any) {
	r.mu.Lock()
	r.log = append(r.log, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

// respond is the httpmock responder for the collection.
func (r *replay) respond(req *http.Request) (*http.Response, error) {
	q := req.URL.Query()
	var kind RequestKind
	switch {
	case req.Method == http.MethodPost:
		kind = CreateRequest
	case isWatch(q):
		kind = WatchRequest
	default:
		kind = ListRequest
	}
	r.mu.Lock()
	nth := r.counts[kind]
	r.counts[kind]++
	r.mu.Unlock()
	line := fmt.Sprintf("%s #%d %s", kind, nth, shortQuery(q))
	answer := func(s string) { r.record("%s -> %s", line, s) }

	switch kind {
	case WatchRequest:
		r.checkWatchRequest(nth, q)
	case ListRequest:
		r.checkListRequest(nth)
	case CreateRequest:
		if nth > 0 {
			r.problem(true, "POST #%d: a POST was retried", nth)
		}
	}

	f, faulted := r.sc.faultFor(kind, nth)
	if faulted {
		switch f.Kind {
		case Refused:
			answer("connection refused")
			return nil, connError("dial", syscall.ECONNREFUSED)
		case Reset:
			answer("connection reset")
			return nil, connError("read", syscall.ECONNRESET)
		case Status:
			answer(f.String())
			resp := r.statusResponse(req, f)
			r.afterStatus(kind, int32(resp.StatusCode))
			return resp, nil
		}
	}

	switch kind {
	case WatchRequest:
		return r.watchResponse(req, q, f, faulted, answer)
	case ListRequest:
		return r.listResponse(req, q, f, faulted, answer)
	}
	answer("no recorded answer")
	r.problem(true, "%s: no recorded answer for a POST without a fault", line)
	return r.statusResponse(req, Fault{Kind: Status, Code: http.StatusNotImplemented}), nil
}

// afterStatus notes a final status answer: nothing may retry it.
func (r *replay) afterStatus(kind RequestKind, code int32) {
	if code < 400 || retryable(code) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch kind {
	case WatchRequest:
		r.cursor.final = fmt.Sprintf("HTTP %d", code)
	case ListRequest:
		r.listFinal = fmt.Sprintf("HTTP %d", code)
	}
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
		r.problem(true, "WATCH #%d after the caller was handed %s: the watch must end there", nth, c.final)
		return
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
	if r.sc.Caller != RawWatch || r.watch.timeoutSeconds == 0 || !c.resumed {
		return
	}
	// A resume is the caller's one watch continued: the server must not hold it open past
	// the caller's timeoutSeconds.
	t, err := strconv.ParseInt(q.Get("timeoutSeconds"), 10, 64)
	limit := r.watch.timeoutSeconds - c.waitedSeconds
	switch {
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

// checkListRequest checks the LIST rules that do not depend on the query.
func (r *replay) checkListRequest(nth int) {
	r.mu.Lock()
	final := r.listFinal
	r.mu.Unlock()
	if final != "" {
		r.problem(true, "LIST #%d after the caller was handed %s: a 4xx must not be retried", nth, final)
	}
}

// countInitialFetch counts a successful initial-state fetch (a LIST, or a WATCH that starts
// with the initial state) and flags the second one: a relist.
func (r *replay) countInitialFetch(what string) {
	r.mu.Lock()
	r.initialFetches++
	n := r.initialFetches
	r.mu.Unlock()
	if n > 1 && r.sc.Outcome == Recover {
		r.problem(true, "relist: initial-state fetch #%d (%s)", n, what)
	}
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
			answer(fmt.Sprintf("200, %d frames, ends after the ERROR", n))
		} else {
			answer(fmt.Sprintf("200, %d frames, then held open", n))
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
			answer(fmt.Sprintf("200, %d frames, cut at byte %d", f.Frame, offset+into))
		case Close:
			body.chunks, body.end = cloneChunks(truncate(chunks, offset)), io.EOF
			answer(fmt.Sprintf("200, %d frames, clean close at byte %d", f.Frame, offset))
		case ErrorEvent:
			st := statusFor(f.Code, r.resource, f.RetryAfter)
			frame, err := errorFrame(st, w.enc)
			if err != nil {
				return nil, err
			}
			body.chunks, body.end = append(cloneChunks(truncate(chunks, offset)), frame), io.EOF
			answer(fmt.Sprintf("200, %d frames, ERROR %d, end", f.Frame, f.Code))
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

// listResponse serves the recorded LIST with the same query, with the fault applied.
func (r *replay) listResponse(req *http.Request, q url.Values, f Fault, faulted bool, answer func(string)) (*http.Response, error) {
	var ex *fixture.Exchange
	for i := range r.lists {
		if sameQuery(r.lists[i].Request.Query(), q) {
			ex = &r.lists[i]
			break
		}
	}
	if r.sc.Caller == Informer {
		r.countInitialFetch("LIST " + shortQuery(q))
	}
	if ex == nil {
		var recorded []string
		for _, l := range r.lists {
			recorded = append(recorded, shortQuery(l.Request.Query()))
		}
		answer("not in the recording")
		r.problem(true, "LIST %s: not a recorded query (recorded: %s); a retry must send the same query", shortQuery(q), strings.Join(recorded, ", "))
		return r.statusResponse(req, Fault{Kind: Status, Code: http.StatusBadRequest}), nil
	}
	resp := replayResponse(ex.Response, req)
	if faulted && f.Kind == Cut {
		body := ex.Response.Body()
		at := f.Into
		if at == Half {
			at = len(body) / 2
		}
		cut := ex.Response
		cut.Chunks, cut.EndError = cloneChunks(truncate(ex.Response.Chunks, at)), io.ErrUnexpectedEOF.Error()
		resp = replayResponse(cut, req)
		resp.Body = &lockedBody{body: &errBody{ChunkReader: fixture.NewChunkReader(cut), end: io.ErrUnexpectedEOF}}
		answer(fmt.Sprintf("%d, cut at byte %d of %d", ex.Response.Status, at, len(body)))
	} else {
		answer(fmt.Sprintf("%d, %d bytes", ex.Response.Status, len(ex.Response.Body())))
	}
	r.afterStatus(ListRequest, int32(ex.Response.Status))
	return resp, nil
}

// replayResponse rebuilds a recorded response for req. Its body gets its own chunks:
// fixture.ChunkReader consumes the slices it is given, and fixtures are shared by every run.
func replayResponse(recorded fixture.Response, req *http.Request) *http.Response {
	recorded.Chunks = cloneChunks(recorded.Chunks)
	resp := recorded.HTTPResponse(req)
	resp.Body = &lockedBody{body: resp.Body}
	return resp
}

// lockedBody lets Close run concurrently with Read, as net/http's bodies do (a transport may
// abandon a body from another goroutine); fixture.ChunkReader never blocks, so a lock is
// enough.
type lockedBody struct {
	mu   sync.Mutex
	body io.ReadCloser
}

func (b *lockedBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.body.Read(p)
}

func (b *lockedBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.body.Close()
}

// errBody replays a recorded body, but ends with the exact error end (io.ErrUnexpectedEOF,
// as net/http's chunked reader does) instead of ChunkReader's plain error.
type errBody struct {
	*fixture.ChunkReader
	end error
}

func (b *errBody) Read(p []byte) (int, error) {
	n, err := b.ChunkReader.Read(p)
	if err != nil && err != io.EOF {
		err = b.end
	}
	return n, err
}

// sameQuery compares two queries parameter by parameter.
func sameQuery(a, b url.Values) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// statusResponse answers req with fault f's status: the recorded response, or a Status in
// the encoding the request prefers.
func (r *replay) statusResponse(req *http.Request, f Fault) *http.Response {
	if f.Recorded != "" {
		wantProto := prefersProtobuf(req.Header.Get("Accept"))
		var pick *fixture.Exchange
		for i, ex := range r.aux[f.Recorded].Exchanges {
			if int32(ex.Response.Status) != f.Code {
				continue
			}
			if pick == nil || prefersProtobuf(ex.Request.Header.Get("Accept")) == wantProto {
				pick = &r.aux[f.Recorded].Exchanges[i]
			}
		}
		if pick != nil {
			return replayResponse(pick.Response, req)
		}
		r.problem(true, "fixture %s recorded no %d", f.Recorded, f.Code)
	}
	st := statusFor(f.Code, r.resource, f.RetryAfter)
	st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	var body bytes.Buffer
	contentType := "application/json"
	if prefersProtobuf(req.Header.Get("Accept")) {
		contentType = "application/vnd.kubernetes.protobuf"
		_ = protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(st, &body)
	} else {
		_ = scheme.Codecs.LegacyCodec(metav1.SchemeGroupVersion).Encode(st, &body)
	}
	header := http.Header{"Content-Type": {contentType}}
	if f.RetryAfter > 0 {
		header.Set("Retry-After", strconv.Itoa(f.RetryAfter))
	}
	return replayResponse(fixture.Response{Status: int(f.Code), Header: header, Chunks: [][]byte{body.Bytes()}}, req)
}

func prefersProtobuf(accept string) bool {
	return strings.HasPrefix(strings.TrimSpace(accept), "application/vnd.kubernetes.protobuf")
}

// connError is what a failed dial or a reset connection looks like to an http.RoundTripper.
func connError(op string, errno syscall.Errno) error {
	return &net.OpError{
		Op:   op,
		Net:  "tcp",
		Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 6443},
		Err:  os.NewSyscallError(map[string]string{"dial": "connect", "read": "read"}[op], errno),
	}
}

// truncate returns the first n bytes of chunks, split where n falls.
func truncate(chunks [][]byte, n int) [][]byte {
	var out [][]byte
	for _, c := range chunks {
		if n <= 0 {
			break
		}
		if len(c) > n {
			c = c[:n]
		}
		out = append(out, c)
		n -= len(c)
	}
	return out
}

func cloneChunks(chunks [][]byte) [][]byte {
	out := make([][]byte, len(chunks))
	for i, c := range chunks {
		out[i] = slices.Clone(c)
	}
	return out
}

// shortQuery renders a query without the parameters every request has.
func shortQuery(q url.Values) string {
	keys := make([]string, 0, len(q))
	for k := range q {
		if k != "timeout" && k != "watch" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('&')
		}
		v := q.Get(k)
		if k == "continue" && len(v) > 12 {
			v = v[:12] + "…"
		}
		b.WriteString(k + "=" + v)
	}
	if b.Len() == 0 {
		return "(no query)"
	}
	return b.String()
}

// drained notes that body has no unread recorded bytes left (or was closed).
func (r *replay) drained(body *streamBody) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending[body] {
		delete(r.pending, body)
		close(r.changed)
		r.changed = make(chan struct{})
	}
}

// waitIdle waits until every watch response has been read to its end (or its hold), so
// that whatever the caller gets next can only come from the client side.
func (r *replay) waitIdle(ctx context.Context) bool {
	for {
		r.mu.Lock()
		idle, changed := len(r.pending) == 0, r.changed
		r.mu.Unlock()
		if idle {
			return true
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return false
		case <-r.aborted:
			return false
		}
	}
}

// errBodyClosed is what a read of a closed response body returns, as in net/http.
var errBodyClosed = errors.New("http: read on closed response body")

// streamBody is a watch response body: the recorded chunks one per Read, then end, or (end
// nil) held open like a live watch until the request's context ends or the body is closed.
type streamBody struct {
	replay *replay
	ctx    context.Context
	mu     sync.Mutex
	chunks [][]byte
	end    error
	closed chan struct{}
	once   sync.Once
}

// Read implements io.Reader.
func (b *streamBody) Read(p []byte) (int, error) {
	select {
	case <-b.closed:
		return 0, errBodyClosed
	default:
	}
	b.mu.Lock()
	for len(b.chunks) > 0 && len(b.chunks[0]) == 0 {
		b.chunks = b.chunks[1:]
	}
	if len(b.chunks) > 0 {
		n := copy(p, b.chunks[0])
		b.chunks[0] = b.chunks[0][n:]
		for len(b.chunks) > 0 && len(b.chunks[0]) == 0 {
			b.chunks = b.chunks[1:]
		}
		left := len(b.chunks)
		b.mu.Unlock()
		if left == 0 {
			b.replay.drained(b)
		}
		return n, nil
	}
	end := b.end
	b.mu.Unlock()
	b.replay.drained(b)
	if end != nil {
		return 0, end
	}
	select {
	case <-b.ctx.Done():
		return 0, b.ctx.Err()
	case <-b.closed:
		return 0, errBodyClosed
	}
}

// Close implements io.Closer.
func (b *streamBody) Close() error {
	b.once.Do(func() { close(b.closed) })
	b.replay.drained(b)
	return nil
}
