package reflector

import (
	"context"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// resyncSchedule fires every period counted from the end of the last successful fetch:
// at fetch+period, fetch+2·period, ... A new fetch restarts it; a late resync does not
// push the following ones back.
type resyncSchedule struct {
	clock  clock.Clock
	period time.Duration // 0: never
	due    time.Time
	timer  clock.Timer
}

// restart schedules the first resync one period from now.
func (s *resyncSchedule) restart() {
	if s.period <= 0 {
		return
	}
	s.due = s.clock.Now().Add(s.period)
	s.arm()
}

// advance schedules the resync after the one that just fired, skipping any already missed.
func (s *resyncSchedule) advance() {
	now := s.clock.Now()
	for !s.due.After(now) {
		s.due = s.due.Add(s.period)
	}
	s.arm()
}

func (s *resyncSchedule) arm() {
	s.stop()
	s.timer = s.clock.NewTimer(s.due.Sub(s.clock.Now()))
}

// C fires when a resync is due; it is nil (never ready) before the first fetch.
func (s *resyncSchedule) C() <-chan time.Time {
	if s.timer == nil {
		return nil
	}
	return s.timer.C()
}

func (s *resyncSchedule) stop() {
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
}

// resyncNow calls store.Resync and schedules the next one.
func (r *Reflector) resyncNow(ctx context.Context) {
	klog.FromContext(ctx).V(4).Info("Resyncing store", "type", r.typeName())
	r.resyncs.Add(1)
	if err := r.store.Resync(); err != nil {
		klog.FromContext(ctx).Error(err, "Store resync failed", "type", r.typeName())
	}
	r.resync.advance()
}
