package watchretry_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"reflect"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kretry/kretry/internal/harness/fakeclock"
	"github.com/kretry/kretry/transport"
)

// fault is what the storm does to one watch request after the initial state.
type fault int

const (
	noFault         fault = iota
	unavailable           // 503 on establishment, no Retry-After
	internalError         // events, then an ERROR 500 event
	tornFrame             // events, then half a frame and a cut connection
	endsAtOnce            // a clean end before any event
	tooManyRequests       // events, then an ERROR 429 event
	outage                // events, a cut, then refused connections for longer than the window
)

// stormServer is a ConfigMap API server that changes one object before
// answering each watch and breaks watches as its fault script says.
type stormServer struct {
	t      *testing.T
	mu     sync.Mutex
	rv     int
	state  map[string]*corev1.ConfigMap
	log    []watch.Event
	script []fault

	lists, initialWatches, watches int
	// onOutage starts an outage: connections are refused from now on, for
	// a while (see refuser).
	onOutage func()
}

func newStormServer(t *testing.T, script ...fault) *stormServer {
	s := &stormServer{t: t, rv: 100, state: map[string]*corev1.ConfigMap{}, script: script}
	for i := 0; i < 5; i++ {
		s.mutate()
	}
	return s
}

// mutate makes the next change: create, update, or delete, in turn.
func (s *stormServer) mutate() {
	s.rv++
	rv := strconv.Itoa(s.rv)
	name := fmt.Sprintf("cm-%d", s.rv%4)
	cm, exists := s.state[name]
	typ := watch.Added
	switch {
	case exists && s.rv%3 == 0:
		typ = watch.Deleted
		delete(s.state, name)
		cm = cm.DeepCopy()
		cm.ResourceVersion = rv
	case exists:
		typ = watch.Modified
		cm = cm.DeepCopy()
		cm.ResourceVersion, cm.Data["rv"] = rv, rv
		s.state[name] = cm
	default:
		cm = configMap(name, rv)
		s.state[name] = cm
	}
	s.log = append(s.log, watch.Event{Type: typ, Object: cm.DeepCopy()})
}

func (s *stormServer) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	q := req.URL.Query()
	if q.Get("watch") == "" {
		s.list(w)
		return
	}
	s.mu.Lock()
	if send, _ := strconv.ParseBool(q.Get("sendInitialEvents")); send {
		s.initialWatches++
		var initial []byte
		for _, cm := range s.sorted() {
			initial = append(initial, event(s.t, jsonStream, watch.Added, cm)...)
		}
		initial = append(initial, event(s.t, jsonStream, watch.Bookmark, bookmark(strconv.Itoa(s.rv), true))...)
		s.mu.Unlock()
		// The initial state, then a clean end: the storm hits the watches after it.
		w.Header().Set("Content-Type", jsonStream)
		_, _ = w.Write(initial)
		return
	}
	s.watches++
	f := noFault
	if len(s.script) > 0 {
		f, s.script = s.script[0], s.script[1:]
	}
	if f == unavailable {
		s.mu.Unlock()
		writeStatus(w, errorStatus(503, metav1.StatusReasonServiceUnavailable, 0))
		return
	}
	if f == endsAtOnce {
		s.mu.Unlock()
		w.Header().Set("Content-Type", jsonStream)
		return
	}
	s.mutate()
	from, _ := strconv.Atoi(q.Get("resourceVersion"))
	var body []byte
	for _, e := range s.log {
		if rv, _ := strconv.Atoi(e.Object.(*corev1.ConfigMap).ResourceVersion); rv > from {
			body = append(body, event(s.t, jsonStream, e.Type, e.Object.(*corev1.ConfigMap))...)
		}
	}
	switch f {
	case internalError:
		body = append(body, event(s.t, jsonStream, watch.Error, errorStatus(500, metav1.StatusReasonInternalError, 0))...)
	case tooManyRequests:
		body = append(body, event(s.t, jsonStream, watch.Error, errorStatus(429, metav1.StatusReasonTooManyRequests, 1))...)
	case tornFrame, outage:
		s.mutate()
		last := s.log[len(s.log)-1]
		next := event(s.t, jsonStream, last.Type, last.Object.(*corev1.ConfigMap))
		body = append(body, next[:len(next)/2]...)
	}
	s.mu.Unlock()
	if f == outage {
		s.onOutage()
	}
	w.Header().Set("Content-Type", jsonStream)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
	w.(http.Flusher).Flush()
	switch f {
	case tornFrame, outage:
		panic(http.ErrAbortHandler) // cut the connection mid-frame
	case noFault:
		<-req.Context().Done()
	}
}

func (s *stormServer) list(w http.ResponseWriter) {
	s.mu.Lock()
	s.lists++
	list := &corev1.ConfigMapList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMapList"}, ListMeta: metav1.ListMeta{ResourceVersion: strconv.Itoa(s.rv)}}
	for _, cm := range s.sorted() {
		list.Items = append(list.Items, *cm)
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(list)
}

func (s *stormServer) sorted() []*corev1.ConfigMap {
	var out []*corev1.ConfigMap
	for _, cm := range s.state {
		out = append(out, cm)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// snapshot is the server's state as name → resourceVersion, and whether the
// fault script has run out.
func (s *stormServer) snapshot() (map[string]string, bool, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]string{}
	for name, cm := range s.state {
		out[name] = cm.ResourceVersion
	}
	return out, len(s.script) == 0, s.lists + s.initialWatches
}

func writeStatus(w http.ResponseWriter, st *metav1.Status) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(st.Code))
	_ = json.NewEncoder(w).Encode(st)
}

