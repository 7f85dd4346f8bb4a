package transport

import (
	"fmt"
	"time"

	"github.com/kretry/kretry/internal/establish"
)

// GiveUpError is the error a LIST or WATCH gets when kretry stops retrying
// connection failures because the InternalErrorWindow is spent, and the
// error a LIST body ends with when kretry could not resume it (a resume
// that gave up, a 410 at the list's resourceVersion, a resumed answer that
// is not the same list). Reach it with errors.As:
//
//	var giveUp *transport.GiveUpError
//	if errors.As(err, &giveUp) { ... giveUp.Attempts, giveUp.Elapsed, giveUp.Last ... }
//
// client-go retries a GET up to 10 times when its error looks like EOF, a
// reset or a lost HTTP/2 connection, and each retry would start a fresh
// window: this error looks like none of them, so one client-go call costs
// about one window. A refused connection stays visible to
// utilnet.IsConnectionRefused and errors.Is(err, syscall.ECONNREFUSED),
// since client-go's reflector backs off on it rather than relisting. The
// give-up of a LIST body unwraps to the break it met, so errors.Is(err,
// io.ErrUnexpectedEOF) holds as it would without kretry; client-go does not
// retry a GET whose body read fails, so this multiplies no retries.
type GiveUpError struct {
	// Attempts is how many requests were sent.
	Attempts int
	// Elapsed is the time from the first attempt to the give-up.
	Elapsed time.Duration
	// Last is the error of the last attempt, as the transport below
	// returned it; for a LIST body, the break.
	Last error
	// body is set for the give-up of a LIST body: Unwrap returns Last.
	body bool
}

// Error names the give-up and the last error, in words client-go's
// retryable-error checks do not match.
func (e *GiveUpError) Error() string {
	return fmt.Sprintf("kretry: gave up after %d attempts in %s: %s", e.Attempts, e.Elapsed.Round(time.Millisecond), establish.Describe(e.Last))
}

// Unwrap returns the last error if it is a refused connection or the break
// of a LIST body, else nil.
func (e *GiveUpError) Unwrap() error {
	if e.body {
		return e.Last
	}
	return establish.Refusal(e.Last)
}

// publicGiveUp is the give-up the retry loops and LIST bodies of this
// transport end with.
func publicGiveUp(e *establish.GiveUpError) error {
	return &GiveUpError{Attempts: e.Attempts, Elapsed: e.Elapsed, Last: e.Last, body: e.Body}
}
