package transport_test

// Outside tests of issue 30's off switches and initial-state observation, written from the public
// API and docs/configuration.md only: a real kubernetes.Clientset wrapped with kretry through
// rest.Config.Wrap, against a scripted loopback API server.

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kretry/kretry/transport"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

const outsideOpsNS = "ops"

// outsideOpsServer answers LISTs of ConfigMaps in namespace "ops": the first fail503 LIST
// requests (first pages) get a 503 Status without Retry-After, the rest a one-item list. A watch
// with sendInitialEvents=true gets the item, then the initial-events-end BOOKMARK (its first
// failWatch503 attempts get a 503); any watch then stays open until the client leaves.
type outsideOpsServer struct {
	srv          *httptest.Server
	mu           sync.Mutex
	fail503      int
	failWatch503 int
	lists        int // LIST requests seen
	watchLists   int // WATCH requests with sendInitialEvents=true seen
	watches      int // other WATCH requests seen
	log          []string
}

func newOutsideOpsServer(t *testing.T, fail503, failWatch503 int) *outsideOpsServer {
	t.Helper()
	s := &outsideOpsServer{fail503: fail503, failWatch503: failWatch503}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *outsideOpsServer) counts() (lists, watchLists, watches int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lists, s.watchLists, s.watches
}

func (s *outsideOpsServer) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.log...)
}

func outsideOps503(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusServiceUnavailable)
	fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the server is currently unable to handle the request","reason":"ServiceUnavailable","code":503}`)
}

const outsideOpsCM = `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","namespace":"ops","resourceVersion":"10","uid":"u-a"},"data":{"k":"v"}}`

