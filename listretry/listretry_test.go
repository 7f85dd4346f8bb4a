package listretry_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jarcoal/httpmock"

	"github.com/kretry/kretry/internal/establish"
	"github.com/kretry/kretry/internal/harness/fakeclock"
	"github.com/kretry/kretry/internal/policy"
	"github.com/kretry/kretry/listretry"
)

const listURL = "http://k8s.test/api/v1/namespaces/ns/pods?continue=eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ&limit=500&resourceVersion=42"

// brokenBody serves data, then fails with err instead of io.EOF.
type brokenBody struct {
	data    *strings.Reader
	err     error
	onBreak func()
	mu      sync.Mutex
	closed  bool
}

func (b *brokenBody) Read(p []byte) (int, error) {
	n, err := b.data.Read(p)
	if err == io.EOF {
		if b.onBreak != nil {
			b.onBreak()
		}
		return n, b.err
	}
	return n, err
}

func (b *brokenBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	return nil
}

func (b *brokenBody) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// server is a scripted httpmock API server that keeps what it was asked
// and every body it handed out.
type server struct {
	mock   *httpmock.MockTransport
	mu     sync.Mutex
	asked  []*http.Request
	bodies []*brokenBody
}

// answer is the n-th response: body is served up to cut bytes, then fails
// with err (cut < 0: the whole body, then io.EOF).
type answer struct {
	code          int
	body          string
	cut           int
	err           error
	contentLength bool
	onBreak       func()
	// contentType is the answer's; default application/json. encoding is
	// its Content-Encoding, if any.
	contentType, encoding string
}

func newServer(t *testing.T, answers ...answer) *server {
	s := &server{mock: httpmock.NewMockTransport()}
	s.mock.RegisterNoResponder(func(req *http.Request) (*http.Response, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		a := answers[min(len(s.asked), len(answers)-1)]
		s.asked = append(s.asked, req.Clone(context.Background()))
		data, readErr := a.body, io.EOF
		if a.cut >= 0 {
			data, readErr = a.body[:a.cut], a.err
		}
		body := &brokenBody{data: strings.NewReader(data), err: readErr, onBreak: a.onBreak}
		s.bodies = append(s.bodies, body)
		contentType := a.contentType
		if contentType == "" {
			contentType = "application/json"
		}
		resp := &http.Response{
			StatusCode: a.code, Status: http.StatusText(a.code), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{"Content-Type": {contentType}}, Body: body, ContentLength: -1, Request: req,
		}
		if a.contentLength {
			resp.ContentLength = int64(len(a.body))
		}
		if a.encoding != "" {
			resp.Header.Set("Content-Encoding", a.encoding)
		}
		return resp, nil
	})
	t.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for i, b := range s.bodies[:max(len(s.bodies)-1, 0)] {
			if !b.isClosed() {
				t.Errorf("abandoned body %d not closed", i)
			}
		}
	})
	return s
}

func (s *server) requests() []*http.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*http.Request(nil), s.asked...)
}

func newList(s *server, cfg listretry.TestConfig) (http.RoundTripper, *fakeclock.Clock) {
	clock := fakeclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg.Policy = policy.New(policy.Config{Clock: clock, Rand: func() float64 { return 0 }})
	return listretry.NewForTest(s.mock, cfg), clock
}

func listRequest(t *testing.T) *http.Request {
	req, err := http.NewRequest(http.MethodGet, listURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer token")
	req.Header.Set("Accept", "application/json")
	return req
}

// items is a built-in kind's JSON list of n pods, a page with more to
// come: its metadata comes before its items, so it is streamed.
func items(n int) string {
	var b strings.Builder
	b.WriteString(`{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"42","continue":"next"},"items":[`)
	writeItems(&b, n)
	b.WriteString("]}")
	return b.String()
}

// customItems is a custom resource's JSON list of n objects: its keys are
// sorted, so its metadata comes last and it is held.
func customItems(n int) string {
	var b strings.Builder
	b.WriteString(`{"apiVersion":"example.com/v1","items":[`)
	writeItems(&b, n)
	b.WriteString(`],"kind":"WidgetList","metadata":{"continue":"next","resourceVersion":"42"}}`)
	return b.String()
}

func writeItems(b *strings.Builder, n int) {
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(b, `{"metadata":{"name":"pod-%04d"}}`, i)
	}
}

