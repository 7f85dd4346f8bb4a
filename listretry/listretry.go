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

// maxPooledBuffer bounds the buffers kept for reuse, so that one huge LIST
// does not pin its memory in the pool.
const maxPooledBuffer = 32 << 20

// chunkSize is how much an unknown-length body's buffer grows at first.
const chunkSize = 64 << 10

// bufferPool holds *[]byte for LIST bodies. A buffer returns to it when the
// caller closes the body; without reuse every LIST would cost a second copy
// of its body in garbage.
var bufferPool sync.Pool

// getBuffer returns an empty buffer with a capacity of at least size and at
// most limit bytes.
func getBuffer(size, limit int) *[]byte {
	if buf, ok := bufferPool.Get().(*[]byte); ok {
		if c := cap(*buf); c >= size && c <= limit {
			*buf = (*buf)[:0]
			return buf
		}
		bufferPool.Put(buf)
	}
	buf := make([]byte, 0, size)
	return &buf
}

func putBuffer(buf *[]byte) {
	if cap(*buf) > maxPooledBuffer {
		return
	}
	*buf = (*buf)[:0]
	bufferPool.Put(buf)
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
	// A declared length is read into one buffer of exactly that size; an
	// unknown one into a buffer that grows up to the bound.
	limit, size := int(rt.bufferSize), min(chunkSize, int(rt.bufferSize))
	if resp.ContentLength >= 0 {
		limit, size = int(resp.ContentLength), int(resp.ContentLength)
	}
	buf := getBuffer(size, limit)
	whole, next, err := readBounded(resp.Body, buf, limit)
	if err != nil {
		putBuffer(buf)
		return err
	}
	if whole {
		// The whole body is here: release the connection now.
		_ = resp.Body.Close()
		resp.Body = newBufferedBody(buf)
		return nil
	}
	resp.Body = &partialBody{Reader: io.MultiReader(bytes.NewReader(*buf), bytes.NewReader(next), resp.Body), Closer: resp.Body, held: cap(*buf)}
	return nil
}

// readBounded reads body into buf, growing it up to limit bytes and never
// past. It reports whether the body ended within the limit. If it did not,
// buf holds exactly limit bytes and next is the one byte read past them
// (read to learn that the body goes on); the rest is still in body.
func readBounded(body io.Reader, buf *[]byte, limit int) (whole bool, next []byte, err error) {
	b := *buf
	defer func() { *buf = b }()
	for len(b) < limit {
		if len(b) == cap(b) {
			// Grow by hand: append's size classes would pass the limit.
			grown := make([]byte, len(b), min(max(2*cap(b), chunkSize), limit))
			copy(grown, b)
			b = grown
		}
		n, err := body.Read(b[len(b):min(cap(b), limit)])
		b = b[:len(b)+n]
		switch {
		case err == io.EOF:
			return true, nil, nil
		case err != nil:
			return false, nil, err
		}
	}
	var probe [1]byte
	for {
		n, err := body.Read(probe[:])
		switch {
		case n > 0:
			return false, probe[:], nil
		case err == io.EOF:
			return true, nil, nil
		case err != nil:
			return false, nil, err
		}
	}
}

// errBodyClosed is what reading a buffered body after Close returns, as
// net/http's bodies do.
var errBodyClosed = errors.New("listretry: read on closed response body")

// bufferedBody is a whole LIST body held in memory. Close hands the buffer
// back for reuse; reads after Close fail rather than see a reused buffer.
type bufferedBody struct {
	mu     sync.Mutex
	buf    *[]byte // nil once closed
	reader bytes.Reader
}

func newBufferedBody(buf *[]byte) *bufferedBody {
	body := &bufferedBody{buf: buf}
	body.reader.Reset(*buf)
	return body
}

// Read serves the buffered bytes.
func (b *bufferedBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf == nil {
		return 0, errBodyClosed
	}
	return b.reader.Read(p)
}

// Close returns the buffer to the pool; a second Close does nothing.
func (b *bufferedBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf != nil {
		b.reader.Reset(nil)
		putBuffer(b.buf)
		b.buf = nil
	}
	return nil
}

// partialBody is a body past the buffer bound: the buffered head, then the
// rest straight from the connection.
type partialBody struct {
	io.Reader
	io.Closer
	held int // the head's buffer capacity
}
