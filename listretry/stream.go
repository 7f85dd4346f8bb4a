package listretry

import (
	"bytes"
	"context"
	"errors"
	"hash/crc32"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/kretry/kretry/internal/establish"
	"github.com/kretry/kretry/internal/policy"
)

// runningTable is the running hash of a streamed body: CRC-32 (IEEE), which
// Go computes with carry-less multiplication where the CPU has it
// (BenchmarkRunningHash: 1.5 to 2 times CRC-32C's speed and 4 to 5 times
// maphash's at the 32 KiB reads client-go's decoders make).
var runningTable = crc32.IEEETable

// skipChunk is the read size when a resumed body is read past its
// delivered prefix.
const skipChunk = 32 << 10

// skipPool holds *[]byte of skipChunk bytes.
var skipPool = sync.Pool{New: func() any {
	buf := make([]byte, skipChunk)
	return &buf
}}

// streamBody is a LIST body handed to the caller as it arrives: first the
// head read to learn the list's resourceVersion, then the connection's
// bytes. A break mid-read asks for the list again at that exact
// resourceVersion, reads the new answer past what was delivered while
// checking it hashes the same, and streams on from there; if it cannot,
// the caller gets the break as it was.
//
// Read is the caller's; Close may come from another goroutine (client-go
// closes a body when its context ends) and cancels a resume in flight.
type streamBody struct {
	rt      *roundTripper
	req     *http.Request
	tracker *policy.Tracker
	meta    listMeta
	// declared is what the first answer declared about its body: a resumed
	// answer must declare the same, or it is a mismatch.
	declared declared
	// started is when the LIST was first sent; attempts counts the requests
	// sent for it, resumes included: a give-up reports both.
	started  time.Time
	attempts int

	head []byte // the head not yet handed over
	// whole is the whole head, kept to compare a resumed answer's head
	// byte for byte (it holds the continue token, where a page served
	// once from the watch cache and once from etcd differs).
	whole []byte
	// read counts the bytes read from the server, head included: all of
	// them are the caller's. sum is their running CRC-32.
	read int64
	sum  uint32
	// err ends the body: every Read after it returns it. pending is a
	// break met with bytes, met again on the next Read. resumedFrom is the
	// break the current answer resumed from; nil for the first answer.
	err, pending, resumedFrom error

	mu      sync.Mutex
	current io.ReadCloser
	closed  bool
	cancel  context.CancelFunc // of a resume in flight
}

func newStreamBody(rt *roundTripper, req *http.Request, tracker *policy.Tracker, resp *http.Response, head []byte, meta listMeta, started time.Time) *streamBody {
	return &streamBody{
		rt: rt, req: req, tracker: tracker, meta: meta, declared: declaredBy(resp), started: started,
		head: head, whole: head, read: int64(len(head)), sum: crc32.Update(0, runningTable, head),
		current: resp.Body,
	}
}

// declared is what an answer declares about its body.
type declared struct {
	contentType, contentEncoding string
	contentLength                int64 // -1: unknown
	uncompressed                 bool  // net/http decoded a gzip body
}

// agrees reports whether a resumed answer declares what the first did: the
// same content type and encoding, and, where both declare a length, the
// same one. Whether a length is declared at all is the server's (or a
// proxy's) choice: Go's server declares one for a body written at once and
// none for one streamed or cut. The bytes are what must match (skip), and
// the caller's response keeps the length the first declared (Read).
func (first declared) agrees(resumed declared) bool {
	sameLength := first.contentLength < 0 || resumed.contentLength < 0 || first.contentLength == resumed.contentLength
	return sameLength && first.contentType == resumed.contentType &&
		first.contentEncoding == resumed.contentEncoding && first.uncompressed == resumed.uncompressed
}

func declaredBy(resp *http.Response) declared {
	return declared{
		contentType: resp.Header.Get("Content-Type"), contentEncoding: resp.Header.Get("Content-Encoding"),
		contentLength: resp.ContentLength, uncompressed: resp.Uncompressed,
	}
}

// progress ends the failure run: an answer delivered bytes (the tracker's
// Progress is idempotent between other reports).
func (b *streamBody) progress() { b.tracker.Progress() }

// giveUp is what the caller gets when a resume of the break err did not
// succeed: kretry's give-up, which errors.Is and errors.As still see as
// err. A break met after the caller's context ended is the caller's own.
func (b *streamBody) giveUp(err error) error {
	if b.req.Context().Err() != nil {
		return err
	}
	client := b.rt.client
	return client.GiveUp(&establish.GiveUpError{Attempts: b.attempts, Elapsed: client.Policy.Clock().Since(b.started), Last: err, Body: true})
}

