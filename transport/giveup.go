package transport

import (
	"errors"
	"fmt"
	"time"

	"github.com/kretry/kretry/internal/establish"
)

// GiveUpError is the error a LIST or WATCH gets when kretry stops retrying
// connection failures (or a LIST body broken again and again) because the
// InternalErrorWindow is spent. Reach it with errors.As:
//
//	var giveUp *transport.GiveUpError
//	if errors.As(err, &giveUp) { ... giveUp.Attempts, giveUp.Elapsed, giveUp.Last ... }
//
// client-go retries a GET up to 10 times when its error looks like EOF, a
// reset or a lost HTTP/2 connection, and each retry would start a fresh
// window: this error looks like none of them, so one client-go call costs
// about one window. A refused connection stays visible to
// utilnet.IsConnectionRefused and errors.Is(err, syscall.ECONNREFUSED),
// since client-go's reflector backs off on it rather than relisting.
type GiveUpError struct {
	// Attempts is how many requests were sent.
	Attempts int
	// Elapsed is the time from the first attempt to the give-up.
	Elapsed time.Duration
	// Last is the error of the last attempt, as the transport below
	// returned it.
	Last error
}

// Error names the give-up and the last error, in words client-go's
// retryable-error checks do not match.
func (e *GiveUpError) Error() string {
	return fmt.Sprintf("kretry: gave up after %d attempts in %s: %s", e.Attempts, e.Elapsed.Round(time.Millisecond), establish.Describe(e.Last))
}

// Unwrap returns the last error if it is a refused connection, else nil.
func (e *GiveUpError) Unwrap() error { return establish.Refusal(e.Last) }

// publicError turns the retry loops' give-up into a GiveUpError; any other
// error is returned as it is.
func publicError(err error) error {
	var giveUp *establish.GiveUpError
	if errors.As(err, &giveUp) {
		return &GiveUpError{Attempts: giveUp.Attempts, Elapsed: giveUp.Elapsed, Last: giveUp.Last}
	}
	return err
}
