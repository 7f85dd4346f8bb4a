package transport_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kretry/kretry/transport"
)

const listPath = "/api/v1/namespaces/ns/pods?limit=500&resourceVersion=0"

func connError(errno syscall.Errno) error {
	return &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 6443},
		Err: os.NewSyscallError("connect", errno)}
}

func TestRetriedAnswers(t *testing.T) {
	rvTooLarge := &metav1.StatusDetails{
		Causes:            []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge, Message: "Too large resource version"}},
		RetryAfterSeconds: 1,
	}
	tests := []struct {
		name       string
		first      step
		wantWait   time.Duration
		wantReason transport.Reason
		wantCode   int
	}{
		{"429 from the inflight limiter, text/plain, Retry-After: 1", inflight429, time.Second, transport.ReasonTooManyRequests, 429},
		{"429 Status with details.retryAfterSeconds, no header",
			statusAnswer(429, metav1.StatusReasonTooManyRequests, "storage is (re)initializing", &metav1.StatusDetails{RetryAfterSeconds: 3}),
			3 * time.Second, transport.ReasonTooManyRequests, 429},
		{"429 header wins over the Status",
			statusAnswer(429, metav1.StatusReasonTooManyRequests, "slow down", &metav1.StatusDetails{RetryAfterSeconds: 9}, "Retry-After", "2"),
			2 * time.Second, transport.ReasonTooManyRequests, 429},
		{"429 Retry-After as an HTTP-date", respond(429, headers("Retry-After", epoch.Add(4*time.Second).Format(http.TimeFormat)), ""),
			4 * time.Second, transport.ReasonTooManyRequests, 429},
		{"429 Retry-After junk: backoff", respond(429, headers("Retry-After", "soon"), ""), 800 * time.Millisecond, transport.ReasonTooManyRequests, 429},
		{"429 Retry-After negative: backoff", respond(429, headers("Retry-After", "-3"), ""), 800 * time.Millisecond, transport.ReasonTooManyRequests, 429},
		{"429 Retry-After zero: backoff", respond(429, headers("Retry-After", "0"), ""), 800 * time.Millisecond, transport.ReasonTooManyRequests, 429},
		{"429 Retry-After huge: capped", respond(429, headers("Retry-After", "99999999999999999999"), ""), time.Minute, transport.ReasonTooManyRequests, 429},
		{"429 Status retryAfterSeconds negative: backoff",
			statusAnswer(429, metav1.StatusReasonTooManyRequests, "x", &metav1.StatusDetails{RetryAfterSeconds: -1}),
			800 * time.Millisecond, transport.ReasonTooManyRequests, 429},
		{"500 InternalError", statusAnswer(500, metav1.StatusReasonInternalError, "etcdserver: leader changed", nil),
			800 * time.Millisecond, transport.ReasonServerError, 500},
		{"502 from a proxy", respond(502, headers("Content-Type", "text/html"), "<html>Bad Gateway</html>"),
			800 * time.Millisecond, transport.ReasonServerError, 502},
		{"503 without Retry-After", statusAnswer(503, metav1.StatusReasonServiceUnavailable, "shutting down", nil),
			800 * time.Millisecond, transport.ReasonServerError, 503},
		{"503 Retry-After above the backoff", statusAnswer(503, metav1.StatusReasonServiceUnavailable, "x", nil, "Retry-After", "5"),
			5 * time.Second, transport.ReasonServerError, 503},
		{"503 Retry-After below the backoff", respond(503, headers("Retry-After", "0"), ""), 800 * time.Millisecond, transport.ReasonServerError, 503},
		{"504 Timeout", statusAnswer(504, metav1.StatusReasonTimeout, "request timed out", nil),
			800 * time.Millisecond, transport.ReasonServerError, 504},
		{"504 Timeout ResourceVersionTooLarge, Retry-After: 1",
			statusAnswer(504, metav1.StatusReasonTimeout, "Too large resource version: 50, current: 42", rvTooLarge, "Retry-After", "1"),
			time.Second, transport.ReasonServerError, 504},
		{"504 Status retryAfterSeconds only", statusAnswer(504, metav1.StatusReasonTimeout, "x", &metav1.StatusDetails{RetryAfterSeconds: 2}),
			2 * time.Second, transport.ReasonServerError, 504},
		// No answer at all: the backoff is drawn from [step/2, 5·step/2),
		// half the step at the draw of 0.
		{"connection refused", fail(connError(syscall.ECONNREFUSED)), 400 * time.Millisecond, transport.ReasonConnection, 0},
		{"connection reset", fail(connError(syscall.ECONNRESET)), 400 * time.Millisecond, transport.ReasonConnection, 0},
		{"EOF before a response", fail(io.EOF), 400 * time.Millisecond, transport.ReasonConnection, 0},
		{"GOAWAY", fail(errors.New("http2: server sent GOAWAY and closed the connection; LastStreamID=3, ErrCode=NO_ERROR, debug=\"\"")),
			400 * time.Millisecond, transport.ReasonConnection, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, transport.Config{}, tt.first, listOK)
			resp, err := h.get(listPath)
			if err != nil {
				t.Fatalf("RoundTrip: %v", err)
			}
			if resp.StatusCode != http.StatusOK || readAll(t, resp) != podList(2) {
				t.Fatalf("got %d, want the list", resp.StatusCode)
			}
			if h.calls() != 2 {
				t.Errorf("%d calls, want 2", h.calls())
			}
			if sleeps := h.clock.Sleeps(); len(sleeps) != 1 || sleeps[0] != tt.wantWait {
				t.Errorf("waited %v, want %v", sleeps, tt.wantWait)
			}
			retries := h.retried()
			if len(retries) != 1 {
				t.Fatalf("the Observer heard %d retries, want 1", len(retries))
			}
			want := transport.RetryEvent{Verb: transport.VerbList, Host: "k8s.test", Reason: tt.wantReason, Code: tt.wantCode, Wait: tt.wantWait}
			if r := retries[0]; r != want {
				t.Errorf("retry %+v, want %+v", r, want)
			}
		})
	}
}

