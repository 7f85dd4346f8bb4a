package observe

import (
	"net/http"
	"testing"

	"github.com/kretry/kretry/transport"
)

func TestRecorderKeepsEachKindInOrder(t *testing.T) {
	var heard int
	r := &Recorder{OnEvent: func() { heard++ }}
	r.ObserveAttempt(transport.AttemptEvent{Code: 503})
	r.ObserveAttempt(transport.AttemptEvent{Code: 200})
	r.ObserveRetry(transport.RetryEvent{Reason: transport.ReasonServerError})
	r.ObserveGiveUp(transport.GiveUpEvent{Attempts: 2})
	r.ObserveBudgetRefusal(transport.BudgetEvent{})
	r.ObserveListResume(transport.ListResumeEvent{Outcome: transport.ListResumed})
	r.ObserveInitialState(transport.InitialStateEvent{Verb: transport.VerbList})
	ev := r.Events()
	if len(ev.Attempts) != 2 || ev.Attempts[0].Code != 503 || ev.Attempts[1].Code != 200 {
		t.Errorf("attempts %+v", ev.Attempts)
	}
	if len(ev.Retries) != 1 || len(ev.GiveUps) != 1 || len(ev.Refusals) != 1 || len(ev.ListResumes) != 1 || len(ev.Initial) != 1 {
		t.Errorf("events %+v", ev)
	}
	if heard != 7 {
		t.Errorf("OnEvent ran %d times, want 7", heard)
	}
	ev.Attempts[0].Code = 0
	if r.Events().Attempts[0].Code != 503 {
		t.Error("Events is not a copy")
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

func TestInFlightCountsUntilTheAnswer(t *testing.T) {
	var c InFlight
	var during, afterDone []int64
	c.OnDone = func() { afterDone = append(afterDone, c.Load()) }
	next := roundTripFunc(func(*http.Request) (*http.Response, error) {
		during = append(during, c.Load())
		return &http.Response{StatusCode: 200}, nil
	})
	rt := c.Wrap(next)
	req, _ := http.NewRequest("GET", "http://example.invalid/", nil)
	if _, err := rt.RoundTrip(req); err != nil {
		t.Fatal(err)
	}
	if len(during) != 1 || during[0] != 1 || len(afterDone) != 1 || afterDone[0] != 0 {
		t.Errorf("in flight during the round trip %v, when OnDone ran %v; want [1] and [0]", during, afterDone)
	}
	w, ok := rt.(interface{ WrappedRoundTripper() http.RoundTripper })
	if !ok || w.WrappedRoundTripper() == nil {
		t.Error("the wrapper does not let kretry reach next")
	}
}
