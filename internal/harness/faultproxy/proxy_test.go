package faultproxy

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// sourceServer writes size bytes (0, 1, 2, ... mod 251) to every connection, then closes it.
func sourceServer(t *testing.T, size int) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.Write(pattern(size))
			}()
		}
	}()
	return ln.Addr().String()
}

func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i % 251)
	}
	return b
}

// echoServer echoes every connection and reports each backend's name first.
func echoServer(t *testing.T, name string) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.Write([]byte(name))
				io.Copy(c, c)
			}()
		}
	}()
	return ln
}

func newProxy(t *testing.T, seed uint64, backends ...string) *Proxy {
	t.Helper()
	p, err := New(seed, backends...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func readAll(t *testing.T, addr string) ([]byte, error) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	return io.ReadAll(c)
}

func TestCutAfterBytes(t *testing.T) {
	src := sourceServer(t, 100_000)
	for _, n := range []int64{1, 100, 32 << 10, 32<<10 + 1, 99_999} {
		p := newProxy(t, 1, src)
		p.SetRule(Rule{CutAfterBytes: n})
		got, _ := readAll(t, p.Addr())
		if !bytes.Equal(got, pattern(100_000)[:n]) {
			t.Fatalf("cut at %d: got %d bytes (prefix intact: %v)", n, len(got), bytes.HasPrefix(pattern(100_000), got))
		}
		if s := p.Stats(); s.Cuts != 1 || s.BytesDown != n {
			t.Fatalf("cut at %d: stats %+v", n, s)
		}
	}
}

func TestNoRuleForwardsEverything(t *testing.T) {
	src := sourceServer(t, 100_000)
	p := newProxy(t, 1, src)
	got, err := readAll(t, p.Addr())
	if err != nil || !bytes.Equal(got, pattern(100_000)) {
		t.Fatalf("got %d bytes, err %v", len(got), err)
	}
	if s := p.Stats(); s.Cuts != 0 || s.Accepted != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// TestRandomBytesSeeded: the same seed and the same connection order give the same cuts.
func TestRandomBytesSeeded(t *testing.T) {
	src := sourceServer(t, 50_000)
	run := func(seed uint64) []int {
		p := newProxy(t, seed, src)
		p.SetRule(Rule{CutAfterRandomBytes: ByteRange{Min: 10, Max: 40_000}})
		var lens []int
		for range 8 {
			got, _ := readAll(t, p.Addr())
			if !bytes.HasPrefix(pattern(50_000), got) {
				t.Fatal("corrupted prefix")
			}
			lens = append(lens, len(got))
		}
		return lens
	}
	a, b, c := run(42), run(42), run(43)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("seed 42 not reproducible: %v vs %v", a, b)
		}
		if a[i] < 10 || a[i] > 40_000 {
			t.Fatalf("cut %d out of range", a[i])
		}
	}
	if equalInts(a, c) {
		t.Fatalf("seeds 42 and 43 gave the same cuts %v", a)
	}
}

func equalInts(a, b []int) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}

func TestRuleFuncPerConnection(t *testing.T) {
	src := sourceServer(t, 1000)
	p := newProxy(t, 1, src)
	p.SetRuleFunc(func(n int64) Rule {
		if n%2 == 1 {
			return Rule{CutAfterBytes: n * 10}
		}
		return Rule{}
	})
	for n := 1; n <= 4; n++ {
		got, _ := readAll(t, p.Addr())
		want := 1000
		if n%2 == 1 {
			want = n * 10
		}
		if len(got) != want {
			t.Fatalf("connection %d: %d bytes, want %d", n, len(got), want)
		}
	}
}

func TestReset(t *testing.T) {
	ln := echoServer(t, "a")
	p := newProxy(t, 1, ln.Addr().String())
	p.SetRule(Rule{CutAfterBytes: 5, Reset: true})
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("hello world"))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(c)
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("want ECONNRESET, got %q, %v", got, err)
	}
}

func TestRefuseAndAccept(t *testing.T) {
	ln := echoServer(t, "a")
	p := newProxy(t, 1, ln.Addr().String())
	if err := p.Refuse(); err != nil {
		t.Fatal(err)
	}
	if _, err := net.Dial("tcp", p.Addr()); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("want ECONNREFUSED, got %v", err)
	}
	if err := p.Accept(); err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 1)
	if _, err := io.ReadFull(c, buf); err != nil || buf[0] != 'a' {
		t.Fatalf("after Accept: %q %v", buf, err)
	}
}

