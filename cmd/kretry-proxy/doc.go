// Command kretry-proxy serves the Kubernetes API on loopback, as `kubectl proxy` does, with
// kretry underneath: every LIST and WATCH that goes through it is retried and resumed, so that
// kubectl, the Python client, @kubernetes/client-node or curl, pointed at it, never see a cut
// connection, a 503 during a rolling upgrade, a 429 or an InternalError watch event that
// kretry can absorb.
//
//	kretry-proxy --kubeconfig ~/.kube/config            # serves http://127.0.0.1:8001
//	kubectl --server=http://127.0.0.1:8001 get configmaps -w -o name
//
// Flags:
//
//	--kubeconfig PATH   the cluster and credentials to use; without it, an in-process demo
//	                    API server (ConfigMaps in namespace "demo", changing and breaking its
//	                    clients on a seeded schedule), so that it runs on a fresh machine
//	--context NAME      the kubeconfig context (default: its current context)
//	--port 8001         0 picks a free port; the address is printed either way
//	--address 127.0.0.1 a loopback address: the proxy lends its credentials to whoever
//	                    connects, so it refuses to bind any other
//	--accept-hosts RE   comma-separated regular expressions for the Host header's name
//	                    (default: localhost, 127.0.0.1, ::1)
//	--allow-upgrades    let protocol upgrades and pods' exec, attach, portforward through
//	--read-only         refuse every method but GET
//	--retry-gets        retry GETs of single objects (and of /api/v1-style discovery) like
//	                    LISTs (default true: a proxy's callers would rather wait than fail)
//	--shutdown-timeout  how long requests in flight may take after SIGTERM/SIGINT (10s)
//	--demo-fault-rate   demo server only: fault scenarios per second per client (0.2)
//
// It prints "Starting to serve on ADDRESS:PORT" as `kubectl proxy` does and serves /healthz
// and /metrics itself: Prometheus metrics, kretry's own from github.com/kretry/kretry/metrics
// (kretry_requests_total, kretry_retries_total and the rest) and the proxy's kretry_proxy_*
// counters of requests served, sent upstream and refused, and of open watches (see package
// proxy). On SIGTERM or SIGINT it ends open watches cleanly (the client sees its watch end
// after the last whole event, as when the API server ends one) and exits once the other
// requests in flight are done; a second signal kills it.
//
// The handler is k8s.io/kubectl/pkg/proxy's, so answers are those of `kubectl proxy`; see
// package proxy for why, and for the checks in front of it. As with `kubectl proxy`, a
// client's Impersonate-* headers pass through (the proxy's identity needs the impersonate
// verb for them to work); its Authorization header does not.
//
// This command is a module of its own, so that k8s.io/kubectl stays out of the library's
// go.mod; from the repository root: go -C cmd/kretry-proxy run . --kubeconfig ~/.kube/config
package main
