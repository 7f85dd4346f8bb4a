package demoserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// Config describes a demo server. The zero Config is a quiet server: 100 objects, a writer
// changing one every 50ms, bookmarks every second, no faults.
type Config struct {
	// Namespace holds the ConfigMap collection; default "demo".
	Namespace string
	// Objects is how many ConfigMaps exist at the start; the writer keeps the count
	// around it. Default 100; negative means none.
	Objects int
	// Seed seeds the writer and every client's fault schedule.
	Seed uint64
	// WriteInterval is the pause between the writer's changes; default 50ms. Negative: no
	// writer goroutine (tests call Step).
	WriteInterval time.Duration
	// BookmarkInterval is how often a caught-up watch that asked for bookmarks gets one;
	// default 1s (kube-apiserver: about a minute).
	BookmarkInterval time.Duration
	// FaultRate is the mean number of fault scenarios per second per client, counted
	// from the client's last progress; 0 injects none (InjectFault still works).
	FaultRate float64
	// FaultKinds are the scenarios drawn from, uniformly (list a kind twice to make it
	// twice as frequent); default AllFaults.
	FaultKinds []FaultKind
	// ThrottleBurst is how long a ThrottleBurst answers 429; default 2s.
	ThrottleBurst time.Duration
	// Hold keeps the writer and the fault schedules still until [Server.Begin], so that
	// clients can take their initial state from a server that stands still.
	Hold bool
	// OnFault, if set, is called for every fault scenario injected. It must not block.
	OnFault func(Fault)
}

// Server is the demo API server. It serves one ConfigMap collection on loopback over plain
// HTTP: LIST (JSON or protobuf, paged, with continue tokens that expire on compaction),
// WATCH (JSON or protobuf stream, bookmarks, watch-list, timeoutSeconds, 410 Expired for
// RVs older than the history), GET of one object, /version and legacy discovery.
type Server struct {
	cfg    Config
	store  *store
	http   *httptest.Server
	ctx    context.Context // ends every watch on Close
	cancel context.CancelFunc

	writerStop chan struct{}
	writerDone chan struct{}
	writerGo   chan struct{} // closed by Begin
	stopWriter sync.Once

	mu          sync.Mutex
	clients     map[string]*client
	faultsEnded bool
	begun       bool          // the fault schedules run (Begin, or no Hold)
	unavailable time.Time     // Rollout: LISTs and watches before it get 503
	dropped     chan struct{} // closed (and replaced) when a Rollout cuts every watch
	rollouts    uint64        // Rollouts so far
}

// client is what the server keeps per User-Agent.
type client struct {
	name     string
	schedule *schedule
	stats    counters
	floor    atomic.Uint64 // the client's own compaction floor (Compaction faults)
	watching atomic.Int64  // watches being served now
	rollout  atomic.Uint64 // the last Rollout recorded for the client
	// expiredFrom is the resourceVersion (plus one) of the last watch
	// answered 410: a watch retried at the same point is not a new 410.
	expiredFrom atomic.Uint64
}

// counters are the live counts behind Stats.
type counters struct {
	requests, lists, listPages, watchLists, watches atomic.Int64
	bytesSent, fetchBytes, events, bookmarks        atomic.Int64
	expired, expiredRepeats, rejected               atomic.Int64
	faults                                          [numFaultKinds + 1]atomic.Int64
}

// Stats counts what the server did for one client (one User-Agent).
type Stats struct {
	// Requests is every HTTP request, rejected ones included.
	Requests int64
	// Lists is LIST requests answered 200 without a continue token: full-state fetches.
	Lists int64
	// ListPages is LIST continuation pages answered 200.
	ListPages int64
	// WatchLists is watch-list requests (sendInitialEvents=true) answered 200: they cost
	// the server a full-state fetch too.
	WatchLists int64
	// Watches is every watch answered 200, watch-lists included.
	Watches int64
	// BytesSent is response body bytes written, partial frames included.
	BytesSent int64
	// FetchBytes is the part of BytesSent that initial-state fetches cost: LIST bodies
	// (continuation pages included) and the initial state of watch-lists.
	FetchBytes int64
	// Events is ADDED, MODIFIED and DELETED events written.
	Events int64
	// Bookmarks is BOOKMARK events written.
	Bookmarks int64
	// Expired is 410 Expired answers: in-stream ERROR events and expired continue tokens.
	// A watch from the resourceVersion the last 410 answered (a client retrying its resume
	// on a new connection, as kretry does in case a load balancer reaches another
	// apiserver) counts in ExpiredRepeats instead: one point gone is one 410 here.
	Expired int64
	// ExpiredRepeats is the watches answered 410 again at the resourceVersion just answered
	// 410.
	ExpiredRepeats int64
	// Rejected is LISTs and watch establishments answered 503 or 429 by a fault.
	Rejected int64
	// Faults counts the fault scenarios injected, by kind.
	Faults map[FaultKind]int64
}

