package policy_test

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/kretry/kretry/internal/policy"
)

func TestAnswer(t *testing.T) {
	tests := []struct {
		code int
		want policy.Kind
	}{
		{200, policy.Final},
		{201, policy.Final},
		{301, policy.Final},
		{304, policy.Final},
		{400, policy.Final},
		{401, policy.Final},
		{403, policy.Final},
		{404, policy.Final},
		{409, policy.Final},
		{410, policy.Final},
		{422, policy.Final},
		{429, policy.Throttled},
		{500, policy.ServerError},
		{501, policy.Final},
		{502, policy.ServerError},
		{503, policy.ServerError},
		{504, policy.ServerError},
		{505, policy.Final},
	}
	for _, tt := range tests {
		if got := policy.Answer(tt.code, time.Second); got.Kind != tt.want || (got.Kind != policy.Final && got.RetryAfter != time.Second) {
			t.Errorf("Answer(%d, 1s) = %+v, want %v with the wait", tt.code, got, tt.want)
		}
		if got := policy.Retryable(tt.code); got != (tt.want != policy.Final) {
			t.Errorf("Retryable(%d) = %v", tt.code, got)
		}
	}
}

// timeoutError is a net.Error that timed out, like a dial or TLS timeout.
type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

// tlsHandshakeTimeout is net/http's TLS handshake timeout: a net.Error that
// timed out.
type tlsHandshakeTimeout struct{}

func (tlsHandshakeTimeout) Error() string   { return "net/http: TLS handshake timeout" }
func (tlsHandshakeTimeout) Timeout() bool   { return true }
func (tlsHandshakeTimeout) Temporary() bool { return true }

