package watchretry

import (
	"net/http"
	"time"

	"github.com/kretry/kretry/internal/establish"
	"github.com/kretry/kretry/internal/policy"
)

// TestConfig is Config with what package transport shares (see Share): the
// tests set a virtual clock and listen to the hooks.
type TestConfig struct {
	Policy           *policy.Policy
	MaxFrameSize     int
	StallTimeout     time.Duration
	MaxInvalidFrames int
	Hooks            policy.Hooks
}

// NewForTest is New with what package transport would share.
func NewForTest(next http.RoundTripper, cfg TestConfig) http.RoundTripper {
	rt := New(next, Config{MaxFrameSize: cfg.MaxFrameSize, StallTimeout: cfg.StallTimeout, MaxInvalidFrames: cfg.MaxInvalidFrames})
	rt.(establish.Sharer).Share(establish.Shared{Policy: cfg.Policy, Hooks: cfg.Hooks})
	return rt
}
