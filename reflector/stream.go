package reflector

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"
)

// stream is an open watch, with what it takes to tell its clean end from a break.
type stream struct {
	w       watch.Interface
	started time.Time
	timeout time.Duration // the timeoutSeconds asked for
}

// stop is safe on a nil stream and more than once.
func (s *stream) stop() {
	if s != nil {
		s.w.Stop()
	}
}

// endedEarly reports whether the stream ended before its timeoutSeconds elapsed. The server
// ends a healthy watch only at its timeout, and a kretry transport resumes every earlier
// end, so an early end means a break that nothing resumed.
func (s *stream) endedEarly(c clock.PassiveClock) bool {
	return c.Since(s.started) < s.timeout
}

// brokeError describes an early end for the logs.
func (s *stream) brokeError(c clock.PassiveClock) error {
	return fmt.Errorf("watch stream ended after %v, before its %v timeout", c.Since(s.started), s.timeout)
}

// openWatch starts a WATCH with bookmarks and a random timeout, on top of opts.
func (r *Reflector) openWatch(ctx context.Context, opts metav1.ListOptions) (*stream, error) {
	seconds := r.cfg.watchTimeoutSeconds()
	opts.TimeoutSeconds = &seconds
	opts.AllowWatchBookmarks = true
	r.watches.Add(1)
	started := r.cfg.Clock.Now()

	type opened struct {
		w   watch.Interface
		err error
	}
	res, err := await(ctx, r, func() opened {
		w, err := r.lw.WatchWithContext(ctx, opts)
		return opened{w, err}
	}, func(late opened) {
		if late.w != nil {
			late.w.Stop()
		}
	})
	switch {
	case err != nil:
		return nil, err
	case res.err != nil:
		if res.w != nil {
			res.w.Stop()
		}
		return nil, res.err
	case res.w == nil:
		return nil, errors.New("ListerWatcher returned neither a watch nor an error")
	}
	return &stream{w: res.w, started: started, timeout: time.Duration(seconds) * time.Second}, nil
}

// nextEvent waits for the stream's next event, resyncing the store when due. ok is false
// once the stream has ended; err is set when ctx has.
func (r *Reflector) nextEvent(ctx context.Context, s *stream) (ev watch.Event, ok bool, err error) {
	for {
		select {
		case <-ctx.Done():
			return watch.Event{}, false, ctx.Err()
		case <-r.resync.C():
			r.resyncNow(ctx)
		case ev, ok := <-s.w.ResultChan():
			return ev, ok, nil
		}
	}
}

// failure classifies an error from a LIST, a WATCH or an ERROR event.
func failure(err error) outcome {
	if isGone(err) {
		return outcome{result: gone, err: err}
	}
	return outcome{result: failed, err: err}
}

// errorEvent turns an ERROR event's object (a metav1.Status, usually) into an error.
func errorEvent(ev watch.Event) error {
	return apierrors.FromObject(ev.Object)
}

// isSpecific reports whether rv names a point in history: not "" (most recent) or "0" (any).
func isSpecific(rv string) bool {
	return rv != "" && rv != "0"
}
