package policy

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"syscall"
	"time"

	"golang.org/x/net/http2"
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
	// NoAnswer is set when the attempt got no answer at all: the connection
	// was refused, reset or closed, or timed out, before a response. The
	// server may be gone, and every client that lost it will come back when
	// it returns, so the backoff is drawn with a wider spread (see Tracker).
	NoAnswer bool
	// Refused is set when the connection was refused: nothing listened at
	// the address, so no load balancer accepted it and tried another
	// backend (see Tracker.Gone).
	Refused bool
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
	var goAway http2.GoAwayError
	var stream http2.StreamError
	switch {
	case err == nil:
		return Deliver
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return Deliver
	case utilnet.IsConnectionRefused(err), utilnet.IsConnectionReset(err),
		utilnet.IsProbableEOF(err), utilnet.IsHTTP2ConnectionLost(err),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.EPIPE), utilnet.IsTimeout(err), errors.As(err, &goAway):
		return InternalError
	case errors.As(err, &stream):
		return classifyStreamError(stream.Code)
	}
	// net/http's bundled HTTP/2 (a Transport with ForceAttemptHTTP2 rather
	// than golang.org/x/net/http2) exports none of these errors as types;
	// nor does its HTTP/1.1 client the error of a new connection closed
	// before any byte of a response (a balancer that accepted it, then
	// found no backend), which it retries itself only on a reused one.
	msg := err.Error()
	for _, transient := range []string{
		"http: server closed idle connection",
		"http2: client connection force closed",
		"; REFUSED_STREAM",
		"; INTERNAL_ERROR",
	} {
		if strings.Contains(msg, transient) {
			return InternalError
		}
	}
	return Deliver
}

// GoingAway reports whether err is a connection's end after its server's
// HTTP/2 GOAWAY: the server is shutting down (an apiserver's graceful
// termination), and every client it had meets the same end at the same
// moment. It recognizes golang.org/x/net/http2's GoAwayError (client-go's
// HTTP/2) and, by its message, net/http's bundled copy of it.
func GoingAway(err error) bool {
	if err == nil {
		return false
	}
	var goAway http2.GoAwayError
	return errors.As(err, &goAway) || strings.Contains(err.Error(), "server sent GOAWAY and closed the connection")
}

// NoAnswer is the outcome of an attempt that ended with err before any
// response arrived.
func NoAnswer(err error) Outcome {
	return Outcome{Class: ClassifyError(err), NoAnswer: true, Refused: utilnet.IsConnectionRefused(err)}
}

// classifyStreamError classifies an HTTP/2 stream reset before a response:
// REFUSED_STREAM (the server did no work) and INTERNAL_ERROR (its handler
// timed out or panicked; client-go says "Please retry") are transient.
func classifyStreamError(code http2.ErrCode) Class {
	switch code {
	case http2.ErrCodeRefusedStream, http2.ErrCodeInternal:
		return InternalError
	}
	return Deliver
}

// ClassifyBodyError classifies an error met reading the body of a 200: any
// read error (a reset, an HTTP/2 CANCEL or PROTOCOL_ERROR from a proxy, a
// TLS record error) means the body is incomplete and asking again is safe,
// so every one is InternalError, except the caller's own context ending.
func ClassifyBodyError(err error) Class {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return Deliver
	}
	return InternalError
}
