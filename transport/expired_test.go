package transport_test

import (
	"context"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kretry/kretry/internal/harness/fakeclock"
	"github.com/kretry/kretry/transport"
)

type connIndex struct{}

// balanced is a loopback HTTP/2 API server standing for two apiservers
// behind a round-robin load balancer, one of them freshly restarted: the
// connections that carry requests alternate between them, the first one
// reaching the fresh one, whose watch cache starts past resourceVersion 11.
// Every watch from 10 gets one event and ends early (a cut); a resume from
// 11 gets "too old resource version" from the fresh apiserver, the events
// from the other.
type balanced struct {
	*httptest.Server
	mu      sync.Mutex
	ordinal map[int32]int // accepted connection -> order in which it first carried a request
}

func newBalanced(t *testing.T) *balanced {
	b := &balanced{ordinal: map[int32]int{}}
	var accepted atomic.Int32
	b.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		name := r.URL.Query().Get("fieldSelector")
		switch {
		case r.URL.Query().Get("resourceVersion") == "10":
			fmt.Fprintf(w, `{"type":"ADDED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":%q,"namespace":"ns","resourceVersion":"11"}}}`+"\n", name)
		case b.fresh(r.Context().Value(connIndex{}).(int32)):
			fmt.Fprint(w, `{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old resource version: 11 (500)","reason":"Expired","code":410}}`+"\n")
		default:
			fmt.Fprintf(w, `{"type":"MODIFIED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":%q,"namespace":"ns","resourceVersion":"12"}}}`+"\n", name)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}
	}))
	b.EnableHTTP2 = true
	b.Config.ConnContext = func(ctx context.Context, _ net.Conn) context.Context {
		return context.WithValue(ctx, connIndex{}, accepted.Add(1))
	}
	b.StartTLS()
	t.Cleanup(b.Close)
	return b
}

// fresh reports whether the accepted connection conn reaches the fresh
// apiserver.
func (b *balanced) fresh(conn int32) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.ordinal[conn]; !ok {
		b.ordinal[conn] = len(b.ordinal)
	}
	return b.ordinal[conn]%2 == 0
}

// carried is how many connections carried a resume.
func (b *balanced) carried() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.ordinal)
}

// TestExpiredResumesBoundTheirConnections: watches over client-go's HTTP/2
// (golang.org/x/net/http2) whose resumes reach the fresh apiserver get there
// on a new connection and go on without a 410; and the connection that
// reached it is retired once. Without that bound every watch retired the
// connection the one before it had dialed, and dialed two of its own (2 per
// watch); with it, the watches after the first ride the new connection.
func TestExpiredResumesBoundTheirConnections(t *testing.T) {
	const watches = 10
	server := newBalanced(t)
	cfg := &rest.Config{Host: server.URL, TLSClientConfig: rest.TLSClientConfig{
		CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: server.Certificate().Raw}),
	}}
	cfg.Wrap(transport.Wrapper(transport.Config{Clock: fakeclock.New(epoch), Rand: func() float64 { return 0.5 }}))
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range watches { // one after the other, as watches break apart
		w, err := cs.CoreV1().Pods("ns").Watch(context.Background(), metav1.ListOptions{ResourceVersion: "10", FieldSelector: fmt.Sprintf("pod-%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		for _, want := range []string{"11", "12"} {
			if got := nextRV(t, w); got != want {
				t.Fatalf("watch %d: got %s, want the event at %s", i, got, want)
			}
		}
	}
	if n := server.carried(); n > 2 {
		t.Errorf("%d connections carried requests for %d watches, want the first and one more", n, watches)
	}
}

// nextRV is the resourceVersion of the watch's next event ("ERROR" for an
// ERROR event, "closed" when it ends).
func nextRV(t *testing.T, w watch.Interface) string {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			return "closed"
		}
		if obj, isObject := ev.Object.(metav1.Object); isObject {
			return obj.GetResourceVersion()
		}
		return string(ev.Type)
	case <-time.After(15 * time.Second):
		t.Fatal("no event")
		return ""
	}
}
