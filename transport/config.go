package transport

import (
	"time"

	"github.com/kretry/kretry/internal/policy"
)

// Config tunes kretry. The zero Config is the recommended setup; every zero
// field takes the default named in its comment.
type Config struct {
	// InitialBackoff is the first wait when the server names none; default 800ms.
	InitialBackoff time.Duration
	// MaxBackoff caps the exponential backoff; default 30s. As in
	// client-go, up to 100% jitter comes on top.
	MaxBackoff time.Duration
	// MaxRetryAfter caps a wait the server asks for with Retry-After or
	// details.retryAfterSeconds; default 60s.
	MaxRetryAfter time.Duration
	// InternalErrorWindow is how long 5xx answers, InternalError watch
	// events and connection failures are retried, from the first failure
	// since the last progress; default 30s.
	InternalErrorWindow time.Duration
	// TooManyRequestsWindow, when positive, bounds how long 429 answers are
	// retried; default 0: until the request's context ends.
	TooManyRequestsWindow time.Duration

	// RetryGets retries single-object GETs like LISTs; default off, so a
	// GET behaves exactly as without kretry.
	RetryGets bool
	// APIPrefix is the path prefix in front of /api and /apis when the API
	// server sits behind a path-routing proxy (e.g. "/k8s/clusters/c-1");
	// default none. Requests outside the API paths pass through.
	APIPrefix string

	// ListBufferSize bounds how much of a LIST body is read before the
	// response is handed over, so that a body broken mid-read can be
	// retried; past it the body streams on unprotected; default 128 MiB.
	ListBufferSize int64
	// MaxFrameSize bounds one watch event; a larger one ends the stream
	// with an error; default 16 MiB, as client-go.
	MaxFrameSize int
	// StallTimeout, when positive, treats a watch stream that delivers no
	// byte for that long as broken and resumes it; default off (the server
	// sends nothing on an idle watch until a bookmark).
	StallTimeout time.Duration
	// MaxInvalidFrames bounds how often a watch resumes at one
	// resourceVersion after an undecodable event before the error reaches
	// the caller; default 3.
	MaxInvalidFrames int

	// OnRetry, if set, is called before every retry and every watch
	// resume, for metrics and logs. Requests call it from their own
	// goroutines, so it may run concurrently; it must not block.
	OnRetry func(policy.Retry)
	// Clock is the time source of every decision and wait; default the
	// wall clock. Tests set a virtual one. It must be safe for concurrent use.
	Clock policy.Clock
	// Rand returns uniform jitter in [0,1); default math/rand/v2.Float64.
	// It must be safe for concurrent use.
	Rand func() float64
}

// policy returns the decision policy this Config describes.
func (c Config) policy() *policy.Policy {
	return policy.New(policy.Config{
		InitialBackoff:        c.InitialBackoff,
		MaxBackoff:            c.MaxBackoff,
		MaxRetryAfter:         c.MaxRetryAfter,
		InternalErrorWindow:   c.InternalErrorWindow,
		TooManyRequestsWindow: c.TooManyRequestsWindow,
		Clock:                 c.Clock,
		Rand:                  c.Rand,
	})
}
