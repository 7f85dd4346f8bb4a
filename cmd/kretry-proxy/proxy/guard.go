package proxy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/sets"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"
)

// Reasons a request is refused, as /metrics names them: upgrade for every refusal that
// Options.AllowUpgrades lifts (a non-canonical proxy path among them), method for CONNECT,
// TRACE and ReadOnly's.
const (
	refusedHost     = "host"
	refusedOrigin   = "origin"
	refusedUpgrade  = "upgrade"
	refusedMethod   = "method"
	refusedShutdown = "shutdown"
)

// streamSubresources of a pod run a command or open a tunnel: exec, attach, portforward.
var streamSubresources = map[string]bool{"exec": true, "attach": true, "portforward": true}

// kubeletReadEndpoints are the kubelet's endpoints, the first segment after
// nodes/NAME/proxy/, that only read: its routes in pkg/kubelet/server/server.go (v1.37) whose
// handlers serve GET only or a metrics registry. Everything else there (run, exec, attach,
// portForward, checkpoint, debug, with the container runtime's streams in cri) runs a command,
// opens a stream or changes the kubelet, and a route added later is refused until listed
// here. "" is the kubelet's root, nodes/NAME/proxy itself. Exact names: the kubelet's router
// tells case.
var kubeletReadEndpoints = map[string]bool{
	"":              true,
	"healthz":       true, // and healthz/ping, healthz/log, healthz/syncloop
	"metrics":       true, // and metrics/cadvisor, metrics/resource, metrics/probes, metrics/slis
	"stats":         true, // stats/summary
	"pods":          true,
	"runningpods":   true,
	"configz":       true,
	"containerLogs": true,
	"logs":          true, // the node's log files, GET only
	"statusz":       true,
	"flagz":         true,
}

// kubeletPorts are the kubelet's ports: its API (10250), where it runs commands, and its
// read-only port (10255). A pod's or a service's proxy to one of them, by number, reaches a
// kubelet where the pod is on its node's network or the service's endpoints are nodes (a
// monitoring Service such as kube-system/kubelet), so it is judged as the node proxy is. A
// port named, or left out (a pod's first declared port), cannot be told apart.
var kubeletPorts = map[int64]bool{10250: true, 10255: true}

// apiRequests reads a request path as kube-apiserver does (its WithRequestInfo filter, whose
// result its authorization and its connect handlers, the node proxy's among them, act on).
var apiRequests = &apirequest.RequestInfoFactory{
	APIPrefixes:          sets.NewString("api", "apis"),
	GrouplessAPIPrefixes: sets.NewString("api"),
}

