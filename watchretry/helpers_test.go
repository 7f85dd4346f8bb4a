package watchretry_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jarcoal/httpmock"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/kretry/kretry/internal/establish"
	"github.com/kretry/kretry/internal/harness/fakeclock"
	"github.com/kretry/kretry/internal/policy"
	"github.com/kretry/kretry/watchretry"
)

const (
	jsonStream  = "application/json"
	protoStream = "application/vnd.kubernetes.protobuf;stream=watch"
)

var epoch = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// configMap is a ConfigMap at resourceVersion rv, with its TypeMeta set as
// the API server sends it.
func configMap(name, rv string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "demo", ResourceVersion: rv},
		Data:       map[string]string{"key": "value-" + rv},
	}
}

func bookmark(rv string, initialEventsEnd bool) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{ResourceVersion: rv},
	}
	if initialEventsEnd {
		cm.Annotations = map[string]string{metav1.InitialEventsAnnotationKey: "true"}
	}
	return cm
}

func errorStatus(code int32, reason metav1.StatusReason, retryAfterSeconds int32) *metav1.Status {
	st := &metav1.Status{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"},
		Status:   metav1.StatusFailure, Code: code, Reason: reason,
		Message: fmt.Sprintf("injected %d", code),
	}
	if retryAfterSeconds > 0 {
		st.Details = &metav1.StatusDetails{RetryAfterSeconds: retryAfterSeconds}
	}
	return st
}

// event encodes one watch event the way kube-apiserver writes it: a JSON
// object and a newline, or a length-prefixed protobuf WatchEvent.
func event(t testing.TB, contentType string, typ watch.EventType, obj runtime.Object) []byte {
	t.Helper()
	if contentType == jsonStream {
		raw, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		data, err := json.Marshal(metav1.WatchEvent{Type: string(typ), Object: runtime.RawExtension{Raw: raw}})
		if err != nil {
			t.Fatal(err)
		}
		return append(data, '\n')
	}
	var raw bytes.Buffer
	if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(obj, &raw); err != nil {
		t.Fatal(err)
	}
	data, err := (&metav1.WatchEvent{Type: string(typ), Object: runtime.RawExtension{Raw: raw.Bytes()}}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(data))), data...)
}

// reply is one scripted answer of the fake API server.
type reply struct {
	status      int         // default 200
	contentType string      // default the test's stream type
	header      http.Header // extra response headers
	body        []byte      // what the server sends
	chunks      [][]byte    // if set, what the server sends instead of body, each in a read of its own
	cutAt       int         // if >= 0 with cut set: only body[:cutAt] arrives
	cut         bool        // the body ends at cutAt with readErr
	readErr     error       // error after the cut; default io.ErrUnexpectedEOF
	hold        bool        // after body, the stream stays open until the request ends
	connErr     error       // RoundTrip fails with this instead of answering
	onEnd       func()      // runs when the body first reaches its end or cut
	onStart     func()      // runs at the body's first read, before any byte
	onRequest   func()      // runs when the request arrives, before it is answered
	silent      bool        // the request is never answered: RoundTrip waits for its end
	apiserver   string      // if set, the answer comes over TLS from a server whose certificate is this
}

// server is a scripted fake API server behind httpmock: each watch request
// takes the next reply; once they run out, a watch stays open and idle.
type server struct {
	t           testing.TB
	contentType string

	// next answers once the scripted replies run out; nil: an idle watch.
	next func(query url.Values) reply

	mu       sync.Mutex
	replies  []reply
	requests []*url.URL
	headers  []http.Header
	closes   []bool // each request's req.Close
	bodies   []*trackedBody
}

func newServer(t testing.TB, contentType string, replies ...reply) *server {
	return &server{t: t, contentType: contentType, replies: replies}
}

func (s *server) respond(req *http.Request) (*http.Response, error) {
	r := s.take(req)
	if r.onRequest != nil {
		r.onRequest()
	}
	if r.silent {
		<-req.Context().Done()
		return nil, req.Context().Err()
	}
	return s.answer(req, r)
}

// take records req and returns the reply it gets.
func (s *server) take(req *http.Request) reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := *req.URL
	s.requests = append(s.requests, &u)
	s.headers = append(s.headers, req.Header.Clone())
	s.closes = append(s.closes, req.Close)
	r := reply{hold: true}
	switch {
	case len(s.replies) > 0:
		r, s.replies = s.replies[0], s.replies[1:]
	case s.next != nil:
		r = s.next(u.Query())
	}
	return r
}

// answer is r's answer to req.
func (s *server) answer(req *http.Request, r reply) (*http.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.connErr != nil {
		return nil, r.connErr
	}
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if r.contentType == "" {
		r.contentType = s.contentType
	}
	header := http.Header{"Content-Type": {r.contentType}}
	for k, v := range r.header {
		header[k] = v
	}
	body := &trackedBody{ctx: req.Context(), data: r.body, chunks: r.chunks, hold: r.hold, onEnd: r.onEnd, onStart: r.onStart, closed: make(chan struct{})}
	if r.cut {
		body.data = r.body[:r.cutAt]
		body.err = r.readErr
		if body.err == nil {
			body.err = io.ErrUnexpectedEOF
		}
	}
	s.bodies = append(s.bodies, body)
	resp := &http.Response{StatusCode: r.status, Header: header, Body: body, Request: req}
	if r.apiserver != "" {
		resp.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{{Raw: []byte(r.apiserver)}}}
	}
	return resp, nil
}

