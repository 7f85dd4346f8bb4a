package policy_test

import (
	"testing"
	"time"

	"github.com/kretry/kretry/internal/harness/fakeclock"
	"github.com/kretry/kretry/internal/policy"
)

// TestDecide is the policy table, a row per rule in the order of Decide's
// rows and docs/behaviour.md's: the failure, the history before it, the
// decision. Each row names the test that walks its rule in detail (and
// fails without it). The jitter draw is 0.5 throughout: a backoff after an
// answer waits 1.5 steps, one after no answer 1.5 steps too ([step/2,
// 5·step/2)), a named wait 5% more.
func TestDecide(t *testing.T) {
	type history func(*policy.Tracker, *fakeclock.Clock)
	none := func(*policy.Tracker, *fakeclock.Clock) {}
	times := func(f policy.Failure, n int) history {
		return func(tr *policy.Tracker, clock *fakeclock.Clock) {
			for range n {
				clock.Advance(tr.Decide(f).Wait)
			}
		}
	}
	then := func(hs ...history) history {
		return func(tr *policy.Tracker, clock *fakeclock.Clock) {
			for _, h := range hs {
				h(tr, clock)
			}
		}
	}
	advance := func(d time.Duration) history {
		return func(_ *policy.Tracker, clock *fakeclock.Clock) { clock.Advance(d) }
	}
	progress := func(tr *policy.Tracker, _ *fakeclock.Clock) { tr.Progress() }
	deadline := func(in time.Duration) history {
		return func(tr *policy.Tracker, clock *fakeclock.Clock) { tr.SetDeadline(clock.Now().Add(in)) }
	}
	retry := func(wait time.Duration) policy.Decision { return policy.Decision{Action: policy.Retry, Wait: wait} }
	stop := func(s policy.Stop) policy.Decision { return policy.Decision{Action: policy.GiveUp, Stop: s} }
	handOver := policy.Decision{Action: policy.HandOver}
	errorEvent := func(code int) policy.Failure { f := policy.Answer(code, 0); f.InStream = true; return f }
	goAway := policy.Failure{Kind: policy.StreamBroke, GoingAway: true}
	invalid := func(n int) policy.Failure { return policy.Failure{Kind: policy.StreamBroke, InvalidFrames: n} }
	fresh := gone410("500")
	search := func(until time.Duration) policy.Decision {
		return policy.Decision{Action: policy.Retry, NewConnection: true, Until: epoch.Add(until)}
	}

	rows := []struct {
		rule     string
		pinnedBy string
		before   history
		failure  policy.Failure
		want     policy.Decision
	}{
		// 1. Nothing retrying can change: the caller's at once.
		{"final: handed over", "TestDeliver", none, policy.Answer(404, 0), handOver},
		{"final: a 501", "TestAnswer", none, policy.Answer(501, 0), handOver},
		// 2. A stream that cannot be resumed.
		{"a break without a resume point: handed over", "TestDecide", none,
			policy.Failure{Kind: policy.StreamBroke, NoResumePoint: true}, handOver},
		{"an ERROR 503 without a resume point: handed over", "TestDecide", none,
			policy.Failure{Kind: policy.ServerError, InStream: true, NoResumePoint: true}, handOver},
		// 3. 429.
		{"429 naming a wait: the wait, +5%", "TestTooManyRequests", none, policy.Answer(429, 2*time.Second), retry(2100 * time.Millisecond)},
		{"429 naming none: the backoff", "TestTooManyRequests", none, policy.Answer(429, 0), retry(1200 * time.Millisecond)},
		{"the eleventh 429 in a row: at least the backoff", "TestTooManyRequests",
			times(policy.Answer(429, time.Second), 10), policy.Answer(429, time.Second), retry(1200 * time.Millisecond)},
		{"429s are retried without a window by default", "TestTooManyRequestsUnboundedByDefault",
			then(times(policy.Answer(429, time.Second), 5), advance(time.Hour)), policy.Answer(429, time.Second), retry(1050 * time.Millisecond)},
		// 4. 5xx and no answer, within the window.
		{"503: the backoff", "TestBackoffSequence", none, policy.Answer(503, 0), retry(1200 * time.Millisecond)},
		{"503 naming more than the backoff: the named wait", "TestInternalErrorWaitIsMaxOfBackoffAndRetryAfter",
			none, policy.Answer(503, 5*time.Second), retry(5250 * time.Millisecond)},
		{"no answer: the wider draw", "TestNoAnswerBackoffIsSpread", none, policy.Failure{Kind: policy.NoAnswer}, retry(1200 * time.Millisecond)},
		{"the last wait is cut to the window's end", "TestInternalErrorWindow",
			then(times(policy.Answer(503, 0), 1), advance(28*time.Second)), policy.Answer(503, 0), retry(800 * time.Millisecond)},
		{"past the window: given up", "TestInternalErrorWindow",
			then(times(policy.Answer(503, 0), 1), advance(29*time.Second)), policy.Answer(503, 0), stop(policy.StoppedByWindow)},
		{"an ERROR 503 past the window: handed over, the caller relists", "TestInternalErrorWindowExhausted",
			then(times(errorEvent(503), 1), advance(29*time.Second)), errorEvent(503),
			policy.Decision{Action: policy.HandOver, Stop: policy.StoppedByWindow}},
		// 5. A stream's break.
		{"the first break of a run: at once", "TestBreak", none, broke(nil), retry(0)},
		{"the first break after a GOAWAY: a draw from [0, 3 s)", "TestBreakCause", none, goAway, retry(1500 * time.Millisecond)},
		{"a later break: the backoff", "TestBreak", times(broke(nil), 1), broke(nil), retry(1200 * time.Millisecond)},
		{"breaks never spend a window", "TestBreak", then(times(broke(nil), 1), advance(time.Hour)), broke(nil), retry(1200 * time.Millisecond)},
		{"a stream up for the window ended its run: at once", "TestStreamUpForAWindowMakesTheNextBreakImmediate",
			then(times(broke(nil), 2), func(tr *policy.Tracker, _ *fakeclock.Clock) { tr.Opened() }, advance(30*time.Second)), broke(nil), retry(0)},
		{"a break of the stream a search's 200 opened: resumed, the search over", "TestSearchEndsWhenTheStreamOpens",
			then(times(broke(nil), 1), times(fresh, 1), advance(10*time.Second)), broke(nil), retry(1200 * time.Millisecond)},
		{"the third invalid frame at a point: resumed", "TestInvalidFrameBound", none, invalid(3), retry(0)},
		{"the fourth: handed over", "TestInvalidFrameBound", none, invalid(4),
			policy.Decision{Action: policy.HandOver, Stop: policy.StoppedByCount}},
		// 6. A LIST body's break.
		{"a LIST body's first break: at once", "TestListBodyBroke", none, listBroke, retry(0)},
		{"its later breaks: the backoff, within the window", "TestListBodyBroke",
			then(times(listBroke, 1), advance(29*time.Second)), listBroke, retry(time.Second)},
		// 7. A resume's 410: the search.
		{"a resume's 410 after a lost connection: a new connection, at once", "TestGoneSearch",
			times(broke(nil), 1), fresh, search(3 * time.Second)},
		{"the same S again: the search goes on", "TestGoneSearch",
			then(times(broke(nil), 1), times(fresh, 1), advance(time.Second)), fresh, search(3 * time.Second)},
		{"another S: another apiserver lacks it, the search goes on", "TestGoneSearch",
			then(times(broke(nil), 1), times(fresh, 1)), gone410("480"), search(3 * time.Second)},
		{"the sixth 410 in a row from an apiserver heard from: handed over", "TestGoneSearch",
			then(times(broke(nil), 1), times(fresh, 1), times(gone410("480"), 5)), gone410("480"), handOver},
		{"etcd's message: at once", "TestGoneSearch", times(broke(nil), 1), gone410(""), handOver},
		{"cut off, every reopening refused: no search, the 410 held", "TestGoneSearch",
			then(times(broke(nil), 1), times(policy.Failure{Kind: policy.NoAnswer, Refused: true}, 3), advance(time.Second)), fresh,
			policy.Decision{Action: policy.Hold, Wait: 3200 * time.Millisecond}},
		// 8. Any other 410.
		{"a 410 ending a run that grew the backoff: held", "TestGoneHold",
			times(broke(nil), 3), policy.Failure{Kind: policy.Gone}, policy.Decision{Action: policy.Hold, Wait: 1600 * time.Millisecond}},
		{"a 410 straight after a cut: at once", "TestGoneHold", times(broke(nil), 1), policy.Failure{Kind: policy.Gone}, handOver},
		// Filter: the caller's deadline.
		{"a wait ending within a second of the deadline: given up", "TestDeadline",
			deadline(2 * time.Second), policy.Answer(503, 0), stop(policy.StoppedByDeadline)},
		{"a GOAWAY's spread past the deadline: given up", "TestBreakSpreadKeepsTheDeadline",
			then(deadline(2400 * time.Millisecond)), goAway, stop(policy.StoppedByDeadline)},
		{"a hold past the deadline: at once", "TestGoneHold",
			then(times(broke(nil), 3), deadline(2*time.Second)), policy.Failure{Kind: policy.Gone}, handOver},
		{"a search past the deadline: the 410's own row", "TestGoneSearch",
			then(deadline(900*time.Millisecond), times(broke(nil), 1)), fresh, handOver},
		// Filter: the end of a search.
		{"a reopening's retry that would start past the search's end: given up", "TestGoneSearchUntil",
			then(times(broke(nil), 1), times(fresh, 1), advance(2500*time.Millisecond)), policy.Answer(503, 0), stop(policy.StoppedBySearch)},
		// Filter: the budget (here one retry per 10 s, spent by the history).
		{"a retry the budget refuses: given up", "TestDecideSpendsTheBudget",
			times(policy.Answer(503, 0), 1), policy.Answer(503, 0), stop(policy.StoppedByBudget)},
		{"a 429 naming its wait does not spend it", "TestDecideSpendsTheBudget",
			times(policy.Answer(503, 0), 1), policy.Answer(429, 2*time.Second), retry(2100 * time.Millisecond)},
		{"a resume does not spend it", "TestDecideSpendsTheBudget",
			times(policy.Answer(503, 0), 1), broke(nil), retry(0)},
		// The history: a success ends the runs; the backoff has its own reset.
		{"a stream up for the window ended its run, not its backoff", "TestStreamUpForAWindowKeepsTheBackoff",
			then(times(broke(nil), 1), times(policy.Answer(503, 0), 3), func(tr *policy.Tracker, _ *fakeclock.Clock) { tr.Opened() },
				advance(31*time.Second), times(broke(nil), 1)), policy.Answer(503, 0), retry(9600 * time.Millisecond)},
		{"progress: a new run, a whole window, the backoff started over", "TestWindowIsMeasuredFromFirstFailureSinceProgress",
			then(times(policy.Answer(503, 0), 4), progress), policy.Answer(503, 0), retry(1200 * time.Millisecond)},
	}
	for _, row := range rows {
		t.Run(row.rule, func(t *testing.T) {
			clock := fakeclock.New(epoch)
			cfg := policy.Config{Clock: clock, Rand: fixedRand(0.5)}
			if row.pinnedBy == "TestDecideSpendsTheBudget" {
				cfg.Budget = policy.BudgetConfig{Ratio: 0.01, MinPerSecond: 0.1}
			}
			tracker := policy.New(cfg).NewTracker()
			row.before(tracker, clock)
			if got := tracker.Decide(row.failure); got != row.want {
				t.Errorf("Decide(%v) = %v, want %v (the rule's detail: %s)", row.failure.Kind, got, row.want, row.pinnedBy)
			}
		})
	}
}

// TestInvalidFrameBound: invalid frames at one resume point are resumed up
// to MaxInvalidFrames, then handed over; the count is the stream's (it
// starts over when the point moves), the bound the policy's.
func TestInvalidFrameBound(t *testing.T) {
	for _, tt := range []struct {
		max, n int
		want   policy.Action
	}{{0, 3, policy.Retry}, {0, 4, policy.HandOver}, {1, 1, policy.Retry}, {1, 2, policy.HandOver}, {10, 10, policy.Retry}} {
		tracker, _ := newTracker(policy.Config{MaxInvalidFrames: tt.max}, 0)
		if got := tracker.Decide(policy.Failure{Kind: policy.StreamBroke, InvalidFrames: tt.n}); got.Action != tt.want {
			t.Errorf("MaxInvalidFrames %d, invalid frame #%d: %v, want %v", tt.max, tt.n, got, tt.want)
		}
	}
}
