package policy

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"syscall"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// Class sorts the outcome of one attempt into what the policy can do with it.
type Class uint8

const (
	// Deliver outcomes go to the caller at once: successes and every answer
	// that retrying cannot change (4xx including 410, 501, ...).
	Deliver Class = iota
	// TooManyRequests is a 429: the server is shedding load and names (or
	// not) how long to stay away.
	TooManyRequests
	// InternalError is a 500, 502, 503 or 504, or a connection that failed
	// before a response arrived (refused, reset, EOF, GOAWAY, timeout).
	InternalError
)

// String names the class for logs and test failures.
func (c Class) String() string {
	switch c {
	case TooManyRequests:
		return "TooManyRequests"
	case InternalError:
		return "InternalError"
	default:
		return "Deliver"
	}
}

// Outcome is what one attempt produced, reduced to what a decision needs.
type Outcome struct {
	// Class is what the attempt's answer or error means for retrying.
	Class Class
	// RetryAfter is the wait the server asked for; meaningful only when
	// HasRetryAfter is set. Junk, zero and negative requests are reported
	// as absent, so they fall back to the backoff and never hot-loop.
	RetryAfter time.Duration
	// HasRetryAfter reports that the server named a usable wait.
	HasRetryAfter bool
}

// ClassifyStatus classifies an HTTP status code, or the code of a
// metav1.Status carried by a watch ERROR event.
func ClassifyStatus(code int) Class {
	switch code {
	case http.StatusTooManyRequests:
		return TooManyRequests
	case http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return InternalError
	default:
		return Deliver
	}
}

// ClassifyError classifies an error that ended an attempt before a
// response arrived. Connection-level failures are InternalError; anything
// else (TLS verification, DNS, malformed request, the caller's context) is
// delivered.
func ClassifyError(err error) Class {
	switch {
	case err == nil:
		return Deliver
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return Deliver
	case utilnet.IsConnectionRefused(err), utilnet.IsConnectionReset(err),
		utilnet.IsProbableEOF(err), utilnet.IsHTTP2ConnectionLost(err),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.EPIPE), utilnet.IsTimeout(err):
		return InternalError
	}
	msg := err.Error()
	for _, transient := range []string{
		"http2: server sent GOAWAY",
		"http2: client connection force closed",
		"REFUSED_STREAM",
		// An HTTP/2 stream the server reset mid-answer (its handler
		// timed out or panicked): client-go says "Please retry".
		"; INTERNAL_ERROR",
		"connection refused",
		"TLS handshake timeout",
	} {
		if strings.Contains(msg, transient) {
			return InternalError
		}
	}
	return Deliver
}