var storm = []fault{unavailable, internalError, tornFrame, endsAtOnce, tooManyRequests, unavailable, tornFrame}

// runInformer runs a stock SharedInformerFactory ConfigMap informer against
// a storm until done says so, and returns how many initial-state fetches
// (LISTs plus sendInitialEvents watches) the server saw by then.
func runInformer(t *testing.T, wrap func(*rest.Config), done func(cacheMatches, stormSpent bool, fetches int) bool) int {
	return runInformerThrough(t, newStormServer(t, storm...), wrap, done)
}

// runInformerThrough is runInformer against srv.
func runInformerThrough(t *testing.T, srv *stormServer, wrap func(*rest.Config), done func(cacheMatches, stormSpent bool, fetches int) bool) int {
	httpServer := httptest.NewServer(srv)
	defer httpServer.Close()
	cfg := &rest.Config{Host: httpServer.URL}
	if wrap != nil {
		wrap(cfg)
	}
	clients, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	factory := informers.NewSharedInformerFactoryWithOptions(clients, 0, informers.WithNamespace("demo"))
	informer := factory.Core().V1().ConfigMaps().Informer()
	stop := make(chan struct{})
	defer func() { close(stop); factory.Shutdown() }()
	factory.Start(stop)

	// Bounded only to turn a hang into a failure: the storm drives itself.
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		want, spent, fetches := srv.snapshot()
		got := map[string]string{}
		for _, obj := range informer.GetStore().List() {
			cm := obj.(*corev1.ConfigMap)
			got[cm.Name] = cm.ResourceVersion
		}
		if done(reflect.DeepEqual(got, want), spent, fetches) {
			return fetches
		}
		if time.Now().After(deadline) {
			t.Fatalf("cache %v, server %v, storm spent: %v, %d initial-state fetches", got, want, spent, fetches)
		}
	}
}

// TestInformerRidesOutStorm: through kretry a stock informer ends the storm
// with the right cache after exactly one initial-state fetch; without it,
// the same informer relists.
func TestInformerRidesOutStorm(t *testing.T) {
	t.Run("kretry", func(t *testing.T) {
		t.Parallel()
		clock := fakeclock.New(epoch)
		fetches := runInformer(t, func(cfg *rest.Config) {
			cfg.Wrap(transport.Wrapper(transport.Config{Clock: clock}))
		}, func(cacheMatches, stormSpent bool, fetches int) bool {
			return cacheMatches && stormSpent
		})
		if fetches != 1 {
			t.Fatalf("%d initial-state fetches through kretry, want exactly 1", fetches)
		}
	})
	t.Run("stock", func(t *testing.T) {
		t.Parallel()
		// client-go backs off for real between relists; the first relist is
		// the proof, there is no need to sit through the whole storm.
		relisted := func(_, _ bool, fetches int) bool { return fetches >= 2 }
		if fetches := runInformer(t, nil, relisted); fetches < 2 {
			t.Fatalf("%d initial-state fetches without kretry: the storm should have cost relists", fetches)
		}
	})
}

// refuser is the network below kretry during an outage: while armed, every
// request fails with a refused connection, as dials to a stopped apiserver do.
type refuser struct {
	next    http.RoundTripper
	refused atomic.Int32 // requests still to refuse
	total   atomic.Int32
}

func (r *refuser) RoundTrip(req *http.Request) (*http.Response, error) {
	if r.refused.Add(-1) >= 0 {
		r.total.Add(1)
		return nil, &url.Error{Op: "Get", URL: req.URL.String(), Err: &net.OpError{Op: "dial", Net: "tcp",
			Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}
	}
	return r.next.RoundTrip(req)
}

// TestInformerRidesOutLongOutage: the apiserver goes away for longer than
// the InternalErrorWindow. kretry's resume gives up, and must do so as a
// clean end of the stream: client-go then re-watches from its
// resourceVersion (backing off on the refused connections) instead of
// relisting. Before the fix the resume's connection error reached the
// reflector as a decoding error (ERROR 500 ClientWatchDecoding) and it
// relisted: 2 initial-state fetches.
func TestInformerRidesOutLongOutage(t *testing.T) {
	clock := fakeclock.New(epoch)
	// 0.8+1.6+3.2+6.4+12.8+5.2 = 30s: 7 refused attempts spend the window;
	// 10 make the outage outlast it, so the caller's re-watch meets the rest.
	const refusedAttempts = 10
	srv := newStormServer(t, noFaultThenOutage...)
	var down *refuser
	srv.onOutage = func() { down.refused.Store(refusedAttempts) }
	fetches := runInformerThrough(t, srv, func(cfg *rest.Config) {
		cfg.Wrap(func(next http.RoundTripper) http.RoundTripper {
			down = &refuser{next: next}
			return down
		})
		cfg.Wrap(transport.Wrapper(transport.Config{Clock: clock, Rand: func() float64 { return 0 }}))
	}, func(cacheMatches, stormSpent bool, _ int) bool {
		return cacheMatches && stormSpent && down.refused.Load() < 0
	})
	if fetches != 1 {
		t.Fatalf("%d initial-state fetches, want exactly 1: a give-up must not make client-go relist", fetches)
	}
	if n := down.total.Load(); n != refusedAttempts {
		t.Errorf("%d refused attempts, want %d", n, refusedAttempts)
	}
}

// noFaultThenOutage: a healthy watch, then the outage on the next one.
var noFaultThenOutage = []fault{outage, noFault}
