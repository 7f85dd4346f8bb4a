package policy_test

import (
	"errors"
	"fmt"
	"io"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"k8s.io/utils/clock"

	"github.com/kretry/kretry/internal/harness/fakeclock"
	"github.com/kretry/kretry/internal/policy"
)

var epoch = time.Date(2026, 11, 30, 16, 0, 0, 0, time.UTC)

func fixedRand(r float64) func() float64 { return func() float64 { return r } }

// atStep is the jitter draw at which a backoff wait is its step exactly:
// waits are drawn from [step/2, 5·step/2), so step/2 + 2·0.25·step.
const atStep = 0.25

// newTracker returns a tracker on a virtual clock with a fixed jitter draw.
func newTracker(cfg policy.Config, jitter float64) (*policy.Tracker, *fakeclock.Clock) {
	clock := fakeclock.New(epoch)
	cfg.Clock = clock
	cfg.Rand = fixedRand(jitter)
	return policy.New(cfg).NewTracker(), clock
}

var (
	serverError = policy.Failure{Kind: policy.ServerError}
	throttled   = policy.Failure{Kind: policy.Throttled}
	final       = policy.Failure{Kind: policy.Final}
	listBroke   = policy.Failure{Kind: policy.ListBodyBroke}
)

func withRetryAfter(f policy.Failure, d time.Duration) policy.Failure {
	f.RetryAfter = d
	return f
}

// broke is the break of an established stream by cause (nil: unknown).
func broke(cause error) policy.Failure {
	return policy.Failure{Kind: policy.StreamBroke, GoingAway: policy.GoingAway(cause)}
}

// waitsUntilGiveUp decides o again and again, waiting each chosen wait on
// the virtual clock as the caller would, and returns the waits in order.
// It stops at the first refusal or after limit retries.
func waitsUntilGiveUp(tracker *policy.Tracker, clock *fakeclock.Clock, o policy.Failure, limit int) (waits []time.Duration, gaveUp bool) {
	for range limit {
		decision := tracker.Decide(o)
		if decision.Action != policy.Retry {
			return waits, true
		}
		waits = append(waits, decision.Wait)
		clock.Advance(decision.Wait)
	}
	return waits, false
}

func seconds(values ...float64) []time.Duration {
	out := make([]time.Duration, len(values))
	for i, v := range values {
		out[i] = time.Duration(v * float64(time.Second))
	}
	return out
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestBackoffSequence(t *testing.T) {
	long := 24 * time.Hour // keep the window out of the way
	tests := []struct {
		name   string
		cfg    policy.Config
		jitter float64
		want   []time.Duration
	}{
		{"client-go numbers, no jitter", policy.Config{InternalErrorWindow: long}, 0,
			seconds(0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30, 30, 30)},
		{"client-go numbers, half jitter", policy.Config{InternalErrorWindow: long}, 0.5,
			seconds(1.2, 2.4, 4.8, 9.6, 19.2, 38.4, 45, 45)},
		{"jitter up to +100% on top of the cap", policy.Config{InternalErrorWindow: long}, 0.999,
			seconds(1.5992, 3.1984, 6.3968, 12.7936, 25.5872, 51.1744, 59.97, 59.97)},
		{"custom initial and cap", policy.Config{InitialBackoff: time.Second, MaxBackoff: 5 * time.Second, InternalErrorWindow: long}, 0,
			seconds(1, 2, 4, 5, 5)},
		{"cap below initial is raised to it", policy.Config{InitialBackoff: 2 * time.Second, MaxBackoff: time.Second, InternalErrorWindow: long}, 0,
			seconds(2, 2, 2)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tracker, clock := newTracker(tt.cfg, tt.jitter)
			waits, _ := waitsUntilGiveUp(tracker, clock, serverError, len(tt.want))
			if !equalDurations(waits, tt.want) {
				t.Errorf("waits = %v, want %v", waits, tt.want)
			}
		})
	}
}

