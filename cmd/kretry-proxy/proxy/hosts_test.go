package proxy

import (
	"regexp"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

// TestAcceptHostsMatchedWhole: every expression for the Host and Origin names is matched
// against the whole name, however it was given: the default, --accept-hosts as users spell
// loopback names (unescaped dots, spaces after commas), and Options.AcceptHosts compiled
// unanchored by a caller. A name that only contains an accepted one is what a DNS rebinding
// sends.
func TestAcceptHostsMatchedWhole(t *testing.T) {
	lists := map[string][]*regexp.Regexp{"default": nil}
	for _, list := range []string{DefaultAcceptHosts, "localhost,127.0.0.1,::1", "localhost, 127.0.0.1, ::1", `^localhost$,^127\.0\.0\.1$,^::1$`} {
		patterns, err := ParseAcceptHosts(list)
		if err != nil {
			t.Fatalf("%q: %v", list, err)
		}
		lists[list] = patterns
	}
	lists["Options.AcceptHosts unanchored"] = []*regexp.Regexp{regexp.MustCompile("localhost"), regexp.MustCompile(`127\.0\.0\.1`), regexp.MustCompile("::1|x")}
	foreign := []string{"localhost.evil.example", "127.0.0.1.evil.example", "evil-localhost.example", "xlocalhost", "localhostx", "::1.evil.example", "::10", "a::1", "LOCALHOST", "", "localhost\n"}
	for name, patterns := range lists {
		srv, err := New(&rest.Config{Host: "https://api.invalid"}, Options{AcceptHosts: patterns})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, host := range foreign {
			if srv.acceptHost(host) {
				t.Errorf("%s: %q accepted", name, host)
			}
		}
		for _, host := range []string{"localhost", "127.0.0.1", "::1"} {
			if !srv.acceptHost(host) {
				t.Errorf("%s: %q refused", name, host)
			}
		}
	}
}

func TestParseAcceptHostsErrors(t *testing.T) {
	for list, want := range map[string]string{
		"":            "empty expression",
		",":           "empty expression",
		"localhost,":  "empty expression",
		"localhost,(": "missing closing )",
	} {
		if _, err := ParseAcceptHosts(list); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseAcceptHosts(%q): %v, want an error with %q", list, err, want)
		}
	}
}
