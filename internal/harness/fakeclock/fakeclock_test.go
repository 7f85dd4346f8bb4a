package fakeclock

import (
	"testing"
	"time"
)

func TestTimersJumpAndRecord(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := New(start)
	for _, d := range []time.Duration{time.Second, 0, time.Minute} {
		timer := clock.NewTimer(d)
		select {
		case <-timer.C():
		default:
			t.Fatalf("timer of %v not fired when returned", d)
		}
	}
	<-clock.After(time.Hour)
	clock.Sleep(time.Hour)
	if got := clock.Since(start); got != 2*time.Hour+time.Minute+time.Second {
		t.Errorf("virtual time advanced %v", got)
	}
	if got := clock.Sleeps(); len(got) != 5 || got[0] != time.Second || got[2] != time.Minute || got[4] != time.Hour {
		t.Errorf("Sleeps = %v", got)
	}
}

func TestAfterFunc(t *testing.T) {
	clock := New(time.Unix(0, 0))
	fired := make(chan string, 3)
	clock.AfterFunc(2*time.Second, func() { fired <- "two" })
	stop := clock.AfterFunc(time.Second, func() { fired <- "stopped" }).Stop
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

func TestAfterFuncReset(t *testing.T) {
	clock := New(time.Unix(0, 0))
	fired := make(chan time.Time, 1)
	timer := clock.AfterFunc(time.Second, func() { fired <- clock.Now() })
	timer.Stop()
	if timer.Reset(3 * time.Second) {
		t.Error("Reset of a stopped timer reported it active")
	}
	clock.Advance(2 * time.Second)
	if clock.PendingTimers() != 1 {
		t.Fatalf("%d pending, want the reset one", clock.PendingTimers())
	}
	clock.Advance(time.Second)
	if got := (<-fired).Sub(time.Unix(0, 0)); got != 3*time.Second {
		t.Errorf("fired at %v, want 3s", got)
	}
}
