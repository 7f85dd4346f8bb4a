package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// roundTripFunc answers requests with a fixed body.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

func answer(body io.Reader) http.RoundTripper {
	return roundTripFunc(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(body)}, nil
	})
}

func get(t *testing.T, rt http.RoundTripper, url string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func TestWireCounterFetches(t *testing.T) {
	const collection = "http://server/api/v1/namespaces/demo/configmaps"
	initial := `{"type":"ADDED"}` + "\n" + `{"type":"BOOKMARK","object":{"metadata":{"annotations":{"k8s.io/initial-events-end":"true"}}}}`
	rest := "\n" + `{"type":"MODIFIED"}` + "\n"
	initialEnd := strings.Index(initial, "k8s.io/initial-events-end") + len("k8s.io/initial-events-end")
	for _, tc := range []struct {
		name                string
		url, body           string
		fetches, fetchBytes int64
	}{
		{"list", collection + "?limit=500", "0123456789", 1, 10},
		{"list page", collection + "?limit=500&continue=abc", "01234", 0, 5},
		{"watch", collection + "?watch=true&resourceVersion=7", initial + rest, 0, 0},
		{"watch-list", collection + "?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan", initial + rest, 1, int64(initialEnd)},
		{"one object", collection + "/cm-1", "{}", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			counter := &wireCounter{next: answer(iotest.OneByteReader(strings.NewReader(tc.body)))}
			resp := get(t, counter, tc.url)
			if _, err := io.ReadAll(resp.Body); err != nil {
				t.Fatal(err)
			}
			// Read a byte at a time, the annotation key is cut between reads and still found.
			if got := counter.fetchBytes.Load(); got != tc.fetchBytes {
				t.Errorf("fetch bytes %d, want %d", got, tc.fetchBytes)
			}
			if counter.fetches.Load() != tc.fetches || counter.bytes.Load() != int64(len(tc.body)) || counter.requests.Load() != 1 {
				t.Errorf("fetches %d, bytes %d, requests %d", counter.fetches.Load(), counter.bytes.Load(), counter.requests.Load())
			}
		})
	}
}

func TestWatchEnds(t *testing.T) {
	const (
		collection = "http://s/api/v1/configmaps"
		event      = `{"type":"ADDED","object":{}}` + "\n"
		expired    = `{"type":"ERROR","object":{"kind":"Status","code":410}}` + "\n"
	)
	for _, tc := range []struct {
		name   string
		query  string
		body   string
		toEnd  bool // the caller reads to the end, else it reads once and closes
		counts bool
	}{
		{"watch ends under the caller", "?watch=true", event, true, true},
		{"caller closes", "?watch=true", event + event, false, false},
		{"ends at its timeout", "?watch=true&timeoutSeconds=1", event, true, false},
		{"ends before its timeout", "?watch=true&timeoutSeconds=300", event, true, true},
		{"not a watch", "?watch=false", event, true, false},
		{"ERROR event, then the caller closes", "?watch=1", expired + event, false, true},
		{"ERROR in protobuf", "?watch=1", "\x0a\x05ERROR\x12\x00", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ends := &watchEnds{next: answer(strings.NewReader(tc.body))}
			resp := get(t, ends, collection+tc.query)
			if tc.toEnd {
				_, _ = io.ReadAll(resp.Body)
				_, _ = resp.Body.Read(make([]byte, 1)) // a second end is not a second count
			} else {
				_, _ = resp.Body.Read(make([]byte, len(tc.body))) // all of it, but not the EOF
				resp.Body.Close()
			}
			if got, want := ends.count(), map[bool]int{true: 1}[tc.counts]; got != want {
				t.Errorf("%d ends counted, want %d", got, want)
			}
		})
	}
}

func TestTimelineJSON(t *testing.T) {
	tl := newTimeline([]string{"a", "b"})
	start := time.Unix(1000, 0)
	tl.sample(start.Add(-time.Second), []clientPoint{{}, {}}) // before begin: dropped
	tl.begin(start)
	tl.sample(start.Add(500*time.Millisecond), []clientPoint{{Requests: 2, Fetches: 1, Lag: 3}, {Lag: -1}})
	tl.fault(start.Add(time.Second), "b", "connection cut")
	tl.span(start.Add(2*time.Second), start.Add(5*time.Second), "rollout")
	tl.note(start.Add(3*time.Second), "a", "ended")
	tl.stop(start.Add(6 * time.Second))
	tl.end(start.Add(9 * time.Second))
	var buf bytes.Buffer
	if err := tl.writeJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := `{"clients":["a","b"],"samples":[{"t":0.5,"clients":[{"requests":2,"fetches":1,"lag":3},{"requests":0,"fetches":0,"lag":-1}]}],` +
		`"faults":[{"t":1,"client":1,"kind":"connection cut"}],"spans":[{"from":2,"to":5,"label":"rollout"}],` +
		`"notes":[{"t":3,"client":0,"text":"ended"}],"stop":6,"end":9}`
	if strings.TrimSpace(buf.String()) != want {
		t.Errorf("timeline JSON\n%s\nwant\n%s", buf.String(), want)
	}
}