func firstByte(t *testing.T, addr string) (byte, error) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 1)
	_, err = io.ReadFull(c, buf)
	return buf[0], err
}

func TestFailoverAndRouting(t *testing.T) {
	a, b := echoServer(t, "a"), echoServer(t, "b")
	p := newProxy(t, 1, a.Addr().String(), b.Addr().String())
	if got, _ := firstByte(t, p.Addr()); got != 'a' {
		t.Fatalf("failover routing should prefer a, got %q", got)
	}
	p.SetDown(0, true)
	if got, _ := firstByte(t, p.Addr()); got != 'b' {
		t.Fatalf("a marked down: got %q", got)
	}
	p.SetDown(0, false)
	a.Close() // a dies: the dial fails and the proxy fails over
	if got, _ := firstByte(t, p.Addr()); got != 'b' {
		t.Fatalf("a dead: got %q", got)
	}
	if s := p.Stats(); s.DialFailures != 1 || s.PerBackendHit[1] != 2 {
		t.Fatalf("stats %+v", s)
	}
	p.SetDown(1, true)
	if _, err := firstByte(t, p.Addr()); err == nil {
		t.Fatal("no backend left, want an error")
	}

	c, d := echoServer(t, "c"), echoServer(t, "d")
	rr := newProxy(t, 1, c.Addr().String(), d.Addr().String())
	rr.SetRouting(RoundRobin)
	var seq []byte
	for range 4 {
		got, _ := firstByte(t, rr.Addr())
		seq = append(seq, got)
	}
	if string(seq) != "cdcd" {
		t.Fatalf("round robin: %q", seq)
	}
}

func TestStallAfterBytes(t *testing.T) {
	src := sourceServer(t, 1000)
	p := newProxy(t, 1, src)
	p.SetRule(Rule{StallAfterBytes: 300, StallFor: 300 * time.Millisecond})
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	first := make([]byte, 300)
	if _, err := io.ReadFull(c, first); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	rest, err := io.ReadAll(c)
	if err != nil || len(rest) != 700 {
		t.Fatalf("rest %d bytes, %v", len(rest), err)
	}
	if waited := time.Since(start); waited < 250*time.Millisecond {
		t.Fatalf("stall too short: %v", waited)
	}
	if !bytes.Equal(append(first, rest...), pattern(1000)) {
		t.Fatal("bytes changed")
	}
}

func TestStallAndCutAll(t *testing.T) {
	ln := echoServer(t, "a")
	p := newProxy(t, 1, ln.Addr().String())
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 1)
	io.ReadFull(c, buf)
	p.Stall(time.Hour)
	c.Write([]byte("x"))
	c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	var ne net.Error
	if _, err := c.Read(buf); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("stalled read: %v", err)
	}
	if n := p.CutAll(); n != 1 {
		t.Fatalf("CutAll cut %d", n)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(buf); err == nil {
		t.Fatal("read after CutAll succeeded")
	}
	if s := p.Stats(); s.Cuts != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// TestCutsPerMinute: a high rate cuts an idle connection soon; the time is seeded.
func TestCutsPerMinute(t *testing.T) {
	ln := echoServer(t, "a")
	p := newProxy(t, 7, ln.Addr().String())
	p.SetRule(Rule{CutsPerMinute: 600}) // mean 100ms
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadAll(c); err != nil {
		t.Fatalf("want a clean cut (EOF), got %v", err)
	}
	if s := p.Stats(); s.Cuts != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// TestHTTPThroughProxy: a plain HTTP server behind the proxy; a body cut at a byte count reaches
// the client as an unexpected EOF after exactly that many bytes of the response.
func TestHTTPThroughProxy(t *testing.T) {
	body := pattern(20_000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
	}))
	defer srv.Close()
	p := newProxy(t, 1, srv.Listener.Addr().String())
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

	resp, err := client.Get("http://" + p.Addr() + "/")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("clean: %d bytes, %v", len(got), err)
	}
	headerLen := p.Stats().BytesDown - int64(len(body))

	p.SetRule(Rule{CutAfterBytes: headerLen + 5000})
	resp, err = client.Get("http://" + p.Addr() + "/")
	if err != nil {
		t.Fatal(err)
	}
	got, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !errors.Is(err, io.ErrUnexpectedEOF) || len(got) != 5000 {
		t.Fatalf("cut: %d bytes, %v", len(got), err)
	}
}