func TestDeliveredAtOnce(t *testing.T) {
	tests := []struct {
		name string
		code int32
		step step
	}{
		{"404", 404, statusAnswer(404, metav1.StatusReasonNotFound, `namespaces "ns" not found`, nil)},
		{"403", 403, statusAnswer(403, metav1.StatusReasonForbidden, "forbidden", nil, "Retry-After", "1")},
		{"401", 401, statusAnswer(401, metav1.StatusReasonUnauthorized, "Unauthorized", nil)},
		{"400", 400, statusAnswer(400, metav1.StatusReasonBadRequest, "bad", nil)},
		{"410 Expired", 410, statusAnswer(410, metav1.StatusReasonExpired, "The provided continue parameter is too old", nil)},
		{"501", 501, respond(501, headers("Retry-After", "1"), "not implemented")},
		{"304", 304, respond(304, nil, "")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, transport.Config{}, tt.step)
			resp, err := h.get(listPath)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != int(tt.code) || h.calls() != 1 || len(h.clock.Sleeps()) != 0 || len(h.retried()) != 0 {
				t.Errorf("got %d after %d calls and waits %v, want %d at once", resp.StatusCode, h.calls(), h.clock.Sleeps(), tt.code)
			}
			// Delivered as the server sent it: Retry-After included.
			if want := h.bodies.lastResponse().Header; !reflect.DeepEqual(resp.Header, want) {
				t.Errorf("headers %v, want %v", resp.Header, want)
			}
			readAll(t, resp)
		})
	}
}

func TestDeliveredErrorIsTheOriginal(t *testing.T) {
	unknownAuthority := &url509{x509.UnknownAuthorityError{}}
	h := newHarness(t, transport.Config{}, fail(unknownAuthority))
	_, err := h.get(listPath)
	if err != unknownAuthority { //nolint:errorlint // the very same error
		t.Errorf("err = %#v, want the RoundTripper's own", err)
	}
	if h.calls() != 1 {
		t.Errorf("%d calls, want 1", h.calls())
	}
}

