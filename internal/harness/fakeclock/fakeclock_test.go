package fakeclock

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestSleepAdvancesAndRecords(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := New(start)
	for _, d := range []time.Duration{time.Second, 0, time.Minute} {
		if err := clock.Sleep(context.Background(), d); err != nil {
			t.Fatal(err)
		}
	}
	if got := clock.Now().Sub(start); got != time.Minute+time.Second {
		t.Errorf("virtual time advanced %v", got)
	}
	if got := clock.Sleeps(); len(got) != 3 || got[0] != time.Second || got[2] != time.Minute {
		t.Errorf("Sleeps = %v", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := clock.Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep on an ended context = %v", err)
	}
	if len(clock.Sleeps()) != 3 || clock.Now().Sub(start) != time.Minute+time.Second {
		t.Error("a sleep on an ended context was recorded or advanced time")
	}
}

func TestAfterFunc(t *testing.T) {
	clock := New(time.Unix(0, 0))
	fired := make(chan string, 3)
	clock.AfterFunc(2*time.Second, func() { fired <- "two" })
	stop := clock.AfterFunc(time.Second, func() { fired <- "stopped" })
	clock.AfterFunc(time.Hour, func() { fired <- "hour" })
	if !stop() {
		t.Fatal("stop did not prevent the call")
	}
	if stop() {
		t.Fatal("second stop reported prevention")
	}
	clock.Advance(time.Second)
	clock.Advance(time.Second)
	if got := <-fired; got != "two" {
		t.Fatalf("fired %q", got)
	}
	select {
	case got := <-fired:
		t.Fatalf("also fired %q", got)
	default:
	}
}
