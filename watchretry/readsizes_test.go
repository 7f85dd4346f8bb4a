package watchretry_test

import (
	"bytes"
	"context"
	"errors"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jarcoal/httpmock"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kretry/kretry/internal/establish"
	"github.com/kretry/kretry/internal/harness/fakeclock"
	"github.com/kretry/kretry/internal/policy"
	"github.com/kretry/kretry/watchretry"
)

func FuzzResumeJSON(f *testing.F)     { fuzzResume(f, jsonStream) }
func FuzzResumeProtobuf(f *testing.F) { fuzzResume(f, protoStream) }

// fuzzResume drives the resuming body with reads of random sizes (from one
// byte to many frames) over a server whose
// responses arrive in reads of random sizes and are cut at random points,
// a few times, before the whole history arrives. The caller's bytes must be
// the server's history, every event exactly once and in order, whole.
func fuzzResume(f *testing.F, ct string) {
	for _, seed := range []string{"", "a", "cut", "in place", "0123456789abcdef"} {
		f.Add([]byte(seed))
	}
	events, rvs := resumeHistory(f, ct)
	f.Fuzz(func(t *testing.T, data []byte) {
		h := fnv.New64a()
		h.Write(data)
		rng := rand.New(rand.NewPCG(h.Sum64(), uint64(len(data))))
		got, want := readResumed(t, ct, events, rvs, rng)
		if !bytes.Equal(got, want) {
			t.Fatalf("the caller read %d bytes, not the history's %d:\n%q\nwant\n%q", len(got), len(want), head(got), head(want))
		}
	})
}

// TestResumeReadsOfAnySize is the fuzz targets' property over a fixed set of
// random sources, so that `go test` walks it every time.
func TestResumeReadsOfAnySize(t *testing.T) {
	for _, ct := range encodings {
		t.Run(ct, func(t *testing.T) {
			events, rvs := resumeHistory(t, ct)
			for seed := range uint64(200) {
				got, want := readResumed(t, ct, events, rvs, rand.New(rand.NewPCG(seed, 1)))
				if !bytes.Equal(got, want) {
					t.Fatalf("seed %d: the caller read %d bytes, not the history's %d", seed, len(got), len(want))
				}
			}
		})
	}
}

func head(b []byte) []byte { return b[:min(len(b), 300)] }

// jsonSeparators are the separators the JSON history's events end with:
// JSON whitespace of one to three bytes, so that a separator split across
// the caller's reads or the server's shows.
var jsonSeparators = []string{"\n", "\r\n", " \r\n", "\n", "\t\n", "\r\n", "  \n", "\n"}

// resumeHistory is eight events of very different sizes, at RVs 101..108.
func resumeHistory(t testing.TB, ct string) (events [][]byte, rvs []int) {
	for i, size := range []int{50, 3000, 200, 9000, 10, 1500, 5000, 100} {
		rv := 101 + i
		cm := configMap("a", strconv.Itoa(rv))
		cm.Data["blob"] = strings.Repeat("x", size)
		typ := watch.Modified
		if i == 0 {
			typ = watch.Added
		}
		ev := event(t, ct, typ, cm)
		if ct == jsonStream {
			ev = append(bytes.TrimRight(ev, "\n"), jsonSeparators[i]...)
		}
		events = append(events, ev)
		rvs = append(rvs, rv)
	}
	return events, rvs
}

