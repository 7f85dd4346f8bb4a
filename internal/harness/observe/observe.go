package observe

import (
	"net/http"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/kretry/kretry/transport"
)

// Events is everything a Recorder heard, by kind, each in the order heard.
type Events struct {
	Attempts    []transport.AttemptEvent
	Retries     []transport.RetryEvent
	GiveUps     []transport.GiveUpEvent
	Refusals    []transport.BudgetEvent
	ListResumes []transport.ListResumeEvent
	Initial     []transport.InitialStateEvent
}

// Recorder is a transport.Observer, ListResumeObserver and
// InitialStateObserver that records every event. Its zero value is ready.
type Recorder struct {
	// OnEvent, if not nil, runs after each event is recorded, outside the
	// Recorder's lock.
	OnEvent func()

	mu sync.Mutex
	ev Events
}

var (
	_ transport.Observer             = (*Recorder)(nil)
	_ transport.ListResumeObserver   = (*Recorder)(nil)
	_ transport.InitialStateObserver = (*Recorder)(nil)
)

// Events returns a copy of everything heard so far.
func (r *Recorder) Events() Events {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Events{
		Attempts:    slices.Clone(r.ev.Attempts),
		Retries:     slices.Clone(r.ev.Retries),
		GiveUps:     slices.Clone(r.ev.GiveUps),
		Refusals:    slices.Clone(r.ev.Refusals),
		ListResumes: slices.Clone(r.ev.ListResumes),
		Initial:     slices.Clone(r.ev.Initial),
	}
}

// record runs add on the events under the lock, then OnEvent.
func (r *Recorder) record(add func(ev *Events)) {
	r.mu.Lock()
	add(&r.ev)
	r.mu.Unlock()
	if r.OnEvent != nil {
		r.OnEvent()
	}
}

func (r *Recorder) ObserveAttempt(e transport.AttemptEvent) {
	r.record(func(ev *Events) { ev.Attempts = append(ev.Attempts, e) })
}

func (r *Recorder) ObserveRetry(e transport.RetryEvent) {
	r.record(func(ev *Events) { ev.Retries = append(ev.Retries, e) })
}

func (r *Recorder) ObserveGiveUp(e transport.GiveUpEvent) {
	r.record(func(ev *Events) { ev.GiveUps = append(ev.GiveUps, e) })
}

func (r *Recorder) ObserveBudgetRefusal(e transport.BudgetEvent) {
	r.record(func(ev *Events) { ev.Refusals = append(ev.Refusals, e) })
}

func (r *Recorder) ObserveListResume(e transport.ListResumeEvent) {
	r.record(func(ev *Events) { ev.ListResumes = append(ev.ListResumes, e) })
}

func (r *Recorder) ObserveInitialState(e transport.InitialStateEvent) {
	r.record(func(ev *Events) { ev.Initial = append(ev.Initial, e) })
}

// InFlight counts the attempts waiting for their answers' headers on the
// round trippers it wraps. Its zero value is ready.
type InFlight struct {
	// OnDone, if not nil, runs after each attempt has its answer's headers
	// or its error, once the count is down.
	OnDone func()

	n atomic.Int64
}

// Load is how many attempts are waiting for their answers now.
func (c *InFlight) Load() int64 { return c.n.Load() }

// Wrap returns next, counted by c. Wrap it below kretry: the wrapper lets
// kretry reach next to close its idle connections
// (k8s.io/apimachinery/pkg/util/net.CloseIdleConnectionsFor).
func (c *InFlight) Wrap(next http.RoundTripper) http.RoundTripper {
	return &counted{c: c, next: next}
}

type counted struct {
	c    *InFlight
	next http.RoundTripper
}

func (t *counted) RoundTrip(req *http.Request) (*http.Response, error) {
	t.c.n.Add(1)
	defer func() {
		t.c.n.Add(-1)
		if t.c.OnDone != nil {
			t.c.OnDone()
		}
	}()
	return t.next.RoundTrip(req)
}

func (t *counted) WrappedRoundTripper() http.RoundTripper { return t.next }
