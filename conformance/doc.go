// Package conformance measures what an http.RoundTripper under client-go does when the API
// server's answers break, by replaying HTTP exchanges recorded from a real kube-apiserver
// v1.37.2 (conformance/testdata, written by cmd/kretry-record) with faults injected at exact
// places, and checking what the caller got and what the server was asked.
//
// Run it on any transport wrapper, the way rest.Config.Wrap takes one:
//
//	func TestConformance(t *testing.T) {
//		conformance.Run(t, transport.Wrapper(transport.Config{})) // nil: stock client-go
//	}
//
// or get the verdicts without a testing.T, as cmd/kretry-conformance does to print the
// table for stock client-go, go-retryablehttp and kretry:
//
//	for _, res := range conformance.Evaluate(wrap) { fmt.Println(res.Scenario, res.Verdict()) }
//
// # Scenarios
//
// A Scenario is a fixture, a Caller, a fault schedule and the Outcome a correct transport
// produces. The callers are real client-go: a typed clientset's Watch read to the end (what
// kubectl get -w does), a LIST through tools/pager, single LISTs, a Create, and a
// SharedIndexInformer, started both ways client-go starts one: with a streaming list (v0.35+,
// the WatchListClient gate on; skipped where it is off) and with a paged LIST then a watch
// (v0.33 and v0.34, and v0.35+ with WatchListClient=false). The faults are those of a real
// network and a real control plane: a connection cut at a byte offset (inside a frame, inside
// a protobuf length prefix or a CBOR head, at a frame boundary, halfway through a LIST body),
// an early clean close of a watch, an HTTP status in place of a response (503 without
// Retry-After, the recorded 429 text/plain with Retry-After: 1, a 500 InternalError Status,
// the recorded 504 ResourceVersionTooLarge, 403, 410), an ERROR event in the stream (429
// with retryAfterSeconds, 500, 410), and connection refused or reset before a response.
//
// Watches come in the three encodings kube-apiserver serves: JSON, protobuf and CBOR
// (application/cbor-seq, recorded from a server with CBORServingAndStorage; a CBOR scenario
// turns client-go's ClientsAllowCBOR gate on for the process, as
// KUBE_FEATURE_ClientsAllowCBOR=true would, so that its client can ask for CBOR).
//
// Some scenarios are there because retrying is wrong: a 410 must reach the caller (it is
// client-go's cue to relist), a break inside the initial state of a streaming list has no
// resume point, a POST must never be sent twice, a 403 goes through, and when retries run out
// the caller must get the server's Status, not the transport's own error. A transport that
// retries everything fails those.
//
// # The replayed server
//
// The server is an httpmock transport built from the fixture. A LIST is answered with the
// recorded response for the identical query (a retry that changes the query gets no answer
// and fails the scenario). The recorded watch is served with its chunks as they arrived; a
// watch resumed at a resourceVersion is answered from the recorded event log: the events newer
// than that resourceVersion, never the initial state. Past the recording, a watch is held
// open like a live one (the recording ended at its timeoutSeconds; the caller stops first).
// Statuses are the recorded responses where the fixtures have them, else a metav1.Status in
// the encoding the request prefers, built as kube-apiserver builds it.
//
// # What is checked
//
//   - The caller's view: every watch event exactly once and in order, the same as a correct
//     transport delivers (computed by walking the fault schedule over the same responses);
//     every LIST item; every informer notification; or, for Deliver, the server's status.
//   - The server's view, as requests arrive: a watch resumes at the resourceVersion of the
//     last whole event the caller got, without sendInitialEvents or resourceVersionMatch,
//     with timeoutSeconds what remains of the caller's (at least 1, less by any
//     retryAfterSeconds waited); a retried LIST sends the same query; no request follows a
//     4xx or an ERROR 410; an informer fetches the initial state once (a second streaming
//     list or a LIST is a relist); a POST is sent once.
//
// Scenarios are deterministic except for the wall time the transport and client-go spend
// waiting: with a virtual clock (kretry's transport.Config.Clock) a run takes milliseconds.
package conformance
