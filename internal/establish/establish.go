package establish

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/kretry/kretry/internal/policy"
	"github.com/kretry/kretry/internal/status"
)

// errGiveUp tells the ErrorHandler that the policy declined to retry a
// retryable outcome any further.
var errGiveUp = errors.New("kretry: retries exhausted")

// Client sends GET requests until the policy hands the outcome over.
type Client struct {
	// Next is the RoundTripper below kretry (client-go's TLS transport).
	Next http.RoundTripper
	// Policy decides and its Clock waits.
	Policy *policy.Policy
	// Hooks are told about every attempt, every retry before its wait,
	// and every give-up.
	Hooks policy.Hooks
}

// Do sends req until an answer the caller should see arrives, and returns
// it. req's body, if any, is closed, as the RoundTripper contract asks. tracker carries the failure history (a watch stream keeps one across
// reopens). If handle is non-nil it is run on every response the policy
// would deliver; an error it returns (a LIST body broken mid-read) is an
// outcome like any other.
//
// When the policy gives up on a 429 or 5xx, Do returns the server's last
// response, its Status body intact, without Retry-After, so client-go does
// not add its own retries on top of kretry's. When it gives up on a
// connection failure or a broken body it returns a *GiveUpError, which
// client-go does not retry either. An error the policy does not retry (TLS
// verification, DNS) is returned as the next RoundTripper returned it. A
// wait ends as soon as req's context does, and Do then returns the
// context's error, or, if the wait was for a 429, that 429's answer.
// req itself is never modified.
func (c *Client) Do(req *http.Request, tracker *policy.Tracker, handle func(*http.Response) error) (*http.Response, error) {
	resp, _, err := c.do(req, tracker, handle, nil, Bounds{})
	return resp, err
}

// DoCounted is Do that also returns how many requests it sent.
func (c *Client) DoCounted(req *http.Request, tracker *policy.Tracker, handle func(*http.Response) error) (*http.Response, int, error) {
	return c.do(req, tracker, handle, nil, Bounds{})
}

// Watch is Do for the establishment of a watch: every attempt is bounded
// by bounds (the caller's deadline, the wait for an answer).
func (c *Client) Watch(req *http.Request, tracker *policy.Tracker, bounds Bounds) (*http.Response, error) {
	resp, _, err := c.do(req, tracker, nil, nil, bounds)
	return resp, err
}

// Run is the failure run a watch reopening belongs to, for the hooks.
type Run struct {
	// ResourceVersion is the resume point.
	ResourceVersion string
	// Since is when the run began: the watch's first break after progress.
	Since time.Time
	// Attempts is how many reopening requests the run has sent before.
	Attempts int
}

// Resume is Watch for the reopening of an established watch in run: its
// attempts, retries and give-ups are reported as a resume's, counted from
// the run's start. It also returns how many requests it sent.
func (c *Client) Resume(req *http.Request, tracker *policy.Tracker, run Run, bounds Bounds) (*http.Response, int, error) {
	return c.do(req, tracker, nil, &run, bounds)
}

