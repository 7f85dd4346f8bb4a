package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func scenarioNamed(t *testing.T, name string) Scenario {
	t.Helper()
	for _, sc := range Scenarios() {
		if sc.Name == name {
			return sc
		}
	}
	t.Fatalf("no scenario %s", name)
	return Scenario{}
}

func newTestReplay(t *testing.T, sc Scenario) *replay {
	t.Helper()
	fixtures, err := loadFixtures(nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := newReplay(sc, fixtures)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// expand replaces {start} with the recorded watch's resourceVersion, {frame:N} with that of
// its frame N, and {list:N} with the query of the recorded LIST N.
func expand(r *replay, query string) string {
	for {
		i := strings.Index(query, "{")
		if i < 0 {
			return query
		}
		j := strings.Index(query, "}")
		key, arg, _ := strings.Cut(query[i+1:j], ":")
		n, _ := strconv.Atoi(arg)
		var value string
		switch key {
		case "start":
			value = r.watch.query.Get("resourceVersion")
		case "frame":
			value = r.watch.frames[n].event.ResourceVersion
		case "list":
			value = r.lists[n].Request.Query().Encode()
		}
		query = query[:i] + value + query[j+1:]
	}
}

// send makes one request to the replayed server and reads what it serves, up to its hold.
func send(t *testing.T, r *replay, method, query string) {
	t.Helper()
	query = expand(r, query)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, baseURL+r.collection+"?"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := r.mock.RoundTrip(req)
	if err != nil {
		return // a connection fault
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(io.Discard, resp.Body)
	}()
	r.waitIdle(ctx)
	_ = resp.Body.Close()
	<-done
}

// TestServerChecks sends hand-made requests, right and wrong, and checks what the replayed
// server says about them.
func TestServerChecks(t *testing.T) {
	// The fixtures' watches use timeoutSeconds=6; watch-json's third frame is the first
	// after the faults at frame 2, watch-list's fifth the first after its initial state.
	const (
		watchJSON = "allowWatchBookmarks=true&timeout=6s&timeoutSeconds=6&watch=true&resourceVersion="
		watchList = "allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&sendInitialEvents=true&timeout=6s&timeoutSeconds=6&watch=true"
		start     = watchJSON + "{start}"
		resume    = watchJSON + "{frame:1}"
		page1     = "limit=3"
	)
	tests := []struct {
		scenario string
		requests [][2]string // method, query
		problem  string      // "" means none
	}{
		{"watch-json/cut-mid-frame", [][2]string{{"GET", start}, {"GET", resume}}, ""},
		{"watch-json/cut-mid-frame", [][2]string{{"GET", start}, {"GET", start}}, "WATCH #1 at resourceVersion="},
		{"watch-json/cut-mid-frame", [][2]string{{"GET", start}, {"GET", watchJSON + "{frame:2}"}}, "WATCH #1 at resourceVersion="},
		{"watch-json/cut-mid-frame", [][2]string{{"GET", start}, {"GET", "watch=true&timeoutSeconds=0&resourceVersion={frame:1}"}},
			"timeoutSeconds=0"},
		{"watch-json/cut-mid-frame", [][2]string{{"GET", start}, {"GET", "watch=true&resourceVersion={frame:1}"}},
			"without timeoutSeconds"},
		{"watch-json/cut-mid-frame", [][2]string{{"GET", start}, {"GET", "watch=true&timeoutSeconds=7&resourceVersion={frame:1}"}},
			"timeoutSeconds=7, want at most 6"},
		{"watch-json/error-429", [][2]string{{"GET", start}, {"GET", resume}}, "timeoutSeconds=6, want at most 5"},
		{"watch-json/error-429", [][2]string{{"GET", start}, {"GET", "watch=true&timeoutSeconds=5&resourceVersion={frame:1}"}}, ""},
		{"watch-json/error-410", [][2]string{{"GET", start}, {"GET", resume}}, "after the caller was handed ERROR 410"},
		{"watch-json/resume-gets-410", [][2]string{{"GET", start}, {"GET", resume}, {"GET", resume}},
			"after the caller was handed HTTP 410"},
		{"watch-json/establish-503", [][2]string{{"GET", start}, {"GET", start}}, ""},
		{"watch-json/clean", [][2]string{{"GET", watchJSON + "1"}}, "is not the recorded watch"},
		{"watch-list/cut-after-initial-events", [][2]string{{"GET", watchList}, {"GET", "watch=true&timeoutSeconds=6&resourceVersion={frame:4}"}}, ""},
		{"watch-list/cut-after-initial-events", [][2]string{{"GET", watchList}, {"GET", watchList + "&resourceVersion={frame:4}"}},
			"relist: WATCH #1 asks for the initial state again"},
		{"watch-list/cut-after-initial-events", [][2]string{{"GET", watchList}, {"GET", "watch=true&timeoutSeconds=6&resourceVersion={frame:4}&resourceVersionMatch=NotOlderThan"}},
			"resumes with resourceVersionMatch=NotOlderThan"},
		{"watch-list/cut-in-initial-events", [][2]string{{"GET", watchList}, {"GET", watchList}},
			"after the caller was handed a break inside the initial state"},
		{"watch-list/establish-503", [][2]string{{"GET", watchList}, {"GET", watchList}}, ""},
		{"informer/clean", [][2]string{{"GET", watchList}, {"GET", "limit=500&resourceVersion=0"}},
			"relist: initial-state fetch #2"},
		{"list-paged/cut-mid-body", [][2]string{{"GET", page1}, {"GET", page1 + "&continue=x"}},
			"not a recorded query"},
		{"list-410-exact/deliver", [][2]string{{"GET", "{list:0}"}, {"GET", "{list:0}"}}, "a 4xx must not be retried"},
		{"create/503", [][2]string{{"POST", ""}}, ""},
		{"create/503", [][2]string{{"POST", ""}, {"POST", ""}}, "POST #1: a POST was retried"},
	}
	for _, tc := range tests {
		t.Run(tc.scenario+"/"+tc.problem, func(t *testing.T) {
			r := newTestReplay(t, scenarioNamed(t, tc.scenario))
			for _, rq := range tc.requests {
				send(t, r, rq[0], rq[1])
			}
			problems := strings.Join(r.problems, "\n")
			switch {
			case tc.problem == "" && problems != "":
				t.Errorf("unexpected problems:\n%s\nrequests:\n%s", problems, strings.Join(r.log, "\n"))
			case tc.problem != "" && !strings.Contains(problems, tc.problem):
				t.Errorf("problems %q, want one with %q\nrequests:\n%s", problems, tc.problem, strings.Join(r.log, "\n"))
			}
		})
	}
}

// TestSimulate pins what a correct transport hands a RawWatch caller.
func TestSimulate(t *testing.T) {
	tests := []struct {
		scenario string
		events   int
		last     string // the last event's type (ERROR with its code)
		ends     bool
	}{
		{"watch-json/clean", 6, "BOOKMARK", false},
		{"watch-json/cut-twice", 6, "BOOKMARK", false},
		{"watch-json/short-watch", 6, "BOOKMARK", false},
		{"watch-json/error-410", 3, "ERROR 410", true},
		{"watch-json/resume-gets-410", 3, "ERROR 410", true},
		{"watch-list/cut-in-initial-events", 2, "ADDED", true},
		{"watch-list/cut-after-initial-events", 10, "BOOKMARK", false},
		{"watch-expired-compacted/deliver", 1, "ERROR 410", true},
	}
	for _, tc := range tests {
		t.Run(tc.scenario, func(t *testing.T) {
			exp, err := newTestReplay(t, scenarioNamed(t, tc.scenario)).simulate()
			if err != nil {
				t.Fatal(err)
			}
			last := exp.events[len(exp.events)-1]
			lastIs := last.Type
			if last.Type == "ERROR" {
				lastIs += " " + strconv.Itoa(int(last.Code))
			}
			if len(exp.events) != tc.events || lastIs != tc.last || exp.ends != tc.ends {
				t.Errorf("got %d events %v, ends %v; want %d ending with %s, ends %v", len(exp.events), exp.events, exp.ends, tc.events, tc.last, tc.ends)
			}
		})
	}
}

// TestRecordedStreams checks the frame split against the recorded bodies, and that an
// injected ERROR frame reads back as what it says in both encodings.
func TestRecordedStreams(t *testing.T) {
	fixtures, err := loadFixtures(nil)
	if err != nil {
		t.Fatal(err)
	}
	watches := 0
	for name, f := range fixtures {
		for _, ex := range f.Exchanges {
			if !isWatch(ex.Request.Query()) {
				continue
			}
			watches++
			w, err := newWatchSource(ex)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			var joined []byte
			for _, fr := range w.frames {
				joined = append(joined, fr.raw...)
			}
			if !bytes.Equal(joined, ex.Response.Body()) {
				t.Errorf("%s: the frames are not the body", name)
			}
		}
	}
	if watches < 8 {
		t.Errorf("%d recorded watches, want the 8 or more cmd/kretry-record writes", watches)
	}
	for _, enc := range []encoding{encJSON, encProtobuf, encCBOR} {
		raw, err := errorFrame(&metav1.Status{Code: 429, Reason: metav1.StatusReasonTooManyRequests}, enc)
		if err != nil {
			t.Fatal(err)
		}
		frames, err := splitFrames(raw, enc)
		if err != nil || len(frames) != 1 || frames[0].event.String() != "ERROR 429 TooManyRequests" {
			t.Errorf("encoding %d: %v, %v", enc, frames, err)
		}
	}
}

// TestSkips: a missing fixture or a fault that does not fit the recording skips the
// scenario with the reason, rather than replaying something else.
func TestSkips(t *testing.T) {
	fixtures, err := loadFixtures(nil)
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(fixtures["watch-json"])
	if err != nil {
		t.Fatal(err)
	}
	results := EvaluateWith(nil, Options{
		Fixtures: fstest.MapFS{"watch-json.json": {Data: data}},
		Scenarios: []Scenario{
			scenarioNamed(t, "list-paged/clean"),
			{Name: "too-far", Fixture: "watch-json", Caller: RawWatch, Faults: []Fault{cutWatch(0, 40, Half)}},
			scenarioNamed(t, "watch-json/establish-429"),
		},
	})
	for i, want := range []string{"fixture list-paged.json is not recorded", "the response has only 6 frames", "fixture list-429.json"} {
		if !results[i].Skipped || !strings.Contains(results[i].Reason, want) {
			t.Errorf("%s: %s, want a skip saying %q", results[i].Scenario.Name, results[i].Verdict(), want)
		}
	}
}

// naiveResumer is a plausible wrong watch resumer: when a watch body breaks it sends the
// very same request again and splices the new body on, partial frame and all.
type naiveResumer struct{ next http.RoundTripper }

func (n naiveResumer) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := n.next.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusOK || !isWatch(req.URL.Query()) {
		return resp, err
	}
	resp.Body = &splicingBody{req: req, next: n.next, current: resp.Body}
	return resp, nil
}

type splicingBody struct {
	req     *http.Request
	next    http.RoundTripper
	mu      sync.Mutex // guards current; never held across a Read, so Close can interrupt one
	current io.ReadCloser
	reopens int // only Read touches it
}

func (b *splicingBody) body() io.ReadCloser {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.current
}

func (b *splicingBody) Read(p []byte) (int, error) {
	n, err := b.body().Read(p)
	if err != nil && n == 0 && b.reopens < 2 && b.req.Context().Err() == nil {
		b.reopens++
		if resp, rerr := b.next.RoundTrip(b.req); rerr == nil && resp.StatusCode == http.StatusOK {
			b.mu.Lock()
			old := b.current
			b.current = resp.Body
			b.mu.Unlock()
			_ = old.Close()
			return 0, nil
		}
	}
	return n, err
}

func (b *splicingBody) Close() error { return b.body().Close() }

// TestNaiveResumerFails: re-sending the original watch after a break replays events the
// caller had (caught by the resume check), and re-sending a streaming list replays its
// initial state.
func TestNaiveResumerFails(t *testing.T) {
	wrap := func(next http.RoundTripper) http.RoundTripper { return naiveResumer{next} }
	for name, want := range map[string]string{
		"watch-json/cut-mid-frame":         "WATCH #1 at resourceVersion=",
		"watch-json/early-close":           "WATCH #1 at resourceVersion=",
		"watch-list/cut-in-initial-events": "after the caller was handed a break inside the initial state",
		"watch-json/error-410":             "after the caller was handed ERROR 410",
	} {
		res := EvaluateWith(wrap, Options{Scenarios: []Scenario{scenarioNamed(t, name)}})[0]
		if res.Passed || !strings.Contains(res.Reason, want) {
			t.Errorf("%s: %s, want a failure saying %q", name, res.Verdict(), want)
		}
	}
}

// leakyRetrier retries a 503 once and forgets to close the body it abandons.
type leakyRetrier struct{ next http.RoundTripper }

func (l leakyRetrier) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusServiceUnavailable {
		return l.next.RoundTrip(req)
	}
	return resp, err
}

// TestLeakedBodyFails: a body the client side never closes holds a connection forever.
func TestLeakedBodyFails(t *testing.T) {
	defer func(grace time.Duration) { bodyCloseGrace = grace }(bodyCloseGrace)
	bodyCloseGrace = 50 * time.Millisecond
	wrap := func(next http.RoundTripper) http.RoundTripper { return leakyRetrier{next} }
	for _, name := range []string{"watch-json/establish-503", "list-paged/503"} {
		res := EvaluateWith(wrap, Options{Scenarios: []Scenario{scenarioNamed(t, name)}})[0]
		if want := "was never closed"; res.Passed || !strings.Contains(res.Reason, want) {
			t.Errorf("%s: %s, want a failure saying %q", name, res.Verdict(), want)
		}
	}
}