// Read hands over the head, then the connection's bytes, resuming after a
// break.
func (b *streamBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if len(b.head) > 0 {
		b.mu.Lock()
		closed := b.closed
		b.mu.Unlock()
		if closed {
			b.err = errBodyClosed
			return 0, b.err
		}
		n := copy(p, b.head)
		b.head = b.head[n:]
		b.progress()
		return n, nil
	}
	for {
		if err := b.pending; err != nil {
			b.pending = nil
			switch {
			case !b.resumable(err):
				b.err = err
			case !b.resume(err):
				b.err = b.giveUp(err)
			}
			if b.err != nil {
				b.release()
				return 0, b.err
			}
		}
		b.mu.Lock()
		current, closed := b.current, b.closed
		b.mu.Unlock()
		if closed {
			b.err = errBodyClosed
			return 0, b.err
		}
		n, err := current.Read(p)
		n, err = b.withinLength(n, err)
		if n > 0 {
			b.sum = crc32.Update(b.sum, runningTable, p[:n])
			b.read += int64(n)
			// New bytes (past the resume point, after a resume): the
			// run of failures is over.
			b.progress()
		}
		switch {
		case err == nil:
			return n, nil
		case err == io.EOF, err == errOtherLength:
			b.err = io.EOF
			if err == errOtherLength {
				b.err = b.giveUp(b.resumedFrom)
			}
			b.release()
			return n, b.err
		}
		// A break: hand over what came with it, and resume on the next Read.
		b.pending = err
		if n > 0 {
			return n, nil
		}
	}
}

// errOtherLength marks a resumed answer that declared no length and ran
// past, or ended short of, the length the first answer declared: another
// body than the one the caller's response describes.
var errOtherLength = errors.New("listretry: the resumed answer is not the declared length")

// withinLength holds a read of n bytes with err to the length the first
// answer declared, which the caller's response still carries: a resumed
// answer that declared none must end exactly there. (An answer that
// declares a length is held to it by net/http itself.)
func (b *streamBody) withinLength(n int, err error) (int, error) {
	length := b.declared.contentLength
	if length < 0 || b.resumedFrom == nil {
		return n, err
	}
	switch {
	case b.read+int64(n) > length:
		return int(length - b.read), errOtherLength
	case err == io.EOF && b.read+int64(n) < length:
		return n, errOtherLength
	}
	return n, err
}

// resumable reports whether a break may be resumed: not when the caller's
// context ended, nor after Close.
func (b *streamBody) resumable(err error) bool {
	if b.req.Context().Err() != nil || !policy.BodyBreak(err) {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.closed
}

// resume asks for the list again at its resourceVersion until an answer
// begins with the delivered bytes, and makes it the current one. It
// returns false when the caller must get the break instead: the policy gave
// up (the window, the deadline), a 410, a mismatch, Close.
func (b *streamBody) resume(breakErr error) bool {
	client := b.rt.client
	clock := client.Policy.Clock()
	start := clock.Now()
	// ctx is the new answer's: it lives until Close, the end of the body,
	// or the next resume.
	ctx, cancel := context.WithCancel(b.req.Context())
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		cancel()
		return false
	}
	previous := b.cancel
	b.cancel = cancel
	b.mu.Unlock()
	resumed := false
	defer func() {
		if !resumed {
			cancel()
		}
	}()

	_ = b.current.Close()
	if previous != nil {
		previous() // the broken answer's
	}
	rv := b.meta.resourceVersion
	report := establish.ListResume{Path: b.req.URL.Path, Host: b.req.URL.Host, ResourceVersion: rv}
	done := func(outcome establish.ListOutcome, skipped int64) bool {
		report.Outcome, report.Skipped, report.Elapsed = outcome, skipped, clock.Since(start)
		client.Reporter().ListResume(b.req.Context(), report)
		return outcome == establish.ListResumed
	}
	for {
		decision := b.tracker.Decide(policy.Failure{Kind: policy.ListBodyBroke})
		since, attempts := b.tracker.Run()
		if decision.Action != policy.Retry {
			reason := establish.ReasonBrokenBody
			if decision.Stop == policy.StoppedByDeadline {
				reason = establish.ReasonDeadline
			}
			client.Reporter().GiveUp(ctx, establish.GiveUp{
				Path: report.Path, Host: report.Host, Reason: reason,
				Attempts: attempts, Elapsed: clock.Since(since), Resume: true, ResourceVersion: rv,
			})
			return done(establish.ListGaveUp, 0)
		}
		client.Reporter().Retry(ctx, establish.Retry{
			Path: report.Path, Host: report.Host, Reason: establish.ReasonBrokenBody, Cause: "broken body: " + breakErr.Error(),
			Wait: decision.Wait, Resume: true, Attempts: attempts, Elapsed: clock.Since(since), ResourceVersion: rv,
		})
		if err := policy.Sleep(ctx, clock, decision.Wait); err != nil {
			return done(establish.ListGaveUp, 0)
		}
		// A LIST has no watch deadline to carry: its resume is bounded by
		// the caller's context, the window and, as a watch reopen is, the
		// wait for an answer. attemptCtx is this round's answer's:
		// cancelled when the skip stalls.
		attemptCtx, cancelAttempt := context.WithCancel(ctx)
		resp, sent, err := client.Resume(b.resumeRequest(attemptCtx), b.tracker, rv, establish.Bounds{AnswerTimeout: policy.AnswerTimeout})
		b.attempts += sent
		report.Requests += sent
		if err != nil {
			cancelAttempt()
			return done(establish.ListGaveUp, 0)
		}
		switch {
		case resp.StatusCode == http.StatusGone:
			establish.DrainAndClose(resp.Body)
			cancelAttempt()
			return done(establish.ListGone, 0)
		case resp.StatusCode != http.StatusOK || !b.declared.agrees(declaredBy(resp)):
			establish.DrainAndClose(resp.Body)
			cancelAttempt()
			if resp.StatusCode == http.StatusOK {
				return done(establish.ListMismatch, 0)
			}
			return done(establish.ListGaveUp, 0)
		}
		skipped, matched, err := b.skip(resp.Body, cancelAttempt)
		if err != nil {
			// Broken again (or stalled) before new bytes: the next round decides.
			_ = resp.Body.Close()
			cancelAttempt()
			if ctx.Err() != nil {
				return done(establish.ListGaveUp, skipped)
			}
			continue
		}
		if !matched {
			establish.DrainAndClose(resp.Body)
			cancelAttempt()
			return done(establish.ListMismatch, skipped)
		}
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			_ = resp.Body.Close()
			cancelAttempt()
			return done(establish.ListGaveUp, skipped)
		}
		b.current = resp.Body
		b.mu.Unlock()
		b.resumedFrom = breakErr
		// The resumed answer lives on under ctx, which Close and the end
		// of the body cancel.
		resumed = true
		return done(establish.ListResumed, skipped)
	}
}

