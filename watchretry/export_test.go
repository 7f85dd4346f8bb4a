package watchretry

import (
	"context"
	"net/http"
	"time"

	"github.com/kretry/kretry/internal/establish"
	"github.com/kretry/kretry/internal/policy"
)

// TestConfig is Config with what package transport builds the Client it
// hands down from: the tests set a virtual clock and hear the reports.
type TestConfig struct {
	Policy       *policy.Policy
	MaxFrameSize int
	StallTimeout time.Duration
	Hooks        Hooks
}

// NewForTest is New over a Client built as package transport builds one.
func NewForTest(next http.RoundTripper, cfg TestConfig) http.RoundTripper {
	if cfg.Policy == nil {
		cfg.Policy = policy.New(policy.Config{})
	}
	client := &establish.Client{Next: next, Policy: cfg.Policy, Report: reporter(cfg.Hooks)}
	return New(client, Config{MaxFrameSize: cfg.MaxFrameSize, StallTimeout: cfg.StallTimeout})
}

// Hooks are the functions the tests hear the reports with; nil ones hear
// nothing.
type Hooks struct {
	OnAttempt func(context.Context, establish.Attempt)
	OnRetry   func(context.Context, establish.Retry)
	OnGiveUp  func(context.Context, establish.GiveUp)
}

// reporter is Hooks as an establish.Reporter.
type reporter Hooks

func (h reporter) Attempt(ctx context.Context, a establish.Attempt) {
	if h.OnAttempt != nil {
		h.OnAttempt(ctx, a)
	}
}

func (h reporter) Retry(ctx context.Context, r establish.Retry) {
	if h.OnRetry != nil {
		h.OnRetry(ctx, r)
	}
}

func (h reporter) GiveUp(ctx context.Context, g establish.GiveUp) {
	if h.OnGiveUp != nil {
		h.OnGiveUp(ctx, g)
	}
}

func (reporter) ListResume(context.Context, establish.ListResume) {}
