package listretry

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/kretry/kretry/internal/establish"
	"github.com/kretry/kretry/internal/policy"
)

// DefaultBufferSize is how much of a LIST body is held back by default.
const DefaultBufferSize = 128 << 20

// Config tunes the LIST retries; the zero Config is the recommended one.
type Config struct {
	// BufferSize bounds a body that is held whole before the response is
	// handed over (one that cannot be resumed mid-way: CBOR, a Table, a
	// custom resource's JSON list, every body when Hold is set); default
	// DefaultBufferSize. Streamed bodies are not bounded by it.
	BufferSize int64
	// Hold holds every body whole, as single-object GETs are: none is
	// streamed and resumed.
	Hold bool
}

// New returns a RoundTripper that retries every request it is given, which
// must be an idempotent GET (a LIST, or a single-object GET), through next,
// with the recommended policy (package transport's zero Config). Package
// transport decides which requests get here, and builds the next it is given
// so that all its RoundTrippers share one policy, retry budget and
// Observer. A give-up (the retries of connection failures spent, or a LIST
// body whose resume did not succeed) is a *transport.GiveUpError when
// package transport built the RoundTripper, and otherwise an error with the
// same message that errors.Is sees the same way.
func New(next http.RoundTripper, cfg Config) http.RoundTripper {
	if cfg.BufferSize <= 0 {
		cfg.BufferSize = DefaultBufferSize
	}
	return &roundTripper{client: establish.For(next), bufferSize: cfg.BufferSize, hold: cfg.Hold}
}

type roundTripper struct {
	client     *establish.Client
	bufferSize int64
	hold       bool
}

// RoundTrip sends req until the policy hands its answer over: a streamed
// body with its head read, or a held one read whole (up to the bound).
func (rt *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	tracker := rt.client.Policy.NewTracker()
	started := rt.client.Policy.Clock().Now()
	resp, attempts, err := rt.client.Do(req, tracker, func(resp *http.Response) error { return rt.prepare(req, tracker, resp, started) })
	if body, ok := respBody(resp).(*streamBody); ok {
		body.attempts = attempts
	}
	return resp, err
}

// respBody is resp's body, nil without a response.
func respBody(resp *http.Response) io.ReadCloser {
	if resp == nil {
		return nil
	}
	return resp.Body
}

// prepare readies a successful answer's body for the caller. A body that
// can be resumed mid-way is streamed once its head names the list's
// resourceVersion; any other is held whole (buffer). A read error before
// the body is handed over is returned for the policy to judge: the
// request is then asked for again as it was.
func (rt *roundTripper) prepare(req *http.Request, tracker *policy.Tracker, resp *http.Response, started time.Time) error {
	if resp.StatusCode < 200 || resp.StatusCode > 299 || resp.Body == nil || resp.Body == http.NoBody {
		return nil
	}
	var scan func([]byte) (listMeta, verdict)
	if !rt.hold {
		scan = streamable(req, resp)
	}
	if scan == nil {
		return rt.buffer(resp, nil)
	}
	head, meta, v, whole, err := readHead(resp.Body, scan)
	switch {
	case err != nil:
		return err
	case whole:
		_ = resp.Body.Close()
		resp.Body = &bufferedBody{held: &held{segments: [][]byte{head}}}
	case v == stream:
		resp.Body = newStreamBody(rt, req, tracker, resp, head, meta, started)
	default:
		return rt.buffer(resp, head)
	}
	return nil
}

// buffer reads a successful answer's body into memory, so that a body that
// breaks mid-read is an attempt that failed, not a response already handed
// to the caller. head is what was read of it already. A read error is
// returned for the policy to judge.
//
// The bound is the bound: at most bufferSize bytes are ever held. A body
// that declares a larger Content-Length is not buffered at all; one of
// unknown length is read until it ends or passes the bound, and in the
// latter case streams on from there, unprotected.
func (rt *roundTripper) buffer(resp *http.Response, head []byte) error {
	rest := resp.Body
	if len(head) > 0 {
		rest = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
	}
	if resp.ContentLength > rt.bufferSize {
		resp.Body = rest
		return nil
	}
	limit := int(rt.bufferSize)
	if resp.ContentLength >= 0 {
		limit = int(resp.ContentLength)
	}
	h, whole, next, err := readHeld(rest, limit)
	if err != nil {
		return err
	}
	if whole {
		// The whole body is here: release the connection now.
		_ = resp.Body.Close()
		resp.Body = &bufferedBody{held: h}
		return nil
	}
	readers := make([]io.Reader, 0, len(h.segments)+2)
	for _, seg := range h.segments {
		readers = append(readers, bytes.NewReader(seg))
	}
	readers = append(readers, bytes.NewReader(next), rest)
	resp.Body = &partialBody{Reader: io.MultiReader(readers...), Closer: resp.Body, held: h.capacity()}
	return nil
}

// errBodyClosed is what reading a buffered body after Close returns, as
// net/http's bodies do.
var errBodyClosed = errors.New("listretry: read on closed response body")

// bufferedBody is a whole LIST body held in memory. Close hands its
// segments back for reuse; reads after Close fail rather than see a reused
// segment.
type bufferedBody struct {
	mu   sync.Mutex
	held *held // nil once closed
	seg  int   // the segment being read
	off  int   // the offset in it
}

// Read serves the held bytes.
func (b *bufferedBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held == nil {
		return 0, errBodyClosed
	}
	n := 0
	for n < len(p) && b.seg < len(b.held.segments) {
		c := copy(p[n:], b.held.segments[b.seg][b.off:])
		n, b.off = n+c, b.off+c
		if b.off == len(b.held.segments[b.seg]) {
			b.seg, b.off = b.seg+1, 0
		}
	}
	if n == 0 && len(p) > 0 {
		return 0, io.EOF
	}
	return n, nil
}

// Close returns the segments to the pool; a second Close does nothing.
func (b *bufferedBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held != nil {
		b.held.release()
		b.held = nil
	}
	return nil
}

// partialBody is a body past the buffer bound: the held head, then the
// rest straight from the connection.
type partialBody struct {
	io.Reader
	io.Closer
	held int // the head's segments' capacity
}
