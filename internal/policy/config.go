package policy

import (
	"math/rand/v2"
	"time"

	"k8s.io/utils/clock"
)

// Defaults, client-go's numbers where client-go has one.
const (
	DefaultInitialBackoff      = 800 * time.Millisecond
	DefaultMaxBackoff          = 30 * time.Second
	DefaultBackoffReset        = 2 * time.Minute
	DefaultMaxRetryAfter       = 60 * time.Second
	DefaultInternalErrorWindow = 30 * time.Second
	DefaultMaxInvalidFrames    = 3
)

// Bounds past which a configured duration is taken for a mistake (a unit
// slip such as 30*time.Hour for 30s) and replaced by its default, as a zero
// or negative value is.
const (
	MaxBackoffBound    = 10 * time.Minute // InitialBackoff, MaxBackoff
	MaxRetryAfterBound = time.Hour        // MaxRetryAfter
	MaxWindowBound     = 24 * time.Hour   // the windows and BackoffReset
)

// Config holds the numbers every decision is made from. The zero Config is
// the recommended one: each zero, negative or out-of-bounds field takes its
// default.
type Config struct {
	// InitialBackoff is the first wait when the server names none.
	InitialBackoff time.Duration
	// MaxBackoff caps the exponential step. The wait is drawn from
	// [step, 2·step), client-go's draw, or from [step/2, 5·step/2) after a
	// failure without an answer, so up to 2.5 times it.
	MaxBackoff time.Duration
	// BackoffReset is the quiet period after which the backoff starts
	// again from InitialBackoff.
	BackoffReset time.Duration
	// MaxRetryAfter caps a wait the server asked for (Retry-After or
	// Status details.retryAfterSeconds).
	MaxRetryAfter time.Duration
	// InternalErrorWindow is how long 5xx answers and connection failures
	// are retried, measured from the first failure of a run (see run).
	// The last backoff is cut short to retry once more at the window's end;
	// a server-named wait that would end past it is not waited for.
	InternalErrorWindow time.Duration
	// TooManyRequestsWindow, when positive, bounds how long 429 answers
	// are retried; zero (and any value out of bounds) retries them until
	// the request's context ends.
	TooManyRequestsWindow time.Duration
	// MaxInvalidFrames bounds the resumes at one resourceVersion after a
	// watch frame that is not a valid event; zero or negative is
	// DefaultMaxInvalidFrames.
	MaxInvalidFrames int
	// Clock is the time source; nil is the wall clock.
	Clock Clock
	// Rand returns uniform jitter in [0,1); nil is math/rand/v2.Float64.
	// It is called from every request's goroutine, so it must be safe for
	// concurrent use.
	Rand func() float64
	// Budget sizes the retry budget shared by every Tracker of the Policy;
	// the zero BudgetConfig is the default budget.
	Budget BudgetConfig
}

// Policy is a Config with its defaults applied. It is immutable and safe
// for concurrent use; the state of one request lives in a [Tracker].
type Policy struct {
	cfg    Config
	budget *Budget // nil: disabled
}

// New returns the Policy for cfg.
func New(cfg Config) *Policy {
	orDefault(&cfg.InitialBackoff, DefaultInitialBackoff, MaxBackoffBound)
	orDefault(&cfg.MaxBackoff, DefaultMaxBackoff, MaxBackoffBound)
	orDefault(&cfg.BackoffReset, DefaultBackoffReset, MaxWindowBound)
	orDefault(&cfg.MaxRetryAfter, DefaultMaxRetryAfter, MaxRetryAfterBound)
	orDefault(&cfg.InternalErrorWindow, DefaultInternalErrorWindow, MaxWindowBound)
	orDefault(&cfg.TooManyRequestsWindow, 0, MaxWindowBound)
	cfg.MaxBackoff = max(cfg.MaxBackoff, cfg.InitialBackoff)
	if cfg.MaxInvalidFrames <= 0 {
		cfg.MaxInvalidFrames = DefaultMaxInvalidFrames
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	return &Policy{cfg: cfg, budget: NewBudget(cfg.Budget, cfg.Clock)}
}

// orDefault replaces a zero, negative or out-of-bounds duration by def.
func orDefault(d *time.Duration, def, bound time.Duration) {
	if *d <= 0 || *d > bound {
		*d = def
	}
}

// Clock returns the clock decisions are made by; the caller waits on it.
func (p *Policy) Clock() Clock { return p.cfg.Clock }

// NewTracker starts the history of one request or one watch stream, and
// counts the request towards the retry budget (its resumes and retries do
// not count as requests).
func (p *Policy) NewTracker() *Tracker {
	p.budget.Request()
	return &Tracker{policy: p}
}