// readResumed reads a watch at RV 100 to its end through watchretry: up to
// three responses are cut (with an error or an early clean end) at random
// points, the next one brings the rest of the history and ends early, and
// the resume after it is refused with 403, which ends the stream cleanly.
// It returns what the caller read, and what it must have read: of each
// response, its whole frames and the separator bytes that arrived after the
// last of them, byte for byte.
func readResumed(t *testing.T, ct string, events [][]byte, rvs []int, rng *rand.Rand) (got, want []byte) {
	t.Helper()
	var mu sync.Mutex // responses are made on the reading goroutine; the lock is for -race's peace of mind
	cuts := rng.IntN(4)
	mock := httpmock.NewMockTransport()
	mock.RegisterNoResponder(func(req *http.Request) (*http.Response, error) {
		mu.Lock()
		defer mu.Unlock()
		from, err := strconv.Atoi(req.URL.Query().Get("resourceVersion"))
		if err != nil {
			t.Errorf("resume without a resourceVersion: %s", req.URL)
		}
		if from >= rvs[len(rvs)-1] {
			return &http.Response{StatusCode: http.StatusForbidden, Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(`{}`))}, nil
		}
		var body []byte
		var frameEnds, eventEnds []int
		for i, rv := range rvs {
			if rv <= from {
				continue
			}
			frame := events[i]
			if ct == jsonStream {
				frame = bytes.TrimRight(frame, " \t\r\n")
			}
			frameEnds = append(frameEnds, len(body)+len(frame))
			body = append(body, events[i]...)
			eventEnds = append(eventEnds, len(body))
		}
		end := error(io.EOF)
		if cuts > 0 {
			cuts--
			cut := rng.IntN(len(body) + 1)
			if i := rng.IntN(len(frameEnds)); ct == jsonStream && rng.IntN(3) == 0 {
				cut = frameEnds[i] + rng.IntN(eventEnds[i]-frameEnds[i]) // within a separator
			}
			body = body[:cut]
			if rng.IntN(2) == 0 {
				end = io.ErrUnexpectedEOF
			}
		}
		// The end of the last whole frame, and of its separator as far as it
		// came; a JSON event whose newline did not come gets one.
		wholeUpTo, frameEnd := 0, 0
		for i := range frameEnds {
			if frameEnds[i] <= len(body) {
				wholeUpTo, frameEnd = min(eventEnds[i], len(body)), frameEnds[i]
			}
		}
		want = append(want, body[:wholeUpTo]...)
		if ct == jsonStream && wholeUpTo > 0 && bytes.IndexByte(body[frameEnd:wholeUpTo], '\n') < 0 {
			want = append(want, '\n')
		}
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {ct}},
			Body: io.NopCloser(&chunkedBody{data: body, end: end, stops: frameEnds, rng: rand.New(rand.NewPCG(rng.Uint64(), 2))})}, nil
	})
	clock := fakeclock.New(epoch)
	rt := watchretry.NewForTest(mock, watchretry.TestConfig{Policy: policy.New(policy.Config{Clock: clock, Rand: func() float64 { return 0.5 }})})
	req, err := http.NewRequest(http.MethodGet, "http://kretry.test/api/v1/namespaces/demo/configmaps?watch=true&resourceVersion=100", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	for {
		size := 1 + rng.IntN(24<<10)
		switch rng.IntN(4) {
		case 0:
			size = 1 + rng.IntN(64)
		case 1:
			size = 1 + rng.IntN(3) // shorter than a separator
		}
		p := make([]byte, size)
		n, err := resp.Body.Read(p)
		got = append(got, p[:n]...)
		if errors.Is(err, io.EOF) {
			mu.Lock()
			defer mu.Unlock()
			return got, want
		}
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
	}
}

// chunkedBody returns data in reads of random sizes, then end. Every other
// read ends at the next of stops (offsets in data: the frames' ends), so
// that a frame often arrives without the separator that follows it.
type chunkedBody struct {
	data  []byte
	end   error
	stops []int
	read  int
	rng   *rand.Rand
}

func (b *chunkedBody) Read(p []byte) (int, error) {
	if len(b.data) == 0 {
		return 0, b.end
	}
	size := 1 + b.rng.IntN(len(b.data))
	if b.rng.IntN(2) == 0 {
		for _, stop := range b.stops {
			if stop > b.read {
				size = min(size, stop-b.read)
				break
			}
		}
	}
	n := copy(p[:min(len(p), size)], b.data)
	b.data, b.read = b.data[n:], b.read+n
	return n, nil
}

// TestBreakInALargeReadIsOneBreak: a break that a read large enough for
// several frames meets (here an early clean end) is one break, resumed once. The
// resume is refused, which ends the watch cleanly: the caller has the
// event and a clean end, and the retry hook heard of exactly one resume.
func TestBreakInALargeReadIsOneBreak(t *testing.T) {
	for _, ct := range encodings {
		t.Run(ct, func(t *testing.T) {
			events, _ := history(t, ct)
			srv := newServer(t, ct,
				reply{body: events[0]}, // clean EOF long before timeoutSeconds
				reply{status: http.StatusForbidden, contentType: "application/json", body: []byte(`{}`)})
			var retries []establish.Retry
			resp, _ := rawWatch(t, srv, "resourceVersion=100&timeoutSeconds=60", func(cfg *watchretry.TestConfig) {
				cfg.Hooks.OnRetry = func(_ context.Context, r establish.Retry) { retries = append(retries, r) }
			})
			got, err := io.ReadAll(readsOf(resp.Body, 8<<10))
			if err != nil || !bytes.Equal(got, events[0]) {
				t.Fatalf("read %q, %v; want the event and a clean end", got, err)
			}
			if len(retries) != 1 || retries[0].Wait != 0 || srv.requestCount() != 2 {
				t.Fatalf("retries %+v after %d requests; want one resume, at once", retries, srv.requestCount())
			}
		})
	}
}

// readsOf reads r with slices of exactly size bytes, as io.Copy does.
func readsOf(r io.Reader, size int) io.Reader { return &sizedReads{r: r, buf: make([]byte, size)} }

type sizedReads struct {
	r   io.Reader
	buf []byte
}

func (s *sizedReads) Read(p []byte) (int, error) {
	n, err := s.r.Read(s.buf)
	return copy(p, s.buf[:n]), err
}
