package policy_test

import (
	"testing"
	"time"

	"github.com/kretry/kretry/internal/harness/fakeclock"
	"github.com/kretry/kretry/internal/policy"
)

func TestBudget(t *testing.T) {
	small := policy.BudgetConfig{Ratio: 0.5, MinPerSecond: 1, Window: 4 * time.Second} // floor: 4 retries per window
	type step struct {
		advance  time.Duration
		requests int
		retries  int // asked for
		allowed  int // of which allowed
	}
	for _, tc := range []struct {
		name  string
		cfg   policy.BudgetConfig
		steps []step
	}{
		{"the floor alone: a quiet client retries MinPerSecond*Window times", small,
			[]step{{retries: 6, allowed: 4}}},
		{"requests earn Ratio of a retry each", small,
			[]step{{requests: 4, retries: 8, allowed: 6}}},
		{"a burst of failures beyond the budget is refused, not retried", small,
			[]step{{requests: 10, retries: 20, allowed: 9}, {advance: time.Second, retries: 5, allowed: 0}}},
		{"spent retries leave the window as it slides", small,
			[]step{{retries: 4, allowed: 4}, {advance: 2 * time.Second, retries: 1, allowed: 0}, {advance: 2 * time.Second, retries: 5, allowed: 4}}},
		{"requests leave the window too", small,
			[]step{{requests: 8}, {advance: 5 * time.Second, retries: 9, allowed: 4}}},
		{"a long quiet spell clears everything", small,
			[]step{{requests: 2, retries: 9, allowed: 5}, {advance: time.Hour, retries: 5, allowed: 4}}},
		{"defaults: 20% of 10s of requests plus 10/s", policy.BudgetConfig{},
			[]step{{requests: 1000, retries: 400, allowed: 300}}},
		{"disabled: every retry allowed", policy.BudgetConfig{Disabled: true},
			[]step{{retries: 10000, allowed: 10000}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := fakeclock.New(epoch)
			budget := policy.NewBudget(tc.cfg, clock)
			for i, s := range tc.steps {
				clock.Advance(s.advance)
				for range s.requests {
					budget.Request()
				}
				allowed := 0
				for range s.retries {
					if budget.Spend() {
						allowed++
					}
				}
				if allowed != s.allowed {
					t.Errorf("step %d: %d of %d retries allowed, want %d", i, allowed, s.retries, s.allowed)
				}
			}
		})
	}
}

// TestDecideSpendsTheBudget walks the budget as Decide and Break use it: a
// burst of failures beyond it is refused, a server-paced 429 never is, and
// breaks of an established watch never spend it.
func TestDecideSpendsTheBudget(t *testing.T) {
	tiny := policy.BudgetConfig{Ratio: 0.5, MinPerSecond: 0.25, Window: 4 * time.Second} // floor: 1 retry per window
	tests := []struct {
		name     string
		budget   policy.BudgetConfig
		requests int // trackers started before the decisions
		decide   func(*policy.Tracker) policy.Decision
		want     []policy.Stop // one decision per entry; NotStopped = retried
	}{
		{"5xx beyond the floor is refused", tiny, 1,
			func(tr *policy.Tracker) policy.Decision { return tr.Decide(serverError) },
			[]policy.Stop{policy.NotStopped, policy.StoppedByBudget, policy.StoppedByBudget}},
		{"requests earn retries", tiny, 5, // 1 + 0.5*5 = 3.5
			func(tr *policy.Tracker) policy.Decision { return tr.Decide(serverError) },
			[]policy.Stop{policy.NotStopped, policy.NotStopped, policy.NotStopped, policy.StoppedByBudget}},
		{"a 429 without Retry-After spends", tiny, 1,
			func(tr *policy.Tracker) policy.Decision { return tr.Decide(throttled) },
			[]policy.Stop{policy.NotStopped, policy.StoppedByBudget}},
		{"a 429 with Retry-After is honoured, never refused", tiny, 1,
			func(tr *policy.Tracker) policy.Decision { return tr.Decide(withRetryAfter(throttled, 2*time.Second)) },
			[]policy.Stop{policy.NotStopped, policy.NotStopped, policy.NotStopped, policy.NotStopped}},
		{"a 503 with Retry-After still spends", tiny, 1,
			func(tr *policy.Tracker) policy.Decision { return tr.Decide(withRetryAfter(serverError, 2*time.Second)) },
			[]policy.Stop{policy.NotStopped, policy.StoppedByBudget}},
		{"watch breaks never spend", tiny, 1,
			func(tr *policy.Tracker) policy.Decision { return tr.Decide(broke(nil)) },
			[]policy.Stop{policy.NotStopped, policy.NotStopped, policy.NotStopped, policy.NotStopped}},
		{"disabled: nothing is refused", policy.BudgetConfig{Disabled: true}, 1,
			func(tr *policy.Tracker) policy.Decision { return tr.Decide(serverError) },
			[]policy.Stop{policy.NotStopped, policy.NotStopped, policy.NotStopped, policy.NotStopped}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := fakeclock.New(epoch)
			p := policy.New(policy.Config{Clock: clock, Rand: fixedRand(0), Budget: tt.budget, InternalErrorWindow: time.Hour})
			var tracker *policy.Tracker
			for range tt.requests {
				tracker = p.NewTracker() // each one a request
			}
			for i, want := range tt.want {
				got := tt.decide(tracker)
				if got.Stop != want || (got.Action == policy.Retry) != (want == policy.NotStopped) {
					t.Errorf("decision %d = %+v, want stopped %v", i, got, want)
				}
			}
		})
	}
}
