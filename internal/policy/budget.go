package policy

import (
	"sync"
	"time"
)

// Budget defaults, Finagle's RetryBudget numbers: retries may add 20% to
// the requests of the last 10 s, plus a floor of 10 retries a second so
// that a quiet client (one informer, one watch) can always retry.
const (
	DefaultBudgetRatio        = 0.2
	DefaultBudgetMinPerSecond = 10
	DefaultBudgetWindow       = 10 * time.Second
)

// budgetBuckets is how finely the window slides.
const budgetBuckets = 10

// BudgetConfig sizes a retry budget. The zero BudgetConfig is the default
// (Finagle's numbers); Disabled turns the budget off.
//
// Why Finagle's shape and not gRPC's token bucket (maxTokens, tokenRatio):
// gRPC's bucket spends a token per failure and earns a fraction per
// success, so a client whose only request is one long watch (no successes
// to earn from) runs dry after a handful of breaks, which is exactly the
// client kretry exists for. A share of recent requests plus a floor per
// second scales with a client's traffic and never starves a quiet one.
type BudgetConfig struct {
	// Ratio is the share of the window's requests that retries may add;
	// default 0.2.
	Ratio float64
	// MinPerSecond is the floor: retries a second allowed whatever the
	// traffic; default 10.
	MinPerSecond float64
	// Window is how far back requests and retries count; default 10s.
	Window time.Duration
	// Disabled turns the budget off: every retry the other rules allow is
	// made.
	Disabled bool
}

// Budget bounds how much load a transport's retries add: one per
// transport, shared by all its requests, safe for concurrent use. Every
// first attempt deposits (Request); a retry is allowed while the window's
// retries stay under Ratio times its requests plus MinPerSecond times its
// length (Spend). A nil *Budget allows everything.
type Budget struct {
	clock  Clock
	ratio  float64
	floor  float64
	bucket time.Duration

	mu       sync.Mutex
	epoch    time.Time // start of bucket 0
	current  int64     // index of the newest bucket since epoch
	requests [budgetBuckets]float64
	retries  [budgetBuckets]float64
}

// NewBudget returns the budget cfg describes on clock (nil: the wall
// clock), or nil when cfg disables it.
func NewBudget(cfg BudgetConfig, clock Clock) *Budget {
	if cfg.Disabled {
		return nil
	}
	if cfg.Ratio <= 0 {
		cfg.Ratio = DefaultBudgetRatio
	}
	if cfg.MinPerSecond <= 0 {
		cfg.MinPerSecond = DefaultBudgetMinPerSecond
	}
	orDefault(&cfg.Window, DefaultBudgetWindow, MaxWindowBound)
	if clock == nil {
		clock = New(Config{}).Clock()
	}
	return &Budget{
		clock:  clock,
		ratio:  cfg.Ratio,
		floor:  cfg.MinPerSecond * cfg.Window.Seconds(),
		bucket: cfg.Window / budgetBuckets,
		epoch:  clock.Now(),
	}
}

// Request records a first attempt: it earns Ratio of a retry.
func (b *Budget) Request() {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.requests[b.advance()]++
}

// Spend asks for one retry. It reports whether the retry may be made, and
// if so counts it against the window.
func (b *Budget) Spend() bool {
	if b == nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	i := b.advance()
	var requests, retries float64
	for j := range budgetBuckets {
		requests += b.requests[j]
		retries += b.retries[j]
	}
	if retries+1 > b.ratio*requests+b.floor {
		return false
	}
	b.retries[i]++
	return true
}

// advance moves the window to now, clearing buckets that slid out of it,
// and returns the current bucket's slot.
func (b *Budget) advance() int {
	now := max(int64(b.clock.Since(b.epoch)/b.bucket), b.current)
	for k := b.current + 1; k <= now && k <= b.current+budgetBuckets; k++ {
		slot := int(k % budgetBuckets)
		b.requests[slot], b.retries[slot] = 0, 0
	}
	b.current = now
	return int(now % budgetBuckets)
}
