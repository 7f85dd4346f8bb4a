package contract_test

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// watchPath is a raw client's watch of the pods of "ns" from
// resourceVersion 100.
const watchPath = "/api/v1/namespaces/ns/pods?watch=1&resourceVersion=100"

// watchHead is a 200 to a JSON watch, chunked.
func watchHead(ctype string) []byte { return head(200, ctype, -1) }

// TestWatchSeparatorArrivesLater: a JSON watch whose multi-byte
// separators ("\r\n", " \r\n") arrive after their event, whole, read by
// the caller in slices shorter than the separator: each separator reaches
// the caller whole before the next event is even sent, and the caller's
// bytes are the server's, then a cut and a resume.
func TestWatchSeparatorArrivesLater(t *testing.T) {
	for _, sep := range []string{"\r\n", " \r\n", "\n\n", "\r\n\r\n"} {
		for _, bufSize := range []int{1, 2} {
			if bufSize >= len(sep) {
				continue
			}
			t.Run(fmt.Sprintf("%q/buf%d", sep, bufSize), func(t *testing.T) {
				separatorTest(t, sep, bufSize, false)
			})
		}
	}
}

// TestWatchSeparatorPiecesAfterCallerCaughtUp is the deterministic form:
// the event's separator comes in pieces, each sent only once the caller has
// read everything before it. Every piece must reach the caller without
// waiting for the next event. If one is held, the test sends the next event
// to show where the piece went (no byte may be lost).
func TestWatchSeparatorPiecesAfterCallerCaughtUp(t *testing.T) {
	cases := []struct {
		pieces  []string
		bufSize int
	}{
		{[]string{"\r", "\n"}, 4096},
		{[]string{"\r", "\n"}, 1},
		{[]string{" ", "\r\n"}, 2},
		{[]string{" \r", "\n"}, 1},
		// Whitespace after the newline is no longer the event's separator
		// (DESIGN: "the JSON newline"): a line reader already has the line,
		// and the extra newline may come with the next event; it is not
		// lost (TestWatchSeparatorAfterTheNewline).
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%q/buf%d", tc.pieces, tc.bufSize), func(t *testing.T) {
			s := newSepScenario(t, tc.bufSize)
			e1, e2 := jsonEvent("ADDED", pod("a", 101)), jsonEvent("MODIFIED", pod("a", 102))
			s.send(string(e1))
			s.expect("event 1", e1)
			for i, p := range tc.pieces {
				s.send(p)
				if s.arrives([]byte(p)) {
					continue
				}
				rest := strings.Join(tc.pieces[i+1:], "")
				t.Errorf("separator %q after its event: piece %d %q was held back until the next event", strings.Join(tc.pieces, ""), i+1, p)
				s.send(p[:0] + rest + string(e2))
				s.expect("the held piece, then the next event", []byte(p+rest+string(e2)))
				return
			}
		})
	}
}

// TestWatchSeparatorAfterTheNewline: whitespace that follows an event's
// newline in a piece of its own reaches the caller, at the latest with the
// next event, byte for byte.
func TestWatchSeparatorAfterTheNewline(t *testing.T) {
	s := newSepScenario(t, 4096)
	e1, e2 := jsonEvent("ADDED", pod("a", 101)), jsonEvent("MODIFIED", pod("a", 102))
	s.send(string(e1))
	s.expect("event 1", e1)
	s.send("\n")
	s.send(string(e2))
	s.expect("the extra newline, then the next event", append([]byte("\n"), e2...))
}

type sepScenario struct {
	t       *testing.T
	srv     *rawServer
	step    chan string
	got     chan byte
	readErr chan error
}

func newSepScenario(t *testing.T, bufSize int) *sepScenario {
	return newSepScenarioVia(t, bufSize, true)
}

// TestWatchSeparatorPiecesControl: the same server and reads without
// kretry: every piece arrives (the rig does not hold them).
func TestWatchSeparatorPiecesControl(t *testing.T) {
	s := newSepScenarioVia(t, 1, false)
	e1 := jsonEvent("ADDED", pod("a", 101))
	s.send(string(e1))
	s.expect("event 1", e1)
	s.send("\r")
	s.expect("piece 1", []byte("\r"))
	s.send("\n")
	s.expect("piece 2", []byte("\n"))
}