func TestBackoffResetsAfterQuiet(t *testing.T) {
	tests := []struct {
		name  string
		quiet time.Duration
		want  time.Duration
	}{
		{"just short of 2m keeps growing", 2*time.Minute - time.Nanosecond, 6400 * time.Millisecond},
		{"2m quiet starts over", 2 * time.Minute, 800 * time.Millisecond},
		{"custom reset", 10 * time.Second, 800 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := policy.Config{InternalErrorWindow: 24 * time.Hour}
			if tt.name == "custom reset" {
				cfg.BackoffReset = 10 * time.Second
			}
			tracker, clock := newTracker(cfg, 0)
			waits, _ := waitsUntilGiveUp(tracker, clock, serverError, 3) // 0.8, 1.6, 3.2
			if !equalDurations(waits, seconds(0.8, 1.6, 3.2)) {
				t.Fatalf("waits = %v", waits)
			}
			// The last failure was at the start of the last wait.
			clock.Advance(tt.quiet - waits[2])
			if got := tracker.Decide(serverError).Wait; got != tt.want {
				t.Errorf("wait after %v quiet = %v, want %v", tt.quiet, got, tt.want)
			}
		})
	}
}

func TestInternalErrorWindow(t *testing.T) {
	tests := []struct {
		name    string
		cfg     policy.Config
		outcome policy.Failure
		jitter  float64
		want    []time.Duration
	}{
		{"default 30s: the last backoff is cut to the window's end", policy.Config{}, serverError, 0.5,
			seconds(1.2, 2.4, 4.8, 9.6, 12)},
		{"no jitter", policy.Config{}, serverError, 0,
			seconds(0.8, 1.6, 3.2, 6.4, 12.8, 5.2)},
		{"short window", policy.Config{InternalErrorWindow: 2 * time.Second}, serverError, 0,
			seconds(0.8, 1.2)},
		{"Retry-After above the backoff is the wait", policy.Config{}, withRetryAfter(serverError, 5*time.Second), 0,
			seconds(5, 5, 5, 6.4, 8.6)},
		{"Retry-After past the window's end is not cut: give up", policy.Config{}, withRetryAfter(serverError, 20*time.Second), 0,
			seconds(20)},
		{"Retry-After beyond the window: no retry at all", policy.Config{}, withRetryAfter(serverError, 10*time.Minute), 0,
			nil},
		{"Retry-After capped by MaxRetryAfter fits a long window", policy.Config{InternalErrorWindow: 3 * time.Minute}, withRetryAfter(serverError, 10*time.Minute), 0,
			seconds(60, 60, 60)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tracker, clock := newTracker(tt.cfg, tt.jitter)
			waits, gaveUp := waitsUntilGiveUp(tracker, clock, tt.outcome, 100)
			if !gaveUp {
				t.Fatalf("never gave up; waits %v", waits)
			}
			if !equalDurations(waits, tt.want) {
				t.Errorf("waits = %v, want %v", waits, tt.want)
			}
			var total time.Duration
			for _, w := range waits {
				total += w
			}
			window := tt.cfg.InternalErrorWindow
			if window == 0 {
				window = policy.DefaultInternalErrorWindow
			}
			if total > window {
				t.Errorf("retried for %v, past the %v window", total, window)
			}
		})
	}
}

func TestInternalErrorWaitIsMaxOfBackoffAndRetryAfter(t *testing.T) {
	tests := []struct {
		name       string
		retryAfter time.Duration
		jitter     float64
		want       time.Duration
	}{
		{"server asks less than the backoff", 500 * time.Millisecond, 0, 800 * time.Millisecond},
		{"server asks more", 3 * time.Second, 0, 3 * time.Second},
		{"both jittered: backoff 1.2s beats 1s+5%", time.Second, 0.5, 1200 * time.Millisecond},
		{"both jittered: 5s+5% beats backoff", 5 * time.Second, 0.5, 5250 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tracker, _ := newTracker(policy.Config{}, tt.jitter)
			got := tracker.Decide(withRetryAfter(serverError, tt.retryAfter))
			if got.Action != policy.Retry || got.Wait != tt.want {
				t.Errorf("Decide = %+v, want retry after %v", got, tt.want)
			}
		})
	}
}

