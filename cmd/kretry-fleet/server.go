package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// server is the fleet's API server: one namespace of ConfigMaps, LIST and
// WATCH in JSON (watch-lists included), an inflight limit on state fetches
// that answers 429 with Retry-After as kube-apiserver's max-inflight filter
// does, and the three faults of the scenarios: a restart (listener closed,
// every connection cut, then a 410 for every resourceVersion from before
// it), a load balancer dropping every connection, and an overload (every
// new request answered 429).
type server struct {
	addr      string
	namespace string
	// listCost is how long a state fetch holds its inflight seat: the
	// server's work for a LIST, which this server does not otherwise have.
	listCost time.Duration
	inflight chan struct{}

	mu       sync.Mutex
	rv       uint64
	floor    uint64 // watches from a resourceVersion below it get 410
	objects  map[string]*corev1.ConfigMap
	history  []event // changes after floor, in order
	watchers map[chan event]struct{}
	http     *http.Server
	conns    map[net.Conn]struct{}

	overloaded atomic.Bool
	start      time.Time
	bins       atomic.Pointer[bins]
	stats      serverStats
}

type event struct {
	rv   uint64
	line []byte // the JSON watch event, newline included
}

// serverStats counts what the server answered.
type serverStats struct {
	requests    atomic.Int64
	fetches     atomic.Int64 // LISTs and watch-lists: initial-state fetches
	watches     atomic.Int64
	throttled   atomic.Int64 // 429s answered
	expired     atomic.Int64 // 410s answered
	bytesServed atomic.Int64
}

// bins counts request arrivals per 100 ms: all of them, and the
// initial-state fetches among them.
type bins struct {
	start   time.Time
	counts  []atomic.Int64
	fetches []atomic.Int64
}

const binWidth = 100 * time.Millisecond

func newBins(start time.Time, span time.Duration) *bins {
	n := int(span/binWidth) + 1
	return &bins{start: start, counts: make([]atomic.Int64, n), fetches: make([]atomic.Int64, n)}
}

func (b *bins) add(now time.Time, fetch bool) {
	if i := int(now.Sub(b.start) / binWidth); i >= 0 && i < len(b.counts) {
		b.counts[i].Add(1)
		if fetch {
			b.fetches[i].Add(1)
		}
	}
}

func newServer(objects int, listCost time.Duration, inflight int) (*server, error) {
	s := &server{
		namespace: "fleet",
		listCost:  listCost,
		inflight:  make(chan struct{}, inflight),
		objects:   map[string]*corev1.ConfigMap{},
		watchers:  map[chan event]struct{}{},
		conns:     map[net.Conn]struct{}{},
		rv:        1,
	}
	for i := range objects {
		name := fmt.Sprintf("cm-%04d", i)
		s.rv++
		s.objects[name] = &corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.namespace, ResourceVersion: strconv.FormatUint(s.rv, 10)},
			Data:       map[string]string{"value": "0"},
		}
	}
	s.floor = s.rv
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s.addr = ln.Addr().String()
	s.serve(ln)
	return s, nil
}

// serve starts an http.Server on ln that tracks its connections.
func (s *server) serve(ln net.Listener) {
	srv := &http.Server{
		Handler: http.HandlerFunc(s.handle),
		ConnState: func(c net.Conn, state http.ConnState) {
			s.mu.Lock()
			defer s.mu.Unlock()
			switch state {
			case http.StateNew:
				s.conns[c] = struct{}{}
			case http.StateClosed, http.StateHijacked:
				delete(s.conns, c)
			}
		},
	}
	s.mu.Lock()
	s.http = srv
	s.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

// URL is where clients reach the server.
func (s *server) URL() string { return "http://" + s.addr }

// Close stops the server and ends every watch.
func (s *server) Close() {
	s.mu.Lock()
	srv := s.http
	s.mu.Unlock()
	_ = srv.Close()
}

// Restart takes the server down for down: the listener closes (new
// connections are refused) and every connection is cut; it then comes back
// with its watch history gone, so a watch from any earlier resourceVersion
// gets 410 Expired, as after a real kube-apiserver restart.
func (s *server) Restart(down time.Duration) {
	s.Close()
	time.Sleep(down)
	s.mu.Lock()
	s.write() // the restarted server's first resourceVersion
	s.floor = s.rv
	s.history = nil
	s.mu.Unlock()
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		panic(fmt.Sprintf("fleet server: listen again on %s: %v", s.addr, err))
	}
	s.serve(ln)
}

