package listretry_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kretry/kretry/internal/establish"
	"github.com/kretry/kretry/internal/harness/fakeclock"
	"github.com/kretry/kretry/internal/harness/listbody"
	"github.com/kretry/kretry/internal/policy"
	"github.com/kretry/kretry/listretry"
)

const mediaProtobuf = listbody.Protobuf

// plainListURL is a list that is not a page: a stream's resume asks for it
// at resourceVersionMatch=Exact, a held body's retry as it was.
const plainListURL = "http://k8s.test/api/v1/namespaces/ns/configmaps?limit=500"

func plainListRequest(t testing.TB) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, plainListURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// configMaps is a ConfigMapList of n items at resourceVersion 42, with a
// continue token when next is set, encoded as kube-apiserver encodes it.
func configMaps(n int, next string, contentType string) string {
	return string(listbody.ConfigMaps(0, n, next, contentType))
}

// resumeCase is a list request, the answer's continue token, and the
// query its resume must carry.
type resumeCase struct {
	name      string
	url       string
	next      string // the answer's continue token
	wantQuery string // of the resume request
}

var resumeCases = []resumeCase{
	{"full list from the watch cache: the limit it ignored is dropped",
		"http://k8s.test/api/v1/namespaces/ns/configmaps?limit=500&resourceVersion=0", "",
		"resourceVersion=42&resourceVersionMatch=Exact"},
	{"first page: its limit is kept",
		"http://k8s.test/api/v1/namespaces/ns/configmaps?labelSelector=app%3Dx&limit=50", "page2",
		"labelSelector=app%3Dx&limit=50&resourceVersion=42&resourceVersionMatch=Exact"},
	{"NotOlderThan becomes Exact",
		"http://k8s.test/api/v1/configmaps?resourceVersion=7&resourceVersionMatch=NotOlderThan&unknown=kept", "",
		"resourceVersion=42&resourceVersionMatch=Exact&unknown=kept"},
	{"a later page: its continue token re-sent as it was",
		"http://k8s.test/api/v1/configmaps?continue=page2&limit=50", "page3",
		"continue=page2&limit=50"},
}

// TestStreamResumedAtExactResourceVersion cuts a streamed body at many
// offsets past its head, JSON and protobuf: the caller reads exactly the
// body, from two requests, the second at resourceVersionMatch=Exact with
// the list's resourceVersion (or, for a page past the first, its continue
// token), resumed at once.
func TestStreamResumedAtExactResourceVersion(t *testing.T) {
	for _, contentType := range []string{"application/json", mediaProtobuf} {
		for _, rc := range resumeCases {
			body := configMaps(60, rc.next, contentType)
			offsets := []int{200, len(body) / 3, len(body) / 2, len(body) - 2, len(body) - 1}
			for cut := 300; cut < len(body); cut += len(body) / 23 {
				offsets = append(offsets, cut)
			}
			for _, cut := range offsets {
				t.Run(fmt.Sprintf("%s/%s/cut at %d of %d", contentType, rc.name, cut, len(body)), func(t *testing.T) {
					s := newServer(t,
						answer{code: 200, body: body, cut: cut, err: io.ErrUnexpectedEOF, contentType: contentType},
						answer{code: 200, body: body, cut: -1, contentType: contentType})
					var resumes []listretry.Resume
					rt, clock := newList(s, listretry.TestConfig{OnResume: func(_ context.Context, r listretry.Resume) { resumes = append(resumes, r) }})
					req, _ := http.NewRequest(http.MethodGet, rc.url, nil)
					req.Header.Set("Authorization", "Bearer token")
					resp, err := rt.RoundTrip(req)
					if err != nil {
						t.Fatal(err)
					}
					got, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					if err != nil || string(got) != body {
						t.Fatalf("read %d bytes, %v; want the %d-byte body exactly", len(got), err, len(body))
					}
					asked := s.requests()
					if len(asked) != 2 {
						t.Fatalf("%d requests, want 2", len(asked))
					}
					if asked[0].URL.String() != rc.url {
						t.Errorf("first request %s, want %s", asked[0].URL, rc.url)
					}
					if q := asked[1].URL.RawQuery; q != rc.wantQuery || asked[1].URL.Path != req.URL.Path || asked[1].Header.Get("Authorization") != "Bearer token" {
						t.Errorf("resume asked %s?%s, want ?%s with the same path and headers", asked[1].URL.Path, q, rc.wantQuery)
					}
					if sleeps := clock.Sleeps(); len(sleeps) != 0 {
						t.Errorf("waits %v, want a resume at once", sleeps)
					}
					if len(resumes) != 1 || resumes[0].Outcome != listretry.ResumeResumed || resumes[0].Skipped != int64(cut) ||
						resumes[0].ResourceVersion != "42" || resumes[0].Requests != 1 {
						t.Errorf("resumes %+v, want one resumed at 42 that skipped %d bytes", resumes, cut)
					}
				})
			}
		}
	}
}

