//go:build e2e

package e2e_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kretry/kretry/internal/frame"
	"github.com/kretry/kretry/internal/harness/apiserver"
	"github.com/kretry/kretry/internal/harness/cmwriter"
	"github.com/kretry/kretry/internal/status"
	"github.com/kretry/kretry/transport"
)

// outageDown is how long kube-apiserver A stays down: longer than kretry's default
// InternalErrorWindow (30s), so that kretry gives up on its resume and on the watch after it.
const outageDown = 40 * time.Second

// TestOutage: an outage longer than kretry's window. A stock ConfigMap informer and a kretry one
// (the default transport.Config: a 30s InternalErrorWindow) run side by side, straight against
// kube-apiserver A (no proxy: a refused connection is a real ECONNREFUSED), while a writer
// changes ConfigMaps through A. A is killed (SIGKILL, as a crash or an OOM kill would; etcd and
// the other servers keep running), and started again 40s after the kill on the same etcd, port
// and certificates, with a fresh watch cache. Writes fail while A is down.
//
// What each informer must do. kretry resumes its broken watch, gives up when its window is
// spent and ends the stream as a clean close, so that client-go re-watches from its RV instead
// of relisting; the re-watch is retried for another window (were that spent too, it would end
// with a *transport.GiveUpError that is still a refused connection, on which the reflector
// backs off and re-watches). Once A is back, its watch cache starts at etcd's current revision, newer than
// either informer's RV (the other servers' leases move it), so the re-watch meets 410 Expired
// and one relist is right. The claims: kretry's initial-state fetches are at most 1 + the 410s
// client-go received through kretry, and never more than stock client-go's; both caches equal
// the server's state at the end. Every request, answer, watch ERROR event, stream end and
// kretry retry is on a timeline that the test logs.
func TestOutage(t *testing.T) {
	sharedCluster(t)
	ctx := context.Background()
	const fault = "outage-40s"
	a := serverARestartedAtCleanup(t)
	ns := namespace(t, serverA, "outage", 40)
	tl := &timeline{start: time.Now()}
	t.Cleanup(func() { t.Logf("timeline (s since the informers started):\n%s", tl) })

	w := startWriter(t, serverA, ns, 8, 100*time.Millisecond)
	stock := newOutageClient(a.Addr(), false, tl)
	kr := newOutageClient(a.Addr(), true, tl)
	clients := []*outageClient{stock, kr}
	for _, c := range clients {
		c.inf = startInformer(t, c.client, ns)
	}
	syncCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, c := range clients {
		if !cache.WaitForCacheSync(syncCtx.Done(), c.inf.informer.HasSynced) {
			t.Fatalf("%s informer did not sync in 30s", c.name)
		}
	}
	tl.add("test", "both informers synced")
	time.Sleep(6 * time.Second)

	pid := a.PID()
	tl.add("test", fmt.Sprintf("killing A (pid %d); restart in %v", pid, outageDown))
	out, err := a.Outage(ctx, outageDown)
	if err != nil {
		t.Fatalf("outage of A: %v", err)
	}
	tl.addAt(out.Listening, "test", fmt.Sprintf("A (pid %d) listens again", out.NewPID))
	tl.addAt(out.Ready, "test", "A is ready (/readyz 200)")
	t.Logf("A: pid %d killed, connections refused %v, ready %v after the kill (pid %d)",
		out.PID, out.Refused().Round(100*time.Millisecond), out.Unready().Round(100*time.Millisecond), out.NewPID)
	if syscall.Kill(out.PID, 0) == nil {
		t.Errorf("the killed kube-apiserver (pid %d) is still there", out.PID)
	}
	if out.Refused() < outageDown {
		t.Fatalf("connections to A were refused for %v only, want at least %v", out.Refused(), outageDown)
	}

	// Time to recover: until each informer holds a ConfigMap created right after A is ready.
	const marker = "outage-marker"
	admin := adminClient(serverA)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		_, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, cmwriter.ConfigMap(marker, 0), metav1.CreateOptions{})
		if err == nil || apierrors.IsAlreadyExists(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("create %s after the restart: %v", marker, err)
		}
	}
	tl.add("test", "marker created")
	recovered := map[*outageClient]time.Duration{}
	for deadline := time.Now().Add(150 * time.Second); len(recovered) < len(clients) && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		for _, c := range clients {
			if _, ok := recovered[c]; ok {
				continue
			}
			if _, ok, _ := c.inf.informer.GetStore().GetByKey(ns + "/" + marker); ok {
				recovered[c] = time.Since(out.Ready)
				tl.add(c.name, "informer has the marker")
			}
		}
	}
	time.Sleep(5 * time.Second) // changes after the recovery too

	w.Stop()
	writes, fails, firstErr := w.Stats()
	t.Logf("writer: %d writes, %d failed (first: %v)", writes, fails, firstErr)
	var figs []figure
	for _, c := range clients {
		d, err := converge(ctx, c.inf, serverA, ns, convergeTimeout)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		rec := "never"
		if r, ok := recovered[c]; ok {
			rec = r.Round(100*time.Millisecond).String() + " after A was ready"
		} else {
			t.Errorf("%s: the informer did not receive the marker within 150s of A being ready", c.name)
		}
		caller := c.caller.snapshot()
		f := figure{Fault: fault, Client: c.name, Caller: caller, Wire: c.wire.snapshot(), Writes: writes,
			Converged: err == nil, Converge: d,
			Note: fmt.Sprintf("A refused %.0fs, ready +%.1fs; client-go: %d watches, %d ERROR 410, %d errors; recovered %s; %d writes failed",
				out.Refused().Seconds(), out.Ready.Sub(out.Listening).Seconds(), caller.Watches+caller.WatchLists,
				c.callerLog.expired(), caller.Errors, rec, fails)}
		figs = append(figs, f)
		record(f)
		t.Logf("%s/%s: fetches=%d caller=%+v wire=%+v converged=%v in %v; %s", fault, c.name, caller.InitialFetches(),
			caller, f.Wire, f.Converged, f.Converge, f.Note)
	}

	st, k := figs[0], figs[1]
	if !k.Converged || !st.Converged {
		return // reported above
	}
	if got, limit := k.Caller.InitialFetches(), 1+kr.callerLog.expired(); got > limit {
		t.Errorf("kretry: %d initial-state fetches, want at most %d (1 + the %d 410s client-go received)", got, limit, kr.callerLog.expired())
	}
	if k.Caller.InitialFetches() > st.Caller.InitialFetches() {
		t.Errorf("kretry: %d initial-state fetches, stock client-go %d: kretry made the outage worse",
			k.Caller.InitialFetches(), st.Caller.InitialFetches())
	}
	// The scenario is only worth its claim if kretry gave up on a watch while A was down.
	if kr.callerLog.cleanEndsBetween(out.Killed, out.Listening) == 0 {
		t.Errorf("kretry: no watch ended cleanly while A was down: the scenario did not reach kretry's give-up")
	}
}