// url509 is an error that is not transient.
type url509 struct{ x509.UnknownAuthorityError }

func TestWindowExhaustion(t *testing.T) {
	tests := []struct {
		name     string
		step     func(n int) step
		wantBody func(n int) string
	}{
		{"503 with Retry-After and a Status", func(n int) step {
			return statusAnswer(503, metav1.StatusReasonServiceUnavailable, "attempt "+string(rune('0'+n)), nil, "Retry-After", "1")
		}, func(n int) string {
			return statusBody(503, metav1.StatusReasonServiceUnavailable, "attempt "+string(rune('0'+n)), nil)
		}},
		{"500 InternalError", func(n int) step {
			return statusAnswer(500, metav1.StatusReasonInternalError, "etcdserver: leader changed "+string(rune('0'+n)), nil)
		}, func(n int) string {
			return statusBody(500, metav1.StatusReasonInternalError, "etcdserver: leader changed "+string(rune('0'+n)), nil)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var script []step
			for n := range 9 {
				script = append(script, tt.step(n))
			}
			h := newHarness(t, transport.Config{}, script...)
			resp, err := h.get(listPath)
			if err != nil {
				t.Fatal(err)
			}
			// No jitter: 0.8 + 1.6 + 3.2 + 6.4 + 12.8 + 5.2 (the rest of the 30s window).
			wantCalls := 7
			if h.calls() != wantCalls {
				t.Errorf("%d calls, want %d", h.calls(), wantCalls)
			}
			if elapsed := h.clock.Now().Sub(epoch); elapsed != 30*time.Second {
				t.Errorf("gave up after %v, want the 30s window", elapsed)
			}
			if resp.StatusCode != 503 && resp.StatusCode != 500 {
				t.Errorf("status %d", resp.StatusCode)
			}
			if got := resp.Header.Get("Retry-After"); got != "" {
				t.Errorf("Retry-After %q kept on give-up", got)
			}
			if got := resp.Header.Get("Audit-Id"); got == "" {
				t.Error("Audit-Id lost")
			}
			if got, want := readAll(t, resp), tt.wantBody(wantCalls-1); got != want {
				t.Errorf("body %q, want the last Status %q", got, want)
			}
		})
	}
}

// TestWindowExhaustionOnConnectionFailures: a give-up on connection
// failures is a *GiveUpError that client-go's retry checks do not match (so
// its 10 GET retries do not each start a new window), with the last error
// reachable, and a refused connection still seen as one.
func TestWindowExhaustionOnConnectionFailures(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		refused bool
	}{
		{"reset", connError(syscall.ECONNRESET), false},
		{"refused", connError(syscall.ECONNREFUSED), true},
		{"EOF", io.EOF, false},
		{"unexpected EOF", io.ErrUnexpectedEOF, false},
		{"GOAWAY", errors.New("http2: server sent GOAWAY and closed the connection; LastStreamID=1, ErrCode=NO_ERROR"), false},
		{"h2 connection lost", errors.New("http2: client connection lost"), false},
		{"closed connection", errors.New("read tcp 127.0.0.1:1->127.0.0.1:2: use of closed network connection"), false},
		{"dial timeout", &net.OpError{Op: "dial", Net: "tcp", Err: timeoutError{}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, transport.Config{InternalErrorWindow: 10 * time.Second}, fail(tt.err))
			resp, err := h.get(listPath)
			if resp != nil {
				t.Fatalf("got a response %d", resp.StatusCode)
			}
			var giveUp *transport.GiveUpError
			if !errors.As(err, &giveUp) {
				t.Fatalf("err = %v (%T), want a *GiveUpError", err, err)
			}
			if giveUp.Last != tt.err || giveUp.Attempts != 6 || giveUp.Elapsed != 10*time.Second { //nolint:errorlint // the very same error
				t.Errorf("GiveUpError = %+v, want Last %v after 6 attempts in 10s", giveUp, tt.err)
			}
			if h.calls() != 6 { // half steps at the draw of 0: 0.4 + 0.8 + 1.6 + 3.2 + 4 (the rest of the window)
				t.Errorf("%d calls, want 6", h.calls())
			}
			// As client-go sees it: http.Client wraps it in a *url.Error.
			seen := &url.Error{Op: "Get", URL: host + listPath, Err: err}
			if utilnet.IsProbableEOF(seen) || utilnet.IsConnectionReset(seen) || utilnet.IsHTTP2ConnectionLost(seen) || utilnet.IsTimeout(seen) {
				t.Errorf("client-go would retry %q", seen)
			}
			if got := utilnet.IsConnectionRefused(seen); got != tt.refused {
				t.Errorf("IsConnectionRefused = %v, want %v", got, tt.refused)
			}
			if got := errors.Is(seen, syscall.ECONNREFUSED); got != tt.refused {
				t.Errorf("errors.Is(ECONNREFUSED) = %v, want %v", got, tt.refused)
			}
			if strings.Contains(err.Error(), "giving up") || !strings.Contains(err.Error(), "6 attempts") {
				t.Errorf("message %q", err)
			}
		})
	}
}

