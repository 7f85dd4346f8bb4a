package conformance

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/kretry/kretry/internal/harness/fixture"
)

// servedBody is a response body the client side must close.
type servedBody struct {
	request string
	closed  func() bool
}

// replayResponse rebuilds a recorded response for req. Its body gets its own chunks:
// fixture.ChunkReader consumes the slices it is given, and fixtures are shared by every run.
func replayResponse(recorded fixture.Response, req *http.Request) *http.Response {
	recorded.Chunks = cloneChunks(recorded.Chunks)
	resp := recorded.HTTPResponse(req)
	resp.Body = &lockedBody{body: resp.Body}
	return resp
}

// lockedBody lets Close run concurrently with Read, as net/http's bodies do (a transport may
// abandon a body from another goroutine); fixture.ChunkReader never blocks, so a lock is
// enough.
type lockedBody struct {
	mu     sync.Mutex
	body   io.ReadCloser
	closed bool
}

func (b *lockedBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.body.Read(p)
}

func (b *lockedBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	return b.body.Close()
}

// errBody replays a recorded body, but ends with the exact error end (io.ErrUnexpectedEOF,
// as net/http's chunked reader does) instead of ChunkReader's plain error.
type errBody struct {
	*fixture.ChunkReader
	end error
	// beforeEnd, if set, runs once before the end is returned (a body that streamed for
	// long: Fault.Elapse).
	beforeEnd func()
}

func (b *errBody) Read(p []byte) (int, error) {
	n, err := b.ChunkReader.Read(p)
	if err != nil && err != io.EOF {
		if b.beforeEnd != nil {
			b.beforeEnd()
			b.beforeEnd = nil
		}
		err = b.end
	}
	return n, err
}

// truncate returns the first n bytes of chunks, split where n falls.
func truncate(chunks [][]byte, n int) [][]byte {
	var out [][]byte
	for _, c := range chunks {
		if n <= 0 {
			break
		}
		if len(c) > n {
			c = c[:n]
		}
		out = append(out, c)
		n -= len(c)
	}
	return out
}

func cloneChunks(chunks [][]byte) [][]byte {
	out := make([][]byte, len(chunks))
	for i, c := range chunks {
		out[i] = slices.Clone(c)
	}
	return out
}

// track remembers a served body, to check that the client side closes it.
func (r *replay) track(request string, body io.ReadCloser) {
	var closed func() bool
	switch b := body.(type) {
	case *streamBody:
		closed = func() bool { return isClosed(b.closed) }
	case *lockedBody:
		closed = func() bool {
			b.mu.Lock()
			defer b.mu.Unlock()
			return b.closed
		}
	default:
		return
	}
	r.mu.Lock()
	r.bodies = append(r.bodies, servedBody{request: request, closed: closed})
	r.mu.Unlock()
}

// unclosedBody waits until every served body is closed, or until deadline, and returns the
// request line of one that was not.
func (r *replay) unclosedBody(deadline time.Duration) string {
	timer := time.NewTimer(deadline)
	defer timer.Stop()
	// A recorded body's Close does not signal: poll for those.
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		r.mu.Lock()
		open, changed := "", r.changed
		for _, b := range r.bodies {
			if !b.closed() {
				open = b.request
				break
			}
		}
		r.mu.Unlock()
		if open == "" {
			return ""
		}
		select {
		case <-changed:
		case <-tick.C:
		case <-timer.C:
			return open
		}
	}
}

// notify wakes everyone waiting on r.changed; r.mu must be held.
func (r *replay) notify() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// drained notes that body has no unread recorded bytes left (or was closed).
func (r *replay) drained(body *streamBody) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending[body] {
		delete(r.pending, body)
		r.notify()
	}
}

// waitIdle waits until every watch response has been read to its end (or its hold), so
// that whatever the caller gets next can only come from the client side.
func (r *replay) waitIdle(ctx context.Context) bool {
	for {
		r.mu.Lock()
		idle, changed := len(r.pending) == 0, r.changed
		r.mu.Unlock()
		if idle {
			return true
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return false
		case <-r.aborted:
			return false
		}
	}
}

// errBodyClosed is what a read of a closed response body returns, as in net/http.
var errBodyClosed = errors.New("http: read on closed response body")

// streamBody is a watch response body: the recorded chunks one per Read, then end, or (end
// nil) held open like a live watch until the request's context ends or the body is closed.
type streamBody struct {
	replay *replay
	ctx    context.Context
	mu     sync.Mutex
	chunks [][]byte
	end    error
	closed chan struct{}
	once   sync.Once
}

// Read implements io.Reader.
func (b *streamBody) Read(p []byte) (int, error) {
	select {
	case <-b.closed:
		return 0, errBodyClosed
	default:
	}
	b.mu.Lock()
	b.dropEmpty()
	if len(b.chunks) > 0 {
		n := copy(p, b.chunks[0])
		b.chunks[0] = b.chunks[0][n:]
		b.dropEmpty() // the read that takes the last byte reports the drain
		left := len(b.chunks)
		b.mu.Unlock()
		if left == 0 {
			b.replay.drained(b)
		}
		return n, nil
	}
	end := b.end
	b.mu.Unlock()
	b.replay.drained(b)
	if end != nil {
		return 0, end
	}
	select {
	case <-b.ctx.Done():
		return 0, b.ctx.Err()
	case <-b.closed:
		return 0, errBodyClosed
	}
}

// dropEmpty drops the empty chunks at the front; b.mu must be held.
func (b *streamBody) dropEmpty() {
	for len(b.chunks) > 0 && len(b.chunks[0]) == 0 {
		b.chunks = b.chunks[1:]
	}
}

// Close implements io.Closer.
func (b *streamBody) Close() error {
	b.once.Do(func() { close(b.closed) })
	b.replay.drained(b)
	b.replay.mu.Lock()
	b.replay.notify()
	b.replay.mu.Unlock()
	return nil
}
