package policy_test

import (
	"testing"
	"time"

	"github.com/kretry/kretry/internal/harness/fakeclock"
	"github.com/kretry/kretry/internal/policy"
)

// TestListBodyBroke walks a LIST body's breaks: the first after progress resumes
// at once, later ones back off (the spread draw), the window from the first
// break bounds them, progress (new bytes) starts a new run, the caller's
// deadline stops a wait that would run into it, and the budget is never
// spent.
func TestListBodyBroke(t *testing.T) {
	tiny := policy.BudgetConfig{Ratio: 0.5, MinPerSecond: 0.25, Window: 4 * time.Second} // floor: 1 retry per window
	type step struct {
		progress bool          // Progress before the break
		advance  time.Duration // clock moves before the break
		want     policy.Decision
	}
	retry := func(wait time.Duration) policy.Decision { return policy.Decision{Action: policy.Retry, Wait: wait} }
	stop := func(s policy.Stop) policy.Decision { return policy.Decision{Action: policy.GiveUp, Stop: s} }
	tests := []struct {
		name     string
		window   time.Duration
		deadline time.Duration // from the start; 0: none
		steps    []step
	}{
		{"first break after progress is immediate, then the backoff", 30 * time.Second, 0, []step{
			{want: retry(0)},
			{want: retry(800 * time.Millisecond)},
			{advance: 800 * time.Millisecond, want: retry(1600 * time.Millisecond)},
			{advance: 1600 * time.Millisecond, want: retry(3200 * time.Millisecond)},
		}},
		{"the window bounds breaks without progress", 5 * time.Second, 0, []step{
			{want: retry(0)},
			{want: retry(800 * time.Millisecond)},
			{advance: 800 * time.Millisecond, want: retry(1600 * time.Millisecond)},
			{advance: 1600 * time.Millisecond, want: retry(2600 * time.Millisecond)}, // cut to the window's end
			{advance: 2600 * time.Millisecond, want: stop(policy.StoppedByWindow)},
		}},
		{"progress starts a new run with a whole window and backoff", 5 * time.Second, 0, []step{
			{want: retry(0)},
			{want: retry(800 * time.Millisecond)},
			{advance: 4 * time.Second, want: retry(1 * time.Second)}, // 1600ms cut to the window's end
			{progress: true, advance: time.Second, want: retry(0)},
			{want: retry(800 * time.Millisecond)},
		}},
		{"a wait into the caller's deadline is not waited", 30 * time.Second, 3 * time.Second, []step{
			{want: retry(0)},
			{want: retry(800 * time.Millisecond)},
			{advance: 800 * time.Millisecond, want: stop(policy.StoppedByDeadline)}, // 1.6s would end 0.6s before it
		}},
		{"the budget is never spent", time.Hour, 0, []step{
			{want: retry(0)}, {progress: true, want: retry(0)}, {progress: true, want: retry(0)}, {progress: true, want: retry(0)},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := fakeclock.New(epoch)
			// atStep: every spread draw is the step itself.
			p := policy.New(policy.Config{Clock: clock, Rand: fixedRand(atStep), Budget: tiny, InternalErrorWindow: tt.window})
			tracker := p.NewTracker()
			if tt.deadline > 0 {
				tracker.SetDeadline(epoch.Add(tt.deadline))
			}
			for i, s := range tt.steps {
				clock.Advance(s.advance)
				if s.progress {
					tracker.Progress()
				}
				if got := tracker.Decide(listBroke); got != s.want {
					t.Errorf("break %d = %+v, want %+v", i, got, s.want)
				}
			}
		})
	}
}
