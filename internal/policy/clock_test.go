package policy_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kretry/kretry/internal/policy"
)

func TestRealClockSleepEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if err := (policy.RealClock{}).Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep = %v, want context.Canceled", err)
	}
	if elapsed := time.Since(start); elapsed > time.Second {
		t.Errorf("Sleep took %v after the context ended", elapsed)
	}
	if err := (policy.RealClock{}).Sleep(context.Background(), 0); err != nil {
		t.Errorf("Sleep(0) = %v", err)
	}
	if err := (policy.RealClock{}).Sleep(ctx, -time.Second); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep(<0) on an ended context = %v", err)
	}
}

func TestRealClockAfterFuncStop(t *testing.T) {
	stop := (policy.RealClock{}).AfterFunc(time.Hour, func() { t.Error("fired") })
	if !stop() {
		t.Error("stop did not prevent the call")
	}
	if stop() {
		t.Error("second stop reported prevention")
	}
	if now := (policy.RealClock{}).Now(); time.Since(now) > time.Minute {
		t.Errorf("Now = %v", now)
	}
}