// guard refuses, before anything else, a request whose Host header is not an accepted name
// (a page of another site that a DNS rebinding pointed at 127.0.0.1 sends its own name), then
// one that refusal refuses. It runs before the HTTP server's router, so that a path the
// router would redirect to its clean form is refused as such, not redirected.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if host := hostOf(r.Host); !s.acceptHost(host) {
			s.metrics.refused(refusedHost)
			writeStatus(w, http.StatusForbidden, fmt.Sprintf("kretry-proxy: Host %q is not accepted (see --accept-hosts)", host))
			return
		}
		if reason, code, msg := s.refusal(r); code != 0 {
			s.metrics.refused(reason)
			writeStatus(w, code, msg)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// refusal says why r must not reach the API server: the reason for /metrics, the status code
// and the message; code 0 means it may.
func (s *Server) refusal(r *http.Request) (reason string, code int, message string) {
	// CONNECT would have the API server open a tunnel; TRACE would echo the request, the
	// proxy's credentials with it. No client sends either.
	if r.Method == http.MethodConnect || r.Method == http.MethodTrace {
		return refusedMethod, http.StatusMethodNotAllowed, fmt.Sprintf("kretry-proxy: %s is refused", r.Method)
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		u, err := url.Parse(origin)
		if err != nil || !s.acceptHost(hostOf(u.Host)) {
			return refusedOrigin, http.StatusForbidden, fmt.Sprintf("kretry-proxy: requests from origin %q are not accepted", origin)
		}
	}
	if !s.opts.AllowUpgrades {
		// The very test of the handler behind: the guard and it cannot disagree.
		if httpstream.IsUpgradeRequest(r) {
			return refusedUpgrade, http.StatusForbidden, "kretry-proxy: protocol upgrades are refused (start it with --allow-upgrades)"
		}
		if message := pathRefusal(r.URL); message != "" {
			return refusedUpgrade, http.StatusForbidden, message
		}
	}
	if s.opts.ReadOnly && r.Method != http.MethodGet {
		return refusedMethod, http.StatusMethodNotAllowed, fmt.Sprintf("kretry-proxy is read-only: %s is refused", r.Method)
	}
	return "", 0, ""
}

// pathRefusal says why a request for u must not reach the API server unless
// Options.AllowUpgrades, or is "". It reads the path as kube-apiserver does, and in lower case
// too (refusing more spellings costs nothing), and refuses a pod's exec, attach and
// portforward, and behind a kubelet's proxy (nodes/NAME/proxy/, or a pod's or a service's
// proxy to a kubelet's port) whatever is not one of the kubelet's read endpoints, by their
// exact names. A path that is not in canonical form is refused first
// wherever any reading of it leads to a proxy subresource or a pod's streams: the node proxy
// hands what follows proxy/ to the kubelet, which routes it after decoding it once more, and
// a canonical path is one whose every reading agrees with the API server's.
func pathRefusal(u *url.URL) string {
	if !canonical(u) && leadsIntoProxy(u.Path) {
		return fmt.Sprintf("kretry-proxy: %s leads to a proxy or a pod's streams and is not in canonical form (encoded /, . or %%, empty or dot segments): refused (start it with --allow-upgrades)", u.EscapedPath())
	}
	segments := splitSegments(u.Path)
	for _, reading := range []string{u.Path, strings.ToLower(u.Path)} {
		info := readPath(reading)
		if info == nil {
			continue
		}
		if target := streamTarget(info); target != "" {
			return fmt.Sprintf("kretry-proxy: %s runs commands or opens streams: refused (start it with --allow-upgrades)", target)
		}
		at, ok := kubeletEndpointAt(info)
		if !ok {
			continue
		}
		// info.Parts are the path's last segments: the endpoint as the client spelt it.
		endpoint := ""
		if at < len(info.Parts) {
			endpoint = segments[len(segments)-len(info.Parts)+at]
		}
		if !kubeletReadEndpoints[endpoint] {
			return fmt.Sprintf("kretry-proxy: %s/%s/proxy/%s is not one of the kubelet's read endpoints: refused (start it with --allow-upgrades)", info.Resource, info.Parts[1], endpoint)
		}
	}
	return ""
}

// splitSegments splits a path as kube-apiserver does, leading and trailing slashes trimmed.
func splitSegments(p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// readPath is kube-apiserver's reading of a decoded request path, nil where it reads no
// resource (and where it fails: kube-apiserver answers 500 then). The method is fixed: it
// changes only the verb, and a POST is not read for list options (which would log the
// query's errors).
func readPath(decodedPath string) *apirequest.RequestInfo {
	info, err := apiRequests.NewRequestInfo(&http.Request{Method: http.MethodPost, URL: &url.URL{Path: decodedPath}})
	if err != nil || !info.IsResourceRequest {
		return nil
	}
	return info
}

// streamTarget is "pods/exec", "pods/attach" or "pods/portforward" for a pod's streams, in
// any group (the legacy /api/v1/proxy/... form too), or "".
func streamTarget(info *apirequest.RequestInfo) string {
	if info.Resource != "pods" {
		return ""
	}
	sub := info.Subresource
	if info.Verb == "proxy" && len(info.Parts) > 2 {
		sub = info.Parts[2]
	}
	if streamSubresources[sub] {
		return "pods/" + sub
	}
	return ""
}

// kubeletEndpointAt is where in info.Parts the first segment of what a proxy hands a kubelet
// is (at most len(info.Parts): none, the kubelet's root), for nodes/NAME/proxy/... (NAME may
// carry a scheme and a port: https:n:10250), for pods/NAME/proxy/... and
// services/NAME/proxy/... whose NAME names a kubelet's port, and for their legacy
// /api/v1/proxy/... forms; ok is false for any other request.
func kubeletEndpointAt(info *apirequest.RequestInfo) (at int, ok bool) {
	switch {
	case info.Resource == "nodes":
	case info.Resource == "pods" || info.Resource == "services":
		if len(info.Parts) < 2 || !namesKubeletPort(info.Parts[1]) {
			return 0, false
		}
	default:
		return 0, false
	}
	switch {
	case info.Verb == "proxy":
		return 2, true // RESOURCE, NAME, endpoint
	case info.Subresource == "proxy":
		return 3, true // RESOURCE, NAME, proxy, endpoint
	}
	return 0, false
}

// namesKubeletPort says whether a pod's or a service's proxy name names one of kubeletPorts by
// number (as a service's proxy reads one, strconv.ParseInt: "010250" and "+10250" are 10250
// too), whatever its scheme. kube-apiserver reads [scheme:]name[:port], so a port, where there
// is one, is what follows the last colon; a scheme it does not take (ws:, HTTPS:, a fourth
// part) gets a 400 from it, which the guard does not count on: deny by default.
func namesKubeletPort(name string) bool {
	colon := strings.LastIndexByte(name, ':')
	if colon < 0 {
		return false // no port: a pod's first declared one, a service's only one
	}
	number, err := strconv.ParseInt(name[colon+1:], 10, 64)
	return err == nil && kubeletPorts[number]
}

// canonical says whether u's path means the same to every reader: no percent-encoded /, .
// or % (in either case of hex digit), so that decoding it again changes nothing, and nothing
// path.Clean would change (empty and dot segments), a trailing slash aside.
func canonical(u *url.URL) bool {
	escaped := strings.ToLower(u.EscapedPath())
	if strings.Contains(escaped, "%2f") || strings.Contains(escaped, "%2e") || strings.Contains(escaped, "%25") {
		return false
	}
	p := u.Path
	if !strings.HasPrefix(p, "/") {
		return false
	}
	clean := path.Clean(p)
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	return clean == p
}

// leadsIntoProxy says whether some reading of a decoded path could lead to a proxy
// subresource (a node's, pod's or service's, or the legacy proxy form) or a pod's streams:
// whether one of its segments, in any reading a router behind could make (decoded again, dot
// segments resolved, in lower case), is proxy, exec, attach or portforward. Looser than
// kube-apiserver's reading on purpose: it decides only for paths no client sends.
func leadsIntoProxy(decodedPath string) bool {
	for _, reading := range readings(decodedPath) {
		for _, segment := range strings.Split(reading, "/") {
			if segment == "proxy" || streamSubresources[segment] {
				return true
			}
		}
	}
	return false
}

// readings are the ways a router could read a decoded path: as it is, percent-decoded again
// until nothing changes, each of these with its empty and dot segments resolved, and all of
// them in lower case.
func readings(decodedPath string) []string {
	decoded := []string{decodedPath}
	for p := decodedPath; len(decoded) < 5; {
		next, err := url.PathUnescape(p)
		if err != nil || next == p {
			break
		}
		p = next
		decoded = append(decoded, p)
	}
	out := make([]string, 0, 4*len(decoded))
	for _, p := range decoded {
		clean := path.Clean("/" + p)
		out = append(out, p, clean, strings.ToLower(p), strings.ToLower(clean))
	}
	return out
}

// dropClientIdentity removes from h everything by which a client could act as someone
// else or claim another source: its Authorization, its Impersonate-* headers (client-go's
// impersonation round tripper leaves a request that already names a user alone, so the
// kubeconfig's as: would not hold), its cookies, the front-proxy identity headers X-Remote-*
// (User, Group, Uid, Extra-*, the API server's --requestheader-* defaults: it believes them
// from a front-proxy client certificate, which the proxy's own credential may be), a bearer
// token among its WebSocket subprotocols, and the source headers a reverse proxy sets:
// X-Forwarded-* and Forwarded, and X-Real-Ip (the API server's audit takes its sourceIPs from
// X-Forwarded-For and X-Real-Ip). The proxy's own credentials and impersonation are added
// below, and the handler behind sets X-Forwarded-For to the client's own address.
func dropClientIdentity(h http.Header) {
	for name, values := range h {
		lower := strings.ToLower(name)
		switch {
		case lower == "authorization", lower == "cookie", lower == "forwarded", lower == "x-real-ip",
			strings.HasPrefix(lower, "impersonate-"), strings.HasPrefix(lower, "x-remote-"), strings.HasPrefix(lower, "x-forwarded-"):
			delete(h, name)
		case lower == "sec-websocket-protocol":
			if kept := withoutBearerProtocol(values); len(kept) > 0 {
				h[name] = kept
			} else {
				delete(h, name)
			}
		}
	}
}

// bearerProtocolPrefix starts a WebSocket subprotocol that carries a bearer token, which
// kube-apiserver's authenticator takes as credentials (a browser cannot set Authorization on
// a WebSocket, so client-go and client-node send the token this way).
const bearerProtocolPrefix = "base64url.bearer.authorization.k8s.io."

// withoutBearerProtocol is a Sec-WebSocket-Protocol header's values without the protocols
// that carry a bearer token, in any case (the API server's prefix is matched exactly; refusing
// more spellings costs nothing); a value left with none is dropped.
func withoutBearerProtocol(values []string) []string {
	var kept []string
	for _, value := range values {
		var protocols []string
		for _, protocol := range strings.Split(value, ",") {
			protocol = strings.TrimSpace(protocol)
			if protocol != "" && !strings.HasPrefix(strings.ToLower(protocol), bearerProtocolPrefix) {
				protocols = append(protocols, protocol)
			}
		}
		if len(protocols) > 0 {
			kept = append(kept, strings.Join(protocols, ", "))
		}
	}
	return kept
}

// writeStatus answers with a metav1.Status, which kubectl, the Python client and client-node
// all print as the server's message.
func writeStatus(w http.ResponseWriter, code int, message string) {
	status := metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure,
		Message:  message,
		Reason:   reasonFor(code),
		Code:     int32(code),
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(status)
}

func reasonFor(code int) metav1.StatusReason {
	switch code {
	case http.StatusForbidden:
		return metav1.StatusReasonForbidden
	case http.StatusMethodNotAllowed:
		return metav1.StatusReasonMethodNotAllowed
	case http.StatusServiceUnavailable:
		return metav1.StatusReasonServiceUnavailable
	}
	return metav1.StatusReasonUnknown
}