// DropConnections cuts every connection at once, as a load balancer that
// restarts does; the server itself stays up.
func (s *server) DropConnections() {
	s.mu.Lock()
	conns := make([]net.Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

// Overload answers every new LIST and WATCH with 429 for d, after cutting
// every connection (so that the fleet has to come back through it).
func (s *server) Overload(d time.Duration) {
	s.overloaded.Store(true)
	s.DropConnections()
	time.Sleep(d)
	s.overloaded.Store(false)
}

// Write changes one object and returns the new resourceVersion.
func (s *server) Write(i int) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writeObject(fmt.Sprintf("cm-%04d", i%len(s.objects)))
}

func (s *server) write() uint64 { return s.writeObject("cm-0000") }

func (s *server) writeObject(name string) uint64 {
	s.rv++
	cm := s.objects[name].DeepCopy()
	cm.ResourceVersion = strconv.FormatUint(s.rv, 10)
	cm.Data["value"] = cm.ResourceVersion
	s.objects[name] = cm
	e := event{rv: s.rv, line: eventLine("MODIFIED", cm)}
	s.history = append(s.history, e)
	for w := range s.watchers {
		select {
		case w <- e:
		default: // a watcher this far behind is cut; it resumes or relists
			close(w)
			delete(s.watchers, w)
		}
	}
	return s.rv
}

// RV is the current resourceVersion.
func (s *server) RV() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rv
}

func eventLine(kind string, obj any) []byte {
	raw, _ := json.Marshal(obj)
	line, _ := json.Marshal(metav1.WatchEvent{Type: kind, Object: runtime.RawExtension{Raw: raw}})
	return append(line, '\n')
}

func (s *server) handle(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	q := r.URL.Query()
	watch := q.Get("watch") == "true" || q.Get("watch") == "1"
	watchList := watch && q.Get("sendInitialEvents") == "true"
	s.stats.requests.Add(1)
	if b := s.bins.Load(); b != nil {
		b.add(now, !watch || watchList)
	}
	if r.URL.Path != "/api/v1/namespaces/"+s.namespace+"/configmaps" || r.Method != http.MethodGet {
		http.NotFound(w, r)
		return
	}
	if s.overloaded.Load() {
		s.tooManyRequests(w)
		return
	}
	if !watch || watchList {
		// A state fetch takes an inflight seat for its cost, or gets 429.
		select {
		case s.inflight <- struct{}{}:
		default:
			s.tooManyRequests(w)
			return
		}
		s.stats.fetches.Add(1)
		time.Sleep(s.listCost)
		<-s.inflight // a watch-list's seat is its initial state's, not its stream's
	}
	if !watch {
		s.serveList(w)
		return
	}
	s.stats.watches.Add(1)
	s.serveWatch(w, r, q.Get("resourceVersion"), watchList, q.Get("timeoutSeconds"))
}

// tooManyRequests answers as kube-apiserver's max-inflight filter does.
func (s *server) tooManyRequests(w http.ResponseWriter) {
	s.stats.throttled.Add(1)
	w.Header().Set("Retry-After", "1")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusTooManyRequests)
	n, _ := w.Write([]byte("Too many requests, please try again later.\n"))
	s.stats.bytesServed.Add(int64(n))
}

func (s *server) serveList(w http.ResponseWriter) {
	s.mu.Lock()
	list := corev1.ConfigMapList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMapList"}}
	list.ResourceVersion = strconv.FormatUint(s.rv, 10)
	for _, cm := range s.objects {
		list.Items = append(list.Items, *cm)
	}
	s.mu.Unlock()
	body, _ := json.Marshal(list)
	w.Header().Set("Content-Type", "application/json")
	n, _ := w.Write(body)
	s.stats.bytesServed.Add(int64(n))
}

func (s *server) serveWatch(w http.ResponseWriter, r *http.Request, rv string, watchList bool, timeout string) {
	ctx := r.Context()
	if seconds, err := strconv.Atoi(timeout); err == nil && seconds > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(seconds)*time.Second)
		defer cancel()
	}
	from, _ := strconv.ParseUint(rv, 10, 64)
	updates := make(chan event, 256)
	var initial [][]byte
	s.mu.Lock()
	floor := s.floor
	expired := !watchList && from != 0 && from < floor
	switch {
	case expired:
	case watchList || from == 0:
		for _, cm := range s.objects {
			initial = append(initial, eventLine("ADDED", cm))
		}
		if watchList {
			bookmark := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}}
			bookmark.ResourceVersion = strconv.FormatUint(s.rv, 10)
			bookmark.Annotations = map[string]string{metav1.InitialEventsAnnotationKey: "true"}
			initial = append(initial, eventLine("BOOKMARK", bookmark))
		}
	default:
		for _, e := range s.history {
			if e.rv > from {
				initial = append(initial, e.line)
			}
		}
	}
	if !expired {
		s.watchers[updates] = struct{}{}
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if _, ok := s.watchers[updates]; ok {
			delete(s.watchers, updates)
		}
		s.mu.Unlock()
	}()

	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	send := func(line []byte) bool {
		n, err := w.Write(line)
		s.stats.bytesServed.Add(int64(n))
		if flusher != nil {
			flusher.Flush()
		}
		return err == nil
	}
	if expired {
		s.stats.expired.Add(1)
		send(eventLine("ERROR", &metav1.Status{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"},
			Status:   metav1.StatusFailure, Code: http.StatusGone, Reason: metav1.StatusReasonExpired,
			Message: fmt.Sprintf("too old resource version: %d (%d)", from, floor),
		}))
		return
	}
	for _, line := range initial {
		if !send(line) {
			return
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-updates:
			if !ok || !send(e.line) {
				return
			}
		}
	}
}
