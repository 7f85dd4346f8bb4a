package conformance

import (
	"bytes"
	"fmt"
	"io"
	"maps"
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
	"time"

	"github.com/jarcoal/httpmock"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/kretry/kretry/internal/harness/fixture"
)

// baseURL is the replayed server's address; no request ever leaves the process.
const baseURL = "http://kube-apiserver.conformance.invalid"

// collectionPath matches the namespaced collection path of a recorded request.
var collectionPath = regexp.MustCompile(`^/api/v1/namespaces/([^/]+)/([^/]+)$`)

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
	// expected is what a correct transport hands a RawWatch caller (simulate).
	expected expectedWatch
	lists    []fixture.Exchange
	mock     *httpmock.MockTransport

	mu             sync.Mutex
	log            []string
	counts         map[RequestKind]int
	initialFetches int
	cursor         cursor
	afterFinal     int // watch requests after cursor.final (Scenario.Search)
	listFinal      string
	problems       []string
	aborted        chan struct{}
	pending        map[*streamBody]bool
	changed        chan struct{}
	// bodies are every response body served, by the request line that got it.
	bodies []servedBody
	// elapse makes time pass on the transport's clock (Options.Elapse); nil: none.
	elapse func(time.Duration)
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
			if sc.NoTimeout {
				// The caller asks for no timeoutSeconds: the recording's
				// stream is held open past its own.
				w.query = maps.Clone(w.query)
				w.query.Del("timeoutSeconds")
				w.timeoutSeconds = 0
			}
			r.watch = w
		default:
			r.lists = append(r.lists, ex)
		}
	}
	if r.watch != nil {
		r.cursor = cursor{rv: r.watch.query.Get("resourceVersion"), initialAllowed: r.watch.sendsInitial}
	}
	if sc.Caller == Informer {
		if err := r.checkInformerStart(); err != nil {
			return nil, err
		}
	}
	if err := r.checkFaultsFit(); err != nil {
		return nil, err
	}
	// Walking the schedule also finds a watch fault past the end of its response.
	exp, err := r.simulate()
	if err != nil {
		return nil, err
	}
	r.expected = exp

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

// errSkip marks a scenario that cannot run, e.g. because its fixture is not recorded.
type errSkip struct{ reason string }

func (e errSkip) Error() string { return e.reason }

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
	resp, err := r.answer(req, q, kind, nth, line, answer)
	if resp != nil {
		r.track(fmt.Sprintf("%s #%d", kind, nth), resp.Body)
	}
	return resp, err
}

// answer builds the response to the nth request of kind.
func (r *replay) answer(req *http.Request, q url.Values, kind RequestKind, nth int, line string, answer func(string)) (*http.Response, error) {
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
		case Silent:
			answer("no answer")
			r.pass(f.Elapse)
			<-req.Context().Done()
			return nil, req.Context().Err()
		case Status:
			answer(f.String())
			if kind == WatchRequest && retryable(f.Code) && f.RetryAfter > 0 {
				r.mu.Lock()
				r.cursor.waitedSeconds += int64(f.RetryAfter)
				r.mu.Unlock()
			}
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

// pass makes d pass on the transport's clock.
func (r *replay) pass(d time.Duration) {
	if d > 0 && r.elapse != nil {
		r.elapse(d)
	}
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
		if !q.Has("continue") {
			// A LIST page after the first is the same initial-state fetch.
			r.countInitialFetch("LIST " + shortQuery(q))
		}
		if ex == nil && !r.listStart() {
			answer("not in the recording")
			r.problem(true, "LIST %s: the informer fell back to a LIST", shortQuery(q))
			return r.statusResponse(req, Fault{Kind: Status, Code: http.StatusBadRequest}), nil
		}
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
	var resp *http.Response
	if faulted && f.Kind == Cut {
		body := ex.Response.Body()
		at := f.Into
		if at == Half {
			at = len(body) / 2
		}
		cut := ex.Response
		cut.Chunks, cut.EndError = cloneChunks(truncate(ex.Response.Chunks, at)), io.ErrUnexpectedEOF.Error()
		resp = cut.HTTPResponse(req)
		var beforeEnd func()
		if f.Elapse > 0 {
			beforeEnd = func() { r.pass(f.Elapse) }
		}
		resp.Body = &lockedBody{body: &errBody{ChunkReader: fixture.NewChunkReader(cut), end: io.ErrUnexpectedEOF, beforeEnd: beforeEnd}}
		answer(fmt.Sprintf("%d, cut at byte %d of %d", ex.Response.Status, at, len(body)))
	} else {
		resp = replayResponse(ex.Response, req)
		answer(fmt.Sprintf("%d, %d bytes", ex.Response.Status, len(ex.Response.Body())))
	}
	r.afterStatus(ListRequest, int32(ex.Response.Status))
	return resp, nil
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
	if f.WatchCache {
		rv, _ := strconv.ParseUint(req.URL.Query().Get("resourceVersion"), 10, 64)
		st.Message = fmt.Sprintf("too old resource version: %d (%d)", rv, rv+1)
	}
	st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	var body bytes.Buffer
	contentType := "application/json"
	if prefersProtobuf(req.Header.Get("Accept")) {
		contentType = "application/vnd.kubernetes.protobuf"
		_ = protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(st, &body)
	} else if prefersCBOR(req.Header.Get("Accept")) {
		contentType = "application/cbor"
		_ = encodeCBORStatus(st, &body)
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
