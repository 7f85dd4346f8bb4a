package transport_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/kretry/kretry/transport"
)

// initialStates is a recorder that also hears initial-state fetches.
type initialStates struct{ recorder }

func (r *initialStates) ObserveInitialState(e transport.InitialStateEvent) {
	r.add("initial-state %s", e.Verb)
}

// only keeps the initial-state lines of events.
func only(events []string) []string {
	return slices.DeleteFunc(events, func(e string) bool { return len(e) < 13 || e[:13] != "initial-state" })
}

func TestInitialStateFetches(t *testing.T) {
	for _, tc := range []struct {
		name, method, path string
		want               []string
	}{
		{"a LIST", http.MethodGet, "/api/v1/namespaces/ns/pods", []string{"initial-state list"}},
		{"a paginated LIST's first page", http.MethodGet, "/api/v1/pods?limit=500", []string{"initial-state list"}},
		{"an empty continue token", http.MethodGet, "/api/v1/pods?limit=500&continue=", []string{"initial-state list"}},
		{"a later page", http.MethodGet, "/api/v1/pods?limit=500&continue=abc", nil},
		{"a watch-list", http.MethodGet, "/api/v1/pods?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true", []string{"initial-state watch"}},
		{"sendInitialEvents as the server reads it", http.MethodGet, "/api/v1/pods?watch=true&sendInitialEvents=yes", []string{"initial-state watch"}},
		{"sendInitialEvents=false", http.MethodGet, "/api/v1/pods?watch=true&sendInitialEvents=false", nil},
		{"a plain watch", http.MethodGet, "/api/v1/pods?watch=true&resourceVersion=5", nil},
		{"one object", http.MethodGet, "/api/v1/namespaces/ns/pods/web-0", nil},
		{"a POST", http.MethodPost, "/api/v1/namespaces/ns/pods", nil},
		{"discovery", http.MethodGet, "/api/v1", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var heard initialStates
			h := newHarness(t, transport.Config{Observer: &heard}, respond(200, headers("Content-Type", "application/json"), podList(1)))
			resp, err := h.do(newRequest(t, tc.method, tc.path))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close() // a watch's body is not read: the event was told as it was sent
			if got := only(heard.lines()); !slices.Equal(got, tc.want) {
				t.Errorf("heard %q, want %q", got, tc.want)
			}
		})
	}
}

// A LIST that kretry retries, and whose body it resumes after a cut, is
// still one initial-state fetch; under JoinObservers too, and a joined
// observer that does not hear them is skipped.
func TestInitialStateOncePerCall(t *testing.T) {
	var heard initialStates
	var plain recorder
	h := newHarness(t, transport.Config{Observer: transport.JoinObservers(&plain, &heard)},
		statusAnswer(503, "ServiceUnavailable", "down", nil),
		statusAnswer(503, "ServiceUnavailable", "down", nil),
		respond(200, headers("Content-Type", "application/json"), podList(2)))
	resp, err := h.get("/api/v1/namespaces/ns/pods")
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if h.calls() != 3 {
		t.Fatalf("%d attempts, want 3", h.calls())
	}
	if got := only(heard.lines()); !slices.Equal(got, []string{"initial-state list"}) {
		t.Errorf("heard %q, want one initial-state list", got)
	}
}
