package policy_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kretry/kretry/internal/policy"
	"golang.org/x/net/http2"
)

// TestGone pins the hold of a 410 that is not retried: nothing after a
// plain cut, a draw from [0, step) once a run of failures grew the backoff,
// nothing once the run has ended, by progress or by a stream up for the
// window, or the backoff has been quiet for its reset time.
func TestGone(t *testing.T) {
	tests := []struct {
		name     string
		failures int // breaks without progress before the 410 (the first reopens at once)
		progress bool
		up       time.Duration // a reopened stream up this long before the 410; 0: none
		quiet    time.Duration // then this long without a failure
		jitter   float64
		deadline time.Duration // from the 410; 0: none
		want     time.Duration
	}{
		{"a cut, then 410: handed over at once", 1, false, 0, 0, 0.5, 0, 0},
		{"two breaks: the step reached is 1.6s", 2, false, 0, 0, 0.5, 0, 800 * time.Millisecond},
		{"four breaks: 6.4s, the lowest draw", 4, false, 0, 0, 0, 0, 0},
		{"four breaks: 6.4s, the highest draw", 4, false, 0, 0, 0.999, 0, 6393600 * time.Microsecond},
		// Fails before: the hold was drawn from the whole 12.8s step.
		{"five breaks: 12.8s, the highest draw capped at 8s", 5, false, 0, 0, 0.999, 0, 7992 * time.Millisecond},
		{"progress since: a new run, at once", 4, true, 0, 0, 0.5, 0, 0},
		{"a hold that would end past the deadline: at once", 4, false, 0, 0, 0.5, 4 * time.Second, 0},
		{"a hold that ends before the deadline", 4, false, 0, 0, 0.5, 5 * time.Second, 3200 * time.Millisecond},
		// Fails before: the run ended only at the next failure, so the 410
		// was held from the step the old run reached.
		{"a stream up for the window: its run has ended, at once", 4, false, 30 * time.Second, 0, 0.5, 0, 0},
		{"a stream up for less than the window: held", 4, false, 29 * time.Second, 0, 0.5, 0, 3200 * time.Millisecond},
		{"quiet for the backoff's reset time: at once", 4, false, 0, 2 * time.Minute, 0.5, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tracker, clock := newTracker(policy.Config{}, tt.jitter)
			for range tt.failures {
				clock.Advance(tracker.Break(nil).Wait)
			}
			if tt.progress {
				tracker.Progress()
			}
			if tt.up > 0 {
				tracker.Opened()
				clock.Advance(tt.up)
			}
			clock.Advance(tt.quiet)
			if tt.deadline > 0 {
				tracker.SetDeadline(clock.Now().Add(tt.deadline))
			}
			if got := tracker.Gone(policy.Expiry{}); got != (policy.GoneDecision{Hold: tt.want}) {
				t.Errorf("Gone() = %+v, want a hold of %v", got, tt.want)
			}
		})
	}
}