// TestBodyBrokenMidReadIsRetried: a held body (one that cannot be resumed
// mid-way) broken mid-read is asked for again whole, with the same query.
func TestBodyBrokenMidReadIsRetried(t *testing.T) {
	body := customItems(200)
	tests := []struct {
		name          string
		err           error
		contentLength bool
	}{
		{"unexpected EOF with Content-Length", io.ErrUnexpectedEOF, true},
		{"unexpected EOF, chunked", io.ErrUnexpectedEOF, false},
		{"connection reset", &resetError{syscall.ECONNRESET}, false},
		{"HTTP/2 stream reset", errors.New("stream error: stream ID 7; INTERNAL_ERROR; received from peer"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t,
				answer{code: 200, body: body, cut: len(body) / 3, err: tt.err, contentLength: tt.contentLength},
				answer{code: 200, body: body, cut: len(body) / 2, err: tt.err, contentLength: tt.contentLength},
				answer{code: 200, body: body, cut: -1, contentLength: tt.contentLength})
			rt, clock := newList(s, listretry.TestConfig{})
			req := listRequest(t)
			resp, err := rt.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			if err != nil || string(got) != body {
				t.Fatalf("read %d bytes, %v; want the whole %d-byte body", len(got), err, len(body))
			}
			resp.Body.Close()
			asked := s.requests()
			if len(asked) != 3 {
				t.Fatalf("%d requests, want 3", len(asked))
			}
			for i, r := range asked {
				if r.URL.String() != listURL || r.Header.Get("Authorization") != "Bearer token" {
					t.Errorf("request %d: %s %v, want the identical query and headers", i, r.URL, r.Header)
				}
			}
			if sleeps := clock.Sleeps(); len(sleeps) != 2 || sleeps[0] != 800*time.Millisecond || sleeps[1] != 1600*time.Millisecond {
				t.Errorf("waits %v, want the backoff", sleeps)
			}
		})
	}
}

// resetError is a connection reset as the kernel reports it.
type resetError struct{ errno syscall.Errno }

func (e *resetError) Error() string { return "read tcp: " + e.errno.Error() }
func (e *resetError) Unwrap() error { return e.errno }

func TestBodyBrokenUntilWindowEnds(t *testing.T) {
	body := items(50)
	s := newServer(t, answer{code: 200, body: body, cut: 10, err: io.ErrUnexpectedEOF})
	rt, _ := newList(s, listretry.TestConfig{})
	resp, err := rt.RoundTrip(listRequest(t))
	var giveUp *establish.GiveUpError
	if resp != nil || !errors.As(err, &giveUp) || giveUp.Last != io.ErrUnexpectedEOF || giveUp.Attempts != 7 { //nolint:errorlint
		t.Fatalf("RoundTrip = %v, %v; want a give-up after the read error", resp, err)
	}
	if n := len(s.requests()); n != 7 {
		t.Errorf("%d requests, want 7 in the 30s window", n)
	}
	// The last body too was abandoned: all closed.
	s.mu.Lock()
	last := s.bodies[len(s.bodies)-1]
	s.mu.Unlock()
	if !last.isClosed() {
		t.Error("last broken body not closed")
	}
}

