package transport_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jarcoal/httpmock"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kretry/kretry/internal/harness/fakeclock"

	"github.com/kretry/kretry/transport"
)

const host = "http://k8s.test"

var epoch = time.Date(2026, 11, 30, 16, 0, 0, 0, time.UTC)

// step answers one attempt.
type step func(req *http.Request) (*http.Response, error)

// attempt is what the server was asked, copied as it arrived.
type attempt struct {
	method string
	url    string
	header http.Header
}

// harness is transport.New over httpmock, with a body counter between
// them, on a virtual clock with no jitter.
type harness struct {
	t       *testing.T
	mock    *httpmock.MockTransport
	bodies  *bodyCounter
	clock   *fakeclock.Clock
	rt      http.RoundTripper
	mu      sync.Mutex
	script  []step
	seen    []attempt
	retries []transport.RetryEvent
}

// newHarness answers the n-th attempt with script[n], repeating the last
// step forever. cfg's Clock, Rand and Observer are set unless given: the
// harness's Observer records the retries.
func newHarness(t *testing.T, cfg transport.Config, script ...step) *harness {
	t.Helper()
	h := &harness{t: t, mock: httpmock.NewMockTransport(), clock: fakeclock.New(epoch), script: script}
	h.mock.RegisterNoResponder(h.respond)
	h.bodies = &bodyCounter{next: h.mock}
	if cfg.Clock == nil {
		cfg.Clock = h.clock
	}
	if cfg.Rand == nil {
		cfg.Rand = func() float64 { return 0 }
	}
	if cfg.Observer == nil {
		cfg.Observer = retryRecorder{h}
	}
	h.rt = transport.New(h.bodies, cfg)
	t.Cleanup(h.bodies.checkClosed(t))
	return h
}

func (h *harness) respond(req *http.Request) (*http.Response, error) {
	h.mu.Lock()
	n := len(h.seen)
	h.seen = append(h.seen, attempt{method: req.Method, url: req.URL.String(), header: req.Header.Clone()})
	next := h.script[min(n, len(h.script)-1)]
	h.mu.Unlock()
	return next(req)
}

func (h *harness) calls() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.seen)
}

func (h *harness) attempts() []attempt {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]attempt(nil), h.seen...)
}

func (h *harness) retried() []transport.RetryEvent {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]transport.RetryEvent(nil), h.retries...)
}

// retryRecorder is the harness's Observer: it records the retries.
type retryRecorder struct{ h *harness }

func (r retryRecorder) ObserveRetry(e transport.RetryEvent) {
	r.h.mu.Lock()
	defer r.h.mu.Unlock()
	r.h.retries = append(r.h.retries, e)
}

func (retryRecorder) ObserveAttempt(transport.AttemptEvent)      {}
func (retryRecorder) ObserveGiveUp(transport.GiveUpEvent)        {}
func (retryRecorder) ObserveBudgetRefusal(transport.BudgetEvent) {}

// get sends a GET for path through the transport.
func (h *harness) get(path string) (*http.Response, error) {
	return h.do(newRequest(h.t, http.MethodGet, path))
}

func (h *harness) do(req *http.Request) (*http.Response, error) {
	return h.rt.RoundTrip(req)
}

func newRequest(t *testing.T, method, path string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, host+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json")
	return req
}

// readAll reads and closes resp's body.
func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the body: %v", err)
	}
	return string(body)
}

// bodyCounter is a RoundTripper that counts the response bodies it hands
// up and how many of them were closed.
type bodyCounter struct {
	next   http.RoundTripper
	mu     sync.Mutex
	opened int
	closed int
	last   *http.Response
}

func (c *bodyCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(req)
	if resp != nil && resp.Body != nil {
		c.mu.Lock()
		c.opened++
		c.last = resp
		c.mu.Unlock()
		resp.Body = &countedBody{ReadCloser: resp.Body, counter: c}
	}
	return resp, err
}

func (c *bodyCounter) counts() (opened, closed int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.opened, c.closed
}

func (c *bodyCounter) lastResponse() *http.Response {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

// checkClosed is a cleanup asserting every body was closed exactly once;
// a test closes the body it was handed before it ends.
func (c *bodyCounter) checkClosed(t *testing.T) func() {
	return func() {
		if opened, closed := c.counts(); opened != closed {
			t.Errorf("%d response bodies opened, %d closed", opened, closed)
		}
	}
}

type countedBody struct {
	io.ReadCloser
	counter *bodyCounter
	once    sync.Once
}

func (b *countedBody) Close() error {
	b.once.Do(func() {
		b.counter.mu.Lock()
		b.counter.closed++
		b.counter.mu.Unlock()
	})
	return b.ReadCloser.Close()
}

// Answers, as a kube-apiserver gives them.

func respond(code int, header http.Header, body string) step {
	return func(req *http.Request) (*http.Response, error) {
		resp := httpmock.NewStringResponse(code, body)
		for k, v := range header {
			resp.Header[k] = append([]string(nil), v...)
		}
		resp.Request = req
		return resp, nil
	}
}

func fail(err error) step {
	return func(*http.Request) (*http.Response, error) { return nil, err }
}

func headers(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func statusBody(code int32, reason metav1.StatusReason, message string, details *metav1.StatusDetails) string {
	st := metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Code: code, Reason: reason, Message: message, Details: details,
	}
	body, err := json.Marshal(st)
	if err != nil {
		panic(err)
	}
	return string(body)
}

// statusAnswer is a Status error answer in JSON.
func statusAnswer(code int32, reason metav1.StatusReason, message string, details *metav1.StatusDetails, kv ...string) step {
	return respond(int(code), headers(append([]string{"Content-Type", "application/json", "Audit-Id", "audit-" + strconv.Itoa(int(code))}, kv...)...),
		statusBody(code, reason, message, details))
}

// inflight429 is kube-apiserver's max-in-flight / APF rejection: text/plain
// with Retry-After: 1, not a Status.
var inflight429 = respond(http.StatusTooManyRequests,
	headers("Content-Type", "text/plain; charset=utf-8", "Retry-After", "1", "X-Content-Type-Options", "nosniff"),
	"Too many requests, please try again later.\n")

func podList(items int) string {
	var b bytes.Buffer
	b.WriteString(`{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"42"},"items":[`)
	for i := range items {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"metadata":{"name":"pod-%d","namespace":"ns","resourceVersion":"%d"}}`, i, 10+i)
	}
	b.WriteString("]}")
	return b.String()
}

var listOK = respond(http.StatusOK, headers("Content-Type", "application/json", "Audit-Id", "audit-ok"), podList(2))
