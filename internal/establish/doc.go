// Package establish runs the retry loop that gets one GET answered: it sends
// the request through the next RoundTripper with go-retryablehttp's Client,
// asks the policy after every attempt, and waits where the policy says.
// listretry uses it for LIST requests and watchretry to open and reopen
// watches; neither owns a loop of its own.
package establish
