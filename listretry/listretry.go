package listretry

import (
	"bytes"
	"io"
	"net/http"

	"github.com/kretry/kretry/internal/establish"
	"github.com/kretry/kretry/policy"
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

// buffer reads a successful answer's body into memory, so that a body that
// breaks mid-read is an attempt that failed, not a response already handed
// to the caller. A read error is returned for the policy to judge.
func (rt *roundTripper) buffer(resp *http.Response) error {
	if resp.StatusCode < 200 || resp.StatusCode > 299 || resp.Body == nil || resp.Body == http.NoBody {
		return nil
	}
	var buf bytes.Buffer
	if resp.ContentLength > 0 && resp.ContentLength <= rt.bufferSize {
		buf.Grow(int(resp.ContentLength) + bytes.MinRead)
	}
	n, err := buf.ReadFrom(io.LimitReader(resp.Body, rt.bufferSize+1))
	if err != nil {
		return err
	}
	if n <= rt.bufferSize {
		// The whole body is here: release the connection now.
		_ = resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(buf.Bytes()))
		return nil
	}
	resp.Body = &partialBody{Reader: io.MultiReader(bytes.NewReader(buf.Bytes()), resp.Body), Closer: resp.Body}
	return nil
}

// partialBody is a body past the buffer bound: the buffered head, then the
// rest straight from the connection.
type partialBody struct {
	io.Reader
	io.Closer
}
