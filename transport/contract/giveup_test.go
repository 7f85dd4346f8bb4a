package contract_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"

	"github.com/kretry/kretry/transport"
)

func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// TestGiveUpRefused: a LIST and a WATCH to a port nobody listens on give up
// after the window with a *GiveUpError that utilnet.IsConnectionRefused
// still sees; client-go does not retry it (one give-up, one window).
func TestGiveUpRefused(t *testing.T) {
	w := newWorld(t)
	cs := w.clientset(closedPort(t), nil, mediaJSON)
	_, err := cs.CoreV1().Pods("ns").List(realCtx(t), metav1.ListOptions{})
	var g *transport.GiveUpError
	if !errors.As(err, &g) {
		t.Fatalf("LIST error %v (%T), want a *GiveUpError", err, err)
	}
	if !utilnet.IsConnectionRefused(err) {
		t.Errorf("utilnet.IsConnectionRefused(%v) = false", err)
	}
	if utilnet.IsProbableEOF(err) || utilnet.IsConnectionReset(err) {
		t.Errorf("the give-up reads as EOF/reset: client-go would retry it")
	}
	o := w.obs.Events()
	if len(o.GiveUps) != 1 || g.Attempts < 3 || len(o.Attempts) != g.Attempts {
		t.Errorf("give-up %+v; %d attempts observed; give-ups %+v", g, len(o.Attempts), o.GiveUps)
	}
	_, err = cs.CoreV1().Pods("ns").Watch(realCtx(t), metav1.ListOptions{ResourceVersion: "100"})
	if !errors.As(err, &g) || !utilnet.IsConnectionRefused(err) {
		t.Errorf("WATCH error %v (%T), want a refused *GiveUpError", err, err)
	}
}

// TestGiveUpEOFNotMultiplied: a server that accepts and closes every
// connection: kretry retries for one window, then one give-up reaches the
// caller; client-go's own 10 retries on EOF must not start it again.
func TestGiveUpEOFNotMultiplied(t *testing.T) {
	w := newWorld(t)
	srv := newRawServer(t, w.clk, func(c *rawConn, q rawReq) bool { return false })
	cs := w.clientset(srv.url(), nil, mediaJSON)
	_, err := cs.CoreV1().Pods("ns").List(realCtx(t), metav1.ListOptions{})
	var g *transport.GiveUpError
	if !errors.As(err, &g) {
		t.Fatalf("error %v (%T), want a *GiveUpError", err, err)
	}
	o := w.obs.Events()
	if len(o.GiveUps) != 1 || len(srv.requests()) != g.Attempts {
		t.Errorf("%d give-ups, %d requests reached the server, the give-up counts %d: client-go retried kretry's give-up", len(o.GiveUps), len(srv.requests()), g.Attempts)
	}
}

// TestGiveUp503StripsRetryAfter: a LIST answered 503 with Retry-After for
// longer than the window: the caller gets the 503 Status, without
// Retry-After, so client-go does not retry it.
func TestGiveUp503StripsRetryAfter(t *testing.T) {
	w := newWorld(t)
	srv := newRawServer(t, w.clk, func(c *rawConn, q rawReq) bool {
		return writeStatus(c, 503, metav1.StatusReasonServiceUnavailable, "upgrading", "Retry-After", "2")
	})
	cs := w.clientset(srv.url(), nil, mediaJSON)
	_, err := cs.CoreV1().Pods("ns").List(realCtx(t), metav1.ListOptions{})
	if !apierrors.IsServiceUnavailable(err) {
		t.Fatalf("error %v, want the 503 Status", err)
	}
	o := w.obs.Events()
	if len(o.GiveUps) != 1 || len(srv.requests()) != o.GiveUps[0].Attempts {
		t.Errorf("%d requests, give-ups %+v: client-go retried", len(srv.requests()), o.GiveUps)
	}
}

