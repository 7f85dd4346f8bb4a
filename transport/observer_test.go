package transport_test

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kretry/kretry/transport"
)

// recorder is an Observer that writes each event as one line.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) add(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, fmt.Sprintf(format, args...))
}

func (r *recorder) ObserveAttempt(e transport.AttemptEvent) {
	r.add("attempt %s %s %d", e.Verb, e.Outcome, e.Code)
}

func (r *recorder) ObserveRetry(e transport.RetryEvent) {
	kind := "retry"
	if e.Resume {
		kind = "resume"
	}
	r.add("%s %s %s %d wait=%s", kind, e.Verb, e.Reason, e.Code, e.Wait)
}

func (r *recorder) ObserveGiveUp(e transport.GiveUpEvent) {
	r.add("giveup %s %s attempts=%d elapsed=%s", e.Verb, e.Reason, e.Attempts, e.Elapsed)
}

func (r *recorder) ObserveBudgetRefusal(e transport.BudgetEvent) {
	r.add("refused %s %s", e.Verb, e.Reason)
}

func (r *recorder) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

const watchPath = "/api/v1/namespaces/ns/pods?watch=true&resourceVersion=5&timeoutSeconds=5"

// watchEvent is a watch stream with one event at resourceVersion 6 that
// then ends early: a break with progress.
var watchEvent = respond(http.StatusOK, headers("Content-Type", "application/json"),
	`{"type":"ADDED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","namespace":"ns","resourceVersion":"6"}}}`+"\n")

// errorEvent500 is a watch stream whose first event is ERROR 500.
var errorEvent500 = respond(http.StatusOK, headers("Content-Type", "application/json"),
	`{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","code":500,"reason":"InternalError","message":"x"}}`+"\n")

var (
	unavailable503 = statusAnswer(503, metav1.StatusReasonServiceUnavailable, "x", nil)
	gone410        = statusAnswer(410, metav1.StatusReasonExpired, "too old resource version", nil)
)

func TestObserverSeesEveryEvent(t *testing.T) {
	tests := []struct {
		name   string
		cfg    transport.Config
		path   string
		script []step
		want   []string
	}{
		{"a LIST through 503, a reset and a 429", transport.Config{}, listPath,
			[]step{unavailable503, fail(connError(syscall.ECONNRESET)), inflight429, listOK},
			[]string{
				"attempt list 5xx 503", "retry list 5xx 503 wait=800ms",
				// no answer: the 1.6s step drawn from [step/2, 5·step/2), its lowest
				"attempt list connection 0", "retry list connection 0 wait=800ms",
				"attempt list 429 429", "retry list 429 429 wait=1s",
				"attempt list 2xx 200",
			}},
		{"a LIST past its window", transport.Config{InternalErrorWindow: 2 * time.Second}, listPath,
			[]step{unavailable503},
			[]string{
				"attempt list 5xx 503", "retry list 5xx 503 wait=800ms",
				"attempt list 5xx 503", "retry list 5xx 503 wait=1.2s",
				"attempt list 5xx 503", "giveup list 5xx attempts=3 elapsed=2s",
			}},
		{"a 404 is no give-up", transport.Config{}, listPath,
			[]step{statusAnswer(404, metav1.StatusReasonNotFound, "x", nil)},
			[]string{"attempt list 4xx 404"}},
		{"a GET with RetryGets", transport.Config{RetryGets: true}, "/api/v1/namespaces/ns/pods/a",
			[]step{unavailable503, listOK},
			[]string{"attempt get 5xx 503", "retry get 5xx 503 wait=800ms", "attempt get 2xx 200"}},
		{"a watch resumed, its reopening refused until its timeoutSeconds", transport.Config{}, watchPath,
			[]step{watchEvent, unavailable503},
			[]string{
				"attempt watch 2xx 200", "resume watch broken-body 0 wait=0s",
				"attempt watch 5xx 503", "resume watch 5xx 503 wait=800ms",
				"attempt watch 5xx 503", "resume watch 5xx 503 wait=1.6s",
				"attempt watch 5xx 503", "giveup watch deadline attempts=3 elapsed=2.4s",
			}},
		{"a watch resumed into ERROR 500 events until its timeoutSeconds", transport.Config{}, watchPath,
			[]step{watchEvent, errorEvent500},
			[]string{
				"attempt watch 2xx 200", "resume watch broken-body 0 wait=0s",
				"attempt watch 2xx 200", "resume watch error-event 500 wait=800ms",
				"attempt watch 2xx 200", "resume watch error-event 500 wait=1.6s",
				"attempt watch 2xx 200", "giveup watch deadline attempts=3 elapsed=2.4s",
			}},
		{"a watch resumed into a 410", transport.Config{}, watchPath,
			[]step{watchEvent, gone410},
			[]string{"attempt watch 2xx 200", "resume watch broken-body 0 wait=0s", "attempt watch 4xx 410"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			observed := &recorder{}
			tt.cfg.Observer = observed
			h := newHarness(t, tt.cfg, tt.script...)
			resp, err := h.get(tt.path)
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, resp)
			if got := observed.lines(); !slices.Equal(got, tt.want) {
				t.Errorf("observed\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(tt.want, "\n\t"))
			}
		})
	}
}

