package policy

import (
	"context"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"time"

	"golang.org/x/net/http2"
	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// Kind is what happened to an attempt, as far as deciding goes.
type Kind uint8

const (
	// Final: nothing retrying can change (a 4xx but 429, a 501, TLS
	// verification, DNS, the caller's own context): the caller's as it is.
	Final Kind = iota
	// Throttled: a 429 answer or ERROR event.
	Throttled
	// ServerError: a 500, 502, 503 or 504 answer or ERROR event.
	ServerError
	// NoAnswer: the attempt got no answer: the connection was refused, or
	// accepted and then reset, closed, timed out or sent GOAWAY.
	NoAnswer
	// StreamBroke: an established watch stream broke (a read error, an end
	// before its time, a stall, an invalid frame).
	StreamBroke
	// ListBodyBroke: a LIST body broke mid-read once bytes of it reached
	// the caller.
	ListBodyBroke
	// Gone: a 410, as an answer or an ERROR event.
	Gone
)

var kindNames = [...]string{"final", "throttled", "server-error", "no-answer", "stream-broke", "list-body-broke", "gone"}

// String names the kind for logs and test failures.
func (k Kind) String() string { return kindNames[k] }

// Failure is what happened, reduced to the facts a decision needs. The
// fields past Kind matter only for the kinds their comments name.
type Failure struct {
	Kind Kind

	// RetryAfter is the wait the server named (Throttled, ServerError):
	// Retry-After or details.retryAfterSeconds; zero when it named none or
	// junk, zero or a negative value, so that the backoff applies.
	RetryAfter time.Duration
	// Refused (NoAnswer): nothing listened at the address, so no balancer
	// accepted the connection and could have sent it elsewhere.
	Refused bool
	// GoingAway (StreamBroke): the stream's server sent HTTP/2 GOAWAY: it is
	// shutting down, and every client it had meets the same end at once.
	GoingAway bool
	// InvalidFrames (StreamBroke): the break is an invalid frame, the n-th
	// met at the current resume point; zero for any other break.
	InvalidFrames int
	// InStream (Throttled, ServerError, Gone): an ERROR event of an
	// established stream rather than an answer.
	InStream bool
	// NoResumePoint (StreamBroke, InStream): the stream cannot be resumed:
	// its initial state is not complete.
	NoResumePoint bool
	// Resume (Gone): the 410 answered the reopening of a stream, or came
	// as an ERROR event before any event of the reopened stream.
	Resume bool
	// Oldest (Gone): the oldest resourceVersion the watch cache holds, the
	// S of "too old resource version: X (S)" (see OldestInCache); "" when
	// the message is not the watch cache's (etcd's own compaction).
	Oldest string
	// Server identifies the apiserver: the one whose stream broke
	// (StreamBroke) or the one that answered (Gone). A comparable value (a
	// digest of its serving certificate); nil when unknown, as behind a
	// balancer that ends TLS itself.
	Server any
	// Connection (Gone) identifies the connection the 410 came over (a
	// comparable value); nil when unknown.
	Connection any
}

// Answer is the failure an answer with status code is (a 410 included:
// only a stream knows what its 410 means), with the wait the server named.
func Answer(code int, retryAfter time.Duration) Failure {
	switch code {
	case http.StatusTooManyRequests:
		return Failure{Kind: Throttled, RetryAfter: retryAfter}
	case http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return Failure{Kind: ServerError, RetryAfter: retryAfter}
	}
	return Failure{Kind: Final}
}

// Retryable reports whether an answer with status code is one the policy
// may retry (429, 5xx but 501): the others go to the caller as they are.
func Retryable(code int) bool { return Answer(code, 0).Kind != Final }

// Unanswered is the failure an attempt that ended with err before any
// answer is: NoAnswer for a connection that failed (refused, reset, EOF,
// GOAWAY, a timeout, REFUSED_STREAM or INTERNAL_ERROR), Final for anything
// else (TLS verification, DNS, a malformed request, the caller's context).
func Unanswered(err error) Failure {
	if !transient(err) {
		return Failure{Kind: Final}
	}
	return Failure{Kind: NoAnswer, Refused: utilnet.IsConnectionRefused(err)}
}

// transient reports whether err is a connection's failure that a new
// attempt may not meet.
func transient(err error) bool {
	var goAway http2.GoAwayError
	var stream http2.StreamError
	switch {
	case err == nil, errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	case utilnet.IsConnectionRefused(err), utilnet.IsConnectionReset(err),
		utilnet.IsProbableEOF(err), utilnet.IsHTTP2ConnectionLost(err),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.EPIPE), utilnet.IsTimeout(err), errors.As(err, &goAway):
		return true
	case errors.As(err, &stream):
		// REFUSED_STREAM (the server did no work) and INTERNAL_ERROR (its
		// handler timed out or panicked; client-go says "Please retry").
		return stream.Code == http2.ErrCodeRefusedStream || stream.Code == http2.ErrCodeInternal
	}
	// net/http's bundled HTTP/2 (a Transport with ForceAttemptHTTP2 rather
	// than golang.org/x/net/http2) exports none of these errors as types;
	// nor does its HTTP/1.1 client the error of a new connection closed
	// before any byte of a response (a balancer that accepted it, then
	// found no backend), which it retries itself only on a reused one.
	msg := err.Error()
	for _, marker := range []string{
		"http: server closed idle connection",
		"http2: client connection force closed",
		"; REFUSED_STREAM",
		"; INTERNAL_ERROR",
	} {
		if strings.Contains(msg, marker) {
			return true
		}
	}
	return false
}

// BodyBreak reports whether err, met reading the body of a 200, leaves the
// body incomplete in a way asking again may mend: any read error (a reset,
// an HTTP/2 CANCEL or PROTOCOL_ERROR from a proxy, a TLS record error)
// except the caller's own context ending.
func BodyBreak(err error) bool {
	return err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// GoingAway reports whether err is a connection's end after its server's
// HTTP/2 GOAWAY (an apiserver's graceful termination). It recognizes
// golang.org/x/net/http2's GoAwayError (client-go's HTTP/2) and, by its
// message, net/http's bundled copy of it.
func GoingAway(err error) bool {
	if err == nil {
		return false
	}
	var goAway http2.GoAwayError
	return errors.As(err, &goAway) || strings.Contains(err.Error(), "server sent GOAWAY and closed the connection")
}

// tooOld is the watch cache's message for a resourceVersion older than the
// oldest it holds (k8s.io/apiserver's cacher: "too old resource version:
// %d (%d)").
var tooOld = regexp.MustCompile(`^too old resource version: \d+ \((\d+)\)$`)

// OldestInCache returns the S of a "too old resource version: X (S)"
// message, or "" for any other message.
func OldestInCache(message string) string {
	m := tooOld.FindStringSubmatch(message)
	if m == nil {
		return ""
	}
	return m[1]
}