// outageClient is one informer's client: counters below and above kretry (client), request
// logs at the caller and, with kretry, on the wire.
type outageClient struct {
	*client
	name      string
	callerLog *requestLog
	inf       *informer
}

// newOutageClient is newClient with request logs: the caller's log is outermost, the wire's sits
// below kretry. kretry's Config is the zero one but for an Observer, which only writes each retry
// to the timeline.
func newOutageClient(addr string, withKretry bool, tl *timeline) *outageClient {
	c := &outageClient{client: &client{cfg: cluster.ConfigFor(addr, apiserver.Admin), wire: &counter{}, caller: &counter{}, kretry: withKretry}, name: "stock"}
	if withKretry {
		c.name = "kretry"
	}
	c.callerLog = &requestLog{who: c.name, tl: tl}
	c.cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { c.wire.next = rt; return c.wire })
	if withKretry {
		wireLog := &requestLog{who: "kretry wire", tl: tl}
		c.cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { wireLog.next = rt; return wireLog })
		c.cfg.Wrap(transport.Wrapper(transport.Config{Observer: timelineRetries{tl}}))
	}
	c.cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { c.caller.next = rt; return c.caller })
	c.cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { c.callerLog.next = rt; return c.callerLog })
	return c
}

// timelineRetries is a transport.Observer that writes each retry to the timeline.
type timelineRetries struct{ tl *timeline }

func (o timelineRetries) ObserveRetry(r transport.RetryEvent) {
	o.tl.add("kretry retry", fmt.Sprintf("%s %s (code %d, resume %v), wait %v", r.Verb, r.Reason, r.Code, r.Resume, r.Wait.Round(time.Millisecond)))
}
func (timelineRetries) ObserveAttempt(transport.AttemptEvent)      {}
func (timelineRetries) ObserveGiveUp(transport.GiveUpEvent)        {}
func (timelineRetries) ObserveBudgetRefusal(transport.BudgetEvent) {}

// timeline is the scenario's log, each line timed from its start.
type timeline struct {
	start time.Time
	mu    sync.Mutex
	lines []string
}

func (tl *timeline) add(who, what string) { tl.addAt(time.Now(), who, what) }

func (tl *timeline) addAt(at time.Time, who, what string) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.lines = append(tl.lines, fmt.Sprintf("%8.3f %-13s %s", at.Sub(tl.start).Seconds(), who, what))
}

func (tl *timeline) String() string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return strings.Join(tl.lines, "\n")
}

// requestLog is an http.RoundTripper that writes every LIST and WATCH and its answer to the
// timeline, and reads each watch response frame by frame (internal/frame, the scanner kretry
// itself uses) to log its ERROR events and how the stream ended. Above kretry it shows what
// client-go got; below it, what the server answered.
type requestLog struct {
	who  string
	tl   *timeline
	next http.RoundTripper

	mu         sync.Mutex
	expired410 int         // 410 answers and ERROR 410 events
	cleanEnds  []time.Time // watch streams that ended with a clean EOF
}

