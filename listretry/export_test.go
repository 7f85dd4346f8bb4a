package listretry

import (
	"context"
	"io"
	"net/http"

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

// TestConfig is Config with what package transport builds the Client it
// hands down from: the tests set a virtual clock and hear the resumes.
type TestConfig struct {
	Policy      *policy.Policy
	BufferSize  int64
	Hold        bool
	OnResume    func(context.Context, Resume)
	GiveUpError func(*establish.GiveUpError) error
}

// NewForTest is New over a Client built as package transport builds one.
func NewForTest(next http.RoundTripper, cfg TestConfig) http.RoundTripper {
	if cfg.Policy == nil {
		cfg.Policy = policy.New(policy.Config{})
	}
	client := &establish.Client{Next: next, Policy: cfg.Policy, Report: onResume(cfg.OnResume), GiveUpError: cfg.GiveUpError}
	return New(client, Config{BufferSize: cfg.BufferSize, Hold: cfg.Hold})
}

// onResume is a Reporter that hears LIST resumes only.
type onResume func(context.Context, Resume)

func (f onResume) ListResume(ctx context.Context, r Resume) {
	if f != nil {
		f(ctx, r)
	}
}
func (onResume) Attempt(context.Context, establish.Attempt) {}
func (onResume) Retry(context.Context, establish.Retry)     {}
func (onResume) GiveUp(context.Context, establish.GiveUp)   {}

// Resume and its outcomes are the reports of LIST body resumes.
type Resume = establish.ListResume

const (
	ResumeResumed  = establish.ListResumed
	ResumeMismatch = establish.ListMismatch
	ResumeGone     = establish.ListGone
	ResumeGaveUp   = establish.ListGaveUp
)

// ResumeOutcome is what a LIST body resume came to.
type ResumeOutcome = establish.ListOutcome