func TestBodyBreak(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"context canceled", fmt.Errorf("read: %w", context.Canceled), false},
		{"context deadline", context.DeadlineExceeded, false},
		{"unexpected EOF", io.ErrUnexpectedEOF, true},
		{"h2 CANCEL from a proxy", http2.StreamError{StreamID: 5, Code: http2.ErrCodeCancel}, true},
		{"h2 PROTOCOL_ERROR", errors.New("stream error: stream ID 5; PROTOCOL_ERROR; received from peer"), true},
		{"TLS record error", errors.New("local error: tls: bad record MAC"), true},
		{"anything else", errors.New("boom"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := policy.BodyBreak(tt.err); got != tt.want {
				t.Errorf("BodyBreak(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

// opError is a dial's error as net returns it.
func opError(errno syscall.Errno) error {
	return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", errno)}
}

func TestUnanswered(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want policy.Kind
	}{
		{"nil", nil, policy.Final},
		{"context canceled", context.Canceled, policy.Final},
		{"context deadline", context.DeadlineExceeded, policy.Final},
		{"wrapped context", fmt.Errorf("read: %w", context.Canceled), policy.Final},
		{"connection refused", opError(syscall.ECONNREFUSED), policy.NoAnswer},
		{"connection reset", opError(syscall.ECONNRESET), policy.NoAnswer},
		{"broken pipe", opError(syscall.EPIPE), policy.NoAnswer},
		{"EOF", io.EOF, policy.NoAnswer},
		{"unexpected EOF", io.ErrUnexpectedEOF, policy.NoAnswer},
		{"wrapped EOF", fmt.Errorf("reading body: %w", io.EOF), policy.NoAnswer},
		{"url.Error EOF", &url.Error{Op: "Get", URL: "https://x", Err: io.EOF}, policy.NoAnswer},
		{"GOAWAY", errors.New("http2: server sent GOAWAY and closed the connection; LastStreamID=1, ErrCode=NO_ERROR"), policy.NoAnswer},
		{"h2 connection lost", errors.New("http2: client connection lost"), policy.NoAnswer},
		{"h2 force closed", errors.New("http2: client connection force closed via ClientConn.Close"), policy.NoAnswer},
		// Fails before (delivered, so the reopening ended the watch): net/http's
		// HTTP/1.1 client on a new connection that a balancer closed unanswered.
		{"h1 new connection closed unanswered", &url.Error{Op: "Get", URL: "http://x", Err: errors.New("http: server closed idle connection")}, policy.NoAnswer},
		{"h2 refused stream", errors.New("stream error: stream ID 3; REFUSED_STREAM"), policy.NoAnswer},
		{"h2 internal error", errors.New("stream error: stream ID 5; INTERNAL_ERROR; received from peer"), policy.NoAnswer},
		{"h2 protocol error", errors.New("stream error: stream ID 5; PROTOCOL_ERROR"), policy.Final},
		{"closed connection", errors.New("read tcp 127.0.0.1:1->127.0.0.1:2: use of closed network connection"), policy.NoAnswer},
		{"net timeout", timeoutError{}, policy.NoAnswer},
		{"TLS handshake timeout", tlsHandshakeTimeout{}, policy.NoAnswer},
		{"x/net GOAWAY", http2.GoAwayError{LastStreamID: 1, ErrCode: http2.ErrCodeNo}, policy.NoAnswer},
		{"x/net refused stream", fmt.Errorf("x: %w", http2.StreamError{StreamID: 3, Code: http2.ErrCodeRefusedStream}), policy.NoAnswer},
		{"x/net internal error", http2.StreamError{StreamID: 3, Code: http2.ErrCodeInternal}, policy.NoAnswer},
		{"x/net protocol error before a response", http2.StreamError{StreamID: 3, Code: http2.ErrCodeProtocol}, policy.Final},
		{"unknown authority", x509.UnknownAuthorityError{}, policy.Final},
		{"no such host", &net.DNSError{Err: "no such host", Name: "x", IsNotFound: true}, policy.Final},
		{"other", errors.New("boom"), policy.Final},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := policy.Unanswered(tt.err).Kind; got != tt.want {
				t.Errorf("Unanswered(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

// TestUnansweredRefused: an attempt that got no response is refused only
// when the connection was (through *url.Error and *net.OpError, as
// http.Client returns it): a reset, an EOF or a timeout means something
// accepted the connection first.
func TestUnansweredRefused(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		refused bool
	}{
		{"refused", &url.Error{Op: "Get", URL: "https://x", Err: opError(syscall.ECONNREFUSED)}, true},
		{"reset", &url.Error{Op: "Get", URL: "https://x", Err: opError(syscall.ECONNRESET)}, false},
		{"EOF", &url.Error{Op: "Get", URL: "https://x", Err: io.EOF}, false},
		{"timeout", timeoutError{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := policy.Unanswered(tt.err)
			if want := (policy.Failure{Kind: policy.NoAnswer, Refused: tt.refused}); got != want {
				t.Errorf("Unanswered(%v) = %+v, want %+v", tt.err, got, want)
			}
		})
	}
}

func TestKindString(t *testing.T) {
	for kind, want := range map[policy.Kind]string{
		policy.Final:         "final",
		policy.Throttled:     "throttled",
		policy.ServerError:   "server-error",
		policy.NoAnswer:      "no-answer",
		policy.StreamBroke:   "stream-broke",
		policy.ListBodyBroke: "list-body-broke",
		policy.Gone:          "gone",
	} {
		if got := kind.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", kind, got, want)
		}
	}
}

// TestGoingAway: a GOAWAY by x/net's type or net/http's bundled message.
func TestGoingAway(t *testing.T) {
	for err, want := range map[error]bool{
		nil:                 false,
		io.EOF:              false,
		io.ErrUnexpectedEOF: false,
		http2.GoAwayError{LastStreamID: 7, ErrCode: http2.ErrCodeNo}:                                                  true,
		fmt.Errorf("reading: %w", http2.GoAwayError{}):                                                                true,
		errors.New(`http2: server sent GOAWAY and closed the connection; LastStreamID=7, ErrCode=NO_ERROR, debug=""`): true,
	} {
		if got := policy.GoingAway(err); got != want {
			t.Errorf("GoingAway(%v) = %v, want %v", err, got, want)
		}
	}
}
