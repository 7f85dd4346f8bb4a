package establish

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/kretry/kretry/internal/policy"
)

// Bounds bound every attempt of one watch request: its establishment, or
// one reopening of it, or one re-request of a LIST body. The zero Bounds
// bounds nothing (a LIST's attempts).
type Bounds struct {
	// Deadline is when the caller's watch ends: its timeoutSeconds from the
	// moment it was sent; zero when it set none. Each attempt carries
	// timeoutSeconds = what remains when it is sent (rounded up), and one
	// still waiting for its answer at the deadline is cancelled: the loop
	// then hands over the last answer the server gave (Retry-After
	// stripped), or a *GiveUpError.
	Deadline time.Time
	// AnswerTimeout, when positive, is how long an attempt may wait for its
	// response headers; past it the attempt is a failure without an answer,
	// retried within the window like a refused connection.
	AnswerTimeout time.Duration
	// Until, when set, is the end of the search for an apiserver that holds
	// a watch's resume point (policy.Decision.Until): an attempt still
	// waiting for its answer then is abandoned, and the loop stops.
	Until time.Time
}

// noAnswerError is an attempt that got no response headers within
// Bounds.AnswerTimeout. It is a timeout (net.Error), so the policy retries
// it as a failure without an answer; it does not wrap the context error of
// the cancellation, which would read as the caller's own.
type noAnswerError struct{ after time.Duration }

func (e *noAnswerError) Error() string {
	return fmt.Sprintf("kretry: no response headers within %s", e.after)
}

// Timeout reports that the attempt timed out.
func (e *noAnswerError) Timeout() bool { return true }

// Temporary reports that a later attempt may be answered.
func (e *noAnswerError) Temporary() bool { return true }

// errDeadline is an attempt cancelled at the caller's deadline before its
// answer came: the watch is over.
var errDeadline = errors.New("kretry: the watch's timeoutSeconds ended before the server answered")

// errSearchOver is an attempt abandoned at the end of the search it belongs
// to (Bounds.Until): the search's 410 is the caller's.
var errSearchOver = errors.New("kretry: the search for an apiserver that holds the resume point ended")

// bounded sends one attempt through next within b: with what remains of the
// caller's timeoutSeconds, cancelled if no response headers come before the
// deadline, the end of a search or the answer timeout. The response body, if any, cancels the
// attempt's context when closed.
func (b Bounds) bounded(clock policy.Clock, next http.RoundTripper, req *http.Request) (*http.Response, error) {
	if b.Deadline.IsZero() && b.AnswerTimeout <= 0 && b.Until.IsZero() {
		return next.RoundTrip(req)
	}
	limit, cause := b.AnswerTimeout, error(&noAnswerError{after: b.AnswerTimeout})
	now := clock.Now()
	for _, end := range []struct {
		at    time.Time
		cause error
	}{{b.Deadline, errDeadline}, {b.Until, errSearchOver}} {
		if end.at.IsZero() {
			continue
		}
		left := end.at.Sub(now)
		if left <= 0 {
			return nil, end.cause
		}
		if limit <= 0 || left <= limit {
			limit, cause = left, end.cause
		}
	}
	if !b.Deadline.IsZero() {
		req = withTimeout(req, b.Deadline.Sub(now))
	}
	ctx, cancel := context.WithCancelCause(req.Context())
	timer := clock.AfterFunc(limit, func() { cancel(cause) })
	resp, err := next.RoundTrip(req.WithContext(ctx))
	fired := !timer.Stop()
	if err == nil && fired {
		// The answer came as the bound ran out: its body is cancelled.
		DrainAndClose(resp.Body)
		resp, err = nil, cause
	}
	if err != nil {
		cancel(nil)
		if fired {
			err = cause
		}
		return nil, err
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: func() { cancel(nil) }}
	return resp, nil
}

// withTimeout is req with timeoutSeconds = remaining rounded up to whole
// seconds (never 0, which would mean "no timeout"), if req asks for one and
// that is not already what it asks.
func withTimeout(req *http.Request, remaining time.Duration) *http.Request {
	query := req.URL.Query()
	if query.Get("timeoutSeconds") == "" {
		return req
	}
	seconds := strconv.FormatInt(int64(max((remaining+time.Second-1)/time.Second, 1)), 10)
	if query.Get("timeoutSeconds") == seconds {
		return req
	}
	query.Set("timeoutSeconds", seconds)
	out := req.Clone(req.Context())
	out.URL.RawQuery = query.Encode()
	return out
}

// cancelOnClose ends an attempt's context when its body is closed, so a
// bounded attempt leaves nothing behind.
type cancelOnClose struct {
	io.ReadCloser
	cancel func()
}

func (b *cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}
