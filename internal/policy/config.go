package policy

import (
	"math/rand/v2"
	"time"
)

// Defaults, client-go's numbers where client-go has one.
const (
	DefaultInitialBackoff      = 800 * time.Millisecond
	DefaultMaxBackoff          = 30 * time.Second
	DefaultBackoffReset        = 2 * time.Minute
	DefaultMaxRetryAfter       = 60 * time.Second
	DefaultInternalErrorWindow = 30 * time.Second
)

// Config holds the numbers every decision is made from. The zero Config is
// the recommended one: each zero field takes its default.
type Config struct {
	// InitialBackoff is the first wait when the server names none.
	InitialBackoff time.Duration
	// MaxBackoff caps the exponential step; the jitter (up to +100%, as
	// client-go's) comes on top of it.
	MaxBackoff time.Duration
	// BackoffReset is the quiet period after which the backoff starts
	// again from InitialBackoff.
	BackoffReset time.Duration
	// MaxRetryAfter caps a wait the server asked for (Retry-After or
	// Status details.retryAfterSeconds).
	MaxRetryAfter time.Duration
	// InternalErrorWindow is how long 5xx answers and connection failures
	// are retried, measured from the first failure since the last progress.
	// The last backoff is cut short to retry once more at the window's end;
	// a server-named wait that would end past it is not waited for.
	InternalErrorWindow time.Duration
	// TooManyRequestsWindow, when positive, bounds how long 429 answers
	// are retried; zero retries them until the request's context ends.
	TooManyRequestsWindow time.Duration
	// Clock is the time source; nil is the wall clock.
	Clock Clock
	// Rand returns uniform jitter in [0,1); nil is math/rand/v2.Float64.
	// It is called from every request's goroutine, so it must be safe for
	// concurrent use.
	Rand func() float64
}

// Policy is a Config with its defaults applied. It is immutable and safe
// for concurrent use; the state of one request lives in a [Tracker].
type Policy struct {
	cfg Config
}

// New returns the Policy for cfg.
func New(cfg Config) *Policy {
	setDefault(&cfg.InitialBackoff, DefaultInitialBackoff)
	setDefault(&cfg.MaxBackoff, DefaultMaxBackoff)
	setDefault(&cfg.BackoffReset, DefaultBackoffReset)
	setDefault(&cfg.MaxRetryAfter, DefaultMaxRetryAfter)
	setDefault(&cfg.InternalErrorWindow, DefaultInternalErrorWindow)
	if cfg.MaxBackoff < cfg.InitialBackoff {
		cfg.MaxBackoff = cfg.InitialBackoff
	}
	if cfg.Clock == nil {
		cfg.Clock = RealClock{}
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	return &Policy{cfg: cfg}
}

func setDefault(d *time.Duration, def time.Duration) {
	if *d <= 0 {
		*d = def
	}
}

// Clock returns the clock decisions are made by; the caller waits on it.
func (p *Policy) Clock() Clock { return p.cfg.Clock }

// Config returns the effective configuration, defaults applied.
func (p *Policy) Config() Config { return p.cfg }

// NewTracker starts the failure history of one request or one watch stream.
func (p *Policy) NewTracker() *Tracker { return &Tracker{policy: p, progressed: true} }
