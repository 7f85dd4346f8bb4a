// Command kretry-demo shows what kretry does for stock client-go clients: it starts an
// in-process API server on loopback that serves a changing ConfigMap collection and hits
// its clients with the faults of a real cluster, runs four clients side by side (a
// SharedInformerFactory informer and a raw watcher, the kubectl get -w pattern, each once
// plain and once through kretry), prints a progress line a second and ends with a table:
// initial-state fetches and the bytes they cost, watches that ended, changes missed, time
// to recover, cache == server; then the faults by kind and a one-line verdict computed
// from the numbers.
//
// The faults (--help lists them with their weights): per client, connection cuts, early
// closes, InternalError ERROR events and 429 bursts with Retry-After; for every client at
// once, three waves of a rolling upgrade (every connection dropped, then 503s on every
// LIST and watch for a few seconds); for the informers, after the last wave, a
// compaction whose 410 Expired is the one fault where a relist is the right answer. The
// server holds still until every client has its initial state, so all four start from
// the same resourceVersion and "changes missed" is exact.
//
//	go run ./cmd/kretry-demo                      # 30s of faults, then at most 5s to settle
//	go run ./cmd/kretry-demo --plot demo.png      # and a PNG timeline (gonum/plot)
//	go run ./cmd/kretry-demo --fault-rate 2 --duration 2m --seed 7
//	go run ./cmd/kretry-demo --kubeconfig ~/.kube/config --namespace kube-system
//
// --plot runs the plotter in cmd/kretry-demo/plot, a module of its own so that gonum/plot
// and its fonts stay out of kretry's go.mod, with `go run`: it needs the go tool and a
// kretry checkout. With --kubeconfig the demo watches a real cluster instead: read-only,
// no fault injection.
package main
