package proxy

import (
	"fmt"
	"net"
	"regexp"
	"strings"
)

// DefaultAcceptHosts are the Host header names accepted by default, spelt as --accept-hosts
// takes them: the loopback names, as `kubectl proxy` accepts them ("::1" is matched without
// its brackets). Each is matched whole.
const DefaultAcceptHosts = `localhost,127\.0\.0\.1,::1`

// ParseAcceptHosts compiles a comma-separated list of regular expressions for the host part of
// a Host or Origin header (--accept-hosts), each matched against the whole name: "localhost"
// accepts localhost and not localhost.evil.example, which a DNS rebinding would send. Spaces
// around an expression are ignored; an empty one is an error.
func ParseAcceptHosts(list string) ([]*regexp.Regexp, error) {
	var patterns []*regexp.Regexp
	for _, expr := range strings.Split(list, ",") {
		expr = strings.TrimSpace(expr)
		if expr == "" {
			return nil, fmt.Errorf("%q has an empty expression: it would accept a request with no Host", list)
		}
		re, err := wholeName(expr)
		if err != nil {
			return nil, err
		}
		patterns = append(patterns, re)
	}
	return patterns, nil
}

// wholeName compiles expr so that it matches a whole name, never a part of one: the
// expressions of `kubectl proxy --accept-hosts` match anywhere unless the user anchors them.
func wholeName(expr string) (*regexp.Regexp, error) {
	// Compiled alone first, so that an error quotes the expression as the user wrote it.
	if _, err := regexp.Compile(expr); err != nil {
		return nil, err
	}
	return regexp.Compile(`^(?:` + expr + `)$`)
}

// wholeNames anchors each of patterns (Options.AcceptHosts, which a caller may have compiled
// unanchored), or returns the default's when there are none.
func wholeNames(patterns []*regexp.Regexp) ([]*regexp.Regexp, error) {
	if patterns == nil {
		return ParseAcceptHosts(DefaultAcceptHosts)
	}
	out := make([]*regexp.Regexp, 0, len(patterns))
	for _, re := range patterns {
		anchored, err := wholeName(re.String())
		if err != nil {
			return nil, err
		}
		out = append(out, anchored)
	}
	return out, nil
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
// "localhost:8001" → "localhost", "[::1]:8001" and "[::1]" → "::1". A bracket without its
// pair stays, so that "[::1" is no loopback name.
func hostOf(hostport string) string {
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		return host
	}
	if strings.HasPrefix(hostport, "[") && strings.HasSuffix(hostport, "]") {
		return hostport[1 : len(hostport)-1]
	}
	return hostport
}