func TestWindowIsMeasuredFromFirstFailureSinceProgress(t *testing.T) {
	tracker, clock := newTracker(policy.Config{InternalErrorWindow: 10 * time.Second}, 0)
	// 0.8 + 1.6 + 3.2 = 5.6s into the window.
	if waits, _ := waitsUntilGiveUp(tracker, clock, serverError, 3); len(waits) != 3 {
		t.Fatalf("waits = %v", waits)
	}
	// A run of 429s in between neither ends nor restarts the window.
	if tracker.Decide(withRetryAfter(throttled, time.Second)).Action != policy.Retry {
		t.Fatal("429 not retried")
	}
	clock.Advance(time.Second) // 6.6s
	if got := tracker.Decide(serverError); got.Action != policy.Retry || got.Wait != 3400*time.Millisecond {
		t.Fatalf("Decide = %+v, want the rest of the window, 3.4s", got)
	}
	clock.Advance(3400 * time.Millisecond) // 10s: the window is spent
	if tracker.Decide(serverError).Action == policy.Retry {
		t.Fatal("retried past the window")
	}

	// Progress starts a new run with a whole window.
	tracker.Progress()
	clock.Advance(time.Second)
	waits, gaveUp := waitsUntilGiveUp(tracker, clock, serverError, 100)
	if !gaveUp {
		t.Fatal("never gave up")
	}
	var total time.Duration
	for _, w := range waits {
		total += w
	}
	if total != 10*time.Second {
		t.Errorf("after progress retried for %v (%v), want the whole 10s window", total, waits)
	}
}

func TestProgressRestartsBackoff(t *testing.T) {
	// Progress ends a run of failures and starts the backoff over, so that
	// the next run is not spent in one capped wait.
	tracker, clock := newTracker(policy.Config{}, 0)
	waitsUntilGiveUp(tracker, clock, serverError, 6) // 0.8 ... 25.6 → capped
	tracker.Progress()
	if got := tracker.Decide(serverError).Wait; got != 800*time.Millisecond {
		t.Errorf("wait after progress = %v, want 800ms", got)
	}
}

func TestTooManyRequests(t *testing.T) {
	tests := []struct {
		name    string
		cfg     policy.Config
		outcome policy.Failure
		jitter  float64
		want    []time.Duration
		gaveUp  bool
	}{
		{"Retry-After is the wait", policy.Config{}, withRetryAfter(throttled, time.Second), 0,
			seconds(1, 1, 1, 1, 1), false},
		// client-go's rest client retries ten; then client-go's reflector
		// backs off once, with its own jitter, and the rest client starts
		// over: every eleventh wait is at least a step drawn from
		// [step, 2·step) (at the highest draw: 1.5992, 3.1984, 6.3968).
		{"every eleventh in a row: at least the backoff", policy.Config{}, withRetryAfter(throttled, time.Second), 0.999,
			append(append(append(
				repeat(1.0999, 10), seconds(1.5992)...), append(repeat(1.0999, 10), seconds(3.1984)...)...),
				append(repeat(1.0999, 10), seconds(6.3968)...)...), false},
		{"Retry-After jittered by up to 10%", policy.Config{}, withRetryAfter(throttled, 10*time.Second), 0.5,
			seconds(10.5, 10.5), false},
		{"Retry-After capped by the default MaxRetryAfter", policy.Config{}, withRetryAfter(throttled, time.Hour), 0,
			seconds(60, 60), false},
		{"Retry-After capped by MaxRetryAfter", policy.Config{MaxRetryAfter: 5 * time.Second}, withRetryAfter(throttled, time.Hour), 0.5,
			seconds(5.25, 5.25), false},
		{"saturated Retry-After is capped", policy.Config{}, withRetryAfter(throttled, maxDuration), 0,
			seconds(60), false},
		{"none named: backoff", policy.Config{}, throttled, 0,
			seconds(0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30, 30), false},
		{"zero or negative named: backoff", policy.Config{}, withRetryAfter(throttled, -time.Second), 0,
			seconds(0.8, 1.6), false},
		{"window bounds Retry-After waits", policy.Config{TooManyRequestsWindow: 10 * time.Second}, withRetryAfter(throttled, 3*time.Second), 0,
			seconds(3, 3, 3), true},
		{"window cuts the last backoff", policy.Config{TooManyRequestsWindow: 10 * time.Second}, throttled, 0,
			seconds(0.8, 1.6, 3.2, 4.4), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tracker, clock := newTracker(tt.cfg, tt.jitter)
			waits, gaveUp := waitsUntilGiveUp(tracker, clock, tt.outcome, len(tt.want)+1)
			if gaveUp != tt.gaveUp {
				t.Errorf("gave up = %v, want %v", gaveUp, tt.gaveUp)
			}
			if !tt.gaveUp {
				waits = waits[:len(tt.want)]
			}
			if !equalDurations(waits, tt.want) {
				t.Errorf("waits = %v, want %v", waits, tt.want)
			}
		})
	}
}