// TestGoneRetriesExpiredResumes pins when a 410 that answered a resume after
// a lost connection is retried on a new connection: on up to twenty new
// connections (six when a reopening failed through something that accepted
// it and the 410 came 3 s or more after the loss, none when every such
// failure was a refused connection) until 3 s after the first 410, while the watch cache names the same oldest
// resourceVersion, under the budget and the deadline; progress starts over.
// Every case begins with the stream's break (the lost connection).
func TestGoneRetriesExpiredResumes(t *testing.T) {
	fresh := policy.Expiry{Resume: true, Oldest: "500"}
	over := func(conn string) policy.Expiry { return policy.Expiry{Resume: true, Oldest: "500", Connection: conn} }
	from := func(server, lost any) policy.Expiry {
		return policy.Expiry{Resume: true, Oldest: "500", Server: server, Lost: lost}
	}
	tests := []struct {
		name    string
		budget  policy.BudgetConfig
		prepare func(*policy.Tracker)
		// gones are the 410s in order, each after the wait before it; want
		// is which are retried.
		gones []policy.Expiry
		waits []time.Duration
		want  []bool
		// progressAt, if positive, is the 410 before which an event
		// arrives and the stream breaks again.
		progressAt int
		cause      error // what broke the stream (nil: unknown)
		// reopens are failed reopenings after the break, before the first
		// 410, each at its time since the break; refused lists those whose
		// connection was refused (the others were accepted, then failed).
		reopens []time.Duration
		refused []bool
	}{
		// Fails before: six retries, and behind round robin one resume in
		// 64 met the fresh apiserver every time.
		{name: "the same fresh apiserver: twenty retries, then the 410",
			gones: repeatExpiry(fresh, 21), want: append(slices.Repeat([]bool{true}, 20), false)},
		{name: "another apiserver names another oldest: expired everywhere",
			gones: []policy.Expiry{fresh, {Resume: true, Oldest: "480"}}, want: []bool{true, false}},
		// Fails before: behind a balancer that had taken the stream's
		// apiserver out, twenty retries each met the one left again.
		{name: "another apiserver than the stream's: at once",
			gones: []policy.Expiry{from("b", "a")}, want: []bool{false}},
		{name: "the stream's apiserver, restarted: retried until another answers",
			gones: []policy.Expiry{from("a", "a"), from("a", "a"), from("b", "a")}, want: []bool{true, true, false}},
		{name: "one apiserver known, the other not: as if neither were",
			gones: []policy.Expiry{from("b", nil), from(nil, "a")}, want: []bool{true, true}},
		{name: "not the watch cache's message (etcd compacted): at once",
			gones: []policy.Expiry{{Resume: true}}, want: []bool{false}},
		{name: "not a resume after a lost connection: at once",
			gones: []policy.Expiry{{Oldest: "500"}}, want: []bool{false}},
		{name: "3s after the first: the bound",
			gones: []policy.Expiry{fresh, fresh, fresh}, waits: []time.Duration{0, 2 * time.Second, time.Second}, want: []bool{true, true, false}},
		// Fails before: every 410 counted, so a watch whose retries rode
		// the old connection every other time reached two new ones.
		{name: "a retry that rode the old connection is not counted: twenty new connections",
			gones: ridden(over, 20), want: append(slices.Repeat([]bool{true}, 40), false)},
		// Fails before: a resume refused for 10 s (one apiserver restarted,
		// or all of them) was retried three more times at its 410.
		{name: "reopens refused, the 410 3s after the loss: at once",
			reopens: []time.Duration{0, 1500 * time.Millisecond}, refused: []bool{true, true},
			gones: []policy.Expiry{fresh}, waits: []time.Duration{1500 * time.Millisecond}, want: []bool{false}},
		// Fails before (handed over at once): behind HAProxy at a cloud
		// balancer's pace, the first resume went to the stopped apiserver
		// and failed after 3 s, the next reached the restarted one.
		{name: "a reopen failed through a balancer, the 410 3s after the loss: six retries, then the 410",
			reopens: []time.Duration{3 * time.Second}, refused: []bool{false},
			gones: repeatExpiry(fresh, 7), waits: []time.Duration{1900 * time.Millisecond}, want: append(slices.Repeat([]bool{true}, 6), false)},
		{name: "refused, then failed through a balancer: six retries",
			reopens: []time.Duration{0, 2 * time.Second}, refused: []bool{true, false},
			gones: repeatExpiry(fresh, 7), waits: []time.Duration{1500 * time.Millisecond}, want: append(slices.Repeat([]bool{true}, 6), false)},
		// Fails before: the GOAWAY's spread counted as time cut off, so a
		// resume that met the stopped apiserver after it searched at most
		// six new connections.
		{name: "after a GOAWAY, 3s from the end of the spread: the full search",
			cause:   http2.GoAwayError{ErrCode: http2.ErrCodeNo},
			reopens: []time.Duration{2 * time.Second}, refused: []bool{false},
			gones: repeatExpiry(fresh, 7), waits: []time.Duration{1900 * time.Millisecond}, want: slices.Repeat([]bool{true}, 7)},
		{name: "after a GOAWAY, 3s from the end of the spread: cut off",
			cause:   http2.GoAwayError{ErrCode: http2.ErrCodeNo},
			reopens: []time.Duration{2 * time.Second}, refused: []bool{false},
			gones: repeatExpiry(fresh, 7), waits: []time.Duration{2600 * time.Millisecond}, want: append(slices.Repeat([]bool{true}, 6), false)},
		{name: "a cut-off search ends at another oldest too",
			reopens: []time.Duration{3 * time.Second}, refused: []bool{false},
			gones: []policy.Expiry{fresh, {Resume: true, Oldest: "480"}}, waits: []time.Duration{100 * time.Millisecond}, want: []bool{true, false}},
		{name: "reopens failed, the 410 within 3s of the loss: retried",
			reopens: []time.Duration{0, 1500 * time.Millisecond}, refused: []bool{true, true},
			gones: repeatExpiry(fresh, 8), waits: []time.Duration{1400 * time.Millisecond}, want: slices.Repeat([]bool{true}, 8)},
		// Fails before: behind HAProxy at a cloud balancer's pace on a
		// loaded machine, the first resume was answered 3.1 s after the
		// loss, by the restarted apiserver while the other held the point.
		{name: "no reopen failed, the answer 3.1s after the loss: retried",
			gones: []policy.Expiry{fresh}, waits: []time.Duration{3100 * time.Millisecond}, want: []bool{true}},
		{name: "progress clears the reopens of the break before",
			reopens: []time.Duration{0, 4 * time.Second}, refused: []bool{true, true},
			gones: []policy.Expiry{fresh, fresh}, waits: []time.Duration{0, 0}, progressAt: 1, want: []bool{false, true}},
		{name: "progress starts the count over",
			gones: repeatExpiry(fresh, 22), progressAt: 21, want: append(append(slices.Repeat([]bool{true}, 20), false), true)},
		{name: "the budget refuses: at once",
			budget: policy.BudgetConfig{MinPerSecond: 0.01},
			gones:  []policy.Expiry{fresh}, want: []bool{false}},
		{name: "past the caller's deadline: at once",
			prepare: func(tr *policy.Tracker) { tr.SetDeadline(epoch.Add(500 * time.Millisecond)) },
			gones:   []policy.Expiry{fresh}, want: []bool{false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tracker, clock := newTracker(policy.Config{Budget: tt.budget}, 0.5)
			if tt.prepare != nil {
				tt.prepare(tracker)
			}
			if tt.cause != nil {
				tracker.Progress()
			}
			tracker.Break(tt.cause)
			lost := clock.Now()
			for i, at := range tt.reopens {
				clock.Advance(lost.Add(at).Sub(clock.Now()))
				tracker.Decide(policy.Outcome{Class: policy.InternalError, NoAnswer: true, Refused: tt.refused[i]})
			}
			for i, gone := range tt.gones {
				if i < len(tt.waits) {
					clock.Advance(tt.waits[i])
				}
				if tt.progressAt > 0 && i == tt.progressAt {
					tracker.Progress()
					tracker.Break(nil)
				}
				if got := tracker.Gone(gone).Retry; got != tt.want[i] {
					t.Errorf("410 #%d: retried %v, want %v", i, got, tt.want[i])
				}
			}
		})
	}
}