func newSepScenarioVia(t *testing.T, bufSize int, viaKretry bool) *sepScenario {
	w := newWorld(t)
	s := &sepScenario{t: t, step: make(chan string), got: make(chan byte, 1<<16), readErr: make(chan error, 1)}
	s.srv = newRawServer(t, w.clk, func(c *rawConn, q rawReq) bool {
		if err := c.send(watchHead(mediaJSON)); err != nil {
			return false
		}
		for {
			select {
			case p := <-s.step:
				if p == "cut" {
					c.Close()
					return false
				}
				if err := c.send(chunk([]byte(p))); err != nil {
					return false
				}
			case <-time.After(hang):
				return false
			}
		}
	})
	client := w.httpClient(plainBase())
	if !viaKretry {
		client = &http.Client{Transport: plainBase()}
	}
	resp, err := client.Get(s.srv.url() + watchPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	go func() {
		buf := make([]byte, bufSize)
		for {
			n, err := resp.Body.Read(buf)
			for _, b := range buf[:n] {
				s.got <- b
			}
			if err != nil {
				s.readErr <- err
				return
			}
		}
	}()
	return s
}

func (s *sepScenario) send(p string) { s.step <- p }

// take returns the next n bytes the caller reads, or fewer if timeout of
// real time passes first; a read that ends fails the test (its message
// prefixed by prefix).
func (s *sepScenario) take(n int, timeout time.Duration, prefix string) []byte {
	s.t.Helper()
	var have []byte
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for len(have) < n {
		select {
		case b := <-s.got:
			have = append(have, b)
		case err := <-s.readErr:
			s.t.Fatalf("%sread ended with %v after %q", prefix, err, have)
		case <-timer.C:
			return have
		}
	}
	return have
}

// arrives reports whether want reaches the caller within a few seconds of
// real time (the only real-time wait of the trial: it shows a byte held).
func (s *sepScenario) arrives(want []byte) bool {
	s.t.Helper()
	have := s.take(len(want), 3*time.Second, "")
	if len(have) < len(want) {
		if len(have) > 0 {
			s.t.Fatalf("caller has %q of %q", have, want)
		}
		return false
	}
	if !bytes.Equal(have, want) {
		s.t.Fatalf("caller read %q, want %q", have, want)
	}
	return true
}

func (s *sepScenario) expect(what string, want []byte) {
	s.t.Helper()
	have := s.take(len(want), 10*time.Second, what+": ")
	if len(have) < len(want) {
		s.t.Fatalf("%s: the caller has %q of %q and nothing more arrives in 10s (held back until the next event)", what, have, want)
	}
	if !bytes.Equal(have, want) {
		s.t.Fatalf("%s: caller read %q, want %q", what, have, want)
	}
}

func separatorTest(t *testing.T, sep string, bufSize int, pieces bool) {
	s := newSepScenario(t, bufSize)
	e1, e2, e3 := jsonEvent("ADDED", pod("a", 101)), jsonEvent("MODIFIED", pod("a", 102)), jsonEvent("MODIFIED", pod("a", 103))
	s.send(string(e1))
	s.expect("event 1", e1)
	if pieces {
		for i := 0; i < len(sep); i++ {
			s.send(sep[i : i+1])
		}
	} else {
		s.send(sep)
	}
	s.expect("separator 1", []byte(sep))
	s.send(string(e2) + sep)
	s.expect("event 2 and separator", append(append([]byte{}, e2...), sep...))
	// a cut after a whole event and its separator: resumed at 102
	s.send("cut")
	eventually(t, "the resume", func() bool { return len(s.srv.requests()) == 2 })
	if r := s.srv.requests()[1]; r.q("resourceVersion") != "102" {
		t.Errorf("resume asked %q", r.url.RawQuery)
	}
	s.send(string(e3))
	s.expect("event 3", e3)
	s.send(sep)
	s.expect("separator 3", []byte(sep))
}

// TestWatchBytesAcrossCuts: a raw JSON watch cut at every offset of its
// first stream and resumed: the caller's bytes are the whole events of both
// streams with their separators, and every event stands on its own line
// (a line reader, e.g. behind kretry-proxy, reads one event per line).
func TestWatchBytesAcrossCuts(t *testing.T) {
	stream := events(mediaJSON, 100, 103)
	var frames [][]byte
	for rv := 101; rv <= 105; rv++ {
		frames = append(frames, event(mediaJSON, "MODIFIED", pod("p", rv)))
	}
	merged := 0
	for cut := 1; cut < len(stream); cut++ {
		w := newWorld(t)
		srv := newWatchServer(t, w, mediaJSON, func(q rawReq) watchAnswer {
			if q.n == 1 {
				return watchAnswer{stream: stream, cut: cut}
			}
			return openStream(mediaJSON, q.rv(), 105)
		}, nil)
		resp := w.get(plainBase(), srv.url()+watchPath)
		var got []byte
		buf := make([]byte, 333)
		for bytes.Count(got, []byte(`"type"`)) < 5 {
			n, err := resp.Body.Read(buf)
			got = append(got, buf[:n]...)
			if err != nil {
				t.Fatalf("cut %d: %v after %q", cut, err, got)
			}
		}
		resp.Body.Close()
		// the events, in order, once each
		var want []byte
		for _, f := range frames {
			want = append(want, f...)
		}
		if !bytes.Equal(bytes.ReplaceAll(got, []byte("\n"), nil), bytes.ReplaceAll(want, []byte("\n"), nil)) {
			t.Fatalf("cut %d: caller read %q", cut, got)
		}
		if !bytes.Equal(got, want) {
			merged++
			if merged == 1 {
				t.Errorf("cut %d (right after an event, before its newline): two events on one line: %q", cut, got)
			}
		}
	}
	if merged > 0 {
		t.Errorf("%d cut offsets leave two events on one line", merged)
	}
}
