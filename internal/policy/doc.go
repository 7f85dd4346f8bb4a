// Package policy owns kretry's retry decisions and nothing else.
//
// Every choice kretry makes about a failed LIST or WATCH (retry or hand to
// the caller, and how long to wait first) is made by one function,
// [Tracker.Decide], from an [Outcome]: what the server or the connection
// said. The package does no I/O: the transport, listretry and watchretry
// packages observe outcomes and wait; this package only decides.
//
// The numbers are client-go's: 800ms initial backoff, doubling, jitter up to
// +100%, capped at 30s, reset after 2 minutes without failures. 429 Too Many
// Requests is retried until the request's context ends (or an optional
// cap), waiting what the server asked for. 5xx answers and connection
// failures are retried for a bounded window measured from the first failure
// of a run (see [Tracker] for what ends a run), and no wait is chosen that
// would run into the caller's deadline. A [Budget] shared by a Policy's
// trackers bounds how many retries Decide allows across all requests of one
// transport; a refusal is a decision like the others ([StoppedByBudget]).
//
// The package is internal: what a user sets is transport.Config, and the
// decision engine is free to change behind it. Time and randomness are
// injected ([Clock] is client-go's k8s.io/utils/clock; Config.Rand), so
// tests never sleep.
package policy
