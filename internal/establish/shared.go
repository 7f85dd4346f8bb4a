package establish

import (
	"net/http"
	"time"

	"github.com/kretry/kretry/internal/policy"
)

// Shared is what package transport gives every RoundTripper it builds with
// watchretry.New and listretry.New: one policy (and so one retry budget),
// the hooks that report to its Observer and logs, and the error a LIST body
// ends with when its resume gave up. Their public Config cannot carry it:
// the policy and the hooks are internal types.
type Shared struct {
	// Policy decides every retry and wait; nil keeps the default policy.
	Policy *policy.Policy
	// Hooks are told about every attempt, retry, resume and give-up.
	Hooks policy.Hooks
	// GiveUpError, if set, makes the error a LIST body ends with when its
	// resume did not succeed (see GiveUpError.Body); it must keep last
	// reachable to errors.Is and errors.As.
	GiveUpError func(attempts int, elapsed time.Duration, last error) error
}

// Sharer is a RoundTripper that takes Shared: package transport calls Share
// once, before the RoundTripper's first request.
type Sharer interface {
	http.RoundTripper
	Share(Shared)
}

// Public, set by package transport when it is initialised, lets errors.As
// reach a give-up as transport's public *GiveUpError (see GiveUpError.As):
// a caller of watchretry.New or listretry.New that names that type has
// package transport in its binary.
var Public func(e *GiveUpError, target any) bool
