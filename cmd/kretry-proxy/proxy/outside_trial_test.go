package proxy_test

// An outside trial of package proxy's public API (no look at its implementation): Options'
// AcceptHosts are matched against the whole name, whatever the caller compiled ("New anchors
// them"), and ParseAcceptHosts keeps to its documentation.

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/kretry/kretry/cmd/kretry-proxy/proxy"
)

func trialHandler(t *testing.T, opts proxy.Options) (http.Handler, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"7"},"items":[]}`))
	}))
	t.Cleanup(api.Close)
	srv, err := proxy.New(&rest.Config{Host: api.URL, BearerToken: "secret"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return srv.Handler(), &n
}

// trialServe sends one request with the given Host and Origin through h and tells whether it
// reached the API server.
func trialServe(h http.Handler, n *atomic.Int64, host, origin string) (int, bool) {
	before := n.Load()
	req := httptest.NewRequest(http.MethodGet, "/api/v1/namespaces/default/configmaps", nil)
	req.Host = host
	req.RemoteAddr = "127.0.0.1:40000"
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, n.Load() > before
}

// TestTrialOptionsAcceptHostsAnchored: Options.AcceptHosts "match the host part of the Host
// header (and of an Origin header), each against the whole name (New anchors them)": an
// expression the caller compiled without anchors, an alternation among them, is matched whole.
func TestTrialOptionsAcceptHostsAnchored(t *testing.T) {
	for _, expr := range []string{`localhost|127\.0\.0\.1`, `localhost`, `(?i)LOCALHOST|127\.0\.0\.1`, `^localhost$|^127\.0\.0\.1$`} {
		h, n := trialHandler(t, proxy.Options{AcceptHosts: []*regexp.Regexp{regexp.MustCompile(expr)}})
		for _, host := range []string{"localhost", "localhost:8001"} {
			if code, reached := trialServe(h, n, host, ""); code != http.StatusOK || !reached {
				t.Errorf("%q: Host %s: %d reached=%v; want passed", expr, host, code, reached)
			}
		}
		for _, host := range []string{"localhost.evil.example", "evil-localhost", "localhost.evil.example:8001", "127.0.0.1.evil.example", "evil127.0.0.1"} {
			if code, reached := trialServe(h, n, host, ""); code != http.StatusForbidden || reached {
				t.Errorf("%q: Host %s: %d reached=%v; want 403 and not reached", expr, host, code, reached)
			}
		}
		for _, origin := range []string{"http://localhost.evil.example", "http://127.0.0.1.evil.example:8001", "http://evillocalhost"} {
			if code, reached := trialServe(h, n, "localhost:8001", origin); code != http.StatusForbidden || reached {
				t.Errorf("%q: Origin %s: %d reached=%v; want 403 and not reached", expr, origin, code, reached)
			}
		}
	}
}

// TestTrialParseAcceptHosts: "Spaces around an expression are ignored; an empty one is an error",
// and what it returns, given to New, is matched whole; DefaultAcceptHosts is what the docs'
// flag table says.
func TestTrialParseAcceptHosts(t *testing.T) {
	if proxy.DefaultAcceptHosts != `localhost,127\.0\.0\.1,::1` {
		t.Errorf("DefaultAcceptHosts = %q; the docs' table says localhost,127\\.0\\.0\\.1,::1", proxy.DefaultAcceptHosts)
	}
	for _, bad := range []string{"", ",", "localhost,", ",localhost", "localhost,,127\\.0\\.0\\.1", " , ", "(", "localhost,["} {
		if _, err := proxy.ParseAcceptHosts(bad); err == nil {
			t.Errorf("ParseAcceptHosts(%q): no error", bad)
		}
	}
	res, err := proxy.ParseAcceptHosts(` localhost|127\.0\.0\.1 , ::1 `)
	if err != nil {
		t.Fatal(err)
	}
	h, n := trialHandler(t, proxy.Options{AcceptHosts: res})
	for _, host := range []string{"localhost:1", "127.0.0.1", "[::1]:8001"} {
		if code, reached := trialServe(h, n, host, ""); code != http.StatusOK || !reached {
			t.Errorf("Host %s: %d reached=%v; want passed", host, code, reached)
		}
	}
	for _, host := range []string{"localhost.evil.example", "x127.0.0.1", "[::10]:8001", "1::1"} {
		if code, reached := trialServe(h, n, host, ""); code != http.StatusForbidden || reached {
			t.Errorf("Host %s: %d reached=%v; want 403 and not reached", host, code, reached)
		}
	}
	// Whether the returned expressions are anchored themselves is not documented; logged.
	for _, re := range res {
		t.Logf("ParseAcceptHosts -> %q, matches localhost.evil.example by itself: %v", re.String(), re.MatchString("localhost.evil.example"))
	}
}
