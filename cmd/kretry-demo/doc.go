// Command kretry-demo shows what kretry does for a stock client-go informer: it starts an
// in-process API server on loopback that serves a changing ConfigMap collection and breaks
// its clients on a seeded fault schedule, runs two SharedInformerFactory ConfigMap informers
// side by side (one plain, one with kretry), prints a progress line a second and ends with a
// table: full-state fetches, requests, bytes, events, cache == server, time to recover.
//
//	go run ./cmd/kretry-demo                      # 30s + at most 15s to settle
//	go run ./cmd/kretry-demo --fault-rate 2 --duration 20s
//	go run ./cmd/kretry-demo --kubeconfig ~/.kube/config --namespace kube-system
//
// With --kubeconfig it watches a real cluster instead: read-only, no fault injection.
package main