func TestTooManyRequestsUnboundedByDefault(t *testing.T) {
	tracker, clock := newTracker(policy.Config{}, 0.5)
	// An hour of 429s, far past every window: still retried.
	waits, gaveUp := waitsUntilGiveUp(tracker, clock, withRetryAfter(throttled, time.Second), 3600)
	if gaveUp || len(waits) != 3600 {
		t.Fatalf("gave up after %d retries", len(waits))
	}
	if clock.Now().Sub(epoch) < time.Hour {
		t.Errorf("only %v of virtual time passed", clock.Now().Sub(epoch))
	}
}

func TestTooManyRequestsPacingRestartsOnProgress(t *testing.T) {
	tracker, clock := newTracker(policy.Config{}, 0.999)
	waitsUntilGiveUp(tracker, clock, withRetryAfter(throttled, time.Second), 15) // the eleventh waited the backoff
	tracker.Progress()
	waits, _ := waitsUntilGiveUp(tracker, clock, withRetryAfter(throttled, time.Second), 11)
	if want := append(repeat(1.0999, 10), seconds(1.5992)...); !equalDurations(waits, want) {
		t.Errorf("429s after progress wait %v, want %v: ten named, then the first backoff step", waits, want)
	}
}

func repeat(s float64, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = time.Duration(s * float64(time.Second))
	}
	return out
}

func TestTooManyRequestsWindowRestartsOnProgress(t *testing.T) {
	tracker, clock := newTracker(policy.Config{TooManyRequestsWindow: 5 * time.Second}, 0)
	if _, gaveUp := waitsUntilGiveUp(tracker, clock, withRetryAfter(throttled, 2*time.Second), 10); !gaveUp {
		t.Fatal("window did not bound 429s")
	}
	tracker.Progress()
	if tracker.Decide(withRetryAfter(throttled, 2*time.Second)).Action != policy.Retry {
		t.Fatal("429 after progress not retried")
	}
}

func TestDeliver(t *testing.T) {
	tracker, _ := newTracker(policy.Config{}, 0)
	if got := tracker.Decide(final); got != (policy.Decision{Action: policy.HandOver}) {
		t.Errorf("Decide(Final) = %+v, want hand over", got)
	}
	// A delivered outcome is not a failure: the backoff did not grow.
	if got := tracker.Decide(serverError).Wait; got != 800*time.Millisecond {
		t.Errorf("first backoff = %v, want 800ms", got)
	}
}

func TestBreak(t *testing.T) {
	tracker, clock := newTracker(policy.Config{InternalErrorWindow: 5 * time.Second}, atStep)
	step := func(want time.Duration) {
		t.Helper()
		got := tracker.Decide(broke(nil))
		if got.Action != policy.Retry || got.Wait != want {
			t.Fatalf("Break = %+v, want retry after %v", got, want)
		}
		clock.Advance(got.Wait)
	}
	// A new stream counts as having progressed: its first break reopens at once.
	step(0)
	step(800 * time.Millisecond)
	step(1600 * time.Millisecond)
	tracker.Progress()
	step(0)                      // first break after progress: immediate
	step(800 * time.Millisecond) // then the backoff, started over by the progress

	// Breaks are unbounded and never open the InternalError window: far
	// past 5s of breaks, a 5xx still gets its whole window.
	for range 1000 {
		if got := tracker.Decide(broke(nil)); got.Action != policy.Retry {
			t.Fatal("break refused")
		}
		clock.Advance(time.Minute)
	}
	waits, gaveUp := waitsUntilGiveUp(tracker, clock, serverError, 100)
	var total time.Duration
	for _, w := range waits {
		total += w
	}
	if !gaveUp || total != 5*time.Second {
		t.Errorf("5xx after breaks: waits %v (gave up %v), want the whole 5s window", waits, gaveUp)
	}
}