// TestStreamHandsBytesOverAsTheyArrive: a streamed body's bytes reach the
// caller before the body ends, and only the head is held.
func TestStreamHandsBytesOverAsTheyArrive(t *testing.T) {
	body := configMaps(2000, "", "application/json")
	s := newServer(t, answer{code: 200, body: body, cut: -1})
	rt, _ := newList(s, listretry.TestConfig{BufferSize: 1 << 10})
	resp, err := rt.RoundTrip(listRequest(t))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if held := listretry.Held(resp.Body); held <= 0 || held > 64<<10 {
		t.Errorf("holds %d bytes, want the head only", held)
	}
	s.mu.Lock()
	unread := s.bodies[0].data.Len()
	s.mu.Unlock()
	if unread < len(body)/2 {
		t.Errorf("%d of %d bytes left on the connection when the caller got the response, want most", unread, len(body))
	}
	got, err := io.ReadAll(resp.Body)
	if err != nil || string(got) != body {
		t.Errorf("read %d bytes, %v", len(got), err)
	}
}

// TestStreamResumeFails: when the re-request cannot continue the body (its
// prefix differs, 410, another content type, a shorter body, the window
// spent on 503s), the caller gets the original break, as without kretry,
// after exactly the bytes delivered: never a spliced body.
func TestStreamResumeFails(t *testing.T) {
	body := configMaps(60, "", "application/json")
	// Past the 4 KiB head: the head is compared byte for byte, the rest by
	// its running hash.
	const cut = 6000
	if len(body) < cut+1000 {
		t.Fatalf("test body of %d bytes is too short", len(body))
	}
	breakErr := fmt.Errorf("read tcp: %w", io.ErrUnexpectedEOF)
	// The same list with one byte changed inside the delivered prefix, past
	// the head; and inside the head (a page served once from the watch
	// cache and once from etcd: its continue token differs by a byte).
	changed := body[:cut-100] + "X" + body[cut-99:]
	changedHead := body[:60] + "X" + body[61:]
	gone := `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 42 (99)","reason":"Expired","code":410}`
	unavailable := `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","code":503}`
	tests := []struct {
		name     string
		resume   answer
		outcome  listretry.ResumeOutcome
		requests int // in all
	}{
		{"prefix mismatch past the head", answer{code: 200, body: changed, cut: -1}, listretry.ResumeMismatch, 2},
		{"prefix mismatch in the head", answer{code: 200, body: changedHead, cut: -1}, listretry.ResumeMismatch, 2},
		{"410 at the exact resourceVersion", answer{code: http.StatusGone, body: gone, cut: -1}, listretry.ResumeGone, 2},
		{"another content type", answer{code: 200, body: body, cut: -1, contentType: "application/cbor"}, listretry.ResumeMismatch, 2},
		{"shorter than the prefix", answer{code: 200, body: body[:cut-1], cut: -1}, listretry.ResumeMismatch, 2},
		{"503 until the window ends", answer{code: http.StatusServiceUnavailable, body: unavailable, cut: -1}, listretry.ResumeGaveUp, 8},
		{"broken within the prefix until the window ends", answer{code: 200, body: body, cut: cut / 2, err: io.ErrUnexpectedEOF}, listretry.ResumeGaveUp, 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t, answer{code: 200, body: body, cut: cut, err: breakErr}, tt.resume)
			var resumes []listretry.Resume
			rt, _ := newList(s, listretry.TestConfig{OnResume: func(_ context.Context, r listretry.Resume) { resumes = append(resumes, r) }})
			resp, err := rt.RoundTrip(listRequest(t))
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			// The give-up, which holds the very break and unwraps to it.
			var giveUp *establish.GiveUpError
			if !errors.As(err, &giveUp) || giveUp.Last != breakErr || !errors.Is(err, io.ErrUnexpectedEOF) || giveUp.Attempts != tt.requests { //nolint:errorlint // the very error
				t.Errorf("read error %v, want a give-up after %d requests holding the original break %v", err, tt.requests, breakErr)
			}
			if string(got) != body[:cut] {
				t.Errorf("read %d bytes, want the %d delivered before the break and nothing else", len(got), cut)
			}
			if n, again := resp.Body.Read(make([]byte, 10)); n != 0 || again != err { //nolint:errorlint
				t.Errorf("read after the end = %d, %v; want the give-up again", n, again)
			}
			resp.Body.Close()
			if n := len(s.requests()); n != tt.requests {
				t.Errorf("%d requests, want %d", n, tt.requests)
			}
			if len(resumes) != 1 || resumes[0].Outcome != tt.outcome {
				t.Errorf("resumes %+v, want one %s", resumes, tt.outcome)
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			for i, b := range s.bodies {
				if !b.isClosed() {
					t.Errorf("body %d not closed", i)
				}
			}
		})
	}
}

