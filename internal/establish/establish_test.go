package establish

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kretry/kretry/internal/harness/fakeclock"
	"github.com/kretry/kretry/internal/policy"
)

// scripted answers the n-th attempt with steps[n], repeating the last.
type scripted struct {
	mu    sync.Mutex
	steps []func(*http.Request) (*http.Response, error)
	reqs  []*http.Request
}

func (s *scripted) RoundTrip(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	step := s.steps[min(len(s.reqs), len(s.steps)-1)]
	s.reqs = append(s.reqs, req)
	s.mu.Unlock()
	return step(req)
}

type closeCounter struct {
	io.Reader
	closed *int
}

func (c closeCounter) Close() error { *c.closed++; return nil }

func answer(code int, header http.Header, body string, closed *int) func(*http.Request) (*http.Response, error) {
	return func(req *http.Request) (*http.Response, error) {
		if header == nil {
			header = http.Header{}
		}
		return &http.Response{StatusCode: code, Header: header.Clone(), Request: req,
			Body: closeCounter{Reader: strings.NewReader(body), closed: closed}}, nil
	}
}

func newClient(next http.RoundTripper, window time.Duration) (*Client, *fakeclock.Clock) {
	clock := fakeclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p := policy.New(policy.Config{Clock: clock, Rand: func() float64 { return 0 }, InternalErrorWindow: window})
	return &Client{Next: next, Policy: p}, clock
}