// InitialStateFetches is LISTs plus watch-lists: every time the client made the server
// send it the whole collection.
func (s Stats) InitialStateFetches() int64 { return s.Lists + s.WatchLists }

// FaultsInjected is the number of fault scenarios of every kind.
func (s Stats) FaultsInjected() int64 {
	var total int64
	for _, n := range s.Faults {
		total += n
	}
	return total
}

// Start starts a server on a free loopback port.
func Start(cfg Config) *Server {
	if cfg.Namespace == "" {
		cfg.Namespace = "demo"
	}
	switch {
	case cfg.Objects == 0:
		cfg.Objects = 100
	case cfg.Objects < 0:
		cfg.Objects = 0
	}
	if cfg.WriteInterval == 0 {
		cfg.WriteInterval = 50 * time.Millisecond
	}
	if cfg.BookmarkInterval <= 0 {
		cfg.BookmarkInterval = time.Second
	}
	if cfg.FaultKinds == nil {
		cfg.FaultKinds = AllFaults
	}
	if cfg.ThrottleBurst <= 0 {
		cfg.ThrottleBurst = 2 * time.Second
	}
	s := &Server{
		cfg:        cfg,
		store:      newStore(cfg.Namespace, cfg.Objects, cfg.Seed),
		clients:    map[string]*client{},
		writerStop: make(chan struct{}),
		writerDone: make(chan struct{}),
		writerGo:   make(chan struct{}),
		dropped:    make(chan struct{}),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.http = httptest.NewServer(s) // binds 127.0.0.1 only
	if cfg.WriteInterval > 0 {
		go s.write(cfg.WriteInterval)
	} else {
		close(s.writerDone)
	}
	if !cfg.Hold {
		s.Begin()
	}
	return s
}

// Begin starts the writer and the fault schedules of a server started with Hold; on any
// other server it does nothing. It returns the RV the state stood at.
func (s *Server) Begin() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	current, _ := s.store.versions()
	if s.begun {
		return current
	}
	s.begun = true
	close(s.writerGo)
	if !s.faultsEnded {
		for _, c := range s.clients {
			c.schedule.start(s.cfg.FaultRate)
		}
	}
	return current
}

// URL is the server's base URL, http://127.0.0.1:port.
func (s *Server) URL() string { return s.http.URL }

// Namespace is the namespace of the ConfigMap collection.
func (s *Server) Namespace() string { return s.cfg.Namespace }

// RESTConfig returns a client configuration for this server whose requests carry
// userAgent, the name the server counts them under.
func (s *Server) RESTConfig(userAgent string) *rest.Config {
	return &rest.Config{Host: s.http.URL, UserAgent: userAgent}
}

// Close stops the writer, ends every watch and shuts the server down.
func (s *Server) Close() {
	s.StopWriter()
	s.cancel()
	s.http.CloseClientConnections()
	s.http.Close()
}

// StopWriter stops the writer goroutine and waits for it; the state no longer changes
// unless Step is called.
func (s *Server) StopWriter() {
	s.stopWriter.Do(func() { close(s.writerStop) })
	<-s.writerDone
}

// StopFaults stops fault injection for every client, now and later; answers already
// queued are dropped.
func (s *Server) StopFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faultsEnded = true
	s.unavailable = time.Time{}
	for _, c := range s.clients {
		c.schedule.stop()
	}
}

// Step makes one seeded change (create, update or delete) and returns its RV.
func (s *Server) Step() string { return strconv.FormatUint(s.store.step(), 10) }

// Compact moves the history floor to the current RV: watches from older RVs and continue
// tokens issued before now get 410 Expired.
func (s *Server) Compact() string {
	return strconv.FormatUint(s.store.compactNow(), 10)
}

// Rollout cuts every watch past its initial state (those still sending it are cut at
// their first change after it) and answers every LIST and watch establishment 503 for d,
// as an apiserver going away in a rolling upgrade. A client gets a Rollout fault when its
// watch is cut or, if it had none open, at its first 503; every client's schedule waits
// for its progress again (a scenario armed before would otherwise hit the first frame
// after the rollout). After StopFaults it does nothing.
func (s *Server) Rollout(d time.Duration) {
	s.mu.Lock()
	if s.faultsEnded {
		s.mu.Unlock()
		return
	}
	s.unavailable = time.Now().Add(d)
	close(s.dropped)
	s.dropped = make(chan struct{})
	s.rollouts++
	clients := make([]*client, 0, len(s.clients))
	for _, c := range s.clients {
		c.schedule.restart()
		if c.watching.Load() > 0 {
			clients = append(clients, c)
		}
	}
	rollout := s.rollouts
	s.mu.Unlock()
	for _, c := range clients {
		s.recordRollout(c, rollout)
	}
}

