// Command plot draws kretry-demo's timeline as a PNG: a strip of the faults each client
// got, then per client its initial-state fetches, its requests on the wire and how many
// changes it was behind the server, over time, with the rollout shaded. kretry-demo
// --plot runs it; it is a module of its own so that gonum/plot and its fonts stay out of
// kretry's go.mod.
//
//	go run . -in timeline.json -out demo.png -title "kretry-demo"
//
// The input is the JSON kretry-demo writes (cmd/kretry-demo/timeline.go): clients,
// samples of {requests, fetches, lag} per client, faults, spans, notes, stop and end
// times, all in seconds since the faults began.
package main
