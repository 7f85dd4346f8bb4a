package watchretry_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/watch"

	"github.com/kretry/kretry/internal/harness/fakeclock"
	"github.com/kretry/kretry/internal/policy"
	"github.com/kretry/kretry/watchretry"
)

// connLog records, per connection of a test server, the states it went
// through and the requests it carried.
type connLog struct {
	mu     sync.Mutex
	states map[string][]http.ConnState
	reqs   []served
}

// served is one request as the server got it.
type served struct {
	conn  string // the client's address: the connection
	close bool   // it asked for its connection to be closed after it
	rv    string
	// statesBefore is how many states its connection had gone through
	// when it arrived.
	statesBefore int
}

func newConnLog() *connLog { return &connLog{states: map[string][]http.ConnState{}} }

func (l *connLog) track(c net.Conn, s http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.states[c.RemoteAddr().String()] = append(l.states[c.RemoteAddr().String()], s)
}

// arrived records r and returns how many requests came before it.
func (l *connLog) arrived(r *http.Request) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reqs = append(l.reqs, served{conn: r.RemoteAddr, close: r.Close, rv: r.URL.Query().Get("resourceVersion"), statesBefore: len(l.states[r.RemoteAddr])})
	return len(l.reqs) - 1
}

// after returns the states request i's connection went through after it
// arrived.
func (l *connLog) after(i int) []http.ConnState {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.reqs[i]
	return append([]http.ConnState(nil), l.states[r.conn][r.statesBefore:]...)
}

// closed returns the connections that were closed.
func (l *connLog) closed() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var closed []string
	for conn, states := range l.states {
		if states[len(states)-1] == http.StateClosed {
			closed = append(closed, conn)
		}
	}
	return closed
}

func (l *connLog) requests() []served {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]served(nil), l.reqs...)
}

func (l *connLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fmt.Sprintf("requests %+v, connections %v", l.reqs, l.states)
}

// tooOldAnswer is a watch cache's 410 for a resume at rv, oldest being S.
func tooOldAnswer(w http.ResponseWriter, rv, oldest string) {
	body := fmt.Sprintf(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: %s (%s)","reason":"Expired","code":410}`, rv, oldest)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusGone)
	io.WriteString(w, body)
}

// TestA410sHTTP1ConnectionNeverReachesThePool: over HTTP/1.1, a resume
// answered 410 by a watch cache that starts past the resume point is
// retried on a new connection, and the connection that brought the 410 is
// closed after it, never handed back to net/http's pool, where the retry or
// any other request on the shared transport could take it. Fails before:
// the 410 was read to its end with the connection kept alive (the server
// saw it go idle), and closed only later.
func TestA410sHTTP1ConnectionNeverReachesThePool(t *testing.T) {
	conns := newConnLog()
	first := event(t, jsonStream, watch.Added, configMap("a", "101"))
	second := event(t, jsonStream, watch.Modified, configMap("a", "102"))
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch conns.arrived(r) {
		case 0: // the watch: an event, then an early end
			w.Header().Set("Content-Type", jsonStream)
			w.Write(first)
		case 1: // its resume reaches a fresh apiserver
			tooOldAnswer(w, "101", "200")
		default: // the search's retry reaches one that holds the point
			w.Header().Set("Content-Type", jsonStream)
			w.Write(second)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}
	}))
	srv.Config.ConnState = conns.track
	srv.Start()
	defer srv.Close()

	rt := watchretry.NewForTest(http.DefaultTransport.(*http.Transport).Clone(),
		watchretry.TestConfig{Policy: policy.New(policy.Config{Clock: fakeclock.New(epoch), Rand: func() float64 { return 0.5 }})})
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/namespaces/demo/configmaps?watch=true&resourceVersion=100", nil)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(first)+len(second))
	if _, err := io.ReadFull(resp.Body, got); err != nil || string(got) != string(first)+string(second) {
		t.Fatalf("read %q, %v; want both events", got, err)
	}
	resp.Body.Close()

	reqs := conns.requests()
	if len(reqs) != 3 {
		t.Fatalf("want the watch, its resume and the search's retry: %s", conns)
	}
	for _, s := range conns.after(1) {
		if s == http.StateIdle {
			t.Errorf("the 410's connection went back to the pool (idle): %s", conns)
		}
	}
	if !reqs[1].close || !reqs[2].close {
		t.Errorf("want every resume over HTTP/1.1 to ask for its connection's close: %s", conns)
	}
	if reqs[2].conn == reqs[1].conn {
		t.Errorf("the search's retry rode the 410's connection: %s", conns)
	}
}

// TestSearchOverHTTP2TouchesOnlyThe410sConnection: over HTTP/2, the
// search's retry retires the connection that brought the 410 and nothing
// else: another idle connection of the same transport stays open. Fails
// before: every idle connection of the transport was closed on each retry.
func TestSearchOverHTTP2TouchesOnlyThe410sConnection(t *testing.T) {
	other := newConnLog()
	bystander := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		other.arrived(r)
		io.WriteString(w, "{}")
	}))
	bystander.EnableHTTP2 = true
	bystander.Config.ConnState = other.track
	bystander.Config.ErrorLog = log.New(io.Discard, "", 0)
	bystander.StartTLS()
	defer bystander.Close()

	conns := newConnLog()
	first := event(t, jsonStream, watch.Added, configMap("a", "101"))
	second := event(t, jsonStream, watch.Modified, configMap("a", "102"))
	var gone sync.Map // the connections that answered a 410: the fresh apiserver's
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := conns.arrived(r)
		_, fresh := gone.Load(r.RemoteAddr)
		switch {
		case n == 0:
			w.Header().Set("Content-Type", jsonStream)
			w.Write(first)
		case n == 1 || fresh:
			gone.Store(r.RemoteAddr, true)
			tooOldAnswer(w, "101", "200")
		default:
			w.Header().Set("Content-Type", jsonStream)
			w.Write(second)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}
	}))
	srv.EnableHTTP2 = true
	srv.Config.ConnState = conns.track
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()

	tr := srv.Client().Transport.(*http.Transport).Clone()
	tr.TLSClientConfig.InsecureSkipVerify = true // two servers, two test certificates
	defer tr.CloseIdleConnections()
	// An idle connection of the same transport, to another server.
	bresp, err := (&http.Client{Transport: tr}).Get(bystander.URL)
	if err != nil || bresp.ProtoMajor != 2 {
		t.Fatalf("precondition: %v, %v; want an HTTP/2 connection", bresp, err)
	}
	io.Copy(io.Discard, bresp.Body)
	bresp.Body.Close()

	rt := watchretry.NewForTest(tr, watchretry.TestConfig{Policy: policy.New(policy.Config{Clock: fakeclock.New(epoch), Rand: func() float64 { return 0.5 }})})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api/v1/namespaces/demo/configmaps?watch=true&resourceVersion=100", nil)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(first)+len(second))
	if _, err := io.ReadFull(resp.Body, got); err != nil || string(got) != string(first)+string(second) {
		t.Fatalf("read %q, %v; want both events: %s", got, err, conns)
	}
	resp.Body.Close()
	if closed := other.closed(); len(closed) > 0 {
		t.Errorf("the idle connection to another server was closed: %s", other)
	}
}
