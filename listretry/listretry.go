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
	// Policy decides every retry; nil is policy.New(policy.Config{}).
	Policy *policy.Policy
	// BufferSize bounds the part of a body read before the response is
	// handed over; default DefaultBufferSize.
	BufferSize int64
	// OnRetry, if set, is called before every retry.
	OnRetry func(policy.Retry)
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
		client:     &establish.Client{Next: next, Policy: cfg.Policy, OnRetry: cfg.OnRetry},
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

// bufferPool holds *bytes.Buffer for LIST bodies. A buffer returns to it
// when the caller closes the body; without reuse every LIST would cost a
// second copy of its body in garbage.
var bufferPool sync.Pool

func getBuffer() *bytes.Buffer {
	if buf, ok := bufferPool.Get().(*bytes.Buffer); ok {
		return buf
	}
	return new(bytes.Buffer)
}

func putBuffer(buf *bytes.Buffer) {
	if buf.Cap() > maxPooledBuffer {
		return
	}
	buf.Reset()
	bufferPool.Put(buf)
}

// buffer reads a successful answer's body into memory, so that a body that
// breaks mid-read is an attempt that failed, not a response already handed
// to the caller. A read error is returned for the policy to judge.
func (rt *roundTripper) buffer(resp *http.Response) error {
	if resp.StatusCode < 200 || resp.StatusCode > 299 || resp.Body == nil || resp.Body == http.NoBody {
		return nil
	}
	buf := getBuffer()
	if resp.ContentLength > 0 && resp.ContentLength <= rt.bufferSize {
		// One allocation (or none, from the pool); the extra MinRead lets
		// ReadFrom see EOF without growing the buffer.
		buf.Grow(int(resp.ContentLength) + bytes.MinRead)
	}
	n, err := buf.ReadFrom(io.LimitReader(resp.Body, rt.bufferSize+1))
	if err != nil {
		putBuffer(buf)
		return err
	}
	if n <= rt.bufferSize {
		// The whole body is here: release the connection now.
		_ = resp.Body.Close()
		resp.Body = newBufferedBody(buf)
		return nil
	}
	resp.Body = &partialBody{Reader: io.MultiReader(bytes.NewReader(buf.Bytes()), resp.Body), Closer: resp.Body}
	return nil
}

// errBodyClosed is what reading a buffered body after Close returns, as
// net/http's bodies do.
var errBodyClosed = errors.New("listretry: read on closed response body")

// bufferedBody is a whole LIST body held in memory. Close hands the buffer
// back for reuse; reads after Close fail rather than see a reused buffer.
type bufferedBody struct {
	mu     sync.Mutex
	buf    *bytes.Buffer // nil once closed
	reader bytes.Reader
}

func newBufferedBody(buf *bytes.Buffer) *bufferedBody {
	body := &bufferedBody{buf: buf}
	body.reader.Reset(buf.Bytes())
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
}
