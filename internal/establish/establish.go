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

// Client sends GET requests until the policy hands the outcome over. One
// Client is what a transport's retrying RoundTrippers share: the next
// RoundTripper, the policy (and so its retry budget), the reporter and the
// give-up error. It is itself a RoundTripper that sends a request once,
// through Next, so that package transport can hand it to watchretry.New and
// listretry.New as their next RoundTripper (see For).
type Client struct {
	// Next is the RoundTripper below kretry (client-go's TLS transport).
	Next http.RoundTripper
	// Policy decides and its Clock waits.
	Policy *policy.Policy
	// Report hears every attempt, retry, give-up and LIST body resume; nil
	// hears nothing.
	Report Reporter
	// GiveUpError, if set, makes the error a give-up returns (a retry loop
	// that stopped on failures without an answer, a LIST body whose resume
	// did not succeed) from this package's: package transport's public
	// *GiveUpError. It must keep what e unwraps to reachable.
	GiveUpError func(e *GiveUpError) error
}

// For returns the Client a retrying RoundTripper built over next uses: next
// itself when it is one (package transport builds one Client and hands it
// to every RoundTripper it composes, so that they share its policy, budget
// and reporting), else a Client over next with the recommended policy.
func For(next http.RoundTripper) *Client {
	if c, ok := next.(*Client); ok {
		return c
	}
	return &Client{Next: next, Policy: policy.New(policy.Config{})}
}

// RoundTrip sends req once, through Next.
func (c *Client) RoundTrip(req *http.Request) (*http.Response, error) { return c.Next.RoundTrip(req) }

// WrappedRoundTripper lets client-go's utilnet helpers reach Next.
func (c *Client) WrappedRoundTripper() http.RoundTripper { return c.Next }

// Reporter returns the client's reporter, Silent when it has none.
func (c *Client) Reporter() Reporter {
	if c.Report == nil {
		return Silent{}
	}
	return c.Report
}

// GiveUp is the error of a give-up: e, or what GiveUpError makes of it.
func (c *Client) GiveUp(e *GiveUpError) error {
	if c.GiveUpError != nil {
		return c.GiveUpError(e)
	}
	return e
}

// Do sends req until an answer the caller should see arrives, and returns
// it. req's body, if any, is closed, as the RoundTripper contract asks.
// tracker carries the history (a watch stream keeps one across reopens). If
// handle is non-nil it is run on every response the policy would deliver;
// an error it returns (a LIST body broken mid-read) is an outcome like any
// other.
//
// When the policy gives up on a 429 or 5xx, Do returns the server's last
// response, its Status body intact, without Retry-After, so client-go does
// not add its own retries on top of kretry's. When it gives up on a
// connection failure or a broken body it returns the give-up error (see
// GiveUp), which client-go does not retry either. An error the policy does
// not retry (TLS verification, DNS) is returned as the next RoundTripper
// returned it. A wait ends as soon as req's context does, and Do then
// returns the context's error, or, if the wait was for a 429, that 429's
// answer. req itself is never modified. It also returns how many requests
// it sent.
func (c *Client) Do(req *http.Request, tracker *policy.Tracker, handle func(*http.Response) error) (*http.Response, int, error) {
	return c.do(req, tracker, handle, "", Bounds{})
}

// Watch is Do for the establishment of a watch: every attempt is bounded
// by bounds (the caller's deadline, the wait for an answer).
func (c *Client) Watch(req *http.Request, tracker *policy.Tracker, bounds Bounds) (*http.Response, error) {
	resp, _, err := c.do(req, tracker, nil, "", bounds)
	return resp, err
}

// Resume is Watch for the reopening of a watch, or the re-request of a LIST
// body, at resourceVersion: its attempts, retries and give-ups are reported
// as a resume's, counted from the start of the tracker's run of failures.
// It also returns how many requests it sent.
func (c *Client) Resume(req *http.Request, tracker *policy.Tracker, resourceVersion string, bounds Bounds) (*http.Response, int, error) {
	return c.do(req, tracker, nil, resourceVersion, bounds)
}

// do is Do; resourceVersion is a resume's point, "" for a request's
// establishment.
func (c *Client) do(req *http.Request, tracker *policy.Tracker, handle func(*http.Response) error, resourceVersion string, bounds Bounds) (*http.Response, int, error) {
	if req.Body != nil {
		defer req.Body.Close()
	}
	loop := &loop{client: c, report: c.Reporter(), tracker: tracker, ctx: req.Context(), path: req.URL.Path, host: req.URL.Host,
		handle: handle, start: c.Policy.Clock().Now(), bounds: bounds, resume: resourceVersion != "", resourceVersion: resourceVersion}
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
		return nil, loop.attempts, c.GiveUp(&GiveUpError{Attempts: loop.attempts, Elapsed: c.Policy.Clock().Since(loop.start), Last: last})
	case loop.gaveUp:
		return nil, loop.attempts, c.GiveUp(&GiveUpError{Attempts: loop.attempts, Elapsed: c.Policy.Clock().Since(loop.start), Last: err})
	}
	return nil, loop.attempts, err
}

