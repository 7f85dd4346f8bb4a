package policy

import "time"

// Reasons a retry or resume is made: a closed, small set, for metrics
// labels and logs.
const (
	ReasonTooManyRequests = "429"           // a 429 answer or ERROR event 429
	ReasonServerError     = "5xx"           // a 500/502/503/504 answer
	ReasonConnection      = "connection"    // no answer: refused, reset, EOF, GOAWAY, timeout
	ReasonBrokenBody      = "broken-body"   // a LIST body or watch stream cut short
	ReasonErrorEvent      = "error-event"   // a watch ERROR event 5xx
	ReasonInvalidFrame    = "invalid-frame" // a watch frame that is not a valid event
	ReasonStall           = "stall"         // a watch that sent nothing for StallTimeout
)

// Retry describes one retry kretry is about to make, for observability
// hooks (metrics, logs). It never carries credentials, queries or bodies.
type Retry struct {
	// Path is the request's URL path.
	Path string
	// Reason is one of the Reason constants.
	Reason string
	// Cause says what failed in detail: an HTTP status ("503"), a watch
	// ERROR event ("ERROR event 429"), a connection error, a stream break.
	Cause string
	// Wait is how long kretry waits before the next attempt.
	Wait time.Duration
	// ResourceVersion is the resume point of a watch resume, else "".
	ResourceVersion string
}