func TestBodyPastBufferStreamsUnprotected(t *testing.T) {
	body := customItems(100)
	const bufferSize = 1024
	t.Run("break past the bound reaches the caller", func(t *testing.T) {
		s := newServer(t, answer{code: 200, body: body, cut: 2 * bufferSize, err: io.ErrUnexpectedEOF},
			answer{code: 200, body: body, cut: -1})
		rt, _ := newList(s, listretry.TestConfig{BufferSize: bufferSize})
		resp, err := rt.RoundTrip(listRequest(t))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		if !errors.Is(err, io.ErrUnexpectedEOF) || string(got) != body[:2*bufferSize] {
			t.Errorf("read %d bytes, %v; want %d bytes then the break", len(got), err, 2*bufferSize)
		}
		resp.Body.Close()
		if n := len(s.requests()); n != 1 {
			t.Errorf("%d requests, want 1", n)
		}
		s.mu.Lock()
		closed := s.bodies[0].isClosed()
		s.mu.Unlock()
		if !closed {
			t.Error("Close did not reach the connection's body")
		}
	})
	t.Run("whole body past the bound", func(t *testing.T) {
		s := newServer(t, answer{code: 200, body: body, cut: -1, contentLength: true})
		rt, _ := newList(s, listretry.TestConfig{BufferSize: bufferSize})
		resp, err := rt.RoundTrip(listRequest(t))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		if err != nil || string(got) != body {
			t.Errorf("read %d bytes, %v; want the whole body", len(got), err)
		}
		resp.Body.Close()
	})
	t.Run("body of exactly the bound is protected", func(t *testing.T) {
		exact := body[:bufferSize]
		s := newServer(t, answer{code: 200, body: exact, cut: bufferSize / 2, err: io.ErrUnexpectedEOF},
			answer{code: 200, body: exact, cut: -1})
		rt, _ := newList(s, listretry.TestConfig{BufferSize: bufferSize})
		resp, err := rt.RoundTrip(listRequest(t))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		if err != nil || string(got) != exact || len(s.requests()) != 2 {
			t.Errorf("read %d bytes, %v after %d requests", len(got), err, len(s.requests()))
		}
		resp.Body.Close()
	})
}

func TestExpiredContinueDeliveredAtOnce(t *testing.T) {
	expired := `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.","reason":"Expired","code":410}`
	s := newServer(t, answer{code: http.StatusGone, body: expired, cut: -1, contentLength: true})
	rt, clock := newList(s, listretry.TestConfig{})
	resp, err := rt.RoundTrip(listRequest(t))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusGone || string(got) != expired {
		t.Errorf("got %d %q, want the 410 Status", resp.StatusCode, got)
	}
	if len(s.requests()) != 1 || len(clock.Sleeps()) != 0 {
		t.Errorf("%d requests, waits %v: want delivered at once", len(s.requests()), clock.Sleeps())
	}
}