func TestTooManyRequestsWindowGiveUp(t *testing.T) {
	h := newHarness(t, transport.Config{TooManyRequestsWindow: 5 * time.Second}, inflight429)
	resp, err := h.get(listPath)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "" {
		t.Errorf("got %d Retry-After %q, want 429 without Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if body := readAll(t, resp); body != "Too many requests, please try again later.\n" {
		t.Errorf("body %q", body)
	}
	if h.calls() != 6 { // 1s apart, the 6th at 5s
		t.Errorf("%d calls, want 6", h.calls())
	}
}

func TestTooManyRequestsRetriedUntilContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var h *harness
	h = newHarness(t, transport.Config{}, func(req *http.Request) (*http.Response, error) {
		if h.calls() == 500 {
			cancel()
		}
		return inflight429(req)
	})
	_, err := h.do(newRequest(t, http.MethodGet, listPath).WithContext(ctx))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if h.calls() != 500 {
		t.Errorf("%d calls, want 500: 429 retried until the context ended", h.calls())
	}
}

// waitingOn returns once clock has a waiter: kretry has started a wait.
func waitingOn(clock *clocktesting.FakeClock) {
	for !clock.HasWaiters() {
		time.Sleep(time.Millisecond) // polls for a goroutine to park; no result depends on timing
	}
}

// cancelledWhileWaiting sends a LIST whose context is cancelled as soon as
// kretry starts a wait on clock.
func cancelledWhileWaiting(t *testing.T, h *harness, clock *clocktesting.FakeClock) (*http.Response, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		waitingOn(clock)
		cancel()
	}()
	return h.do(newRequest(t, http.MethodGet, listPath).WithContext(ctx))
}

// TestContextCancelDuringWait runs on client-go's own fake clock: a wait
// kretry starts is one its users can hold open and step through.
func TestContextCancelDuringWait(t *testing.T) {
	clock := clocktesting.NewFakeClock(epoch)
	h := newHarness(t, transport.Config{Clock: clock}, statusAnswer(503, metav1.StatusReasonServiceUnavailable, "x", nil, "Retry-After", "30"))
	resp, err := cancelledWhileWaiting(t, h, clock)
	if resp != nil || !errors.Is(err, context.Canceled) {
		t.Errorf("RoundTrip = %v, %v; want context.Canceled", resp, err)
	}
	if h.calls() != 1 {
		t.Errorf("%d calls, want 1", h.calls())
	}
	if clock.HasWaiters() {
		t.Error("the wait's timer was left behind")
	}
}