func TestNewDefaults(t *testing.T) {
	got := policy.New(policy.Config{}).Config()
	if got.InitialBackoff != 800*time.Millisecond || got.MaxBackoff != 30*time.Second ||
		got.BackoffReset != 2*time.Minute || got.MaxRetryAfter != time.Minute ||
		got.InternalErrorWindow != 30*time.Second || got.TooManyRequestsWindow != 0 {
		t.Errorf("defaults = %+v", got)
	}
	if got.Clock == nil || got.Rand == nil {
		t.Error("no default clock or random source")
	}
	if r := got.Rand(); r < 0 || r >= 1 {
		t.Errorf("Rand() = %v, want [0,1)", r)
	}
	if _, ok := got.Clock.(clock.RealClock); !ok {
		t.Errorf("default clock is %T, not the wall clock", got.Clock)
	}
}

func TestConfigValidation(t *testing.T) {
	defaults := policy.New(policy.Config{}).Config()
	tests := []struct {
		name string
		cfg  policy.Config
		want func(c *policy.Config) // applied to the defaults
	}{
		{"negative values take the default", policy.Config{InitialBackoff: -1, MaxBackoff: -time.Hour,
			BackoffReset: -1, MaxRetryAfter: -1, InternalErrorWindow: -time.Second, TooManyRequestsWindow: -1},
			func(*policy.Config) {}},
		{"absurd values take the default", policy.Config{InitialBackoff: 30 * time.Hour, MaxBackoff: 11 * time.Minute,
			BackoffReset: 25 * time.Hour, MaxRetryAfter: 2 * time.Hour, InternalErrorWindow: 1 << 62, TooManyRequestsWindow: 1 << 62},
			func(*policy.Config) {}},
		{"values at their bounds are kept", policy.Config{InitialBackoff: 10 * time.Minute, MaxBackoff: 10 * time.Minute,
			BackoffReset: 24 * time.Hour, MaxRetryAfter: time.Hour, InternalErrorWindow: 24 * time.Hour, TooManyRequestsWindow: 24 * time.Hour},
			func(c *policy.Config) {
				c.InitialBackoff, c.MaxBackoff, c.BackoffReset = 10*time.Minute, 10*time.Minute, 24*time.Hour
				c.MaxRetryAfter, c.InternalErrorWindow, c.TooManyRequestsWindow = time.Hour, 24*time.Hour, 24*time.Hour
			}},
		{"a cap below the initial backoff is raised to it", policy.Config{InitialBackoff: 2 * time.Second, MaxBackoff: time.Second},
			func(c *policy.Config) { c.InitialBackoff, c.MaxBackoff = 2*time.Second, 2*time.Second }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := policy.New(tt.cfg).Config()
			want := defaults
			tt.want(&want)
			if got.InitialBackoff != want.InitialBackoff || got.MaxBackoff != want.MaxBackoff ||
				got.BackoffReset != want.BackoffReset || got.MaxRetryAfter != want.MaxRetryAfter ||
				got.InternalErrorWindow != want.InternalErrorWindow || got.TooManyRequestsWindow != want.TooManyRequestsWindow {
				t.Errorf("Config = %+v\nwant     %+v", got, want)
			}
		})
	}
}

func TestRetryAfterUnderASecondIsNone(t *testing.T) {
	tests := []struct {
		name    string
		outcome policy.Failure
		want    time.Duration
	}{
		{"429 asking 400ms: the backoff", withRetryAfter(throttled, 400*time.Millisecond), 800 * time.Millisecond},
		{"429 asking 999ms: the backoff", withRetryAfter(throttled, 999*time.Millisecond), 800 * time.Millisecond},
		{"429 asking 1s: 1s", withRetryAfter(throttled, time.Second), time.Second},
		{"503 asking 300ms: the backoff", withRetryAfter(serverError, 300*time.Millisecond), 800 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tracker, _ := newTracker(policy.Config{}, 0)
			if got := tracker.Decide(tt.outcome); got.Action != policy.Retry || got.Wait != tt.want {
				t.Errorf("Decide = %+v, want retry after %v", got, tt.want)
			}
		})
	}
}

