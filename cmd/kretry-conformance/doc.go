// Command kretry-conformance runs the conformance suite (package conformance: HTTP exchanges
// recorded from kube-apiserver v1.37.2, replayed with faults injected) on three transports
// and prints the comparison table:
//
//   - stock client-go (no wrapper);
//   - go-retryablehttp's RoundTripper with its defaults (logger off);
//   - kretry with its zero Config.
//
// Usage:
//
//	go run ./cmd/kretry-conformance [-run regexp] [-timeout 60s] [-v]
//
// Everything runs on real clocks: go-retryablehttp waits 1s, 2s, 4s, 8s between attempts,
// client-go sleeps on Retry-After, kretry waits about a second per retry and, when a 503
// never goes away, retries for its 30s InternalErrorWindow before handing the Status over.
// Scenarios run concurrently, each bounded by -timeout, so the command takes about a
// minute. It exits 1 when kretry fails a scenario.
package main
