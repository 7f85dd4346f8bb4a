package policy_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/kretry/kretry/internal/policy"
)

// gone410 is a 410 with the watch cache's message naming oldest as S, that
// answered the resume of a stream (or came before any event of the
// reopened one).
func gone410(oldest string) policy.Failure {
	return policy.Failure{Kind: policy.Gone, Resume: true, Oldest: oldest}
}

// TestGoneHold pins the hold of a 410 that is not searched for: nothing
// after a plain cut, a draw from [0, step) once a run of failures grew the
// backoff, nothing once the run has ended, by progress or by a stream up for
// the window, or the backoff has been quiet for its reset time.
func TestGoneHold(t *testing.T) {
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
				clock.Advance(tracker.Decide(broke(nil)).Wait)
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
			want := policy.Decision{Action: policy.Hold, Wait: tt.want}
			if tt.want == 0 {
				want = policy.Decision{Action: policy.HandOver}
			}
			if got := tracker.Decide(policy.Failure{Kind: policy.Gone}); got != want {
				t.Errorf("Decide(410) = %v, want %v", got, want)
			}
		})
	}
}

// TestGoneSearch pins when a 410 that answered a resume after a lost
// connection is retried on a new connection: on up to twenty new
// connections (six when a reopening failed through something that accepted
// it and the 410 came 3 s or more after the reopenings began, none when
// every such failure was a refused connection) until 3 s after the first
// 410, while a new connection may still reach an apiserver the search has
// not heard from (until five 410s in a row came from apiservers it had
// heard from already, the stream's own counting once another answered), under the
// budget and the deadline; progress starts over. Apiservers are told apart
// by their serving certificates, or, when unknown, by the oldest
// resourceVersion their watch caches name. Every case begins with the
// stream's break (the lost connection).
func TestGoneSearch(t *testing.T) {
	fresh := gone410("500")
	over := func(conn string) policy.Failure { f := fresh; f.Connection = conn; return f }
	from := func(server any) policy.Failure { f := fresh; f.Server = server; return f }
	fromS := func(server any, oldest string) policy.Failure { f := gone410(oldest); f.Server = server; return f }
	tests := []struct {
		name   string
		budget policy.BudgetConfig
		// deadline, if positive, is the caller's, from the break.
		deadline time.Duration
		// lost is the apiserver whose stream broke; cause what broke it.
		lost  any
		cause error
		// reopens are failed reopenings after the break, before the first
		// 410, each at its time since the break; refused lists those whose
		// connection was refused (the others were accepted, then failed).
		reopens []time.Duration
		refused []bool
		// gones are the 410s in order, each after the wait before it; want
		// is which are retried.
		gones []policy.Failure
		waits []time.Duration
		want  []bool
		// progressAt, if positive, is the 410 before which an event
		// arrives and the stream breaks again.
		progressAt int
	}{
		// Fails before: six retries, and behind round robin one resume in
		// 64 met the fresh apiserver every time.
		{name: "the same fresh apiserver: twenty retries, then the 410",
			gones: repeatFailure(fresh, 21), want: append(slices.Repeat([]bool{true}, 20), false)},
		{name: "another apiserver names another oldest: heard from, then five more of its 410s",
			gones: append([]policy.Failure{fresh}, repeatFailure(gone410("480"), 7)...), want: append(slices.Repeat([]bool{true}, 6), false, false)},
		// Fails before (at once): behind three apiservers, the one
		// restarted before the stream's lacks the point, the third holds
		// it.
		{name: "another apiserver than the stream's lacks it: the search goes on",
			lost: "a", gones: []policy.Failure{from("b"), from("b"), from("c")}, want: []bool{true, true, true}},
		// Before, twenty retries each met the one left again behind a
		// balancer that had taken the stream's apiserver out; then none.
		{name: "another apiserver than the stream's, again and again: five more of its 410s",
			lost: "a", gones: repeatFailure(from("b"), 7), want: append(slices.Repeat([]bool{true}, 5), false, false)},
		{name: "every apiserver first heard from starts the count over",
			lost: "a", gones: append(repeatFailure(from("b"), 5), repeatFailure(from("c"), 6)...),
			want: append(slices.Repeat([]bool{true}, 10), false)},
		// Fails before (twenty new connections): every apiserver
		// restarted after etcd compacted past the point, the stream's
		// own and the other took turns and only the other's counted.
		{name: "the stream's own apiserver's 410s count once another answered",
			lost: "a", gones: []policy.Failure{from("b"), from("a"), from("b"), from("a"), from("b"), from("a"), from("b")},
			want: []bool{true, true, true, true, true, false, false}},
		{name: "the stream's apiserver answers after another: still its own, and counted",
			lost: "a", gones: append([]policy.Failure{from("b"), from("a"), from("a")}, repeatFailure(from("b"), 4)...),
			want: append(slices.Repeat([]bool{true}, 5), false, false)},
		// One certificate for every apiserver (or a balancer that ends
		// TLS): the oldest resourceVersion tells them apart.
		{name: "one certificate, another S: another apiserver heard from",
			lost: "x", gones: append([]policy.Failure{fromS("x", "500")}, repeatFailure(fromS("x", "480"), 7)...),
			want: append(slices.Repeat([]bool{true}, 6), false, false)},
		{name: "the stream's apiserver, restarted: retried until another answers, then counted",
			lost: "a", gones: append([]policy.Failure{from("a"), from("a"), from("b")}, repeatFailure(from("a"), 6)...),
			want: append(slices.Repeat([]bool{true}, 7), false, false)},
		{name: "a 410 that rode the old connection is not one more in a row",
			lost: "a", gones: riddenFrom("b", 5), want: append(slices.Repeat([]bool{true}, 10), false)},
		{name: "the answering apiserver known, the stream's not: as if neither were",
			gones: []policy.Failure{from("b")}, want: []bool{true}},
		{name: "the stream's apiserver known, the answering one not: as if neither were",
			lost: "a", gones: []policy.Failure{from(nil)}, want: []bool{true}},
		{name: "not the watch cache's message (etcd compacted): at once",
			gones: []policy.Failure{gone410("")}, want: []bool{false}},
		{name: "not a resume: at once",
			gones: []policy.Failure{{Kind: policy.Gone, Oldest: "500"}}, want: []bool{false}},
		{name: "3s after the first: the bound",
			gones: []policy.Failure{fresh, fresh, fresh}, waits: []time.Duration{0, 2 * time.Second, time.Second}, want: []bool{true, true, false}},
		// Fails before: every 410 counted, so a watch whose retries rode
		// the old connection every other time reached two new ones.
		{name: "a retry that rode the old connection is not counted: twenty new connections",
			gones: ridden(over, 20), want: append(slices.Repeat([]bool{true}, 40), false)},
		// Fails before: a resume refused for 10 s (one apiserver restarted,
		// or all of them) was retried three more times at its 410.
		{name: "reopens refused, the 410 3s after the loss: at once",
			reopens: []time.Duration{0, 1500 * time.Millisecond}, refused: []bool{true, true},
			gones: []policy.Failure{fresh}, waits: []time.Duration{1500 * time.Millisecond}, want: []bool{false}},
		// Fails before (handed over at once): behind HAProxy at a cloud
		// balancer's pace, the first resume went to the stopped apiserver
		// and failed after 3 s, the next reached the restarted one.
		{name: "a reopen failed through a balancer, the 410 3s after the loss: six retries, then the 410",
			reopens: []time.Duration{3 * time.Second}, refused: []bool{false},
			gones: repeatFailure(fresh, 7), waits: []time.Duration{1900 * time.Millisecond}, want: append(slices.Repeat([]bool{true}, 6), false)},
		{name: "refused, then failed through a balancer: six retries",
			reopens: []time.Duration{0, 2 * time.Second}, refused: []bool{true, false},
			gones: repeatFailure(fresh, 7), waits: []time.Duration{1500 * time.Millisecond}, want: append(slices.Repeat([]bool{true}, 6), false)},
		// Fails before: the GOAWAY's spread counted as time cut off, so a
		// resume that met the stopped apiserver after it searched at most
		// six new connections.
		{name: "after a GOAWAY, 3s from the end of the spread: the full search",
			cause:   http2.GoAwayError{ErrCode: http2.ErrCodeNo},
			reopens: []time.Duration{2 * time.Second}, refused: []bool{false},
			gones: repeatFailure(fresh, 7), waits: []time.Duration{1900 * time.Millisecond}, want: slices.Repeat([]bool{true}, 7)},
		{name: "after a GOAWAY, 3s from the end of the spread: cut off",
			cause:   http2.GoAwayError{ErrCode: http2.ErrCodeNo},
			reopens: []time.Duration{2 * time.Second}, refused: []bool{false},
			gones: repeatFailure(fresh, 7), waits: []time.Duration{2600 * time.Millisecond}, want: append(slices.Repeat([]bool{true}, 6), false)},
		{name: "a cut-off search: six new connections, whoever answers",
			reopens: []time.Duration{3 * time.Second}, refused: []bool{false},
			gones: []policy.Failure{fresh, gone410("480"), gone410("490"), fresh, gone410("480"), gone410("490"), gone410("490")},
			waits: []time.Duration{100 * time.Millisecond}, want: append(slices.Repeat([]bool{true}, 6), false)},
		{name: "reopens failed, the 410 within 3s of the loss: retried",
			reopens: []time.Duration{0, 1500 * time.Millisecond}, refused: []bool{true, true},
			gones: repeatFailure(fresh, 8), waits: []time.Duration{1400 * time.Millisecond}, want: slices.Repeat([]bool{true}, 8)},
		// Fails before: behind HAProxy at a cloud balancer's pace on a
		// loaded machine, the first resume was answered 3.1 s after the
		// loss, by the restarted apiserver while the other held the point.
		{name: "no reopen failed, the answer 3.1s after the loss: retried",
			gones: []policy.Failure{fresh}, waits: []time.Duration{3100 * time.Millisecond}, want: []bool{true}},
		{name: "progress clears the reopens of the break before",
			reopens: []time.Duration{0, 4 * time.Second}, refused: []bool{true, true},
			gones: []policy.Failure{fresh, fresh}, waits: []time.Duration{0, 0}, progressAt: 1, want: []bool{false, true}},
		{name: "progress starts the count over",
			gones: repeatFailure(fresh, 22), progressAt: 21, want: append(append(slices.Repeat([]bool{true}, 20), false), true)},
		// An ERROR event 5xx since the break: the server answers the watch,
		// no connection is lost.
		{name: "an ERROR 503 since the break: at once",
			gones: []policy.Failure{{Kind: policy.ServerError, InStream: true}, fresh}, want: []bool{true, false}},
		{name: "the budget refuses: at once",
			budget: policy.BudgetConfig{MinPerSecond: 0.01},
			gones:  []policy.Failure{fresh}, want: []bool{false}},
		{name: "past the caller's deadline: at once",
			deadline: 500 * time.Millisecond,
			gones:    []policy.Failure{fresh}, want: []bool{false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tracker, clock := newTracker(policy.Config{Budget: tt.budget}, 0.5)
			if tt.deadline > 0 {
				tracker.SetDeadline(clock.Now().Add(tt.deadline))
			}
			breakOf := func() policy.Failure { f := broke(tt.cause); f.Server = tt.lost; return f }
			if tt.cause != nil {
				tracker.Progress()
			}
			lost := clock.Now()
			if d := tracker.Decide(breakOf()); tt.deadline == 0 && d.Action != policy.Retry {
				t.Fatalf("the break: %v, want a resume", d)
			}
			for i, at := range tt.reopens {
				clock.Advance(lost.Add(at).Sub(clock.Now()))
				tracker.Decide(policy.Failure{Kind: policy.NoAnswer, Refused: tt.refused[i]})
			}
			for i, f := range tt.gones {
				if i < len(tt.waits) {
					clock.Advance(tt.waits[i])
				}
				if tt.progressAt > 0 && i == tt.progressAt {
					tracker.Progress()
					tracker.Decide(breakOf())
				}
				d := tracker.Decide(f)
				if f.Kind != policy.Gone {
					continue
				}
				if got := d.Action == policy.Retry && d.NewConnection; got != tt.want[i] {
					t.Errorf("410 #%d: %v, want a retry on a new connection: %v", i, d, tt.want[i])
				}
			}
		})
	}
}

