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

	"golang.org/x/net/http2"

	"github.com/kretry/kretry/internal/policy"
)

func TestClassifyStatus(t *testing.T) {
	tests := []struct {
		code int
		want policy.Class
	}{
		{200, policy.Deliver},
		{201, policy.Deliver},
		{301, policy.Deliver},
		{304, policy.Deliver},
		{400, policy.Deliver},
		{401, policy.Deliver},
		{403, policy.Deliver},
		{404, policy.Deliver},
		{409, policy.Deliver},
		{410, policy.Deliver},
		{422, policy.Deliver},
		{429, policy.TooManyRequests},
		{500, policy.InternalError},
		{501, policy.Deliver},
		{502, policy.InternalError},
		{503, policy.InternalError},
		{504, policy.InternalError},
		{505, policy.Deliver},
	}
	for _, tt := range tests {
		if got := policy.ClassifyStatus(tt.code); got != tt.want {
			t.Errorf("ClassifyStatus(%d) = %v, want %v", tt.code, got, tt.want)
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

func TestClassifyBodyError(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want policy.Class
	}{
		{"nil", nil, policy.Deliver},
		{"context canceled", fmt.Errorf("read: %w", context.Canceled), policy.Deliver},
		{"context deadline", context.DeadlineExceeded, policy.Deliver},
		{"unexpected EOF", io.ErrUnexpectedEOF, policy.InternalError},
		{"h2 CANCEL from a proxy", http2.StreamError{StreamID: 5, Code: http2.ErrCodeCancel}, policy.InternalError},
		{"h2 PROTOCOL_ERROR", errors.New("stream error: stream ID 5; PROTOCOL_ERROR; received from peer"), policy.InternalError},
		{"TLS record error", errors.New("local error: tls: bad record MAC"), policy.InternalError},
		{"anything else", errors.New("boom"), policy.InternalError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := policy.ClassifyBodyError(tt.err); got != tt.want {
				t.Errorf("ClassifyBodyError(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

// opError is a dial's error as net returns it.
func opError(errno syscall.Errno) error {
	return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", errno)}
}

func TestClassifyError(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want policy.Class
	}{
		{"nil", nil, policy.Deliver},
		{"context canceled", context.Canceled, policy.Deliver},
		{"context deadline", context.DeadlineExceeded, policy.Deliver},
		{"wrapped context", fmt.Errorf("read: %w", context.Canceled), policy.Deliver},
		{"connection refused", opError(syscall.ECONNREFUSED), policy.InternalError},
		{"connection reset", opError(syscall.ECONNRESET), policy.InternalError},
		{"broken pipe", opError(syscall.EPIPE), policy.InternalError},
		{"EOF", io.EOF, policy.InternalError},
		{"unexpected EOF", io.ErrUnexpectedEOF, policy.InternalError},
		{"wrapped EOF", fmt.Errorf("reading body: %w", io.EOF), policy.InternalError},
		{"url.Error EOF", &url.Error{Op: "Get", URL: "https://x", Err: io.EOF}, policy.InternalError},
		{"GOAWAY", errors.New("http2: server sent GOAWAY and closed the connection; LastStreamID=1, ErrCode=NO_ERROR"), policy.InternalError},
		{"h2 connection lost", errors.New("http2: client connection lost"), policy.InternalError},
		{"h2 force closed", errors.New("http2: client connection force closed via ClientConn.Close"), policy.InternalError},
		// Fails before (delivered, so the reopening ended the watch): net/http's
		// HTTP/1.1 client on a new connection that a balancer closed unanswered.
		{"h1 new connection closed unanswered", &url.Error{Op: "Get", URL: "http://x", Err: errors.New("http: server closed idle connection")}, policy.InternalError},
		{"h2 refused stream", errors.New("stream error: stream ID 3; REFUSED_STREAM"), policy.InternalError},
		{"h2 internal error", errors.New("stream error: stream ID 5; INTERNAL_ERROR; received from peer"), policy.InternalError},
		{"h2 protocol error", errors.New("stream error: stream ID 5; PROTOCOL_ERROR"), policy.Deliver},
		{"closed connection", errors.New("read tcp 127.0.0.1:1->127.0.0.1:2: use of closed network connection"), policy.InternalError},
		{"net timeout", timeoutError{}, policy.InternalError},
		{"TLS handshake timeout", tlsHandshakeTimeout{}, policy.InternalError},
		{"x/net GOAWAY", http2.GoAwayError{LastStreamID: 1, ErrCode: http2.ErrCodeNo}, policy.InternalError},
		{"x/net refused stream", fmt.Errorf("x: %w", http2.StreamError{StreamID: 3, Code: http2.ErrCodeRefusedStream}), policy.InternalError},
		{"x/net internal error", http2.StreamError{StreamID: 3, Code: http2.ErrCodeInternal}, policy.InternalError},
		{"x/net protocol error before a response", http2.StreamError{StreamID: 3, Code: http2.ErrCodeProtocol}, policy.Deliver},
		{"unknown authority", x509.UnknownAuthorityError{}, policy.Deliver},
		{"no such host", &net.DNSError{Err: "no such host", Name: "x", IsNotFound: true}, policy.Deliver},
		{"other", errors.New("boom"), policy.Deliver},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := policy.ClassifyError(tt.err); got != tt.want {
				t.Errorf("ClassifyError(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

// TestNoAnswer: an attempt that got no response is a no-answer outcome of
// its error's class, refused only when the connection was (through
// *url.Error and *net.OpError, as http.Client returns it): a reset, an EOF
// or a timeout means something accepted the connection first.
func TestNoAnswer(t *testing.T) {
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
			got := policy.NoAnswer(tt.err)
			if want := (policy.Outcome{Class: policy.InternalError, NoAnswer: true, Refused: tt.refused}); got != want {
				t.Errorf("NoAnswer(%v) = %+v, want %+v", tt.err, got, want)
			}
		})
	}
}

func TestClassString(t *testing.T) {
	for class, want := range map[policy.Class]string{
		policy.Deliver:         "Deliver",
		policy.TooManyRequests: "TooManyRequests",
		policy.InternalError:   "InternalError",
	} {
		if got := class.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", class, got, want)
		}
	}
}
