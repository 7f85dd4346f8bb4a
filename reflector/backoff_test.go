package reflector

import (
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	b := backoff{base: time.Second, max: 60 * time.Second}
	for _, tc := range []struct {
		n      int
		jitter float64
		want   time.Duration
	}{
		{0, 0.5, 0},
		{-1, 0.5, 0},
		{1, 0, 500 * time.Millisecond},
		{1, 0.5, 750 * time.Millisecond},
		{1, 0.999, 999500 * time.Microsecond},
		{2, 0, time.Second},
		{6, 0, 16 * time.Second},
		{7, 0.999, 59970 * time.Millisecond}, // 64s capped at 60s: never more than the cap
		{1000, 0, 30 * time.Second},          // no overflow
	} {
		if got := b.wait(tc.n, tc.jitter); got != tc.want {
			t.Errorf("wait(%d, %v) = %v, want %v", tc.n, tc.jitter, got, tc.want)
		}
	}
}

func TestConfigDefaults(t *testing.T) {
	cfg := Config{}.withDefaults()
	if cfg.PageSize != 500 || cfg.MinWatchTimeout != 5*time.Minute || cfg.MaxRelistBackoff != time.Minute ||
		cfg.ResyncPeriod != 0 || cfg.Clock == nil || cfg.Rand == nil {
		t.Fatalf("defaults: %+v", cfg)
	}
	for _, tc := range []struct {
		rand float64
		want int64
	}{{0, 300}, {0.5, 450}, {0.99999, 599}} {
		cfg.Rand = func() float64 { return tc.rand }
		if got := cfg.watchTimeoutSeconds(); got != tc.want {
			t.Errorf("timeoutSeconds with rand %v = %d, want %d", tc.rand, got, tc.want)
		}
	}
	if got := (Config{PageSize: -1}).withDefaults().PageSize; got != 0 {
		t.Errorf("PageSize -1 → %d, want 0 (no paging)", got)
	}
}