// ridden is n new connections' 410s, each retry riding the one before it
// once, and the first 410 of the connection after them.
func ridden(over func(string) policy.Failure, n int) []policy.Failure {
	var gones []policy.Failure
	for i := 1; i <= n; i++ {
		c := fmt.Sprintf("c%d", i)
		gones = append(gones, over(c), over(c))
	}
	return append(gones, over(fmt.Sprintf("c%d", n+1)))
}

// riddenFrom is n new connections' 410s from the apiserver server, each
// retry riding the one before it once, and the first 410 of the connection
// after them.
func riddenFrom(server string, n int) []policy.Failure {
	over := func(c string) policy.Failure {
		f := gone410("500")
		f.Server, f.Connection = server, c
		return f
	}
	return ridden(over, n)
}

func repeatFailure(f policy.Failure, n int) []policy.Failure {
	return slices.Repeat([]policy.Failure{f}, n)
}

// TestGoneSearchUntil: a retried 410's decision carries the end of the
// search, 3 s after its first 410, the same for every retry of the run, and
// a new run (after progress) has its own; a retry of a reopening that would
// start past it is not made (the search's first 410 is then the caller's).
func TestGoneSearchUntil(t *testing.T) {
	fresh := gone410("500")
	tracker, clock := newTracker(policy.Config{}, 0.5)
	tracker.Decide(broke(nil))
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
			tracker.Decide(broke(nil))
		}
		d := tracker.Decide(fresh)
		if want := (policy.Decision{Action: policy.Retry, NewConnection: true, Until: step.want}); d != want {
			t.Errorf("410 #%d: %v, want %v", i, d, want)
		}
	}
	// 2.9 s into the search, a 503's backoff (at least 800 ms) would start
	// past its end.
	clock.Advance(2900 * time.Millisecond)
	if d := tracker.Decide(serverError); d != (policy.Decision{Action: policy.GiveUp, Stop: policy.StoppedBySearch}) {
		t.Errorf("a 503 at the search's end: %v, want no retry (search)", d)
	}
	clock.Advance(100 * time.Millisecond)
	if d := tracker.Decide(fresh); d.Action == policy.Retry || !d.Until.IsZero() {
		t.Errorf("410 past the bound: %v, want no retry and no Until", d)
	}
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