func (s *outsideOpsServer) serve(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	s.mu.Lock()
	s.log = append(s.log, r.Method+" "+r.URL.RequestURI())
	s.mu.Unlock()
	if r.URL.Path != "/api/v1/namespaces/"+outsideOpsNS+"/configmaps" || r.Method != http.MethodGet {
		http.NotFound(w, r)
		return
	}
	isWatch := q.Get("watch") == "true" || q.Get("watch") == "1"
	if !isWatch {
		s.mu.Lock()
		s.lists++
		fail := q.Get("continue") == "" && s.fail503 > 0
		if fail {
			s.fail503--
		}
		s.mu.Unlock()
		if fail {
			outsideOps503(w)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"10"},"items":[%s]}`, outsideOpsCM)
		return
	}
	s.mu.Lock()
	initial := q.Get("sendInitialEvents") == "true"
	fail := false
	if initial {
		s.watchLists++
		if s.failWatch503 > 0 {
			s.failWatch503--
			fail = true
		}
	} else {
		s.watches++
	}
	s.mu.Unlock()
	if fail {
		outsideOps503(w)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	fl := w.(http.Flusher)
	if initial {
		fmt.Fprintf(w, `{"type":"ADDED","object":%s}`+"\n", outsideOpsCM)
		fmt.Fprint(w, `{"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":"10","annotations":{"k8s.io/initial-events-end":"true"}}}}`+"\n")
	}
	fl.Flush()
	<-r.Context().Done()
}

// outsideOpsObserver counts every event, including initial-state fetches.
type outsideOpsObserver struct {
	attempts, retries, giveUps, refusals atomic.Int64
	mu                                   sync.Mutex
	initial                              map[transport.Verb]int
}

func (o *outsideOpsObserver) ObserveAttempt(transport.AttemptEvent)      { o.attempts.Add(1) }
func (o *outsideOpsObserver) ObserveRetry(transport.RetryEvent)          { o.retries.Add(1) }
func (o *outsideOpsObserver) ObserveGiveUp(transport.GiveUpEvent)        { o.giveUps.Add(1) }
func (o *outsideOpsObserver) ObserveBudgetRefusal(transport.BudgetEvent) { o.refusals.Add(1) }
func (o *outsideOpsObserver) ObserveInitialState(e transport.InitialStateEvent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.initial == nil {
		o.initial = map[transport.Verb]int{}
	}
	o.initial[e.Verb]++
}

func (o *outsideOpsObserver) initialCounts() map[transport.Verb]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[transport.Verb]int{}
	for k, v := range o.initial {
		out[k] = v
	}
	return out
}

func (o *outsideOpsObserver) total() int64 {
	n := o.attempts.Load() + o.retries.Load() + o.giveUps.Load() + o.refusals.Load()
	for _, v := range o.initialCounts() {
		n += int64(v)
	}
	return n
}

var _ transport.InitialStateObserver = (*outsideOpsObserver)(nil)

// outsideOpsConfig is a kretry-wrapped rest.Config for s; the backoff is 1ms so that a retry
// costs no real time.
func outsideOpsConfig(s *outsideOpsServer, obs transport.Observer) *rest.Config {
	cfg := &rest.Config{Host: s.srv.URL, QPS: -1}
	cfg.Wrap(transport.Wrapper(transport.Config{
		InitialBackoff: time.Millisecond,
		MaxBackoff:     2 * time.Millisecond,
		Observer:       obs,
	}))
	return cfg
}

func outsideOpsClient(t *testing.T, cfg *rest.Config) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func outsideOpsList(cs *kubernetes.Clientset, ctx context.Context) error {
	_, err := cs.CoreV1().ConfigMaps(outsideOpsNS).List(ctx, metav1.ListOptions{})
	return err
}

// expectPassThrough: one 503 reaches the caller after exactly one request, the observer hears
// nothing.
func outsideOpsExpectPassThrough(t *testing.T, cs *kubernetes.Clientset, s *outsideOpsServer, obs *outsideOpsObserver) {
	t.Helper()
	err := outsideOpsList(cs, context.Background())
	if !apierrors.IsServiceUnavailable(err) {
		t.Errorf("LIST: got err %v, want the server's 503 (kretry off)", err)
	}
	if lists, _, _ := s.counts(); lists != 1 {
		t.Errorf("server saw %d LISTs, want 1 (no retry): %q", lists, s.requests())
	}
	if n := obs.total(); n != 0 {
		t.Errorf("observer heard %d events, want 0 (kretry off)", n)
	}
}

// expectRetried: the 503 is retried and the LIST succeeds after two requests.
func outsideOpsExpectRetried(t *testing.T, cs *kubernetes.Clientset, s *outsideOpsServer, obs *outsideOpsObserver) {
	t.Helper()
	if err := outsideOpsList(cs, context.Background()); err != nil {
		t.Errorf("LIST: %v, want success after kretry's retry (kretry on)", err)
	}
	if lists, _, _ := s.counts(); lists != 2 {
		t.Errorf("server saw %d LISTs, want 2 (one retry): %q", lists, s.requests())
	}
	if obs.retries.Load() != 1 {
		t.Errorf("observer heard %d retries, want 1", obs.retries.Load())
	}
	if got := obs.initialCounts()[transport.VerbList]; got != 1 {
		t.Errorf("observer heard %d initial-state LIST fetches, want 1", got)
	}
}

// TestOutsideOpsDisableEnvValues: docs/configuration.md: "With a true value (1, t, T, true,
// TRUE, True: Go's strconv.ParseBool) ... return the next RoundTripper itself ... Any other
// value, an unparsable one included, leaves kretry on."
func TestOutsideOpsDisableEnvValues(t *testing.T) {
	if transport.DisableEnv != "KRETRY_DISABLE" {
		t.Fatalf("DisableEnv = %q, docs say KRETRY_DISABLE", transport.DisableEnv)
	}
	off := []string{"1", "t", "T", "true", "TRUE", "True"}
	on := []string{"0", "f", "F", "false", "FALSE", "False", "", "yes", "on", "y", "2", "tRuE", " 1", "1 ", "disable"}
	for _, v := range off {
		t.Run(fmt.Sprintf("off=%q", v), func(t *testing.T) {
			t.Setenv(transport.DisableEnv, v)
			s := newOutsideOpsServer(t, 1, 0)
			obs := &outsideOpsObserver{}
			cs := outsideOpsClient(t, outsideOpsConfig(s, obs))
			outsideOpsExpectPassThrough(t, cs, s, obs)
		})
	}
	for _, v := range on {
		t.Run(fmt.Sprintf("on=%q", v), func(t *testing.T) {
			t.Setenv(transport.DisableEnv, v)
			s := newOutsideOpsServer(t, 1, 0)
			obs := &outsideOpsObserver{}
			cs := outsideOpsClient(t, outsideOpsConfig(s, obs))
			outsideOpsExpectRetried(t, cs, s, obs)
		})
	}
	t.Run("unset", func(t *testing.T) {
		t.Setenv(transport.DisableEnv, "x")
		os.Unsetenv(transport.DisableEnv)
		s := newOutsideOpsServer(t, 1, 0)
		obs := &outsideOpsObserver{}
		cs := outsideOpsClient(t, outsideOpsConfig(s, obs))
		outsideOpsExpectRetried(t, cs, s, obs)
	})
}

// TestOutsideOpsDisableEnvReadOnce: "It is read once per transport, when the transport is built
// ... changing it in a running process changes nothing for the clients it already built."
func TestOutsideOpsDisableEnvReadOnce(t *testing.T) {
	t.Run("set after the client is built: still kretry", func(t *testing.T) {
		os.Unsetenv(transport.DisableEnv)
		s := newOutsideOpsServer(t, 1, 0)
		obs := &outsideOpsObserver{}
		cs := outsideOpsClient(t, outsideOpsConfig(s, obs))
		t.Setenv(transport.DisableEnv, "1")
		outsideOpsExpectRetried(t, cs, s, obs)
	})
	t.Run("unset after the client is built: still off", func(t *testing.T) {
		t.Setenv(transport.DisableEnv, "1")
		s := newOutsideOpsServer(t, 1, 0)
		obs := &outsideOpsObserver{}
		cs := outsideOpsClient(t, outsideOpsConfig(s, obs))
		os.Unsetenv(transport.DisableEnv)
		outsideOpsExpectPassThrough(t, cs, s, obs)
	})
	t.Run("set after the client is built, then a second client from the same config", func(t *testing.T) {
		os.Unsetenv(transport.DisableEnv)
		s := newOutsideOpsServer(t, 1, 0)
		obs := &outsideOpsObserver{}
		cfg := outsideOpsConfig(s, obs)
		first := outsideOpsClient(t, cfg)
		t.Setenv(transport.DisableEnv, "true")
		second := outsideOpsClient(t, cfg) // built now: documented to read the variable now
		outsideOpsExpectPassThrough(t, second, s, obs)
		// the first client, built before, keeps kretry
		s.mu.Lock()
		s.fail503, s.lists = 1, 0
		s.mu.Unlock()
		if err := outsideOpsList(first, context.Background()); err != nil {
			t.Errorf("first client (built before the variable was set): %v, want kretry's retry", err)
		}
		if lists, _, _ := s.counts(); lists != 2 {
			t.Errorf("first client: server saw %d LISTs, want 2", lists)
		}
	})
	t.Run("transport.New directly", func(t *testing.T) {
		t.Setenv(transport.DisableEnv, "1")
		next := http.DefaultTransport
		if rt := transport.New(next, transport.Config{}); rt != next {
			t.Errorf("transport.New with %s=1 returned %T, want next itself", transport.DisableEnv, rt)
		}
		os.Unsetenv(transport.DisableEnv)
		if rt := transport.New(next, transport.Config{}); rt == next {
			t.Errorf("transport.New without %s returned next itself, want kretry", transport.DisableEnv)
		}
	})
}

// TestOutsideOpsWithoutRetry: "A request whose context comes from it is sent once and its answer
// (a 503 ...) reaches the caller as the server gave it, unseen by the Observer; the same client's
// other calls are retried as before."
func TestOutsideOpsWithoutRetry(t *testing.T) {
	os.Unsetenv(transport.DisableEnv)
	s := newOutsideOpsServer(t, 1, 0)
	obs := &outsideOpsObserver{}
	cs := outsideOpsClient(t, outsideOpsConfig(s, obs))

	err := outsideOpsList(cs, transport.WithoutRetry(context.Background()))
	if !apierrors.IsServiceUnavailable(err) {
		t.Errorf("LIST with WithoutRetry: err %v, want the 503", err)
	}
	if lists, _, _ := s.counts(); lists != 1 {
		t.Errorf("LIST with WithoutRetry: server saw %d LISTs, want 1", lists)
	}
	if n := obs.total(); n != 0 {
		t.Errorf("LIST with WithoutRetry: observer heard %d events, want 0", n)
	}

	// the same client, without the opt-out: retried
	s.mu.Lock()
	s.fail503, s.lists = 1, 0
	s.mu.Unlock()
	outsideOpsExpectRetried(t, cs, s, obs)

	// a context derived from a WithoutRetry one keeps the opt-out
	s.mu.Lock()
	s.fail503, s.lists = 1, 0
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(transport.WithoutRetry(context.Background()), time.Minute)
	defer cancel()
	before := obs.total()
	if err := outsideOpsList(cs, ctx); !apierrors.IsServiceUnavailable(err) {
		t.Errorf("LIST with a context derived from WithoutRetry: err %v, want the 503", err)
	}
	if lists, _, _ := s.counts(); lists != 1 {
		t.Errorf("derived context: server saw %d LISTs, want 1", lists)
	}
	if n := obs.total(); n != before {
		t.Errorf("derived context: observer heard %d events, want 0", n-before)
	}
}

// TestOutsideOpsWithoutRetryWatch: a watch opened under WithoutRetry whose establishment gets a
// 503 gets that 503; without it the watch is established.
func TestOutsideOpsWithoutRetryWatch(t *testing.T) {
	os.Unsetenv(transport.DisableEnv)
	s := newOutsideOpsServer(t, 0, 1)
	obs := &outsideOpsObserver{}
	cs := outsideOpsClient(t, outsideOpsConfig(s, obs))
	opts := metav1.ListOptions{Watch: true, SendInitialEvents: ptrBool(true), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, AllowWatchBookmarks: true}
	_, err := cs.CoreV1().ConfigMaps(outsideOpsNS).Watch(transport.WithoutRetry(context.Background()), opts)
	if !apierrors.IsServiceUnavailable(err) {
		t.Errorf("watch with WithoutRetry: err %v, want the 503", err)
	}
	if _, wl, _ := s.counts(); wl != 1 {
		t.Errorf("watch with WithoutRetry: server saw %d watch-lists, want 1", wl)
	}
	if n := obs.total(); n != 0 {
		t.Errorf("watch with WithoutRetry: observer heard %d events, want 0", n)
	}
	s.mu.Lock()
	s.failWatch503, s.watchLists = 1, 0
	s.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := cs.CoreV1().ConfigMaps(outsideOpsNS).Watch(ctx, opts)
	if err != nil {
		t.Fatalf("watch without the opt-out: %v, want kretry's retry", err)
	}
	ev := <-w.ResultChan()
	if ev.Type != "ADDED" {
		t.Errorf("first event %q, want ADDED", ev.Type)
	}
	w.Stop()
	if _, wl, _ := s.counts(); wl != 2 {
		t.Errorf("watch: server saw %d watch-lists, want 2", wl)
	}
	if got := obs.initialCounts(); got[transport.VerbWatch] != 1 || got[transport.VerbList] != 0 {
		t.Errorf("initial-state fetches %v, want watch=1 only (once per call, not per retry)", got)
	}
}

func ptrBool(b bool) *bool { return &b }

// TestOutsideOpsInformerInitialState: an informer's initial fetch, its first attempt answered
// 503, is one initial-state fetch: "once per call: kretry's own retries and resumes are not
// counted". Which form the informer uses depends on client-go's WatchListClient gate; the
// LIST form is also forced in a child process (KUBE_FEATURE_WatchListClient=false).
func TestOutsideOpsInformerInitialState(t *testing.T) {
	outsideOpsInformerRun(t)
	if os.Getenv("OUTSIDE_OPS_CHILD") != "" {
		return
	}
	for _, gate := range []string{"false", "true"} {
		t.Run("WatchListClient="+gate, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestOutsideOpsInformerInitialState$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), "OUTSIDE_OPS_CHILD=1", "KUBE_FEATURE_WatchListClient="+gate)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Errorf("child with KUBE_FEATURE_WatchListClient=%s failed: %v\n%s", gate, err, out)
			} else {
				t.Logf("child: %s", lastLines(string(out), 4))
			}
		})
	}
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, " | ")
}

func outsideOpsInformerRun(t *testing.T) {
	os.Unsetenv(transport.DisableEnv)
	s := newOutsideOpsServer(t, 1, 1) // the first LIST and the first watch-list get a 503
	obs := &outsideOpsObserver{}
	cs := outsideOpsClient(t, outsideOpsConfig(s, obs))
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(outsideOpsNS))
	inf := f.Core().V1().ConfigMaps().Informer()
	stop := make(chan struct{})
	f.Start(stop)
	ok := cache.WaitForCacheSync(stop, inf.HasSynced)
	close(stop)
	f.Shutdown()
	if !ok {
		t.Fatal("cache did not sync")
	}
	lists, wls, watches := s.counts()
	got := obs.initialCounts()
	t.Logf("server: %d LISTs, %d watch-lists, %d watches; initial-state fetches observed %v; retries %d; requests %q",
		lists, wls, watches, got, obs.retries.Load(), s.requests())
	switch {
	case wls > 0 && lists == 0: // streaming list, retried once
		if wls != 2 || got[transport.VerbWatch] != 1 || got[transport.VerbList] != 0 {
			t.Errorf("watch-list start: server saw %d watch-lists (want 2: 503 + retry), observed %v, want watch=1", wls, got)
		}
	case lists > 0 && wls == 0: // LIST start, retried once
		if lists != 2 || got[transport.VerbList] != 1 || got[transport.VerbWatch] != 0 {
			t.Errorf("LIST start: server saw %d LISTs (want 2: 503 + retry), observed %v, want list=1", lists, got)
		}
	default:
		t.Errorf("informer used both a watch-list (%d) and a LIST (%d): kretry's retry did not save the fallback; observed %v", wls, lists, got)
	}
	if r := obs.retries.Load(); r != 1 {
		t.Errorf("retries observed %d, want 1", r)
	}
}
