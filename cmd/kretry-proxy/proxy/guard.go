package proxy

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
)

// Reasons a request is refused, as /metrics names them.
const (
	refusedHost     = "host"
	refusedOrigin   = "origin"
	refusedUpgrade  = "upgrade"
	refusedMethod   = "method"
	refusedShutdown = "shutdown"
)

// streamSubresources of a pod run a command or open a tunnel: exec, attach, portforward.
var streamSubresources = map[string]bool{"exec": true, "attach": true, "portforward": true}

// kubeletCommandEndpoints are the kubelet's endpoints, the first segment after
// nodes/NAME/proxy/, that run a command or open a stream: /run runs one as a plain POST,
// /exec, /attach and /portForward stream, /cri serves the container runtime's streams. The
// rest (metrics, stats, configz, logs, ...) only read. Lower case: they are compared so.
var kubeletCommandEndpoints = map[string]bool{"run": true, "exec": true, "attach": true, "portforward": true, "cri": true}

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
		if target := commandTarget(r.URL.Path); target != "" {
			return refusedUpgrade, http.StatusForbidden, fmt.Sprintf("kretry-proxy: %s runs commands or opens streams: refused (start it with --allow-upgrades)", target)
		}
	}
	if s.opts.ReadOnly && r.Method != http.MethodGet {
		return refusedMethod, http.StatusMethodNotAllowed, fmt.Sprintf("kretry-proxy is read-only: %s is refused", r.Method)
	}
	return "", 0, ""
}

func (s *Server) acceptHost(host string) bool {
	for _, re := range s.opts.AcceptHosts {
		if re.MatchString(host) {
			return true
		}
	}
	return false
}

// hostOf is the host of a Host header value, without port or IPv6 brackets:
// "localhost:8001" → "localhost", "[::1]:8001" and "[::1]" → "::1".
func hostOf(hostport string) string {
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		return host
	}
	return strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]")
}

// commandTarget names what a request path reaches that runs a command or opens a stream
// ("pods/exec", "nodes/proxy/run"), or is "". The path is read as the API server and the
// kubelet behind it could read it: percent-decoded until nothing changes, empty and dot
// segments resolved, letters of either case, so that no spelling of a refused endpoint
// passes.
func commandTarget(requestPath string) string {
	p := requestPath
	for range 4 { // net/url decoded once; an encoding inside an encoding is decoded too
		decoded, err := url.PathUnescape(p)
		if err != nil || decoded == p {
			break
		}
		p = decoded
	}
	segments := strings.Split(strings.Trim(path.Clean("/"+strings.ToLower(p)), "/"), "/")
	for i := 0; i+2 < len(segments); i++ {
		switch {
		case segments[i] == "pods" && (i == 0 || segments[i-1] != "namespaces") && streamSubresources[segments[i+2]]:
			return "pods/" + segments[i+2]
		case segments[i] == "nodes" && segments[i+2] == "proxy" && i+3 < len(segments) && kubeletCommandEndpoints[segments[i+3]]:
			return "nodes/proxy/" + segments[i+3]
		}
	}
	return ""
}

// dropClientIdentity removes from h everything by which a client could act as someone
// else: its Authorization, its Impersonate-* headers (client-go's impersonation round tripper
// leaves a request that already names a user alone, so the kubeconfig's as: would not hold)
// and its cookies. The proxy's own credentials and impersonation are added below.
func dropClientIdentity(h http.Header) {
	for name := range h {
		lower := strings.ToLower(name)
		if lower == "authorization" || lower == "cookie" || strings.HasPrefix(lower, "impersonate-") {
			delete(h, name)
		}
	}
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