// ridden is n new connections' 410s, each retry riding the one before it
// once, and the first 410 of the connection after them.
func ridden(over func(string) policy.Expiry, n int) []policy.Expiry {
	var gones []policy.Expiry
	for i := 1; i <= n; i++ {
		c := fmt.Sprintf("c%d", i)
		gones = append(gones, over(c), over(c))
	}
	return append(gones, over(fmt.Sprintf("c%d", n+1)))
}

// TestGoneSearchUntil: a retried 410's decision carries the end of the
// search, 3 s after its first 410, the same for every retry of the run, and
// a new run (after progress) has its own.
func TestGoneSearchUntil(t *testing.T) {
	fresh := policy.Expiry{Resume: true, Oldest: "500"}
	tracker, clock := newTracker(policy.Config{}, 0.5)
	tracker.Break(nil)
	steps := []struct {
		wait     time.Duration
		progress bool
		want     time.Time
	}{
		{0, false, epoch.Add(3 * time.Second)},
		{1400 * time.Millisecond, false, epoch.Add(3 * time.Second)},
		{1400 * time.Millisecond, false, epoch.Add(3 * time.Second)},
		{100 * time.Millisecond, true, epoch.Add(5900 * time.Millisecond)},
	}
	for i, step := range steps {
		clock.Advance(step.wait)
		if step.progress {
			tracker.Progress()
			tracker.Break(nil)
		}
		d := tracker.Gone(fresh)
		if !d.Retry || !d.Until.Equal(step.want) {
			t.Errorf("410 #%d: %+v, want a retry until %v", i, d, step.want)
		}
	}
	clock.Advance(3 * time.Second)
	if d := tracker.Gone(fresh); d.Retry || !d.Until.IsZero() {
		t.Errorf("410 past the bound: %+v, want no retry and no Until", d)
	}
}

func repeatExpiry(e policy.Expiry, n int) []policy.Expiry {
	return slices.Repeat([]policy.Expiry{e}, n)
}

func TestOldestInCache(t *testing.T) {
	for message, want := range map[string]string{
		"too old resource version: 120 (500)":                    "500",
		"too old resource version: 1 (2)":                        "2",
		"The resourceVersion for the provided watch is too old.": "",
		"too old resource version: 120":                          "",
		"":                                                       "",
	} {
		if got := policy.OldestInCache(message); got != want {
			t.Errorf("OldestInCache(%q) = %q, want %q", message, got, want)
		}
	}
}