// skip reads the delivered prefix's length from body and reports whether
// it is the delivered bytes: the head byte for byte, all of it by its
// running hash. A body that ends sooner does not match; a read error is
// returned for the caller to resume again. A read that brings nothing for
// policy.AnswerTimeout is a stall: stall is called, which cancels the
// answer, and the read's error is returned.
func (b *streamBody) skip(body io.Reader, stall func()) (skipped int64, matched bool, err error) {
	bufp := skipPool.Get().(*[]byte)
	defer skipPool.Put(bufp)
	buf := *bufp
	var sum uint32
	clock := b.rt.client.Policy.Clock()
	for skipped < b.read {
		timer := clock.AfterFunc(policy.AnswerTimeout, stall)
		n, err := body.Read(buf[:min(int64(len(buf)), b.read-skipped)])
		timer.Stop()
		if head := int64(len(b.whole)); skipped < head {
			if !bytes.Equal(buf[:min(int64(n), head-skipped)], b.whole[skipped:min(head, skipped+int64(n))]) {
				return skipped + int64(n), false, nil
			}
		}
		sum = crc32.Update(sum, runningTable, buf[:n])
		skipped += int64(n)
		switch {
		case skipped == b.read:
		case err == io.EOF:
			return skipped, false, nil
		case err != nil:
			return skipped, false, err
		}
	}
	return skipped, sum == b.sum, nil
}

// resumeRequest is the original request at the list's exact
// resourceVersion, every other parameter kept. A page asked for with a
// continue token is asked for again as it was: the token fixes the
// resourceVersion (the server refuses both). A limit that produced no
// continue is dropped: the server may have ignored it (resourceVersion=0
// from the watch cache), and at Exact it would not.
func (b *streamBody) resumeRequest(ctx context.Context) *http.Request {
	req := b.req.Clone(ctx)
	query := req.URL.Query()
	if query.Get("continue") != "" {
		return req
	}
	query.Set("resourceVersion", b.meta.resourceVersion)
	query.Set("resourceVersionMatch", "Exact")
	if !b.meta.hasContinue {
		query.Del("limit")
	}
	u := *req.URL
	u.RawQuery = query.Encode()
	req.URL = &u
	return req
}

// release ends the context of a resumed answer once the body has ended.
func (b *streamBody) release() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cancel != nil {
		b.cancel()
		b.cancel = nil
	}
}

// Close closes the connection's body and cancels a resume in flight (or
// the resumed answer's request).
func (b *streamBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	if b.cancel != nil {
		b.cancel()
	}
	return b.current.Close()
}
