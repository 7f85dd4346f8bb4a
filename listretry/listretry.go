package listretry

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"sync"

	"github.com/kretry/kretry/internal/establish"
	"github.com/kretry/kretry/internal/policy"
)

// DefaultBufferSize is how much of a LIST body is held back by default.
const DefaultBufferSize = 128 << 20

// Config tunes the LIST retries; the zero Config is the recommended one.
type Config struct {
	// Policy decides every retry and wait. It is set by package transport
	// from its Config (the policy is internal: outside this module, leave
	// it nil for the recommended defaults).
	Policy *policy.Policy
	// BufferSize bounds the part of a body read before the response is
	// handed over; default DefaultBufferSize.
	BufferSize int64
	// Hooks are told about every attempt, retry and give-up. Set by
	// package transport, which adapts them to its Observer and logs.
	Hooks policy.Hooks
}

// New returns a RoundTripper that retries every request it is given, which
// must be an idempotent GET (a LIST, or a single-object GET), through next.
// Package transport decides which requests get here.
func New(next http.RoundTripper, cfg Config) http.RoundTripper {
	if cfg.Policy == nil {
		cfg.Policy = policy.New(policy.Config{})
	}
	if cfg.BufferSize <= 0 {
		cfg.BufferSize = DefaultBufferSize
	}
	return &roundTripper{
		client:     &establish.Client{Next: next, Policy: cfg.Policy, Hooks: cfg.Hooks},
		policy:     cfg.Policy,
		bufferSize: cfg.BufferSize,
	}
}

type roundTripper struct {
	client     *establish.Client
	policy     *policy.Policy
	bufferSize int64
}

// RoundTrip sends req until the policy hands its answer over, with the body
// of a successful answer already read (up to the bound).
func (rt *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	return rt.client.Do(req, rt.policy.NewTracker(), rt.buffer)
}

// buffer reads a successful answer's body into memory, so that a body that
// breaks mid-read is an attempt that failed, not a response already handed
// to the caller. A read error is returned for the policy to judge.
//
// The bound is the bound: at most bufferSize bytes are ever held. A body
// that declares a larger Content-Length is not buffered at all; one of
// unknown length is read until it ends or passes the bound, and in the
// latter case streams on from there, unprotected.
func (rt *roundTripper) buffer(resp *http.Response) error {
	if resp.StatusCode < 200 || resp.StatusCode > 299 || resp.Body == nil || resp.Body == http.NoBody {
		return nil
	}
	if resp.ContentLength > rt.bufferSize {
		return nil
	}
	limit := int(rt.bufferSize)
	if resp.ContentLength >= 0 {
		limit = int(resp.ContentLength)
	}
	h, whole, next, err := readHeld(resp.Body, limit)
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
	readers = append(readers, bytes.NewReader(next), resp.Body)
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