// TestThrottledCutByCallerContext: a 429 wait cut by the caller's context
// gives the caller the 429 Status, not the context's error.
func TestThrottledCutByCallerContext(t *testing.T) {
	w := newWorld(t)
	w.clk.manual = true
	srv := newRawServer(t, w.clk, func(c *rawConn, q rawReq) bool {
		return writeStatus(c, 429, metav1.StatusReasonTooManyRequests, "slow down", "Retry-After", "30")
	})
	cs := w.clientset(srv.url(), nil, mediaJSON)
	ctx, cancel := context.WithCancel(realCtx(t))
	go func() {
		eventually(t, "kretry's wait", func() bool { return w.clk.pendingSleeps() > 0 })
		cancel()
	}()
	_, err := cs.CoreV1().Pods("ns").List(ctx, metav1.ListOptions{})
	if !apierrors.IsTooManyRequests(err) {
		t.Errorf("error %v (%T), want the 429 Status", err, err)
	}
}

// TestDisableEnv: KRETRY_DISABLE=1 at wrap time turns kretry into a
// pass-through; an unparsable value leaves it on; a change after the client
// is built changes nothing.
func TestDisableEnv(t *testing.T) {
	run := func(t *testing.T, env string, setAfter bool) (error, int, *observer) {
		w := newWorld(t)
		var mu sync.Mutex
		n := 0
		srv := newRawServer(t, w.clk, func(c *rawConn, q rawReq) bool {
			mu.Lock()
			n++
			first := n == 1
			mu.Unlock()
			if first {
				return writeStatus(c, 503, metav1.StatusReasonServiceUnavailable, "once")
			}
			return writeBody(c, mediaJSON, listBody(mediaJSON, 10, 1), false, -1, false)
		})
		if !setAfter {
			t.Setenv(transport.DisableEnv, env)
		}
		cs := w.clientset(srv.url(), nil, mediaJSON)
		if setAfter {
			t.Setenv(transport.DisableEnv, env)
		}
		_, err := cs.CoreV1().Pods("ns").List(realCtx(t), metav1.ListOptions{})
		return err, len(srv.requests()), w.obs
	}
	for _, tc := range []struct {
		env      string
		after    bool
		disabled bool
	}{{"1", false, true}, {"TRUE", false, true}, {"yes", false, false}, {"1", true, false}, {"", false, false}} {
		t.Run(fmt.Sprintf("%q/after=%v", tc.env, tc.after), func(t *testing.T) {
			err, reqs, obs := run(t, tc.env, tc.after)
			o := obs.Events()
			if tc.disabled {
				if !apierrors.IsServiceUnavailable(err) || reqs != 1 || len(o.Attempts) != 0 {
					t.Errorf("disabled: err %v, %d requests, %d attempts observed", err, reqs, len(o.Attempts))
				}
			} else if err != nil || reqs != 2 {
				t.Errorf("enabled: err %v, %d requests", err, reqs)
			}
		})
	}
}

// TestWithoutRetry: a LIST and a watch under transport.WithoutRetry are
// sent once; their failures reach the caller as the server gave them and
// the Observer hears nothing.
func TestWithoutRetry(t *testing.T) {
	w := newWorld(t)
	srv := newWatchServer(t, w, mediaJSON, func(q rawReq) watchAnswer {
		return watchAnswer{stream: events(mediaJSON, 100, 102), cut: 300}
	}, func(c *rawConn, q rawReq) bool {
		return writeStatus(c, 503, metav1.StatusReasonServiceUnavailable, "no")
	})
	cs := w.clientset(srv.url(), nil, mediaJSON)
	ctx := transport.WithoutRetry(realCtx(t))
	if _, err := cs.CoreV1().Pods("ns").List(ctx, metav1.ListOptions{}); !apierrors.IsServiceUnavailable(err) {
		t.Errorf("LIST error %v", err)
	}
	wi, err := cs.CoreV1().Pods("ns").Watch(ctx, metav1.ListOptions{ResourceVersion: "100"})
	if err != nil {
		t.Fatal(err)
	}
	evs := collect(wi).waitClosed(t)
	if len(srv.requests()) != 2 {
		t.Errorf("%d requests, want 2 (no retry, no resume); caller saw %s", len(srv.requests()), describe(evs))
	}
	if o := w.obs.Events(); len(o.Attempts)+len(o.Retries)+len(o.GiveUps) != 0 {
		t.Errorf("the observer heard %s", w.obs)
	}
}