// recordRollout records the Rollout fault for c once per rollout.
func (s *Server) recordRollout(c *client, rollout uint64) {
	if c.rollout.Swap(rollout) != rollout {
		s.recordFault(c, Rollout)
	}
}

// rollingOut reports whether a Rollout answers c's requests 503 now, recording the fault
// for c if this is its first 503, and returns the channel that the next Rollout closes.
func (s *Server) rollingOut(c *client, now time.Time) (unavailable bool, dropped <-chan struct{}) {
	s.mu.Lock()
	unavailable, dropped, rollout := now.Before(s.unavailable), s.dropped, s.rollouts
	s.mu.Unlock()
	if unavailable {
		s.recordRollout(c, rollout)
	}
	return unavailable, dropped
}

// InjectFault arms one fault scenario for the client with that User-Agent at its next
// opportunity (the next watch request, or the next frame of a watch past its initial
// state), whatever the fault rate.
func (s *Server) InjectFault(userAgent string, kind FaultKind) {
	s.client(userAgent).schedule.inject(kind)
}

// Stats returns the counts for the client with that User-Agent (zero if never seen).
func (s *Server) Stats(userAgent string) Stats {
	c := s.client(userAgent)
	st := Stats{
		Requests:       c.stats.requests.Load(),
		Lists:          c.stats.lists.Load(),
		ListPages:      c.stats.listPages.Load(),
		WatchLists:     c.stats.watchLists.Load(),
		Watches:        c.stats.watches.Load(),
		BytesSent:      c.stats.bytesSent.Load(),
		FetchBytes:     c.stats.fetchBytes.Load(),
		Events:         c.stats.events.Load(),
		Bookmarks:      c.stats.bookmarks.Load(),
		Expired:        c.stats.expired.Load(),
		ExpiredRepeats: c.stats.expiredRepeats.Load(),
		Rejected:       c.stats.rejected.Load(),
		Faults:         map[FaultKind]int64{},
	}
	for kind := FaultKind(1); int(kind) <= numFaultKinds; kind++ {
		if n := c.stats.faults[kind].Load(); n > 0 {
			st.Faults[kind] = n
		}
	}
	return st
}

// Object is the part of a ConfigMap the cache == server check compares.
type Object struct {
	ResourceVersion string
	Data            map[string]string
}

// State is the collection at one RV.
type State struct {
	ResourceVersion string
	Objects         map[string]Object
}

// State returns the current state of the collection.
func (s *Server) State() State {
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	st := State{
		ResourceVersion: strconv.FormatUint(s.store.rv, 10),
		Objects:         make(map[string]Object, len(s.store.objects)),
	}
	for name, obj := range s.store.objects {
		st.Objects[name] = ObjectOf(obj)
	}
	return st
}

// ObjectOf reduces a ConfigMap to what the state comparison looks at.
func ObjectOf(cm *corev1.ConfigMap) Object {
	data := make(map[string]string, len(cm.Data))
	for k, v := range cm.Data {
		data[k] = v
	}
	return Object{ResourceVersion: cm.ResourceVersion, Data: data}
}

// client returns the per-User-Agent record, creating it on first sight. Every client's
// schedule is seeded alike, so clients compared side by side face the same sequence.
func (s *Server) client(userAgent string) *client {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.clients[userAgent]
	if !ok {
		rate := s.cfg.FaultRate
		if s.faultsEnded || !s.begun {
			rate = 0 // Begin sets it
		}
		c = &client{name: userAgent, schedule: newSchedule(s.cfg.Seed, rate, s.cfg.FaultKinds, s.cfg.ThrottleBurst)}
		s.clients[userAgent] = c
	}
	return c
}

func (s *Server) write(interval time.Duration) {
	defer close(s.writerDone)
	select {
	case <-s.writerStop:
		return
	case <-s.writerGo:
	}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-s.writerStop:
			return
		case <-ticker.C:
			s.store.step()
		}
	}
}

// recordFault counts a scenario and reports it.
func (s *Server) recordFault(c *client, kind FaultKind) {
	c.stats.faults[kind].Add(1)
	if s.cfg.OnFault != nil {
		current, _ := s.store.versions()
		s.cfg.OnFault(Fault{Client: c.name, Kind: kind, At: time.Now(), ResourceVersion: current})
	}
}