// TestStreamResumeBrokenAgain: a resume broken again within the prefix
// backs off and tries again; once new bytes arrived, the next break resumes
// at once, and the skip count grows with what was delivered.
func TestStreamResumeBrokenAgain(t *testing.T) {
	body := configMaps(80, "", mediaProtobuf)
	s := newServer(t,
		answer{code: 200, body: body, cut: 1000, err: io.ErrUnexpectedEOF, contentType: mediaProtobuf},
		answer{code: 200, body: body, cut: 500, err: io.ErrUnexpectedEOF, contentType: mediaProtobuf},
		answer{code: 200, body: body, cut: 2500, err: io.ErrUnexpectedEOF, contentType: mediaProtobuf},
		answer{code: 200, body: body, cut: -1, contentType: mediaProtobuf})
	got, resumes, clock, err := readList(t, s)
	if err != nil || string(got) != body {
		t.Fatalf("read %d bytes, %v; want the %d-byte body", len(got), err, len(body))
	}
	if n := len(s.requests()); n != 4 {
		t.Errorf("%d requests, want 4", n)
	}
	// rand 0: the spread draw is half the step.
	if sleeps := clock.Sleeps(); len(sleeps) != 1 || sleeps[0] != 400*time.Millisecond {
		t.Errorf("waits %v, want one backoff after the break within the prefix", sleeps)
	}
	if len(resumes) != 2 || resumes[0].Skipped != 1000 || resumes[0].Requests != 2 || resumes[1].Skipped != 2500 || resumes[1].Requests != 1 {
		t.Errorf("resumes %+v, want skips of 1000 (2 requests) and 2500 (1)", resumes)
	}
}

