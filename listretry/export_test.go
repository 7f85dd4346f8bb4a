package listretry

import (
	"context"
	"io"
	"net/http"
	"time"

	"github.com/kretry/kretry/internal/establish"
	"github.com/kretry/kretry/internal/policy"
)

// Held returns how many bytes of memory a LIST body returned by the
// RoundTripper holds (its segments' capacity; for a streamed body, the
// head's), or -1 if it holds none: the body streams from the connection as
// it came.
func Held(body io.ReadCloser) int {
	switch b := body.(type) {
	case *bufferedBody:
		return b.held.capacity()
	case *partialBody:
		return b.held
	case *streamBody:
		return cap(b.head)
	}
	return -1
}

// TestConfig is Config with what package transport shares (see Share): the
// tests set a virtual clock and listen to the hooks and resumes.
type TestConfig struct {
	Policy      *policy.Policy
	BufferSize  int64
	Hold        bool
	Hooks       policy.Hooks
	OnResume    func(context.Context, Resume)
	GiveUpError func(attempts int, elapsed time.Duration, last error) error
}

// NewForTest is New with what package transport would share.
func NewForTest(next http.RoundTripper, cfg TestConfig) http.RoundTripper {
	rt := New(next, Config{BufferSize: cfg.BufferSize, Hold: cfg.Hold})
	hooks := cfg.Hooks
	hooks.ListResume = cfg.OnResume
	rt.(establish.Sharer).Share(establish.Shared{Policy: cfg.Policy, Hooks: hooks, GiveUpError: cfg.GiveUpError})
	return rt
}

// Resume and its outcomes are the reports of LIST body resumes.
type Resume = policy.ListResume

const (
	ResumeResumed  = policy.ListResumed
	ResumeMismatch = policy.ListResumeMismatch
	ResumeGone     = policy.ListResumeGone
	ResumeGaveUp   = policy.ListResumeGaveUp
)

// ResumeOutcome is what a LIST body resume came to.
type ResumeOutcome = policy.ListResumeOutcome