func TestContextEndsMidBody(t *testing.T) {
	body := customItems(50)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := newServer(t, answer{code: 200, body: body, cut: 100, err: context.Canceled, onBreak: cancel})
	rt, clock := newList(s, listretry.TestConfig{})
	resp, err := rt.RoundTrip(listRequest(t).WithContext(ctx))
	if resp != nil || !errors.Is(err, context.Canceled) {
		t.Errorf("RoundTrip = %v, %v; want context.Canceled", resp, err)
	}
	if n := len(s.requests()); n != 1 || len(clock.Sleeps()) != 0 {
		t.Errorf("%d requests, waits %v after the context ended", n, clock.Sleeps())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.bodies[0].isClosed() {
		t.Error("body not closed")
	}
}

func TestBufferedBodyAfterClose(t *testing.T) {
	first, second := items(10), items(20)
	s := newServer(t, answer{code: 200, body: first, cut: -1, contentLength: true},
		answer{code: 200, body: second, cut: -1, contentLength: true})
	rt, _ := newList(s, listretry.TestConfig{})

	resp1, err := rt.RoundTrip(listRequest(t))
	if err != nil {
		t.Fatal(err)
	}
	head := make([]byte, 10)
	if _, err := io.ReadFull(resp1.Body, head); err != nil {
		t.Fatal(err)
	}
	if err := resp1.Body.Close(); err != nil {
		t.Fatal(err)
	}
	if err := resp1.Body.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	// The buffer may be reused now: the closed body must not read it.
	resp2, err := rt.RoundTrip(listRequest(t))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := resp1.Body.Read(head); n != 0 || err == nil {
		t.Errorf("read after Close = %d, %v; want an error", n, err)
	}
	got, err := io.ReadAll(resp2.Body)
	if err != nil || string(got) != second {
		t.Errorf("second body %q, %v", got, err)
	}
	resp2.Body.Close()
}

func TestDefaults(t *testing.T) {
	s := newServer(t, answer{code: 200, body: items(1), cut: -1})
	resp, err := listretry.NewForTest(s.mock, listretry.TestConfig{}).RoundTrip(listRequest(t))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(got) != items(1) {
		t.Errorf("body %q", got)
	}
	if listretry.DefaultBufferSize != 128<<20 {
		t.Errorf("DefaultBufferSize = %d, want 128 MiB", listretry.DefaultBufferSize)
	}
}

// TestBufferBound: at most BufferSize bytes are ever held, whatever the
// body; a declared Content-Length over the bound is not buffered at all.
// Before: an unknown-length body grew its bytes.Buffer to twice the bound,
// and a declared length over it was still buffered from zero.
func TestBufferBound(t *testing.T) {
	const bound = 100 << 10
	body := customItems(7000) // well past the bound
	if len(body) < 2*bound {
		t.Fatalf("test body of %d bytes is too small", len(body))
	}
	tests := []struct {
		name          string
		size          int
		contentLength bool
		wantHeld      int // -1: not buffered at all
	}{
		{"unknown length, under the bound", bound - 1, false, bound - 1},
		{"unknown length, exactly the bound", bound, false, bound},
		{"unknown length, one byte over", bound + 1, false, bound},
		{"unknown length, twice the bound", 2 * bound, false, bound},
		{"declared length under the bound: exact", bound - 1, true, bound - 1},
		{"declared length of the bound", bound, true, bound},
		{"declared length over the bound: not buffered", bound + 1, true, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := body[:tt.size]
			s := newServer(t, answer{code: 200, body: want, cut: -1, contentLength: tt.contentLength})
			rt, _ := newList(s, listretry.TestConfig{BufferSize: bound})
			resp, err := rt.RoundTrip(listRequest(t))
			if err != nil {
				t.Fatal(err)
			}
			held := listretry.Held(resp.Body)
			if tt.wantHeld >= 0 && (held < 0 || held > bound || held < tt.wantHeld) || tt.wantHeld < 0 && held != -1 {
				t.Errorf("holds %d bytes, want %d (bound %d)", held, tt.wantHeld, bound)
			}
			got, err := io.ReadAll(resp.Body)
			if err != nil || string(got) != want {
				t.Errorf("read %d bytes, %v; want the %d sent", len(got), err, len(want))
			}
			resp.Body.Close()
		})
	}
}

// TestAnyBodyReadErrorIsABreak: every read error after a 200 (an HTTP/2
// CANCEL or PROTOCOL_ERROR from a proxy, a TLS record error) is a broken
// body, asked for again; before, only allow-listed connection errors were.
func TestAnyBodyReadErrorIsABreak(t *testing.T) {
	for _, readErr := range []error{
		errors.New("stream error: stream ID 5; CANCEL; received from peer"),
		errors.New("stream error: stream ID 5; PROTOCOL_ERROR; received from peer"),
		errors.New("local error: tls: bad record MAC"),
	} {
		t.Run(readErr.Error(), func(t *testing.T) {
			body := customItems(50)
			s := newServer(t, answer{code: 200, body: body, cut: 10, err: readErr}, answer{code: 200, body: body, cut: -1})
			rt, _ := newList(s, listretry.TestConfig{})
			resp, err := rt.RoundTrip(listRequest(t))
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || string(got) != body || len(s.requests()) != 2 {
				t.Errorf("read %d bytes, %v after %d requests; want the body after one retry", len(got), err, len(s.requests()))
			}
		})
	}
}