// TestStreamHeld: bodies that are not byte-stable, or carry their
// resourceVersion too late to stream, are held whole and asked for again as
// they were: CBOR, a Table, a custom resource's JSON list, a body the
// caller decodes itself, and every body with Hold (single-object GETs).
func TestStreamHeld(t *testing.T) {
	builtIn := configMaps(60, "", "application/json")
	tests := []struct {
		name        string
		body        string
		contentType string
		accept      string
		encoding    string
		hold        bool
	}{
		{"CBOR", builtIn, "application/cbor", "application/cbor", "", false},
		{"Table", `{"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"42"},"columnDefinitions":[` + strings.Repeat(`{"name":"Age"},`, 100) + `{}],"rows":[]}`,
			"application/json", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json", "", false},
		{"Table asked for, metadata first", builtIn, "application/json", "application/json;as=Table;v=v1;g=meta.k8s.io", "", false},
		{"custom resource JSON", customItems(60), "application/json", "application/json", "", false},
		{"Content-Encoding the caller decodes", builtIn, "application/json", "application/json", "gzip", false},
		{"Hold", builtIn, "application/json", "application/json", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cut := len(tt.body) / 2
			s := newServer(t,
				answer{code: 200, body: tt.body, cut: cut, err: io.ErrUnexpectedEOF, contentType: tt.contentType, encoding: tt.encoding},
				answer{code: 200, body: tt.body, cut: -1, contentType: tt.contentType, encoding: tt.encoding})
			rt, _ := newList(s, listretry.TestConfig{Hold: tt.hold})
			req, _ := http.NewRequest(http.MethodGet, plainListURL, nil)
			req.Header.Set("Accept", tt.accept)
			resp, err := rt.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			if held := listretry.Held(resp.Body); held < len(tt.body) {
				t.Errorf("holds %d bytes, want the whole %d-byte body", held, len(tt.body))
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || string(got) != tt.body {
				t.Errorf("read %d bytes, %v; want the whole body", len(got), err)
			}
			asked := s.requests()
			if len(asked) != 2 || asked[1].URL.String() != plainListURL {
				t.Errorf("%d requests, the second %v; want it asked for again as it was", len(asked), asked[len(asked)-1].URL)
			}
		})
	}
}

// TestStreamCallerContextEnds: the caller's context ending mid-body ends
// the body with the read error, and nothing is asked for again.
func TestStreamCallerContextEnds(t *testing.T) {
	body := configMaps(60, "", "application/json")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := newServer(t, answer{code: 200, body: body, cut: 1200, err: context.Canceled, onBreak: cancel})
	rt, clock := newList(s, listretry.TestConfig{})
	resp, err := rt.RoundTrip(listRequest(t).WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !errors.Is(err, context.Canceled) || string(got) != body[:1200] {
		t.Errorf("read %d bytes, %v; want 1200 then context.Canceled", len(got), err)
	}
	if n := len(s.requests()); n != 1 || len(clock.Sleeps()) != 0 {
		t.Errorf("%d requests, waits %v after the context ended", n, clock.Sleeps())
	}
}

// TestStreamCloseCancelsResume: Close from another goroutine ends a resume
// whose request hangs, and the Read waiting on it returns.
func TestStreamCloseCancelsResume(t *testing.T) {
	body := configMaps(60, "", "application/json")
	s := newServer(t, answer{code: 200, body: body, cut: 1000, err: io.ErrUnexpectedEOF})
	asked := make(chan struct{})
	var once sync.Once
	hanging := http.RoundTripper(roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.URL.Query().Get("resourceVersionMatch") != "Exact" {
			return s.mock.RoundTrip(req)
		}
		once.Do(func() { close(asked) })
		<-req.Context().Done()
		return nil, req.Context().Err()
	}))
	rt := listretry.NewForTest(hanging, listretry.TestConfig{Policy: policy.New(policy.Config{Rand: func() float64 { return 0 }})})
	resp, err := rt.RoundTrip(plainListRequest(t))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() {
		_, err := io.ReadAll(resp.Body)
		done <- err
	}()
	<-asked
	resp.Body.Close()
	if err := <-done; !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("read error %v, want the break", err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// TestStreamResumeFraming: a resumed answer agrees with the first when it
// has the same content type and encoding and, where both declare a
// Content-Length, the same one; whether a length is declared at all is the
// server's choice (Go's own server declares one for a body written at once,
// none for one streamed or cut). The bytes are what must match, and the
// caller's response never delivers other than the length it declared.
func TestStreamResumeFraming(t *testing.T) {
	body := configMaps(60, "", "application/json")
	const cut = 6000
	tests := []struct {
		name         string
		firstLength  bool // the first answer declares its length
		resume       answer
		want         string // what the caller reads
		wantGiveUp   bool
		wantRequests int
		wantOutcome  listretry.ResumeOutcome
	}{
		// Fails before: a first answer without a length and a resume with
		// one were a mismatch.
		{"none, then a length", false, answer{code: 200, body: body, cut: -1, contentLength: true}, body, false, 2, listretry.ResumeResumed},
		{"a length, then none", true, answer{code: 200, body: body, cut: -1}, body, false, 2, listretry.ResumeResumed},
		{"the same length", true, answer{code: 200, body: body, cut: -1, contentLength: true}, body, false, 2, listretry.ResumeResumed},
		{"none, then none", false, answer{code: 200, body: body, cut: -1}, body, false, 2, listretry.ResumeResumed},
		{"another length", true, answer{code: 200, body: body + " ", cut: -1, contentLength: true}, body[:cut], true, 2, listretry.ResumeMismatch},
		{"a length, then none and a longer body", true, answer{code: 200, body: body + "  ", cut: -1}, body, true, 2, listretry.ResumeResumed},
		{"a length, then none and a shorter body", true, answer{code: 200, body: body[:len(body)-2], cut: -1}, body[:len(body)-2], true, 2, listretry.ResumeResumed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t, answer{code: 200, body: body, cut: cut, err: io.ErrUnexpectedEOF, contentLength: tt.firstLength}, tt.resume)
			got, resumes, _, err := readList(t, s)
			if string(got) != tt.want {
				t.Errorf("read %d bytes, want %d", len(got), len(tt.want))
			}
			if tt.firstLength && len(got) > len(body) {
				t.Errorf("read %d bytes of a response that declared %d", len(got), len(body))
			}
			var giveUp *establish.GiveUpError
			if gaveUp := errors.As(err, &giveUp); gaveUp != tt.wantGiveUp || (gaveUp && !errors.Is(err, io.ErrUnexpectedEOF)) || (!gaveUp && err != nil) {
				t.Errorf("read error %v, want a give-up that unwraps to io.ErrUnexpectedEOF: %v", err, tt.wantGiveUp)
			}
			if n := len(s.requests()); n != tt.wantRequests {
				t.Errorf("%d requests, want %d", n, tt.wantRequests)
			}
			if len(resumes) != 1 || resumes[0].Outcome != tt.wantOutcome {
				t.Errorf("resumes %+v, want one %s", resumes, tt.wantOutcome)
			}
		})
	}
}

// readList lists through listretry over s on a virtual clock, reads the
// whole body and returns it, the resumes heard, the clock and the read's
// error.
func readList(t *testing.T, s *server) ([]byte, []listretry.Resume, *fakeclock.Clock, error) {
	t.Helper()
	var resumes []listretry.Resume
	rt, clock := newList(s, listretry.TestConfig{OnResume: func(_ context.Context, r listretry.Resume) { resumes = append(resumes, r) }})
	resp, err := rt.RoundTrip(listRequest(t))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return got, resumes, clock, err
}