// TestFailureRuns pins DESIGN's "Failure runs": a run ends at a success, and
// a reopened stream that stays up as long as the window is one; a bare 200
// is not.
func TestFailureRuns(t *testing.T) {
	const window = 30 * time.Second
	refused := serverError // a refused dial is an InternalError outcome
	tests := []struct {
		name string
		// between runs after the first refused dial, before the second.
		between func(tracker *policy.Tracker, clock *fakeclock.Clock)
		// wantWhole: the second run gets a whole window.
		wantWhole bool
	}{
		{"reopened, then an hour of quiet: a new run", func(tr *policy.Tracker, c *fakeclock.Clock) {
			tr.Opened()
			c.Advance(time.Hour)
		}, true},
		{"reopened, up exactly the window: a new run", func(tr *policy.Tracker, c *fakeclock.Clock) {
			tr.Opened()
			c.Advance(window)
		}, true},
		{"reopened, up just short of the window: the same run", func(tr *policy.Tracker, c *fakeclock.Clock) {
			tr.Opened()
			c.Advance(window - time.Millisecond)
		}, false},
		{"a bare 200 then ERROR 500 at once: the same run", func(tr *policy.Tracker, c *fakeclock.Clock) {
			tr.Opened()
		}, false},
		{"an hour without reopening (a LIST's waits): the same run", func(tr *policy.Tracker, c *fakeclock.Clock) {
			c.Advance(time.Hour)
		}, false},
		{"progress: a new run", func(tr *policy.Tracker, c *fakeclock.Clock) {
			tr.Opened()
			tr.Progress()
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tracker, clock := newTracker(policy.Config{InternalErrorWindow: window}, 0)
			first := tracker.Decide(refused)
			if first.Action != policy.Retry {
				t.Fatal("first failure not retried")
			}
			clock.Advance(first.Wait)
			tt.between(tracker, clock)
			waits, gaveUp := waitsUntilGiveUp(tracker, clock, refused, 100)
			var total time.Duration
			for _, w := range waits {
				total += w
			}
			if whole := gaveUp && total == window; whole != tt.wantWhole {
				t.Errorf("second run retried for %v (waits %v); whole window = %v, want %v", total, waits, whole, tt.wantWhole)
			}
		})
	}
}

func TestStreamUpForAWindowMakesTheNextBreakImmediate(t *testing.T) {
	tracker, clock := newTracker(policy.Config{InternalErrorWindow: 10 * time.Second}, atStep)
	tracker.Decide(broke(nil)) // immediate: a new stream counts as progressed
	if got := tracker.Decide(broke(nil)).Wait; got != 800*time.Millisecond {
		t.Fatalf("second break waits %v", got)
	}
	tracker.Opened()
	clock.Advance(10 * time.Second)
	if got := tracker.Decide(broke(nil)).Wait; got != 0 {
		t.Errorf("break after a stream up for the window waits %v, want an immediate reopen", got)
	}
}

