package transport

import (
	"time"

	"k8s.io/utils/clock"

	"github.com/kretry/kretry/internal/policy"
)

// Config tunes kretry. The zero Config is the recommended setup. A zero or
// negative duration takes the default named in its comment, and so does one
// past its bound (a unit slip such as 30*time.Hour): 10m for the backoffs,
// 1h for MaxRetryAfter, 24h for the windows and StallTimeout.
type Config struct {
	// InitialBackoff is the first wait when the server names none; default 800ms.
	InitialBackoff time.Duration
	// MaxBackoff caps the exponential backoff's step; default 30s. As in
	// client-go, a wait is drawn from [step, 2·step); after a failure
	// without an answer (a refused or reset connection, a broken watch
	// stream) from [step/2, 5·step/2): client-go's mean with twice its
	// spread, so that a fleet that lost its server does not come back in
	// step when it returns (BENCHMARKS.md, "The fleet").
	MaxBackoff time.Duration
	// MaxRetryAfter caps a wait the server asks for with Retry-After or
	// details.retryAfterSeconds; default 60s. A wait under a second counts
	// as none asked for: the backoff applies.
	MaxRetryAfter time.Duration
	// InternalErrorWindow is how long 5xx answers, InternalError watch
	// events and connection failures are retried, from the first failure
	// of a run; default 30s. A run ends at a success: an event delivered, a
	// LIST body read whole, or a reopened watch that stays up this long.
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
	// ListBufferSize bounds the LIST bodies that are held whole in memory
	// before the caller sees them, so that one broken mid-read can be asked
	// for again; default 128 MiB. Most LIST bodies are not held: a JSON or
	// protobuf list of a built-in kind streams to the caller as it
	// arrives, holding back only its head (up to 64 KiB) until the list's
	// resourceVersion is known, and a break mid-body is resumed by asking
	// for the same list at that exact resourceVersion, reading past the
	// bytes already delivered and checking they are the same; so a list
	// of any size is protected, at no extra memory. Held whole, up to this
	// bound, are the bodies that are not the same when asked for again or
	// name their resourceVersion too late: CBOR, as=Table, custom
	// resources in JSON, a body whose Content-Encoding the caller decodes
	// itself, and single-object GETs (RetryGets). A held body that declares
	// a larger Content-Length, or turns out larger, streams through
	// unprotected past what was read.
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
	// Observer, if set, is told about every attempt, retry, watch resume,
	// give-up and budget refusal, for metrics: package
	// github.com/kretry/kretry/metrics implements it with Prometheus
	// collectors. Default none, at no cost.
	Observer Observer
	// RetryBudget bounds the load this transport's retries add to the API
	// server; the zero RetryBudget is the default budget (see its doc).
	RetryBudget RetryBudget
	// Clock is the time source of every decision and wait; default the
	// wall clock. It is client-go's clock abstraction, so tests can pass
	// k8s.io/utils/clock/testing.NewFakeClock(...). It must be safe for
	// concurrent use.
	Clock clock.WithDelayedExecution
	// Rand returns uniform jitter in [0,1); default math/rand/v2.Float64.
	// It must be safe for concurrent use.
	Rand func() float64
}

// Reason says why kretry retries a request or resumes a watch: one of a
// closed, small set, fit for a metrics label.
type Reason string

// The reasons for a retry.
const (
	ReasonTooManyRequests Reason = "429"           // a 429 answer or ERROR event 429
	ReasonServerError     Reason = "5xx"           // a 500, 502, 503 or 504 answer
	ReasonConnection      Reason = "connection"    // no answer: refused, reset, EOF, GOAWAY, timeout
	ReasonBrokenBody      Reason = "broken-body"   // a LIST body or a watch stream cut short
	ReasonErrorEvent      Reason = "error-event"   // a watch ERROR event with a 5xx code
	ReasonInvalidFrame    Reason = "invalid-frame" // a watch frame that is not a valid event
	ReasonStall           Reason = "stall"         // a watch silent for StallTimeout
	// ReasonExpiredResume is a 410 that answered the resume of a watch
	// after a lost connection, retried at once on a new connection: behind
	// a load balancer the reconnection may have reached a freshly
	// restarted apiserver whose cache starts past the resume point.
	ReasonExpiredResume Reason = "expired-resume"
)

// RetryBudget sizes the retry budget all the requests of one transport
// share, in Finagle's shape: retries may add Ratio times the requests of the
// last Window, plus MinPerSecond retries a second whatever the traffic. The
// zero RetryBudget is the default, on: 20% of the last 10s of requests plus
// 10 retries a second (one informer's watch always gets its retries; a
// thousand LISTs failing at once get about 300 retries in 10s, not 1000
// each). A retry beyond it goes to the caller at once as a give-up,
// counted by the Observer as a budget refusal.
//
// What never spends it: a 429 whose Retry-After names a wait (the server is
// pacing its clients; that wait is honoured), and a watch resume after its
// stream broke or ended early. A resume replaces the re-watch from the same
// resourceVersion that client-go's reflector makes as soon as a stream ends,
// so refusing it would save the server no request, only hand it to
// client-go, which costs a LIST when the reflector cannot resume; the
// kretry-fleet run agrees (BENCHMARKS.md: after an LB drop at N=1,000
// kretry's resumes sent the server 1,000 requests, as many as stock
// client-go's re-watches). The retries of a reopening (a 503, a refused connection) do
// spend it, like any other retry.
type RetryBudget struct {
	// Ratio is the share of the window's requests that retries may add;
	// default 0.2 (zero or negative: the default).
	Ratio float64
	// MinPerSecond is the floor, in retries a second; default 10 (zero or
	// negative: the default).
	MinPerSecond float64
	// Window is how far back requests and retries count; default 10s
	// (bounded like the windows).
	Window time.Duration
	// Disabled turns the budget off: every retry the other rules allow
	// is made.
	Disabled bool
}

// maxStallTimeout bounds StallTimeout like the windows.
const maxStallTimeout = policy.MaxWindowBound

// policy returns the decision policy this Config describes.
func (c Config) policy() *policy.Policy {
	return policy.New(policy.Config{
		InitialBackoff:        c.InitialBackoff,
		MaxBackoff:            c.MaxBackoff,
		MaxRetryAfter:         c.MaxRetryAfter,
		InternalErrorWindow:   c.InternalErrorWindow,
		TooManyRequestsWindow: c.TooManyRequestsWindow,
		MaxInvalidFrames:      c.MaxInvalidFrames,
		Clock:                 c.Clock,
		Rand:                  c.Rand,
		Budget: policy.BudgetConfig{
			Ratio:        c.RetryBudget.Ratio,
			MinPerSecond: c.RetryBudget.MinPerSecond,
			Window:       c.RetryBudget.Window,
			Disabled:     c.RetryBudget.Disabled,
		},
	})
}

// stallTimeout is StallTimeout with its bound applied: off when out of it.
func (c Config) stallTimeout() time.Duration {
	if c.StallTimeout <= 0 || c.StallTimeout > maxStallTimeout {
		return 0
	}
	return c.StallTimeout
}
