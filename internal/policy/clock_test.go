package policy_test

import (
	"context"
	"errors"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kretry/kretry/internal/policy"
)

func TestSleep(t *testing.T) {
	clock := clocktesting.NewFakeClock(epoch)
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		d    time.Duration
		want error
	}{
		{"zero wait", context.Background(), 0, nil},
		{"negative wait", context.Background(), -time.Second, nil},
		{"ended context, no wait", ended, 0, context.Canceled},
		{"ended context, long wait", ended, time.Hour, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := policy.Sleep(tt.ctx, clock, tt.d); !errors.Is(err, tt.want) {
				t.Errorf("Sleep = %v, want %v", err, tt.want)
			}
			if clock.HasWaiters() {
				t.Error("a timer was left waiting")
			}
		})
	}
}

func TestSleepOnFakeClock(t *testing.T) {
	clock := clocktesting.NewFakeClock(epoch)
	done := make(chan error, 1)
	go func() { done <- policy.Sleep(context.Background(), clock, 5*time.Second) }()
	for !clock.HasWaiters() {
		time.Sleep(time.Millisecond) // until the waiter is registered; no timing depends on it
	}
	clock.Step(4 * time.Second)
	select {
	case err := <-done:
		t.Fatalf("returned %v after 4s of a 5s wait", err)
	default:
	}
	clock.Step(time.Second)
	if err := <-done; err != nil {
		t.Errorf("Sleep = %v", err)
	}
}

func TestSleepEndsWithContext(t *testing.T) {
	clock := clocktesting.NewFakeClock(epoch)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- policy.Sleep(ctx, clock, time.Hour) }()
	for !clock.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep = %v, want context.Canceled", err)
	}
	if clock.HasWaiters() {
		t.Error("the timer was not stopped")
	}
}