func TestDeadline(t *testing.T) {
	tests := []struct {
		name    string
		left    time.Duration // until the deadline
		outcome *policy.Failure
		want    policy.Decision
	}{
		{"a backoff well before the deadline", 10 * time.Second, &serverError, policy.Decision{Action: policy.Retry, Wait: 800 * time.Millisecond}},
		{"a backoff ending less than a second before it", 1700 * time.Millisecond, &serverError, policy.Decision{Action: policy.GiveUp, Stop: policy.StoppedByDeadline}},
		{"a Retry-After: 10 past it", 5 * time.Second, ptr(withRetryAfter(throttled, 10*time.Second)), policy.Decision{Action: policy.GiveUp, Stop: policy.StoppedByDeadline}},
		{"a Retry-After: 10 before it", 12 * time.Second, ptr(withRetryAfter(throttled, 10*time.Second)), policy.Decision{Action: policy.Retry, Wait: 10 * time.Second}},
		{"an immediate reopen with under a second left", 999 * time.Millisecond, nil, policy.Decision{Action: policy.GiveUp, Stop: policy.StoppedByDeadline}},
		{"an immediate reopen with time left", 2 * time.Second, nil, policy.Decision{Action: policy.Retry}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tracker, clock := newTracker(policy.Config{}, 0)
			tracker.SetDeadline(clock.Now().Add(tt.left))
			var got policy.Decision
			if tt.outcome == nil {
				got = tracker.Decide(broke(nil))
			} else {
				got = tracker.Decide(*tt.outcome)
			}
			if got != tt.want {
				t.Errorf("decision %+v, want %+v", got, tt.want)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestNoAnswerBackoffIsSpread: a failure without an answer (a refused or
// reset connection) waits client-go's steps drawn from [step/2, 5·step/2),
// where an answer that says "later" (a 503) waits client-go's own draw,
// [step, 2·step) (TestBackoffSequence).
func TestNoAnswerBackoffIsSpread(t *testing.T) {
	noAnswer := policy.Failure{Kind: policy.NoAnswer}
	long := policy.Config{InternalErrorWindow: 24 * time.Hour}
	tests := []struct {
		name   string
		jitter float64
		want   []time.Duration
	}{
		{"the lowest draw: half the step", 0, seconds(0.4, 0.8, 1.6, 3.2, 6.4, 12.8, 15, 15)},
		{"the draw that waits the step", atStep, seconds(0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30, 30)},
		{"the middle draw: client-go's mean, 1.5 steps", 0.5, seconds(1.2, 2.4, 4.8, 9.6, 19.2, 38.4, 45, 45)},
		{"the highest draw: 2.5 steps", 0.999, seconds(1.9984, 3.9968, 7.9936, 15.9872, 31.9744, 63.9488, 74.94, 74.94)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tracker, clock := newTracker(long, tt.jitter)
			if waits, _ := waitsUntilGiveUp(tracker, clock, noAnswer, len(tt.want)); !equalDurations(waits, tt.want) {
				t.Errorf("waits = %v, want %v", waits, tt.want)
			}
		})
	}
}

// TestProgressIsIdempotentBetweenReports: a stream tells the tracker of
// every event it delivers, so a Progress after a Progress must change
// nothing, and a Progress after any other report must end what that report
// started. Each case makes its reports after a first Progress, then
// Progress again; the decisions that follow must be those of a tracker
// told Progress once, at the same time. Without the second Progress they
// differ (the case's reports left their mark), so a Progress wrongly
// skipped fails the case.
func TestProgressIsIdempotentBetweenReports(t *testing.T) {
	const window = 5 * time.Second
	cases := []struct {
		name    string
		reports func(*policy.Tracker, *fakeclock.Clock)
		marks   bool // the reports change what the probe decides
	}{
		{name: "nothing", reports: func(*policy.Tracker, *fakeclock.Clock) {}},
		{name: "Progress", reports: func(tr *policy.Tracker, _ *fakeclock.Clock) { tr.Progress(); tr.Progress() }},
		{name: "Decide 5xx", marks: true, reports: func(tr *policy.Tracker, _ *fakeclock.Clock) { tr.Decide(serverError) }},
		{name: "Decide 429", marks: true, reports: func(tr *policy.Tracker, _ *fakeclock.Clock) {
			for range pacedThrottles {
				tr.Decide(throttled)
			}
		}},
		{name: "Break", marks: true, reports: func(tr *policy.Tracker, _ *fakeclock.Clock) { tr.Decide(broke(nil)) }},
		{name: "ListBreak", marks: true, reports: func(tr *policy.Tracker, _ *fakeclock.Clock) { tr.Decide(listBroke) }},
		// A 410 handed over changes nothing a later decision reads.
		{name: "Gone handed over", reports: func(tr *policy.Tracker, _ *fakeclock.Clock) {
			tr.Decide(policy.Failure{Kind: policy.Gone})
		}},
		{name: "Decide after a window up", marks: true, reports: func(tr *policy.Tracker, clock *fakeclock.Clock) {
			// The failure first ends the run the stream was opened in (a
			// Progress of the tracker's own), then starts a new one.
			tr.Opened()
			clock.Advance(window)
			tr.Decide(serverError)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := policy.Config{InternalErrorWindow: window}
			run := func(reports func(*policy.Tracker, *fakeclock.Clock), progress bool, elapsed time.Duration) (string, time.Duration) {
				tr, clock := newTracker(cfg, atStep)
				tr.Decide(serverError) // a run of failures to end
				tr.Progress()
				start := clock.Now()
				if reports != nil {
					reports(tr, clock)
				}
				clock.Advance(elapsed - clock.Since(start))
				if progress {
					tr.Progress()
				}
				return probe(tr), clock.Since(start)
			}
			got, elapsed := run(tc.reports, true, 0)
			want, _ := run(nil, false, elapsed)
			if got != want {
				t.Errorf("after the reports and Progress the tracker decides\n%s\nwant, as after Progress alone,\n%s", got, want)
			}
			if unended, _ := run(tc.reports, false, 0); (unended != want) != tc.marks {
				t.Errorf("without the second Progress the tracker decides\n%s\nthe reports marked it: %v, want %v", unended, unended != want, tc.marks)
			}
		})
	}
}

// pacedThrottles mirrors the policy's: the 429s whose waits only the
// server names.
const pacedThrottles = 10

// probe makes one report of each kind and says what the tracker decided.
func probe(tr *policy.Tracker) string {
	return fmt.Sprintf("Break %+v\nGone %+v\nDecide 5xx %+v\nDecide 429 %+v\nListBreak %+v",
		tr.Decide(broke(nil)), tr.Decide(policy.Failure{Kind: policy.Gone, Resume: true, Oldest: "7"}), tr.Decide(serverError),
		tr.Decide(throttled), tr.Decide(listBroke))
}

// TestBreakCause walks the first break after progress by its cause: a
// server going away (its GOAWAY, then the connection's end) spreads the
// reopen over [0, 3s); every other break reopens at once.
func TestBreakCause(t *testing.T) {
	goAway := http2.GoAwayError{LastStreamID: 7, ErrCode: http2.ErrCodeNo}
	tests := []struct {
		name  string
		cause error
		draw  float64
		want  time.Duration
	}{
		{"unknown", nil, 0.5, 0},
		{"early clean end", io.EOF, 0.5, 0},
		{"reset", syscall.ECONNRESET, 0.5, 0},
		{"unexpected EOF", io.ErrUnexpectedEOF, 0.5, 0},
		{"x/net GOAWAY, low draw", goAway, 0, 0},
		{"x/net GOAWAY", goAway, 0.5, 1500 * time.Millisecond},
		{"x/net GOAWAY, wrapped", fmt.Errorf("reading frame: %w", goAway), 0.25, 750 * time.Millisecond},
		{"net/http's bundled GOAWAY", errors.New(`http2: server sent GOAWAY and closed the connection; LastStreamID=7, ErrCode=NO_ERROR, debug=""`), 0.9, 2700 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tracker, clock := newTracker(policy.Config{}, tt.draw)
			if got := tracker.Decide(broke(tt.cause)); got != (policy.Decision{Action: policy.Retry, Wait: tt.want}) {
				t.Fatalf("first break: %+v, want retry after %v", got, tt.want)
			}
			// Without progress in between, a second break backs off as any
			// does, whatever its cause.
			clock.Advance(tt.want)
			step := 400*time.Millisecond + time.Duration(tt.draw*2*float64(800*time.Millisecond))
			if got := tracker.Decide(broke(tt.cause)); got != (policy.Decision{Action: policy.Retry, Wait: step}) {
				t.Errorf("second break: %+v, want retry after %v", got, step)
			}
		})
	}
}

func TestBreakSpreadKeepsTheDeadline(t *testing.T) {
	tracker, clock := newTracker(policy.Config{}, 0.9)
	tracker.SetDeadline(clock.Now().Add(3 * time.Second))
	goAway := http2.GoAwayError{ErrCode: http2.ErrCodeNo}
	if got := tracker.Decide(broke(goAway)); got.Action == policy.Retry {
		t.Errorf("a 2.7s spread with 3s left: %+v, want the watch over (under a second would be left)", got)
	}
}

// TestStreamUpForAWindowKeepsTheBackoff: a stream up, quiet, for a window
// has ended its run of failures (its next break reopens at once, a new
// window opens) but not its backoff, which starts over only after
// BackoffReset of quiet, as client-go's does: a server that fails every
// minute is not retried faster than client-go would. Fails before: the
// backoff started over after one window.
func TestStreamUpForAWindowKeepsTheBackoff(t *testing.T) {
	for _, tt := range []struct {
		up   time.Duration
		want time.Duration
	}{
		{31 * time.Second, 6400 * time.Millisecond},
		{90 * time.Second, 6400 * time.Millisecond},
		{10 * time.Minute, 800 * time.Millisecond},
	} {
		tracker, clock := newTracker(policy.Config{}, 0)
		tracker.Decide(broke(nil))
		waitsUntilGiveUp(tracker, clock, serverError, 3) // 0.8, 1.6, 3.2
		tracker.Opened()
		clock.Advance(tt.up)
		if d := tracker.Decide(broke(nil)); d != (policy.Decision{Action: policy.Retry}) {
			t.Errorf("up %v: the break %v, want a reopen at once (a new run)", tt.up, d)
		}
		if d := tracker.Decide(serverError); d.Wait != tt.want {
			t.Errorf("up %v: the reopen's 503 waits %v, want %v", tt.up, d.Wait, tt.want)
		}
	}
}
