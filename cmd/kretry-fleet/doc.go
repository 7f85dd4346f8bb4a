// Command kretry-fleet measures the thundering herd: N stock client-go
// ConfigMap informers in one process (each with its own clientset,
// connections and rate limiter, as N controllers in N processes would
// have), against a small in-process API server of its own, through three
// faults, once per kind of client (stock client-go; kretry with its
// defaults; kretry with the retry budget off). docs/fleet-model.py is the
// model of the restart scenario kretry's backoff defaults were chosen with.
//
//	go run ./cmd/kretry-fleet                         # N=1000, every scenario and client
//	go run ./cmd/kretry-fleet -clients 100 -scenarios restart -plot fleet.png
//	make fleet                                        # what BENCHMARKS.md shows, with docs/fleet.png
//
// The server serves one namespace of ConfigMaps in JSON: LIST, WATCH from a
// resourceVersion, and watch-lists (sendInitialEvents=true, ended by the
// k8s.io/initial-events-end bookmark), which client-go v0.35+ informers
// start with. LISTs and watch-lists take an inflight seat for -list-cost;
// past -inflight seats the server answers 429 with Retry-After: 1 and the
// text/plain body of kube-apiserver's max-inflight filter. A writer changes
// one object every 200 ms.
//
// Scenarios (one fault each, 2 s after the fleet has synced):
//   - restart: the listener closes (connections refused) and every
//     connection is cut for -down (10 s); the server comes back with no
//     watch history, so every watch from an older resourceVersion gets 410
//     Expired, as after a real kube-apiserver restart.
//   - lbdrop: every connection is cut at once; the server stays up.
//   - overload: every connection is cut, then every new request is answered
//     429 (Retry-After: 1) for -overload (60 s).
//
// Figures per run: peak and 99th-percentile requests per second arriving
// at the server (one-second windows sliding by 100 ms, from the fault on)
// and the busiest 100 ms bin, requests, initial-state
// fetches (LISTs and watch-lists) and bytes served, 429s and 410s
// answered, the time from the fault's end until half and then every cache
// has the first change made after it, caches equal to the server at the
// end, kretry's retries and resumes, and retries the budget refused. -json
// writes them with the request-rate series (all requests, and the
// initial-state fetches among them); -plot draws the series with gonum/plot
// from the nested module cmd/kretry-fleet/plot, which keeps gonum out of
// kretry's go.mod.
package main