// loop is the state of one Do call shared by the retryablehttp hooks. It is
// also the RoundTripper of retryablehttp's http.Client, so that it sees the
// next RoundTripper's errors before http.Client wraps or rewrites them.
type loop struct {
	client  *Client
	report  Reporter
	tracker *policy.Tracker
	ctx     context.Context
	path    string
	host    string
	start   time.Time
	// handle, if set, readies every answer the policy would deliver before
	// the policy decides on it (see checkRetry); nil: none.
	handle func(*http.Response) error
	// resume and resourceVersion mark a resume at its resourceVersion: the
	// reports count its attempts and time from the start of the tracker's
	// run of failures, not from this call.
	resume          bool
	resourceVersion string
	// attempts counts the requests sent, observed those reported to
	// Reporter.Attempt: checkRetry is asked once per attempt, but
	// http.Client may refuse a request before any RoundTrip (a nil URL), and
	// then no new attempt is reported.
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
	// bounds bound each attempt (a watch's deadline and answer timeout, a
	// search's end).
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
	l.tracker.Sent()
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

// checkRetry reports the attempt's failure to the policy and does what it
// decides. When it stops, the error it returns is the one the caller gets
// (see giveUp): errGiveUp for a response the policy gave up on, else the
// attempt's own error, or the context's.
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
	if err == nil && resp != nil && l.handle != nil && !policy.Retryable(resp.StatusCode) {
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
	switch {
	case errors.Is(err, errDeadline):
		l.attempted(0, true)
		l.gaveUpOn(ReasonDeadline, false)
		return false, err
	case errors.Is(err, errSearchOver):
		// The search this reopening belongs to is over: its 410 is the
		// caller's, not this attempt's failure.
		l.attempted(0, true)
		return false, err
	}
	failure, cause := l.failure(resp, err)
	decision := l.tracker.Decide(failure)
	code := 0 // no whole answer: none arrived, or its body broke
	if err == nil && resp != nil {
		code = resp.StatusCode
	}
	l.attempted(code, false)
	reason := reasonOf(failure, resp, err)
	switch decision.Action {
	case policy.Retry:
	case policy.GiveUp:
		switch decision.Stop {
		case policy.StoppedByDeadline:
			l.gaveUpOn(ReasonDeadline, false)
		case policy.StoppedBySearch:
		default:
			l.gaveUpOn(reason, decision.Stop == policy.StoppedByBudget)
		}
		if err != nil {
			l.gaveUp = true
			return false, err
		}
		return false, errGiveUp
	default:
		return false, err
	}
	l.wait = decision.Wait
	switch {
	case err != nil:
		l.lastAnswer, l.lastErr = nil, err
	case resp != nil && (failure.Kind == policy.Throttled || !l.bounds.Deadline.IsZero()):
		l.lastAnswer, l.lastErr = saveAnswer(resp), nil
		if failure.Kind == policy.Throttled {
			l.throttled = l.lastAnswer
		}
	}
	attempts, elapsed := l.run()
	l.report.Retry(l.ctx, Retry{
		Path: l.path, Host: l.host, Code: code, Reason: reason, Cause: cause, Wait: decision.Wait,
		Resume: l.resume, Attempts: attempts, Elapsed: elapsed, ResourceVersion: l.resourceVersion,
	})
	return true, nil
}

// run is what the reports count: the attempts and the time of this request,
// or, for a resume, of the tracker's run of failures.
func (l *loop) run() (attempts int, elapsed time.Duration) {
	clock := l.client.Policy.Clock()
	if !l.resume {
		return l.attempts, clock.Since(l.start)
	}
	since, attempts := l.tracker.Run()
	if since.IsZero() {
		since = l.start
	}
	return attempts, clock.Since(since)
}

// attempted reports the attempt in flight to Reporter.Attempt, once.
func (l *loop) attempted(code int, canceled bool) {
	if l.observed == l.attempts {
		return
	}
	l.observed = l.attempts
	number, _ := l.run()
	l.report.Attempt(l.ctx, Attempt{
		Path: l.path, Host: l.host, Code: code, Canceled: canceled,
		Number: number, Resume: l.resume, ResourceVersion: l.resourceVersion,
	})
}

// gaveUpOn reports a retryable failure of reason given up on.
func (l *loop) gaveUpOn(reason string, budgetRefused bool) {
	attempts, elapsed := l.run()
	l.report.GiveUp(l.ctx, GiveUp{
		Path: l.path, Host: l.host, Reason: reason, BudgetRefused: budgetRefused,
		Attempts: attempts, Elapsed: elapsed, Resume: l.resume, ResourceVersion: l.resourceVersion,
	})
}

// reasonOf names why an attempt that failed with f is retried or given up
// on, for the reports.
func reasonOf(f policy.Failure, resp *http.Response, err error) string {
	switch {
	case f.Kind == policy.Throttled:
		return ReasonTooManyRequests
	case err != nil && resp != nil:
		return ReasonBrokenBody
	case err != nil:
		return ReasonConnection
	}
	return ReasonServerError
}

// failure is what one attempt came to, and its cause for the reports. err
// is set when no response arrived, or when the response handler failed
// reading the body: a body broken before the caller got it is an answer
// that failed, like a 5xx.
func (l *loop) failure(resp *http.Response, err error) (policy.Failure, string) {
	switch {
	case err != nil && resp != nil:
		if !policy.BodyBreak(err) {
			return policy.Failure{Kind: policy.Final}, ""
		}
		return policy.Failure{Kind: policy.ServerError}, "broken body: " + err.Error()
	case err != nil:
		return policy.Unanswered(err), err.Error()
	case !policy.Retryable(resp.StatusCode):
		return policy.Failure{Kind: policy.Final}, ""
	}
	now := l.client.Policy.Clock().Now()
	wait, ok := policy.ParseRetryAfter(resp.Header.Get("Retry-After"), now)
	if !ok {
		wait, _ = statusRetryAfter(resp)
	}
	return policy.Answer(resp.StatusCode, wait), strconv.Itoa(resp.StatusCode)
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