// TestRetryBudgetBoundsAFleetOf503s: 100 LISTs at once, every answer a 503,
// time frozen (so no window ever ends): only the budget can stop their
// retries. Every LIST ends with the 503, each give-up after a refusal has
// the failure's own reason.
func TestRetryBudgetBoundsAFleetOf503s(t *testing.T) {
	w := newWorld(t)
	w.clk.frozen = true
	srv := newRawServer(t, w.clk, func(c *rawConn, q rawReq) bool {
		return writeStatus(c, 503, metav1.StatusReasonServiceUnavailable, "down")
	})
	cs := w.clientset(srv.url(), nil, mediaJSON)
	errs := allAtOnce(100, func(i int) error {
		_, err := cs.CoreV1().Pods(fmt.Sprint("ns-", i)).List(realCtx(t), metav1.ListOptions{})
		return err
	})
	for i, err := range errs {
		if !apierrors.IsServiceUnavailable(err) {
			t.Errorf("LIST %d: %v", i, err)
		}
	}
	o := w.obs.Events()
	reqs := len(srv.requests())
	t.Logf("%d requests for 100 LISTs, %d retries, %d refusals", reqs, len(o.Retries), len(o.Refusals))
	if len(o.Refusals) != 100 || len(o.GiveUps) != 100 {
		t.Errorf("%d refusals, %d give-ups, want 100 each", len(o.Refusals), len(o.GiveUps))
	}
	for _, g := range o.GiveUps {
		if g.Reason != transport.ReasonServerError {
			t.Errorf("give-up after a refusal with reason %q, want 5xx", g.Reason)
			break
		}
	}
	// 20% of the window's requests plus 10 a second over a 10 s window
	if retries := reqs - 100; retries > 20+100+20 {
		t.Errorf("%d retries for 100 LISTs: the budget allows about 120", retries)
	}
}

// TestBudgetNotSpentByResumesAndNamedWaits: under a budget that allows no
// retry, a watch cut ten times is resumed ten times, and a LIST answered
// 429 with Retry-After five times is still retried: neither spends it.
func TestBudgetNotSpentByResumesAndNamedWaits(t *testing.T) {
	w := newWorld(t)
	w.kc.RetryBudget = budgetAllowsNothing
	srv := newWatchServer(t, w, mediaJSON, func(q rawReq) watchAnswer {
		s := events(mediaJSON, q.rv(), q.rv()+2)
		return watchAnswer{stream: s, cut: len(s) - 3, reset: q.rv()%2 == 0}
	}, func(c *rawConn, q rawReq) bool {
		if q.n <= 5 {
			return writeStatus(c, 429, metav1.StatusReasonTooManyRequests, "slow", "Retry-After", "2")
		}
		return writeBody(c, mediaJSON, listBody(mediaJSON, 10, 1), false, -1, false)
	})
	cs := w.clientset(srv.url(), nil, mediaJSON)
	if _, err := cs.CoreV1().Pods("ns").List(realCtx(t), metav1.ListOptions{}); err != nil {
		t.Errorf("LIST: %v", err)
	}
	evs := watchPods(t, cs, metav1.ListOptions{ResourceVersion: "100"}).eventsOrEnd(t, 10)
	if got := rvs(evs); len(got) < 10 || !slices.Equal(got[:10], seq(101, 110)) {
		t.Errorf("caller saw %s", describe(evs))
	}
	if o := w.obs.Events(); len(o.Refusals) != 0 {
		t.Errorf("budget refusals %+v", o.Refusals)
	}
}