// do is Do, and also returns the number of requests sent; resume is the
// run of a watch reopening, else nil.
func (c *Client) do(req *http.Request, tracker *policy.Tracker, handle func(*http.Response) error, resume *Run, bounds Bounds) (*http.Response, int, error) {
	if req.Body != nil {
		defer req.Body.Close()
	}
	start := c.Policy.Clock().Now()
	loop := &loop{client: c, tracker: tracker, ctx: req.Context(), path: req.URL.Path, host: req.URL.Host,
		handle: handle, start: start, runStart: start, bounds: bounds}
	if resume != nil {
		loop.resume, loop.resourceVersion, loop.attemptsBefore = true, resume.ResourceVersion, resume.Attempts
		if !resume.Since.IsZero() {
			loop.runStart = resume.Since
		}
	}
	retryable := &retryablehttp.Client{
		HTTPClient: &http.Client{
			Transport: loop,
			// Redirects go to the caller, as they would without kretry.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		RetryMax:     math.MaxInt32, // the policy decides when to stop
		CheckRetry:   loop.checkRetry,
		Backoff:      loop.backoff,
		ErrorHandler: loop.giveUp,
		PrepareRetry: func(r *http.Request) error { return r.Context().Err() },
		// Logger stays nil: retryablehttp logs nothing.
	}
	// retryablehttp sends the request it is given as the first attempt and
	// may set its Body; it gets a shallow copy so that the caller's request
	// stays exactly as it came. RequestURI is a server-side field that
	// http.Client refuses.
	attempt := *req
	attempt.RequestURI = ""
	retryableReq, err := retryablehttp.FromRequest(&attempt)
	if err != nil {
		return nil, 0, err
	}
	resp, err := retryable.Do(retryableReq)
	switch {
	case err == nil:
		return resp, loop.attempts, nil
	case loop.throttled != nil && req.Context().Err() != nil:
		// The caller's deadline cut a 429 wait: what it needs to hear is
		// the server's "too many requests", not its own deadline.
		return loop.throttled.response(), loop.attempts, nil
	case errors.Is(err, errDeadline) && loop.lastAnswer != nil:
		// The watch's timeoutSeconds ended with an attempt unanswered:
		// the caller gets what the server last said, as stock client-go
		// would have had it at once.
		return loop.lastAnswer.response(), loop.attempts, nil
	case errors.Is(err, errDeadline):
		last := err
		if loop.lastErr != nil {
			last = loop.lastErr
		}
		return nil, loop.attempts, &GiveUpError{Attempts: loop.attempts, Elapsed: c.Policy.Clock().Since(loop.start), Last: last}
	case loop.gaveUp:
		return nil, loop.attempts, &GiveUpError{Attempts: loop.attempts, Elapsed: c.Policy.Clock().Since(loop.start), Last: err}
	}
	return nil, loop.attempts, err
}

// loop is the state of one Do call shared by the retryablehttp hooks. It is
// also the RoundTripper of retryablehttp's http.Client, so that it sees the
// next RoundTripper's errors before http.Client wraps or rewrites them.
type loop struct {
	client  *Client
	tracker *policy.Tracker
	ctx     context.Context
	path    string
	host    string
	start   time.Time
	// handle, if set, readies every answer the policy would deliver before
	// the policy decides on it (see checkRetry); nil: none.
	handle func(*http.Response) error
	// resume and resourceVersion mark the reopening of an established
	// watch at its resume point, for the hooks, which count attempts and
	// time from the start of the failure run (runStart, attemptsBefore):
	// for a reopening, the watch's first break; else start.
	resume          bool
	resourceVersion string
	runStart        time.Time
	attemptsBefore  int
	// attempts counts the requests sent, observed those reported to
	// Hooks.Attempt: checkRetry is asked once per attempt, but http.Client
	// may refuse a request before any RoundTrip (a nil URL), and then no
	// new attempt is reported.
	attempts, observed int
	// gaveUp is set when the policy declined to retry a connection failure
	// or a broken body it would otherwise retry.
	gaveUp bool
	// throttled is the last 429 answer, kept while its wait runs.
	throttled *savedAnswer
	// wait is the policy's chosen wait for the retry about to happen.
	wait time.Duration
	// roundTripErr is the error the next RoundTripper returned for the
	// attempt in flight, as it returned it.
	roundTripErr error
	// drained is the response retryablehttp drained and closed before its
	// last wait; it must not be closed again.
	drained *http.Response
	// bounds bound each attempt (a watch's deadline and answer timeout).
	bounds Bounds
	// lastAnswer is the last answer retried (a 429 or 5xx), lastErr the
	// last connection failure retried: what the caller gets when its
	// deadline cancels an attempt still unanswered.
	lastAnswer *savedAnswer
	lastErr    error
}

// RoundTrip sends one attempt through the next RoundTripper. It has no
// CloseIdleConnections method on purpose: retryablehttp calls that on its
// client after each give-up, which would tear down client-go's shared
// connection pool.
func (l *loop) RoundTrip(req *http.Request) (*http.Response, error) {
	l.attempts++
	l.throttled = nil
	resp, err := l.bounds.bounded(l.client.Policy.Clock(), l.client.Next, req)
	if err != nil && resp != nil {
		// http.Client would log and drop this response; close it instead.
		DrainAndClose(resp.Body)
		resp = nil
	}
	l.roundTripErr = err
	return resp, err
}

// checkRetry turns an attempt into an outcome and asks the policy. When it
// stops, the error it returns is the one the caller gets (see giveUp):
// errGiveUp for a response the policy gave up on, else the attempt's own
// error, or the context's.
func (l *loop) checkRetry(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if resp == nil && err != nil {
		// err is http.Client's wrapping of what the RoundTripper said.
		if l.roundTripErr != nil {
			err = l.roundTripErr
		} else {
			err = unwrapURLError(err)
		}
	}
	l.roundTripErr = nil
	if err == nil && resp != nil && l.handle != nil && policy.ClassifyStatus(resp.StatusCode) == policy.Deliver {
		// The answer is readied (a LIST body read) before anything is
		// decided: a body that breaks meanwhile is the attempt's outcome.
		// retryablehttp is given no response handler, so that it asks
		// checkRetry once per attempt.
		err = l.handle(resp)
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		l.attempted(0, true)
		return false, ctxErr
	}
	if errors.Is(err, errDeadline) {
		l.attempted(0, true)
		l.gaveUpOn(policy.ReasonDeadline, policy.Decision{Stopped: policy.StoppedByDeadline})
		return false, err
	}
	outcome, cause := l.outcome(resp, err)
	decision := l.tracker.Decide(outcome)
	code := 0 // no whole answer: none arrived, or its body broke
	if err == nil && resp != nil {
		code = resp.StatusCode
	}
	l.attempted(code, false)
	if !decision.Retry {
		if outcome.Class != policy.Deliver {
			l.gaveUpOn(reason(resp, err, outcome.Class), decision)
		}
		switch {
		case err != nil:
			l.gaveUp = outcome.Class != policy.Deliver
			return false, err
		case outcome.Class != policy.Deliver:
			return false, errGiveUp
		}
		return false, nil
	}
	l.wait = decision.Wait
	switch {
	case err != nil:
		l.lastAnswer, l.lastErr = nil, err
	case resp != nil && (outcome.Class == policy.TooManyRequests || !l.bounds.Deadline.IsZero()):
		l.lastAnswer, l.lastErr = saveAnswer(resp), nil
		if outcome.Class == policy.TooManyRequests {
			l.throttled = l.lastAnswer
		}
	}
	if hook := l.client.Hooks.Retry; hook != nil {
		hook(l.ctx, policy.Retry{
			Path: l.path, Host: l.host, Code: code, Reason: reason(resp, err, outcome.Class), Cause: cause,
			Wait: decision.Wait, Resume: l.resume, Attempts: l.attemptsBefore + l.attempts, Elapsed: l.client.Policy.Clock().Since(l.runStart),
			ResourceVersion: l.resourceVersion,
		})
	}
	return true, nil
}

// attempted reports the attempt in flight to Hooks.Attempt, once.
func (l *loop) attempted(code int, canceled bool) {
	if l.observed == l.attempts {
		return
	}
	l.observed = l.attempts
	if hook := l.client.Hooks.Attempt; hook != nil {
		hook(l.ctx, policy.Attempt{
			Path: l.path, Host: l.host, Code: code, Canceled: canceled,
			Number: l.attemptsBefore + l.attempts, Resume: l.resume, ResourceVersion: l.resourceVersion,
		})
	}
}

// gaveUpOn reports a retryable failure of reason that decision stopped.
func (l *loop) gaveUpOn(reason string, decision policy.Decision) {
	if hook := l.client.Hooks.GiveUp; hook != nil {
		hook(l.ctx, policy.GiveUp{
			Path: l.path, Host: l.host, Reason: decision.Reason(reason), BudgetRefused: decision.Stopped == policy.StoppedByBudget,
			Attempts: l.attemptsBefore + l.attempts, Elapsed: l.client.Policy.Clock().Since(l.runStart), Resume: l.resume,
			ResourceVersion: l.resourceVersion,
		})
	}
}

// reason names why an attempt is retried or given up on, for the hooks.
func reason(resp *http.Response, err error, class policy.Class) string {
	switch {
	case class == policy.TooManyRequests:
		return policy.ReasonTooManyRequests
	case err != nil && resp != nil:
		return policy.ReasonBrokenBody
	case err != nil:
		return policy.ReasonConnection
	}
	return policy.ReasonServerError
}

// outcome classifies one attempt. err is set when no response arrived, or
// when the response handler failed reading the body.
func (l *loop) outcome(resp *http.Response, err error) (policy.Outcome, string) {
	switch {
	case err != nil && resp != nil:
		return policy.Outcome{Class: policy.ClassifyBodyError(err)}, "broken body: " + err.Error()
	case err != nil:
		return policy.NoAnswer(err), err.Error()
	}
	outcome := policy.Outcome{Class: policy.ClassifyStatus(resp.StatusCode)}
	if outcome.Class == policy.Deliver {
		return outcome, ""
	}
	now := l.client.Policy.Clock().Now()
	if wait, ok := policy.ParseRetryAfter(resp.Header.Get("Retry-After"), now); ok {
		outcome.RetryAfter, outcome.HasRetryAfter = wait, true
	} else if wait, ok := statusRetryAfter(resp); ok {
		outcome.RetryAfter, outcome.HasRetryAfter = wait, true
	}
	return outcome, strconv.Itoa(resp.StatusCode)
}

// statusRetryAfter reads the start of resp's body for a Status naming
// details.retryAfterSeconds, and puts the bytes back so the body reaches
// the caller whole.
func statusRetryAfter(resp *http.Response) (time.Duration, bool) {
	head, err := peek(resp)
	if err != nil {
		return 0, false
	}
	st, ok := status.Parse(resp.Header.Get("Content-Type"), head)
	if !ok {
		return 0, false
	}
	return status.RetryAfter(st)
}

// peek reads the start of resp's body (up to status.BodyLimit) and puts the
// bytes back, so the body still reaches its reader whole. It returns what a
// previous peek read without reading again.
func peek(resp *http.Response) ([]byte, error) {
	if replay, ok := resp.Body.(*replayBody); ok {
		return replay.head, replay.err
	}
	if resp.Body == nil || resp.Body == http.NoBody {
		return nil, nil
	}
	head, err := io.ReadAll(io.LimitReader(resp.Body, status.BodyLimit))
	resp.Body = &replayBody{
		Reader: io.MultiReader(bytes.NewReader(head), errorReader{err}, resp.Body),
		Closer: resp.Body,
		head:   head,
		err:    err,
	}
	return head, err
}

// savedAnswer is a 429 kept across its wait (which drains and closes it),
// so that a wait cut by the caller's deadline can still hand the caller the
// server's answer.
type savedAnswer struct {
	resp *http.Response // status line, header and request; Body unused
	head []byte
}

func saveAnswer(resp *http.Response) *savedAnswer {
	head, _ := peek(resp)
	saved := *resp
	saved.Header = resp.Header.Clone()
	saved.Header.Del("Retry-After") // kretry has waited; client-go must not add its own
	return &savedAnswer{resp: &saved, head: head}
}

// response rebuilds the answer with the body bytes kept.
func (a *savedAnswer) response() *http.Response {
	resp := *a.resp
	resp.Body = io.NopCloser(bytes.NewReader(a.head))
	resp.ContentLength = int64(len(a.head))
	resp.Header.Del("Content-Length")
	if len(a.head) > 0 {
		resp.Header.Set("Content-Length", strconv.Itoa(len(a.head)))
	}
	return &resp
}

// backoff waits the policy's chosen wait on the policy's clock (so tests
// need not sleep) and the request context, then tells retryablehttp to wait
// no longer. If the context ends first, retryablehttp or PrepareRetry stops
// the loop with the context's error. retryablehttp has drained and closed
// resp before calling this.
func (l *loop) backoff(_, _ time.Duration, _ int, resp *http.Response) time.Duration {
	l.drained = resp
	// The context is checked again right after; the error adds nothing here.
	_ = policy.Sleep(l.ctx, l.client.Policy.Clock(), l.wait)
	return 0
}

// giveUp is the ErrorHandler: it hands the caller what the server last
// said, never a "giving up after N attempts" error of retryablehttp's own.
// err is what checkRetry (or PrepareRetry) stopped with.
func (l *loop) giveUp(resp *http.Response, err error, _ int) (*http.Response, error) {
	if errors.Is(err, errGiveUp) && resp != nil {
		// Our retries are spent: client-go must not add its own on top.
		resp.Header.Del("Retry-After")
		return resp, nil
	}
	if resp != nil && resp != l.drained {
		DrainAndClose(resp.Body)
	}
	return nil, err
}

// drainLimit bounds how much of an abandoned body is read so that its
// connection can be reused.
const drainLimit = 4 << 10

// DrainAndClose reads a little of an abandoned body and closes it, so that
// its connection can be reused.
func DrainAndClose(body io.ReadCloser) {
	if body == nil {
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(body, drainLimit))
	_ = body.Close()
}

// unwrapURLError returns the error the RoundTripper returned, without the
// *url.Error http.Client wraps it in: client-go wraps it again itself and
// tests errors (utilnet.IsProbableEOF and friends) on what is inside.
func unwrapURLError(err error) error {
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		return urlErr.Err
	}
	return err
}

// replayBody serves bytes already read from a body, then the rest of it.
type replayBody struct {
	io.Reader
	io.Closer
	// head and err are what the peek read.
	head []byte
	err  error
}

// errorReader replays a read error met while peeking; nil reads as EOF.
type errorReader struct{ err error }

func (r errorReader) Read([]byte) (int, error) {
	if r.err == nil {
		return 0, io.EOF
	}
	return 0, r.err
}
