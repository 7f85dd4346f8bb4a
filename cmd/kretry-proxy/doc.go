// Command kretry-proxy serves the Kubernetes API on loopback, as `kubectl proxy` does, with
// kretry underneath: every LIST and WATCH that goes through it is retried and resumed, so that
// kubectl, the Python client, @kubernetes/client-node or curl, pointed at it, never see a cut
// connection, a 503 during a rolling upgrade, a 429 or an InternalError watch event that
// kretry can absorb.
//
//	kretry-proxy                                        # serves http://127.0.0.1:8001
//	kubectl --server=http://127.0.0.1:8001 get configmaps -w -o name
//
// It is made to run beside a program in a pod, as a sidecar: the program, in any language,
// talks plain HTTP to 127.0.0.1:8001 with no credentials, and the proxy sends the pod's
// service-account token. examples/sidecar is such a pod (a Python program, the proxy as a
// native sidecar, its RBAC); docs/kretry-proxy.md says how to build its image from go build
// output.
//
// It finds its cluster as kubectl does: --kubeconfig, else the files of $KUBECONFIG, else
// ~/.kube/config, else the pod's service account (in-cluster: KUBERNETES_SERVICE_HOST and
// KUBERNETES_SERVICE_PORT, the token and ca.crt in --service-account-dir). When it finds
// none it fails, naming what it tried. It prints which cluster it serves and how it found it.
// A service-account token (or a kubeconfig's tokenFile) is read again as soon as the file
// changes, as the kubelet rotates it: every request from then on, and every watch kretry
// resumes, carries the new token, with no restart and no watch broken.
//
// Flags:
//
//	--kubeconfig PATH   the cluster and credentials to use (default: as above)
//	--context NAME      the kubeconfig context (default: its current context)
//	--service-account-dir DIR
//	                    in-cluster: where token and ca.crt are mounted
//	                    (/var/run/secrets/kubernetes.io/serviceaccount)
//	--demo              serve an in-process demo API server instead of a cluster
//	                    (ConfigMaps in namespace "demo", changing and breaking its clients
//	                    on a seeded schedule), so that it runs on a fresh machine; it says so
//	--demo-fault-rate   with --demo: fault scenarios per second per client (0.2)
//	--port 8001         0 picks a free port; the address is printed either way
//	--address 127.0.0.1 a loopback address: the proxy lends its credentials to whoever
//	                    connects, so it refuses to bind any other
//	--probe-address ADDR
//	                    also serve /healthz and /metrics, and nothing else, on ADDR (e.g.
//	                    :8081): the kubelet probes a pod's IP, not its loopback (default off)
//	--accept-hosts RE   comma-separated regular expressions for the name in the Host and
//	                    Origin headers, each matched against the whole name
//	                    (default: localhost,127\.0\.0\.1,::1)
//	--allow-upgrades    let through what is refused by default as something that runs a
//	                    command or opens a tunnel: every protocol upgrade; pods' exec, attach
//	                    and portforward; behind a node's proxy, and behind a pod's or a
//	                    service's proxy to port 10250 or 10255, whatever is not one of the
//	                    kubelet's read endpoints (its run, exec, attach, portForward, cri,
//	                    checkpoint, debug); a path to a proxy or a pod's streams not in
//	                    canonical form. CONNECT and TRACE stay refused
//	--read-only         refuse every method but GET. With --allow-upgrades it is not
//	                    read-only in effect: exec, attach and port-forward over WebSocket
//	                    are GETs, and pass
//	--retry-gets        retry GETs of single objects (and of /api/v1-style discovery) like
//	                    LISTs (default true: a proxy's callers would rather wait than fail)
//	--list-buffer-size QUANTITY
//	                    the largest LIST body held whole so that a break can be retried
//	                    (128Mi, kretry's default; at least 1Mi): size the memory limit with it
//	--shutdown-timeout  how long requests in flight may take after SIGTERM/SIGINT (10s)
//	--version           print the module version and exit
//	--help, -h          print the flags and exit
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
// package proxy for why, and for the checks in front of it. Unlike `kubectl proxy`, it acts
// with its own identity and nobody else's: a client's Authorization, Impersonate-* headers and
// cookies are dropped (a kubeconfig's as: holds), and the kubelet's command endpoints behind
// nodes/NAME/proxy/, and behind a pod's or a service's proxy to the kubelet's port, are
// refused as pods' exec is.
//
// This command is a module of its own, so that k8s.io/kubectl stays out of the library's
// go.mod; from the repository root: go -C cmd/kretry-proxy run . (or run . --demo).
package main