func TestFakeClockStepsThroughWaits(t *testing.T) {
	clock := clocktesting.NewFakeClock(epoch)
	h := newHarness(t, transport.Config{Clock: clock}, fail(io.EOF), statusAnswer(503, metav1.StatusReasonServiceUnavailable, "x", nil), listOK)
	done := make(chan error, 1)
	go func() {
		resp, err := h.get(listPath)
		if err == nil {
			readAll(t, resp)
		}
		done <- err
	}()
	// EOF before a response (no answer: the 800ms step drawn from
	// [step/2, 5·step/2), its lowest), then a 503 (client-go's draw of the
	// 1.6s step, its lowest).
	for _, wait := range []time.Duration{400 * time.Millisecond, 1600 * time.Millisecond} {
		waitingOn(clock)
		clock.Step(wait - time.Millisecond)
		if !clock.HasWaiters() {
			t.Fatalf("the %v wait ended early", wait)
		}
		clock.Step(time.Millisecond)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if h.calls() != 3 {
		t.Errorf("%d calls, want 3", h.calls())
	}
}

func TestContextDeadlineDuringWait(t *testing.T) {
	clock := clocktesting.NewFakeClock(epoch) // never stepped: the wait outlives the deadline
	h := newHarness(t, transport.Config{Clock: clock}, fail(io.EOF))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err := h.do(newRequest(t, http.MethodGet, listPath).WithContext(ctx))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want context.DeadlineExceeded", err)
	}
}

// A 429 wait cut by the caller's deadline hands over the server's answer:
// the caller learns it was throttled, not that its own deadline passed.
func TestTooManyRequestsWaitCutByContext(t *testing.T) {
	clock := clocktesting.NewFakeClock(epoch)
	answer := statusAnswer(429, metav1.StatusReasonTooManyRequests, "storage is (re)initializing", &metav1.StatusDetails{RetryAfterSeconds: 30}, "Retry-After", "30")
	h := newHarness(t, transport.Config{Clock: clock}, answer)
	resp, err := cancelledWhileWaiting(t, h, clock)
	if err != nil {
		t.Fatalf("RoundTrip: %v, want the 429", err)
	}
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "" || resp.Header.Get("Audit-Id") == "" {
		t.Errorf("got %d, Retry-After %q, Audit-Id %q", resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("Audit-Id"))
	}
	want := statusBody(429, metav1.StatusReasonTooManyRequests, "storage is (re)initializing", &metav1.StatusDetails{RetryAfterSeconds: 30})
	if got := readAll(t, resp); got != want {
		t.Errorf("body %q, want the server's Status %q", got, want)
	}
}

