package proxy

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Reasons a request is refused, as /metrics names them.
const (
	refusedHost     = "host"
	refusedOrigin   = "origin"
	refusedUpgrade  = "upgrade"
	refusedMethod   = "method"
	refusedShutdown = "shutdown"
)

// upgradeSubresources tunnel a stream over a protocol upgrade: they are refused with upgrades.
var upgradeSubresources = map[string]bool{"exec": true, "attach": true, "portforward": true}

// checkHost refuses a request whose Host header is not an accepted name, before anything
// else: a page of another site that a DNS rebinding pointed at 127.0.0.1 sends its own name.
func (s *Server) checkHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if host := hostOf(r.Host); !s.acceptHost(host) {
			s.metrics.refused(refusedHost)
			writeStatus(w, http.StatusForbidden, fmt.Sprintf("kretry-proxy: Host %q is not accepted (see --accept-hosts)", host))
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
		if isUpgrade(r) {
			return refusedUpgrade, http.StatusForbidden, "kretry-proxy: protocol upgrades are refused (start it with --allow-upgrades)"
		}
		if sub := podSubresource(r.URL.Path); upgradeSubresources[sub] {
			return refusedUpgrade, http.StatusForbidden, fmt.Sprintf("kretry-proxy: pods/%s is refused (start it with --allow-upgrades)", sub)
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

// isUpgrade reports whether r asks to switch protocols (SPDY, WebSocket, h2c).
func isUpgrade(r *http.Request) bool {
	if r.Header.Get("Upgrade") != "" {
		return true
	}
	for _, v := range r.Header.Values("Connection") {
		for token := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(token), "upgrade") {
				return true
			}
		}
	}
	return false
}

// podSubresource is the subresource of a pod a path names ("exec" in
// /api/v1/namespaces/ns/pods/name/exec), or "".
func podSubresource(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i := 0; i+2 < len(parts); i++ {
		if parts[i] == "pods" && (i == 0 || parts[i-1] != "namespaces") {
			return parts[i+2]
		}
	}
	return ""
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