func TestCallerRequestUntouched(t *testing.T) {
	var closed int
	next := &scripted{steps: []func(*http.Request) (*http.Response, error){
		answer(503, nil, "", &closed), answer(200, nil, "ok", &closed),
	}}
	client, _ := newClient(next, 0)
	body := io.NopCloser(strings.NewReader("unusual GET body"))
	req, _ := http.NewRequest(http.MethodGet, "http://k8s.test/api/v1/pods", body)
	req.RequestURI = "/api/v1/pods" // as a server-side request would carry
	resp, _, err := client.Do(req, client.Policy.NewTracker(), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if req.Body != body || req.RequestURI != "/api/v1/pods" {
		t.Errorf("caller's request modified: Body %v, RequestURI %q", req.Body, req.RequestURI)
	}
	for i, r := range next.reqs {
		if r == req {
			t.Errorf("attempt %d sent the caller's own *http.Request", i)
		}
	}
	if len(next.reqs) != 2 || closed != 2 {
		t.Errorf("%d attempts, %d bodies closed", len(next.reqs), closed)
	}
}

func TestHandleErrorIsAnOutcome(t *testing.T) {
	tests := []struct {
		name      string
		handleErr error
		wantCalls int
		wantErr   error
	}{
		{"broken body retried", io.ErrUnexpectedEOF, 2, nil},
		// Any read error after a 200 means the body is incomplete: an
		// HTTP/2 CANCEL or PROTOCOL_ERROR from a proxy, a TLS record error.
		{"h2 stream error retried", errors.New("stream error: stream ID 7; PROTOCOL_ERROR; received from peer"), 2, nil},
		{"TLS record error retried", errors.New("local error: tls: bad record MAC"), 2, nil},
		{"the caller's context delivered", fmt.Errorf("read: %w", context.Canceled), 1, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var closed int
			next := &scripted{steps: []func(*http.Request) (*http.Response, error){answer(200, nil, "ok", &closed)}}
			client, _ := newClient(next, 0)
			req, _ := http.NewRequest(http.MethodGet, "http://k8s.test/api/v1/pods", nil)
			calls := 0
			handle := func(*http.Response) error {
				calls++
				if calls == 1 {
					return tt.handleErr
				}
				return nil
			}
			resp, _, err := client.Do(req, client.Policy.NewTracker(), handle)
			if len(next.reqs) != tt.wantCalls {
				t.Errorf("%d attempts, want %d", len(next.reqs), tt.wantCalls)
			}
			if tt.wantErr != nil {
				if resp != nil || !errors.Is(err, tt.wantErr) {
					t.Errorf("Do = %v, %v; want %v", resp, err, tt.wantErr)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
			}
			if closed != len(next.reqs) {
				t.Errorf("%d of %d bodies closed", closed, len(next.reqs))
			}
		})
	}
}

func TestTrackerSpansCalls(t *testing.T) {
	// A watch reopened again and again keeps one tracker: the window runs
	// across Do calls until progress.
	var closed int
	next := &scripted{steps: []func(*http.Request) (*http.Response, error){answer(500, nil, "", &closed)}}
	client, clock := newClient(next, 3*time.Second)
	tracker := client.Policy.NewTracker()
	req, _ := http.NewRequest(http.MethodGet, "http://k8s.test/api/v1/pods?watch=1", nil)
	resp, _, err := client.Do(req, tracker, nil)
	if err != nil || resp.StatusCode != 500 {
		t.Fatalf("Do = %v, %v", resp, err)
	}
	resp.Body.Close()
	first := len(next.reqs) // 0.8 + 1.6 + 0.6: 4 attempts
	resp, _, err = client.Do(req, tracker, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if first != 4 || len(next.reqs) != 5 {
		t.Errorf("attempts %d then %d, want 4 then 1 (window spent)", first, len(next.reqs)-first)
	}
	tracker.Progress()
	resp, _, _ = client.Do(req, tracker, nil)
	resp.Body.Close()
	if len(next.reqs) <= 5 {
		t.Error("no retry after progress")
	}
	if clock.Now().IsZero() || closed != len(next.reqs) {
		t.Errorf("%d of %d bodies closed", closed, len(next.reqs))
	}
}

func TestProtobufStatusRetryAfter(t *testing.T) {
	st := &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Code: 429,
		Reason: metav1.StatusReasonTooManyRequests, Details: &metav1.StatusDetails{RetryAfterSeconds: 4}}
	raw, _ := st.Marshal()
	unknown := runtime.Unknown{TypeMeta: runtime.TypeMeta{Kind: "Status", APIVersion: "v1"}, Raw: raw}
	encoded, _ := unknown.Marshal()
	body := "k8s\x00" + string(encoded)
	var closed int
	header := http.Header{"Content-Type": {"application/vnd.kubernetes.protobuf"}}
	next := &scripted{steps: []func(*http.Request) (*http.Response, error){answer(429, header, body, &closed), answer(200, nil, "ok", &closed)}}
	client, clock := newClient(next, 0)
	req, _ := http.NewRequest(http.MethodGet, "http://k8s.test/api/v1/pods", nil)
	resp, _, err := client.Do(req, client.Policy.NewTracker(), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if sleeps := clock.Sleeps(); len(sleeps) != 1 || sleeps[0] != 4*time.Second {
		t.Errorf("waits %v, want 4s from the protobuf Status", sleeps)
	}
}

// failingBody serves data and then fails.
type failingBody struct {
	data *strings.Reader
	err  error
}

func (b *failingBody) Read(p []byte) (int, error) {
	if n, _ := b.data.Read(p); n > 0 {
		return n, nil
	}
	return 0, b.err
}

func (b *failingBody) Close() error { return nil }

func TestStatusPeekReplaysBytesAndError(t *testing.T) {
	broken := errors.New("connection reset mid-Status")
	resp := &http.Response{StatusCode: 503, Header: http.Header{"Content-Type": {"application/json"}},
		Body: &failingBody{data: strings.NewReader(`{"kind":"Sta`), err: broken}}
	if _, ok := statusRetryAfter(resp); ok {
		t.Fatal("a truncated Status named a wait")
	}
	got, err := io.ReadAll(resp.Body)
	if string(got) != `{"kind":"Sta` || !errors.Is(err, broken) {
		t.Errorf("replayed %q, %v; want the peeked bytes then the error", got, err)
	}
	whole := &http.Response{StatusCode: 503, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(`{"kind":"Status","code":503,"details":{"retryAfterSeconds":2}}`))}
	if wait, ok := statusRetryAfter(whole); !ok || wait != 2*time.Second {
		t.Errorf("statusRetryAfter = %v, %v", wait, ok)
	}
	if got, _ := io.ReadAll(whole.Body); !strings.Contains(string(got), "retryAfterSeconds") {
		t.Errorf("body after the peek: %q", got)
	}
}

// TestHandleRunsBeforeTheDecision: the handler readies each answer the
// policy would deliver before the policy decides on it, once per attempt,
// and an answer the policy retries or gives up on (a 503) never reaches it.
// Each attempt is reported once, after its handler.
func TestHandleRunsBeforeTheDecision(t *testing.T) {
	var closed int
	next := &scripted{steps: []func(*http.Request) (*http.Response, error){
		answer(503, nil, "", &closed), answer(200, nil, "torn", &closed), answer(200, nil, "ok", &closed), answer(503, nil, "", &closed),
	}}
	client, clock := newClient(next, time.Second)
	var events []string
	client.Report = attempts(func(a Attempt) {
		events = append(events, fmt.Sprintf("attempt %d: %d", a.Number, a.Code))
	})
	handle := func(resp *http.Response) error {
		events = append(events, fmt.Sprintf("handle %d", resp.StatusCode))
		if len(next.reqs) == 2 {
			return io.ErrUnexpectedEOF
		}
		return nil
	}
	req, _ := http.NewRequest(http.MethodGet, "http://k8s.test/api/v1/pods", nil)
	tracker := client.Policy.NewTracker()
	resp, _, err := client.Do(req, tracker, handle)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// A 503 after the window: given up on, handed over without the handler.
	clock.Advance(time.Hour)
	resp, _, err = client.Do(req, tracker, handle)
	if err != nil || resp.StatusCode != 503 {
		t.Fatalf("Do = %v, %v; want the 503", resp, err)
	}
	resp.Body.Close()
	want := []string{"attempt 1: 503", "handle 200", "attempt 2: 0", "handle 200", "attempt 3: 200"}
	if got := strings.Join(events[:min(len(events), len(want))], ", "); got != strings.Join(want, ", ") {
		t.Errorf("events %v, want %v then the 503's attempts alone", events, want)
	}
	for _, e := range events[len(want):] {
		if strings.HasPrefix(e, "handle") {
			t.Errorf("the handler ran on an answer the policy did not deliver: %v", events)
		}
	}
}

// attempts is a Reporter that hears attempts only.
type attempts func(Attempt)

func (f attempts) Attempt(_ context.Context, a Attempt) { f(a) }
func (attempts) Retry(context.Context, Retry)           {}
func (attempts) GiveUp(context.Context, GiveUp)         {}
func (attempts) ListResume(context.Context, ListResume) {}