// query returns the query of the i-th request.
func (s *server) query(i int) url.Values {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i >= len(s.requests) {
		s.t.Fatalf("request %d was never made (%d requests)", i, len(s.requests))
	}
	return s.requests[i].Query()
}

// closed returns each request's req.Close.
func (s *server) closed() []bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]bool(nil), s.closes...)
}

func (s *server) requestCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

// allClosed reports whether every body handed out was closed.
func (s *server) allClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range s.bodies {
		select {
		case <-b.closed:
		default:
			return false
		}
	}
	return true
}

// trackedBody serves data, then err, or holds the stream open until the
// request's context ends or it is closed.
type trackedBody struct {
	ctx       context.Context
	data      []byte
	chunks    [][]byte // after data, served one a read
	err       error
	hold      bool
	onEnd     func()
	onStart   func()
	closeOnce sync.Once
	closed    chan struct{}
}

func (b *trackedBody) Read(p []byte) (int, error) {
	if b.onStart != nil {
		b.onStart()
		b.onStart = nil
	}
	if len(b.data) == 0 && len(b.chunks) > 0 {
		b.data, b.chunks = b.chunks[0], b.chunks[1:]
		n := copy(p, b.data)
		b.data = b.data[n:]
		return n, nil
	}
	if len(b.data) > 0 {
		n := copy(p, b.data)
		b.data = b.data[n:]
		return n, nil
	}
	if b.onEnd != nil {
		b.onEnd()
		b.onEnd = nil
	}
	if b.err != nil {
		return 0, b.err
	}
	if !b.hold {
		return 0, io.EOF
	}
	select {
	case <-b.ctx.Done():
		return 0, b.ctx.Err()
	case <-b.closed:
		return 0, io.ErrClosedPipe
	}
}

func (b *trackedBody) Close() error {
	b.closeOnce.Do(func() { close(b.closed) })
	return nil
}

// harness is a clientset whose watches go through watchretry to a scripted
// server, on a virtual clock.
type harness struct {
	server  *server
	clock   *fakeclock.Clock
	clients *kubernetes.Clientset
	retries []establish.Retry
	mu      sync.Mutex
}

func newHarness(t testing.TB, srv *server, tune func(*watchretry.TestConfig)) *harness {
	t.Helper()
	mock := httpmock.NewMockTransport()
	mock.RegisterRegexpResponder(http.MethodGet, regexp.MustCompile(`/configmaps`), srv.respond)
	h := &harness{server: srv, clock: fakeclock.New(epoch)}
	cfg := watchretry.TestConfig{
		Policy: policy.New(policy.Config{Clock: h.clock, Rand: func() float64 { return 0.5 }}),
		Hooks: watchretry.Hooks{OnRetry: func(_ context.Context, r establish.Retry) {
			h.mu.Lock()
			h.retries = append(h.retries, r)
			h.mu.Unlock()
		}},
	}
	if tune != nil {
		tune(&cfg)
	}
	restConfig := &rest.Config{
		Host:          "http://kretry.test",
		Transport:     mock,
		WrapTransport: func(next http.RoundTripper) http.RoundTripper { return watchretry.NewForTest(next, cfg) },
	}
	if srv.contentType == protoStream {
		restConfig.ContentType = "application/vnd.kubernetes.protobuf"
	}
	clients, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		t.Fatal(err)
	}
	h.clients = clients
	return h
}

// watch opens a ConfigMap watch with opts.
func (h *harness) watch(t testing.TB, opts metav1.ListOptions) watch.Interface {
	t.Helper()
	w, err := h.clients.CoreV1().ConfigMaps("demo").Watch(context.Background(), opts)
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	return w
}

// seen is one event as the caller saw it.
type seen struct {
	Type watch.EventType
	RV   string
	Code int32
}

// collect reads n events, or until the channel closes; it fails the test
// if neither happens within a generous bound (nothing here waits for real
// time: the bound only turns a hang into a failure).
func collect(t testing.TB, w watch.Interface, n int) []seen {
	t.Helper()
	var got []seen
	deadline := time.After(20 * time.Second)
	for n < 0 || len(got) < n {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return got
			}
			got = append(got, describe(ev))
		case <-deadline:
			t.Fatalf("timed out after %d events: %v", len(got), got)
		}
	}
	return got
}

// wantAddedThenModified watches from resourceVersion 100 through h and
// fails the test unless it sees ADDED 101 then MODIFIED 102: the events of
// a stream that broke after the first and was resumed.
func wantAddedThenModified(t testing.TB, h *harness) {
	t.Helper()
	w := h.watch(t, metav1.ListOptions{ResourceVersion: "100"})
	got := collect(t, w, 2)
	w.Stop()
	if want := []seen{{Type: watch.Added, RV: "101"}, {Type: watch.Modified, RV: "102"}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func describe(ev watch.Event) seen {
	switch obj := ev.Object.(type) {
	case *metav1.Status:
		return seen{Type: ev.Type, Code: obj.Code}
	case metav1.Object:
		return seen{Type: ev.Type, RV: obj.GetResourceVersion()}
	default:
		return seen{Type: ev.Type}
	}
}

func timeout(seconds int64) *int64 { return &seconds }

func rvAfter(t testing.TB, q url.Values) int {
	t.Helper()
	rv, err := strconv.Atoi(q.Get("resourceVersion"))
	if err != nil {
		t.Fatalf("resourceVersion %q: %v", q.Get("resourceVersion"), err)
	}
	return rv
}
