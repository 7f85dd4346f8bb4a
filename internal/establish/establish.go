// Package establish runs the retry loop that gets one GET answered: it sends
// the request through the next RoundTripper with go-retryablehttp's Client,
// asks the policy after every attempt, and waits where the policy says.
// listretry uses it for LIST requests and watchretry to open and reopen
// watches; neither owns a loop of its own.
package establish

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/kretry/kretry/internal/status"
	"github.com/kretry/kretry/policy"
)

// statusPeekLimit bounds how much of a 429/5xx body is read to find a
// Status with details.retryAfterSeconds. API server Status bodies are a
// few hundred bytes.
const statusPeekLimit = 64 << 10

// errGiveUp tells the ErrorHandler that the policy declined to retry a
// retryable outcome any further.
var errGiveUp = errors.New("kretry: retries exhausted")

// Client sends GET requests until the policy hands the outcome over.
type Client struct {
	// Next is the RoundTripper below kretry (client-go's TLS transport).
	Next http.RoundTripper
	// Policy decides and its Clock waits.
	Policy *policy.Policy
	// OnRetry, if set, is told about every retry before its wait.
	OnRetry func(policy.Retry)
}

// Do sends req until an answer the caller should see arrives, and returns
// it. tracker carries the failure history (a watch stream keeps one across
// reopens). If handle is non-nil it is run on every response the policy
// would deliver; an error it returns (a LIST body broken mid-read) is an
// outcome like any other.
//
// When the policy gives up on a 429 or 5xx, Do returns the server's last
// response, its Status body intact, without Retry-After, so client-go does
// not add its own retries on top of kretry's. When it gives up on a
// connection failure it returns that error as it was. A wait ends as soon
// as req's context does.
func (c *Client) Do(req *http.Request, tracker *policy.Tracker, handle func(*http.Response) error) (*http.Response, error) {
	loop := &loop{client: c, tracker: tracker, ctx: req.Context(), path: req.URL.Path}
	retryable := &retryablehttp.Client{
		HTTPClient: &http.Client{
			Transport: roundTripperOnly{c.Next},
			// Redirects go to the caller, as they would without kretry.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		RetryMax:     math.MaxInt32, // the policy decides when to stop
		CheckRetry:   loop.checkRetry,
		Backoff:      loop.backoff,
		ErrorHandler: loop.giveUp,
		PrepareRetry: func(r *http.Request) error { return r.Context().Err() },
	}
	retryableReq, err := retryablehttp.FromRequest(req)
	if err != nil {
		return nil, err
	}
	if handle != nil {
		retryableReq.SetResponseHandler(handle)
	}
	return retryable.Do(retryableReq)
}

// loop is the state of one Do call shared by the retryablehttp hooks.
type loop struct {
	client  *Client
	tracker *policy.Tracker
	ctx     context.Context
	path    string
	// decided and verdict remember the decision on a response, because
	// retryablehttp asks again after running the response handler and one
	// outcome must be decided once.
	decided *http.Response
	verdict error
	// wait is the policy's chosen wait for the retry about to happen.
	wait time.Duration
	// lastErr is the last attempt's error as the RoundTripper returned it.
	lastErr error
}

// checkRetry turns an attempt into an outcome and asks the policy.
func (l *loop) checkRetry(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return false, ctxErr
	}
	if err == nil && resp != nil && resp == l.decided {
		return false, l.verdict
	}
	l.lastErr = unwrapURLError(err)
	outcome, cause := l.outcome(resp, l.lastErr)
	decision := l.tracker.Decide(outcome)
	if !decision.Retry {
		l.decided, l.verdict = resp, nil
		if outcome.Class != policy.Deliver {
			l.verdict = errGiveUp
		}
		return false, l.verdict
	}
	l.wait = decision.Wait
	if l.client.OnRetry != nil {
		l.client.OnRetry(policy.Retry{Path: l.path, Cause: cause, Class: outcome.Class, Wait: decision.Wait})
	}
	return true, nil
}

// outcome classifies one attempt. err is set when no response arrived, or
// when the response handler failed reading the body.
func (l *loop) outcome(resp *http.Response, err error) (policy.Outcome, string) {
	if err != nil {
		return policy.Outcome{Class: policy.ClassifyError(err)}, err.Error()
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
	return outcome, fmt.Sprintf("%d", resp.StatusCode)
}

// statusRetryAfter reads the start of resp's body for a Status naming
// details.retryAfterSeconds, and puts the bytes back so the body reaches
// the caller whole.
func statusRetryAfter(resp *http.Response) (time.Duration, bool) {
	if resp.Body == nil || resp.Body == http.NoBody {
		return 0, false
	}
	head, err := io.ReadAll(io.LimitReader(resp.Body, statusPeekLimit))
	resp.Body = &replayBody{Reader: io.MultiReader(bytes.NewReader(head), errorReader{err}, resp.Body), Closer: resp.Body}
	if err != nil {
		return 0, false
	}
	st, ok := status.Parse(resp.Header.Get("Content-Type"), head)
	if !ok {
		return 0, false
	}
	return status.RetryAfter(st)
}

// backoff waits the policy's chosen wait on the policy's clock (so tests
// need not sleep) and the request context, then tells retryablehttp to wait
// no longer. If the context ends first, PrepareRetry stops the loop.
func (l *loop) backoff(time.Duration, time.Duration, int, *http.Response) time.Duration {
	// The context is checked again by PrepareRetry; the error adds nothing here.
	_ = l.client.Policy.Clock().Sleep(l.ctx, l.wait)
	return 0
}

// giveUp is the ErrorHandler: it hands the caller what the server last
// said, never a "giving up after N attempts" error of retryablehttp's own.
func (l *loop) giveUp(resp *http.Response, err error, _ int) (*http.Response, error) {
	if errors.Is(err, errGiveUp) {
		if l.lastErr == nil && resp != nil {
			// Our retries are spent: client-go must not add its own on top.
			resp.Header.Del("Retry-After")
			return resp, nil
		}
		err = l.lastErr
	}
	if resp != nil {
		drainAndClose(resp.Body)
	}
	return nil, unwrapURLError(err)
}

// drainLimit bounds how much of an abandoned body is read so that its
// connection can be reused.
const drainLimit = 4 << 10

// drainAndClose reads a little of an abandoned body and closes it.
func drainAndClose(body io.ReadCloser) {
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

// roundTripperOnly hides every method of the next RoundTripper but
// RoundTrip: retryablehttp calls CloseIdleConnections on its client after
// each give-up, which would tear down client-go's shared connection pool.
type roundTripperOnly struct{ next http.RoundTripper }

func (r roundTripperOnly) RoundTrip(req *http.Request) (*http.Response, error) {
	return r.next.RoundTrip(req)
}

// replayBody serves bytes already read from a body, then the rest of it.
type replayBody struct {
	io.Reader
	io.Closer
}

// errorReader replays a read error met while peeking; nil reads as EOF.
type errorReader struct{ err error }

func (r errorReader) Read([]byte) (int, error) {
	if r.err == nil {
		return 0, io.EOF
	}
	return 0, r.err
}
