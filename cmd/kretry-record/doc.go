// Command kretry-record drives a real kube-apiserver v1.37.2 (started with internal/harness/apiserver)
// through scripted scenarios and writes what went over the wire to conformance/testdata/, one
// internal/harness/fixture JSON file per scenario.
//
// Usage (needs `make apiserver` first; `make record` does both):
//
//	go run ./cmd/kretry-record -out conformance/testdata [-only watch-json,list-429] [-v]
//
// The cluster has three kube-apiservers on one etcd: 0 with default flags, 1 in request-limit
// mode (one request in flight for users outside system:masters), 2 without a watch cache for
// ConfigMaps so that etcd compaction is visible. Requests are made by client-go (typed clientset
// or its REST client, with the headers client-go sends); a writer on a separate client changes
// ConfigMaps while watches are open. Each scenario checks what it recorded (e.g. that a BOOKMARK
// arrived) and the command fails instead of writing a fixture that does not show its point.
package main