func TestNotRetried(t *testing.T) {
	tests := []struct {
		method, path string
		header       http.Header
	}{
		{http.MethodPost, "/api/v1/namespaces/ns/pods", nil},
		{http.MethodPut, "/api/v1/namespaces/ns/pods/p", nil},
		{http.MethodPatch, "/api/v1/namespaces/ns/pods/p", nil},
		{http.MethodDelete, "/api/v1/namespaces/ns/pods/p", nil},
		{http.MethodDelete, "/api/v1/namespaces/ns/pods", nil},
		{http.MethodGet, "/api/v1/namespaces/ns/pods/p/log?follow=true", nil},
		{http.MethodGet, "/api/v1/namespaces/ns/pods/p/exec?command=ls", headers("Connection", "Upgrade", "Upgrade", "websocket")},
		{http.MethodPost, "/api/v1/namespaces/ns/pods/p/exec?command=ls", headers("Connection", "Upgrade", "Upgrade", "SPDY/3.1")},
		{http.MethodGet, "/api/v1/namespaces/ns/pods/p/attach", nil},
		{http.MethodGet, "/api/v1/namespaces/ns/pods/p/portforward", nil},
		{http.MethodGet, "/api/v1/namespaces/ns/services/http:svc:80/proxy/metrics", nil},
		{http.MethodGet, "/api/v1/namespaces/ns/pods/p", nil}, // single GET: off by default
		{http.MethodGet, "/healthz", nil},
		{http.MethodGet, "/version", nil},
	}
	answers := []struct {
		name string
		step step
	}{
		{"503", statusAnswer(503, metav1.StatusReasonServiceUnavailable, "x", nil, "Retry-After", "1")},
		{"EOF", fail(io.EOF)},
	}
	for _, tt := range tests {
		for _, answer := range answers {
			t.Run(tt.method+" "+tt.path+" "+answer.name, func(t *testing.T) {
				h := newHarness(t, transport.Config{}, answer.step, listOK)
				req := newRequest(t, tt.method, tt.path)
				for k, v := range tt.header {
					req.Header[k] = v
				}
				resp, err := h.do(req)
				if h.calls() != 1 || len(h.clock.Sleeps()) != 0 {
					t.Errorf("%d calls, waits %v: retried", h.calls(), h.clock.Sleeps())
				}
				if answer.name == "EOF" {
					if err != io.EOF { //nolint:errorlint
						t.Errorf("err = %v, want io.EOF as is", err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				// Passed through: the very response the next RoundTripper returned.
				if resp != h.bodies.lastResponse() || resp.Header.Get("Retry-After") != "1" {
					t.Errorf("response not passed through untouched")
				}
				readAll(t, resp)
			})
		}
	}
}

func TestRetryGets(t *testing.T) {
	h := newHarness(t, transport.Config{RetryGets: true}, fail(io.EOF), listOK)
	resp, err := h.get("/api/v1/namespaces/ns/pods/p")
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if h.calls() != 2 {
		t.Errorf("%d calls, want 2", h.calls())
	}
}

func TestRequestPreservedOnEveryAttempt(t *testing.T) {
	h := newHarness(t, transport.Config{},
		statusAnswer(503, metav1.StatusReasonServiceUnavailable, "x", nil),
		fail(connError(syscall.ECONNRESET)),
		inflight429,
		listOK)
	ctx := context.WithValue(context.Background(), struct{}{}, "caller")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, host+"/api/v1/namespaces/ns/pods?continue=abc&limit=500&resourceVersion=7", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer secret-token")
	req.Header.Set("Accept", "application/vnd.kubernetes.protobuf, application/json")
	req.Header.Set("User-Agent", "kubectl/v1.37.2 (linux/amd64) kubernetes/abcdef")
	req.Header.Add("Impersonate-Group", "a")
	req.Header.Add("Impersonate-Group", "b")
	req.Header.Set("X-Custom", "1")

	before := snapshot(req)
	resp, err := h.do(req)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)

	attempts := h.attempts()
	if len(attempts) != 4 {
		t.Fatalf("%d attempts, want 4", len(attempts))
	}
	for i, a := range attempts {
		if a.method != http.MethodGet || a.url != before.url {
			t.Errorf("attempt %d: %s %s, want GET %s", i, a.method, a.url, before.url)
		}
		if !reflect.DeepEqual(a.header, before.header) {
			t.Errorf("attempt %d headers %v, want %v", i, a.header, before.header)
		}
	}
	if after := snapshot(req); !reflect.DeepEqual(before, after) {
		t.Errorf("caller's request modified:\n before %+v\n after  %+v", before, after)
	}
	if req.Context() != ctx {
		t.Error("caller's request context replaced")
	}
}

type requestSnapshot struct {
	method, url, host string
	header            http.Header
	body              io.ReadCloser
	getBodyNil        bool
	contentLength     int64
	urlPtr            any
}

func snapshot(req *http.Request) requestSnapshot {
	return requestSnapshot{
		method: req.Method, url: req.URL.String(), host: req.Host,
		header: req.Header.Clone(), body: req.Body, getBodyNil: req.GetBody == nil,
		contentLength: req.ContentLength, urlPtr: req.URL,
	}
}

func TestResponseHeadersPreserved(t *testing.T) {
	warning := `299 - "unknown field \"spec.foo\""`
	ok := respond(200, headers("Content-Type", "application/json", "Audit-Id", "4c6a", "Warning", warning, "Warning", `299 - "second"`,
		"X-Kubernetes-Pf-Flowschema-Uid", "f", "Cache-Control", "no-cache, private"), podList(1))
	h := newHarness(t, transport.Config{}, inflight429, ok)
	resp, err := h.get(listPath)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	want := h.bodies.lastResponse().Header
	if !reflect.DeepEqual(resp.Header, want) || len(resp.Header.Values("Warning")) != 2 {
		t.Errorf("headers %v, want %v", resp.Header, want)
	}
}

func TestRedirectNotFollowed(t *testing.T) {
	h := newHarness(t, transport.Config{}, respond(http.StatusFound, headers("Location", host+"/api/v1/nodes"), ""))
	resp, err := h.get(listPath)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if resp.StatusCode != http.StatusFound || h.calls() != 1 || resp.Header.Get("Location") == "" {
		t.Errorf("got %d after %d calls, want the 302 itself", resp.StatusCode, h.calls())
	}
}

func TestNothingLogged(t *testing.T) {
	var buf bytes.Buffer
	log.SetOutput(&buf)
	defer log.SetOutput(os.Stderr)
	h := newHarness(t, transport.Config{InternalErrorWindow: 5 * time.Second},
		fail(io.EOF), inflight429, statusAnswer(503, metav1.StatusReasonServiceUnavailable, "x", nil))
	resp, err := h.get(listPath)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if buf.Len() != 0 {
		t.Errorf("logged: %s", buf.String())
	}
}

// responseAndError breaks the RoundTripper contract: it returns a response
// and an error, which http.Client would log and leak.
type responseAndError struct{ bodies *bodyCounter }

func (r responseAndError) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, _ := r.bodies.RoundTrip(req)
	return resp, io.EOF
}

func TestResponseAndErrorClosedNotLogged(t *testing.T) {
	var buf bytes.Buffer
	log.SetOutput(&buf)
	defer log.SetOutput(os.Stderr)
	h := newHarness(t, transport.Config{}, listOK)
	rt := transport.New(responseAndError{h.bodies}, transport.Config{Clock: h.clock, InternalErrorWindow: 5 * time.Second})
	_, err := rt.RoundTrip(newRequest(t, http.MethodGet, listPath))
	var giveUp *transport.GiveUpError
	if !errors.As(err, &giveUp) || giveUp.Last != io.EOF { //nolint:errorlint
		t.Errorf("err = %v, want a give-up after io.EOF", err)
	}
	if h.calls() < 2 {
		t.Errorf("%d calls: EOF not retried", h.calls())
	}
	if buf.Len() != 0 {
		t.Errorf("logged: %s", buf.String())
	}
}

func TestWrappedRoundTripper(t *testing.T) {
	h := newHarness(t, transport.Config{}, listOK)
	wrapped, ok := h.rt.(utilnet.RoundTripperWrapper)
	if !ok || wrapped.WrappedRoundTripper() != h.bodies {
		t.Error("the next RoundTripper is not reachable for utilnet helpers")
	}
}

func TestWrapper(t *testing.T) {
	h := newHarness(t, transport.Config{}, fail(io.EOF), listOK)
	rt := transport.Wrapper(transport.Config{Clock: h.clock, Rand: func() float64 { return 0 }})(h.bodies)
	resp, err := rt.RoundTrip(newRequest(t, http.MethodGet, listPath))
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if h.calls() != 2 {
		t.Errorf("%d calls, want 2", h.calls())
	}
}

// timeoutError is a net.Error that timed out, like a dial timeout.
type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

// closeCounter is a request body that counts its Close calls.
type closeCounter struct {
	io.Reader
	closed atomic.Int32
}

func (c *closeCounter) Close() error { c.closed.Add(1); return nil }

// TestRequestBodyClosed: a retried GET that carries a body (odd, but legal)
// has it closed, as the RoundTripper contract asks, retried or not.
func TestRequestBodyClosed(t *testing.T) {
	for _, path := range []string{listPath, "/api/v1/namespaces/ns/pods?watch=true&resourceVersion=5"} {
		t.Run(path, func(t *testing.T) {
			h := newHarness(t, transport.Config{}, fail(io.EOF), listOK)
			body := &closeCounter{Reader: strings.NewReader("{}")}
			req := newRequest(t, http.MethodGet, path)
			req.Body = body
			resp, err := h.do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if n := body.closed.Load(); n == 0 {
				t.Error("the request body was never closed")
			}
		})
	}
}
