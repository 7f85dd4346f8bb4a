package establish

import (
	"errors"
	"fmt"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// GiveUpError is the give-up Do returns (through Client.GiveUp) when the
// policy stops retrying connection failures or broken bodies: one client-go call then costs about one
// InternalError window. client-go retries a GET whose error looks like EOF,
// a reset or a lost HTTP/2 connection (utilnet.IsProbableEOF,
// IsConnectionReset, IsHTTP2ConnectionLost) and a watch whose error looks
// like EOF or a timeout; this error looks like none of them, so those retries
// do not multiply kretry's. A refused connection stays visible
// (utilnet.IsConnectionRefused, errors.Is(err, syscall.ECONNREFUSED)), since
// client-go's reflector backs off on it instead of relisting.
type GiveUpError struct {
	// Attempts is how many requests were sent.
	Attempts int
	// Elapsed is the time from the first attempt to the give-up.
	Elapsed time.Duration
	// Last is the error of the last attempt.
	Last error
	// Body is set when the give-up ended a LIST body a resume could not
	// mend: Last is then the break, and Unwrap returns it.
	Body bool
}

// Error names the give-up and describes the last error in words client-go
// does not take for a retryable connection error.
func (e *GiveUpError) Error() string {
	return fmt.Sprintf("kretry: gave up after %d attempts in %s: %s", e.Attempts, e.Elapsed.Round(time.Millisecond), Describe(e.Last))
}

// Unwrap exposes the last error only if it is a refused connection, or
// the break of a LIST body (see Body).
func (e *GiveUpError) Unwrap() error {
	if e.Body {
		return e.Last
	}
	return Refusal(e.Last)
}

// Refusal returns err if it is a refused connection, else nil: the one kind
// of last error a give-up lets errors.Is and errors.As see.
func Refusal(err error) error {
	if utilnet.IsConnectionRefused(err) {
		return err
	}
	return nil
}

// Describe is err's message, unless client-go's error classifiers would
// match that text (they match some errors by message alone), in which case it
// is a plain paraphrase; the error itself stays reachable as GiveUpError.Last.
func Describe(err error) string {
	if err == nil {
		return "no error"
	}
	msg := err.Error()
	if looksRetryable(errors.New(msg)) {
		return "the connection broke (reset, closed or lost) before a whole answer arrived"
	}
	return msg
}

// looksRetryable reports whether client-go would retry an error with this
// text alone.
func looksRetryable(err error) bool {
	return utilnet.IsProbableEOF(err) || utilnet.IsConnectionReset(err) || utilnet.IsHTTP2ConnectionLost(err)
}