// ServeHTTP routes a request. Only GET is served: the demo collection is read-only to
// clients.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c := s.client(r.UserAgent())
	c.stats.requests.Add(1)
	cw := &countingWriter{ResponseWriter: w, bytes: &c.stats.bytesSent}
	w = cw

	switch r.URL.Path {
	case "/version", "/version/":
		serveVersion(w)
		return
	case "/api", "/api/":
		serveAPIVersions(w, r)
		return
	case "/api/v1", "/api/v1/":
		serveAPIResources(w)
		return
	case "/apis", "/apis/":
		serveAPIGroups(w)
		return
	}

	cd, ok := negotiate(r.Header.Get("Accept"))
	if !ok {
		http.Error(w, "only application/json and application/vnd.kubernetes.protobuf are served", http.StatusNotAcceptable)
		return
	}
	if r.Method != http.MethodGet {
		writeStatus(w, cd, apierrors.NewMethodNotSupported(schema.GroupResource{Resource: "configmaps"}, r.Method))
		return
	}
	name, isCollection, found := s.route(r.URL.Path)
	if !found {
		writeStatus(w, cd, apierrors.NewNotFound(schema.GroupResource{}, r.URL.Path))
		return
	}
	query := r.URL.Query()
	switch {
	case !isCollection:
		s.serveGet(w, cd, name)
	case isWatch(query):
		s.serveWatch(cw, r, cd, c, query)
	default:
		if s.rejectList(w, cd, c) {
			return
		}
		s.serveList(cw, cd, c, query)
	}
}

// route matches /api/v1/configmaps and /api/v1/namespaces/{ns}/configmaps[/{name}] for
// the server's namespace. The legacy /api/v1/watch/... paths are not served.
func (s *Server) route(path string) (name string, isCollection, found bool) {
	if path == "/api/v1/configmaps" {
		return "", true, true
	}
	rest, ok := strings.CutPrefix(path, "/api/v1/namespaces/"+s.cfg.Namespace+"/configmaps")
	switch {
	case !ok:
		return "", false, false
	case rest == "" || rest == "/":
		return "", true, true
	case strings.Count(rest, "/") == 1:
		return rest[1:], false, true
	}
	return "", false, false
}

func (s *Server) serveGet(w http.ResponseWriter, cd codec, name string) {
	obj := s.store.get(name)
	if obj == nil {
		writeStatus(w, cd, apierrors.NewNotFound(corev1.Resource("configmaps"), name))
		return
	}
	cd.writeObject(w, http.StatusOK, obj)
}

// writeStatus writes an API error as the apiserver does: a Status in the negotiated type.
func writeStatus(w http.ResponseWriter, cd codec, err *apierrors.StatusError) {
	status := err.Status()
	cd.writeObject(w, int(status.Code), &status)
}

// rejectList answers a LIST 503 during a Rollout or 429 during the client's
// ThrottleBurst, and reports whether it did.
func (s *Server) rejectList(w http.ResponseWriter, cd codec, c *client) bool {
	now := time.Now()
	kind := FaultKind(0)
	if unavailable, _ := s.rollingOut(c, now); unavailable {
		kind = Unavailable
	} else if c.schedule.throttled(now) {
		kind = ThrottleBurst
	}
	if kind == 0 {
		return false
	}
	c.stats.rejected.Add(1)
	rejectEstablishment(w, cd, kind)
	return true
}

// floor is the compaction floor for c: the server's, or c's own if higher.
func (s *Server) floor(c *client) (current, floor uint64) {
	current, floor = s.store.versions()
	return current, max(floor, c.floor.Load())
}

// Change is one write in the server's history.
type Change struct {
	// ResourceVersion is the RV the write created.
	ResourceVersion uint64
	// Type is Added, Modified or Deleted.
	Type watch.EventType
	// Name is the ConfigMap's name.
	Name string
}

// ChangesAfter returns every write after rv, in order: what a watch from rv should see.
func (s *Server) ChangesAfter(rv uint64) []Change {
	var out []Change
	for {
		changes, _, _ := s.store.since(rv, 1000)
		if len(changes) == 0 {
			return out
		}
		for _, ch := range changes {
			out = append(out, Change{ResourceVersion: ch.rv, Type: ch.kind, Name: ch.object.Name})
		}
		rv = changes[len(changes)-1].rv
	}
}

// countingWriter counts body bytes per client (and per response, in written) and keeps
// Flush reachable.
type countingWriter struct {
	http.ResponseWriter
	bytes   *atomic.Int64
	written int64
}

func (w *countingWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	w.bytes.Add(int64(n))
	w.written += int64(n)
	return n, err
}

// Flush sends buffered bytes to the client.
func (w *countingWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the underlying writer.
func (w *countingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// isWatch reads the watch parameter as kube-apiserver does
// (runtime.Convert_Slice_string_To_bool): false only when absent, "0" or
// "false" in any case, so the Python client's "watch=True" is a watch.
func isWatch(query url.Values) bool {
	values, ok := query["watch"]
	if !ok {
		return false
	}
	var watch bool
	_ = runtime.Convert_Slice_string_To_bool(&values, &watch, nil) // never fails
	return watch
}
