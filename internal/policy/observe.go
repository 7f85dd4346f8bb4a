package policy

import "time"

// Retry describes one retry kretry is about to make, for observability
// hooks (metrics, logs). It never carries credentials, queries or bodies.
type Retry struct {
	// Path is the request's URL path.
	Path string
	// Cause says what failed: an HTTP status ("503"), a watch ERROR event
	// ("ERROR event 429"), a connection error, or a stream break.
	Cause string
	// Class is the policy class of the failure; Deliver for stream breaks.
	Class Class
	// Wait is how long kretry waits before the next attempt.
	Wait time.Duration
	// ResourceVersion is the resume point of a watch resume, else "".
	ResourceVersion string
}
