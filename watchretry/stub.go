package watchretry

import (
	"net/http"
	"time"

	"github.com/kretry/kretry/policy"
)

// Config tunes watch resumption.
type Config struct {
	Policy           *policy.Policy
	MaxFrameSize     int
	StallTimeout     time.Duration
	MaxInvalidFrames int
	OnRetry          func(policy.Retry)
}

// New is a placeholder until the resuming body lands.
func New(next http.RoundTripper, cfg Config) http.RoundTripper { return next }