// TestRetryBudget runs a transport out of its budget on the virtual clock:
// a burst of failures beyond it is handed over at once, a 429 with
// Retry-After still waits, and a watch resume after a break is made.
func TestRetryBudget(t *testing.T) {
	// A floor of 2 retries per 10s; requests earn next to nothing.
	tiny := transport.RetryBudget{Ratio: 0.001, MinPerSecond: 0.2, Window: 10 * time.Second}
	observed := &recorder{}
	h := newHarness(t, transport.Config{RetryBudget: tiny, Observer: observed},
		unavailable503, unavailable503, unavailable503, // the first LIST: 2 retries, then refused
		unavailable503,      // the second: refused at once
		inflight429, listOK, // the third: paced by the server, waited for
		watchEvent, gone410, // a watch: its resume after the break is made
	)
	for i, want := range []int{http.StatusServiceUnavailable, http.StatusServiceUnavailable, http.StatusOK} {
		resp, err := h.get(listPath)
		if err != nil {
			t.Fatalf("LIST %d: %v", i, err)
		}
		readAll(t, resp)
		if resp.StatusCode != want || resp.Header.Get("Retry-After") != "" {
			t.Errorf("LIST %d: %d, Retry-After %q; want %d without one", i, resp.StatusCode, resp.Header.Get("Retry-After"), want)
		}
	}
	resp, err := h.get(watchPath)
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); !strings.Contains(body, `"code":410`) {
		t.Errorf("watch body %q: want the event, then the 410 as an ERROR event", body)
	}
	want := []string{
		"attempt list 5xx 503", "retry list 5xx 503 wait=800ms",
		"attempt list 5xx 503", "retry list 5xx 503 wait=1.6s",
		"attempt list 5xx 503", "refused list 5xx", "giveup list 5xx attempts=3 elapsed=2.4s",
		"attempt list 5xx 503", "refused list 5xx", "giveup list 5xx attempts=1 elapsed=0s",
		"attempt list 429 429", "retry list 429 429 wait=1s",
		"attempt list 2xx 200",
		"attempt watch 2xx 200", "resume watch broken-body 0 wait=0s", "attempt watch 4xx 410",
	}
	if got := observed.lines(); !slices.Equal(got, want) {
		t.Errorf("observed\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
	if h.calls() != 8 {
		t.Errorf("%d requests, want 8", h.calls())
	}
}

// TestRetryBudgetDisabled: without a budget the same burst is retried for
// the whole window.
func TestRetryBudgetDisabled(t *testing.T) {
	for _, tt := range []struct {
		name   string
		budget transport.RetryBudget
		calls  int
	}{
		{"a tiny budget", transport.RetryBudget{Ratio: 0.001, MinPerSecond: 0.2, Window: 10 * time.Second}, 3},
		{"disabled", transport.RetryBudget{Ratio: 0.001, MinPerSecond: 0.2, Window: 10 * time.Second, Disabled: true}, 7},
		{"the default", transport.RetryBudget{}, 7},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, transport.Config{RetryBudget: tt.budget, InternalErrorWindow: 30 * time.Second}, unavailable503)
			resp, err := h.get(listPath)
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, resp)
			if h.calls() != tt.calls {
				t.Errorf("%d requests, want %d", h.calls(), tt.calls)
			}
		})
	}
}

// TestObserverSeesStreamGiveUps covers the give-ups a resuming stream
// makes itself: too many invalid frames at one resourceVersion (the error
// goes to the caller), and an ERROR event's retry refused by the budget
// (a clean end).
func TestObserverSeesStreamGiveUps(t *testing.T) {
	garbage := respond(http.StatusOK, headers("Content-Type", "application/json"), `{"type":"ADDED","object":[}`+"\n")
	eventThenGarbage := respond(http.StatusOK, headers("Content-Type", "application/json"),
		`{"type":"ADDED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","namespace":"ns","resourceVersion":"6"}}}`+"\n"+`{"type":"ADDED","object":[}`+"\n")
	tests := []struct {
		name    string
		cfg     transport.Config
		script  []step
		readErr bool
		want    []string
	}{
		{"invalid frames past MaxInvalidFrames", transport.Config{MaxInvalidFrames: 2}, []step{eventThenGarbage, garbage}, true,
			[]string{
				"attempt watch 2xx 200", "resume watch invalid-frame 0 wait=0s",
				// a break: the 800ms step drawn from [step/2, 5·step/2), its lowest
				"attempt watch 2xx 200", "resume watch invalid-frame 0 wait=400ms",
				"attempt watch 2xx 200", "giveup watch invalid-frame attempts=2 elapsed=400ms",
			}},
		{"an ERROR event's retry refused by the budget",
			transport.Config{RetryBudget: transport.RetryBudget{Ratio: 0.001, MinPerSecond: 0.1, Window: 10 * time.Second}},
			[]step{watchEvent, errorEvent500}, false,
			[]string{
				"attempt watch 2xx 200", "resume watch broken-body 0 wait=0s",
				"attempt watch 2xx 200", "resume watch error-event 500 wait=800ms",
				"attempt watch 2xx 200", "refused watch error-event", "giveup watch error-event attempts=2 elapsed=800ms",
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			observed := &recorder{}
			tt.cfg.Observer = observed
			h := newHarness(t, tt.cfg, tt.script...)
			resp, err := h.get(watchPath)
			if err != nil {
				t.Fatal(err)
			}
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			if (err != nil) != tt.readErr {
				t.Errorf("reading the watch: %v; want an error: %v", err, tt.readErr)
			}
			if got := observed.lines(); !slices.Equal(got, tt.want) {
				t.Errorf("observed\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(tt.want, "\n\t"))
			}
		})
	}
}
