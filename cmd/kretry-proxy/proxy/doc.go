// Package proxy serves the Kubernetes API on loopback with kretry underneath, for clients
// that are not written in Go: kubectl, the Python client, @kubernetes/client-node, curl.
//
// The API handler is the one `kubectl proxy` serves, k8s.io/kubectl/pkg/proxy's
// NewProxyHandler (apimachinery's UpgradeAwareHandler over httputil.ReverseProxy), built on a
// copy of the caller's rest.Config wrapped with transport.Wrapper. It was chosen over wiring
// apimachinery's handler by hand because it is what users already run: the same path
// handling, the same forwarding of upgrades, the same credentials handling through
// rest.TransportFor, and so the same answers, with kretry as the only difference. Its
// FilterServer is not used: the checks in front of it are this package's own (see below),
// because they answer with a Status the clients can print, accept an IPv6 loopback Host with a
// port (FilterServer's extractHost strips the brackets its own default pattern expects), and
// add what FilterServer has no notion of: upgrades, Origin and read-only.
//
// What reaches the API server, and how:
//   - Every method is passed through; only GET (LIST and WATCH, and single-object GET with
//     transport.Config.RetryGets) is ever retried, by kretry, as in the library.
//   - Streaming is passed through as it arrives: kretry's resuming watch body hands over one
//     whole event per Read and httputil.ReverseProxy flushes after every write to a response
//     of unknown length, so each event reaches the client (HTTP/1.1 chunked) as soon as the
//     API server (HTTP/2 over TLS) sent it.
//   - A client that goes away cancels the upstream request at once (the request's context).
//   - The proxy acts with its own identity and nobody else's: its credentials are used for
//     every request and never logged; a client's Authorization, Impersonate-* headers,
//     cookies and X-Remote-* front-proxy identity headers are dropped (client-go's
//     impersonation leaves a request that already names a user alone, so a kubeconfig's as:
//     would not hold otherwise; the API server believes X-Remote-* from a front-proxy client
//     certificate, which the proxy's credential may be), and so is a bearer token among the
//     WebSocket subprotocols of an upgrade (the others are kept).
//   - A client names no other source: its X-Forwarded-*, Forwarded and X-Real-Ip headers are
//     dropped (the API server's audit reads its sourceIPs from X-Forwarded-For and
//     X-Real-Ip), and the handler behind sets X-Forwarded-For to the client's address.
//   - With Options.TokenFile (a pod's service-account token) or a rest.Config's
//     BearerTokenFile, the token is read again as soon as the file changes (one stat per
//     request), beneath kretry: retries and resumed watches carry the token of the moment.
//
// Checks, in this order, each answered with a Status, before the HTTP router (so a path it
// would redirect to its clean form is refused as such):
//   - Host header not a loopback name (DNS rebinding): 403. /healthz and /metrics too, as
//     for every check.
//   - CONNECT (a tunnel through the API server) and TRACE: 405, whatever the options.
//   - An Origin header whose host is not accepted either (a web page posting to the proxy): 403.
//   - Unless Options.AllowUpgrades, what runs a command or opens a tunnel: 403. That is a
//     protocol upgrade, as the handler behind detects one (apimachinery's
//     httpstream.IsUpgradeRequest: a Connection value containing "upgrade"), pods' exec,
//     attach and portforward, and behind nodes/NAME/proxy/ whatever is not one of the
//     kubelet's read endpoints, listed by name from its routes (metrics, stats, healthz,
//     pods, configz, containerLogs, ...; run, exec, attach, portForward, cri, checkpoint
//     and debug are not). A pod's or a service's proxy to a kubelet's port, 10250 or 10255
//     by number, whatever the scheme (pods/https:NAME:10250/proxy/, pods/ws:NAME:10250/proxy/,
//     which kube-apiserver would answer 400), is judged the same: a hostNetwork pod's IP
//     is its node's, and a Service may have the nodes as endpoints. A port named or left out
//     cannot be told apart, and passes. The path is read as kube-apiserver reads it, by its own parser
//     (k8s.io/apiserver's RequestInfoFactory), as spelt and in lower case. A path that is
//     not in canonical form (an encoded /, . or %, an empty or dot segment) is refused
//     where any reading of it leads to a proxy or a pod's streams: the kubelet decodes what
//     the API server decoded once again, and only a canonical path reads the same to both.
//   - With Options.ReadOnly, any method but GET: 405. With AllowUpgrades too, exec, attach
//     and port-forward over WebSocket are GETs, and pass.
//
// Server.ProbeHandler serves /healthz and /metrics alone, without the checks, for an address
// the kubelet's probes reach.
//
// The proxy answers /healthz (200 "ok", 503 while shutting down) and /metrics itself, those
// two paths exactly: the API server's own /healthz and /metrics are not reachable through it,
// and every other path goes to the API server, its /livez and /readyz, /healthz/etcd and the
// other /healthz/ checks, /metrics/ and /Metrics among them. /metrics serves one Prometheus
// registry of the proxy's own (client_golang's promhttp) holding two sets of metrics:
//   - kretry's, from package github.com/kretry/kretry/metrics, whose Observer is set in the
//     transport.Config the proxy wraps its API transport with (joined with
//     Options.Transport.Observer, if any): kretry_requests_total{verb,outcome},
//     kretry_retries_total{verb,reason}, kretry_watch_resumes_total{reason},
//     kretry_giveups_total{verb,reason}, kretry_retry_wait_seconds{verb} and
//     kretry_budget_refusals_total{verb}.
//   - the proxy's: kretry_proxy_requests_total{class,code} (requests served to clients),
//     kretry_proxy_upstream_requests_total{class,code} (requests sent to the API server,
//     kretry's retries and resumes included; code "error" for no response),
//     kretry_proxy_refused_total{reason} and the gauge kretry_proxy_open_watches. class is
//     list, watch, watch_list (a watch with sendInitialEvents), get or other.
//
// Shutdown ends open watches cleanly: each watch's context is cancelled, kretry's body then
// reports a clean end after the last whole event, and the client sees its response end as if
// the server had ended the watch. Other requests in flight are left to finish.
package proxy
