// Package policy owns kretry's retry decisions and nothing else.
//
// Every choice kretry makes about a failed LIST or WATCH (wait and retry,
// resume at once or after a spread, search for another apiserver on a new
// connection, hold, hand over, give up) is made by one function,
// [Tracker.Decide], from a [Failure] (what happened) and the [Tracker]'s
// history (small values, one file each: the failure run, the run of 429s,
// the backoff, the lost connection, the search). The caller's deadline and
// the retry budget are two filters applied once, at the end. The package
// does no I/O: the establishment loop, listretry and watchretry report what
// happened and do what the decision says.
//
// The numbers are client-go's: 800ms initial backoff, doubling, jitter up to
// +100%, capped at 30s, reset after 2 minutes without failures. 429 Too Many
// Requests is retried until the request's context ends (or an optional
// cap), waiting what the server asked for. 5xx answers and connection
// failures are retried for a bounded window measured from the first failure
// of a run. A [Budget] shared by a Policy's trackers bounds how many retries
// Decide allows across all requests of one transport.
//
// The package is internal: what a user sets is transport.Config, and the
// decision engine is free to change behind it. Time and randomness are
// injected ([Clock] is client-go's k8s.io/utils/clock; Config.Rand), so
// tests never sleep.
package policy