func (l *requestLog) expired() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.expired410
}

func (l *requestLog) cleanEndsBetween(from, to time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, at := range l.cleanEnds {
		if !at.Before(from) && !at.After(to) {
			n++
		}
	}
	return n
}

func (l *requestLog) RoundTrip(req *http.Request) (*http.Response, error) {
	if !strings.HasSuffix(req.URL.Path, "/configmaps") {
		return l.next.RoundTrip(req)
	}
	q := req.URL.Query()
	what := "LIST"
	watching := q.Get("watch") == "true" || q.Get("watch") == "1"
	if watching {
		what = "WATCH"
		if q.Get("sendInitialEvents") == "true" {
			what = "WATCH-LIST"
		}
	}
	what = fmt.Sprintf("%s rv=%q", what, q.Get("resourceVersion"))
	sent := time.Now()
	resp, err := l.next.RoundTrip(req)
	took := time.Since(sent).Round(time.Millisecond)
	switch {
	case err != nil:
		var giveUp *transport.GiveUpError
		kind := ""
		if errors.As(err, &giveUp) {
			kind = fmt.Sprintf(" [*transport.GiveUpError: %d attempts]", giveUp.Attempts)
		}
		l.tl.add(l.who, fmt.Sprintf("%s -> error after %v%s: %s", what, took, kind, short(err.Error())))
	case resp.StatusCode != http.StatusOK:
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		reason := ""
		if s, ok := status.Parse(resp.Header.Get("Content-Type"), body); ok {
			reason = fmt.Sprintf(" %s: %s", s.Reason, short(s.Message))
		}
		if resp.StatusCode == http.StatusGone {
			l.mu.Lock()
			l.expired410++
			l.mu.Unlock()
		}
		l.tl.add(l.who, fmt.Sprintf("%s -> %d after %v%s", what, resp.StatusCode, took, reason))
	case watching:
		enc, ok := frame.EncodingFor(resp.Header.Get("Content-Type"))
		if !ok {
			l.tl.add(l.who, fmt.Sprintf("%s -> 200 %s (not scanned)", what, resp.Header.Get("Content-Type")))
			break
		}
		l.tl.add(l.who, fmt.Sprintf("%s -> 200 after %v", what, took))
		resp.Body = l.scan(what, resp.Body, enc)
	default:
		l.tl.add(l.who, fmt.Sprintf("%s -> 200 after %v", what, took))
	}
	return resp, err
}

// errClosedByCaller ends a scan when the caller closes the body before its end.
var errClosedByCaller = errors.New("closed by the caller")

// scan returns body as it is, while a goroutine reads a copy of it through a frame.Scanner.
func (l *requestLog) scan(what string, body io.ReadCloser, enc frame.Encoding) io.ReadCloser {
	pr, pw := io.Pipe()
	opened := time.Now()
	go func() {
		sc := frame.NewScanner(pr, enc, 0)
		events := 0
		var f frame.Frame
		for {
			if err := sc.Scan(&f); err != nil {
				pr.CloseWithError(err) // a writer blocked in the body's Read returns at once
				after := time.Since(opened).Round(100 * time.Millisecond)
				if errors.Is(err, io.EOF) {
					l.mu.Lock()
					l.cleanEnds = append(l.cleanEnds, time.Now())
					l.mu.Unlock()
					l.tl.add(l.who, fmt.Sprintf("%s ended after %v, %d events: clean EOF", what, after, events))
				} else {
					l.tl.add(l.who, fmt.Sprintf("%s ended after %v, %d events: %s", what, after, events, short(err.Error())))
				}
				return
			}
			events++
			if f.Event.Type == frame.Error {
				if f.Event.Code == http.StatusGone {
					l.mu.Lock()
					l.expired410++
					l.mu.Unlock()
				}
				l.tl.add(l.who, fmt.Sprintf("%s: ERROR event %d %s", what, f.Event.Code, f.Event.Reason))
			}
		}
	}()
	return &scannedBody{ReadCloser: body, copy: pw}
}

// scannedBody copies what its reader reads into a pipe, and its end as the pipe's end.
type scannedBody struct {
	io.ReadCloser
	copy *io.PipeWriter
}

func (b *scannedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.copy.Write(p[:n]) // fails only once the scan is over
	}
	if errors.Is(err, io.EOF) {
		b.copy.Close()
	} else if err != nil {
		b.copy.CloseWithError(err)
	}
	return n, err
}

func (b *scannedBody) Close() error {
	b.copy.CloseWithError(errClosedByCaller)
	return b.ReadCloser.Close()
}

// short is s cut to 200 bytes, for the timeline.
func short(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}
