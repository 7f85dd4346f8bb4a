package transport_test

// Outside tests of issue 30's off switches and initial-state observation, written from the public
// API and docs/configuration.md only: a real kubernetes.Clientset wrapped with kretry through
// rest.Config.Wrap, against the rig's apiserver (outside_rig_test.go).

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/kretry/kretry/transport"
)

const outsideOpsNS = "ops"

// outsideOpsServer answers LISTs of ConfigMaps in namespace "ops": the next fail503 LIST
// requests (first pages) get a 503 Status without Retry-After, the rest a one-item list. A watch
// with sendInitialEvents=true gets the item, then the initial-events-end BOOKMARK (its next
// failWatch503 attempts get a 503); any watch then stays open until the client leaves.
type outsideOpsServer struct {
	*rigServer
	fail503, failWatch503 atomic.Int32
}

const outsideOpsCM = `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","namespace":"ops","resourceVersion":"10","uid":"u-a"},"data":{"k":"v"}}`

func newOutsideOpsServer(r *rig, fail503, failWatch503 int32) *outsideOpsServer {
	s := &outsideOpsServer{}
	s.fail503.Store(fail503)
	s.failWatch503.Store(failWatch503)
	unavailable := answerStatus(http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, "the server is currently unable to handle the request")
	s.rigServer = r.server("ops", serverOpts{plain: true}, func(q *rigRequest) rigAnswer {
		switch {
		case q.path != "/api/v1/namespaces/"+outsideOpsNS+"/configmaps":
			return answerStatus(http.StatusNotFound, metav1.StatusReasonNotFound, "not here")
		case q.kind == "list" && q.query.Get("continue") == "" && takeOne(&s.fail503),
			q.kind == "watch-list" && takeOne(&s.failWatch503):
			return unavailable
		case q.kind == "list":
			return func(w http.ResponseWriter, _ *http.Request, _ *rigRequest) {
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprintf(w, `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"10"},"items":[%s]}`, outsideOpsCM)
			}
		case q.kind == "watch-list":
			return func(w http.ResponseWriter, r *http.Request, q *rigRequest) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusOK)
				fmt.Fprintf(w, `{"type":"ADDED","object":%s}`+"\n", outsideOpsCM)
				fmt.Fprint(w, `{"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":"10","annotations":{"k8s.io/initial-events-end":"true"}}}}`+"\n")
				q.a.stay(w, r, q)
			}
		}
		return answerOpen
	})
	return s
}

// takeOne takes one from n if it is positive.
func takeOne(n *atomic.Int32) bool {
	for {
		v := n.Load()
		if v <= 0 {
			return false
		}
		if n.CompareAndSwap(v, v-1) {
			return true
		}
	}
}

// count is how many requests of kind the server saw.
func (s *outsideOpsServer) count(kind string) int { return len(s.requests(kind)) }

// outsideOpsConfig is a kretry-wrapped rest.Config for s, with the rig's clock and observer.
func outsideOpsConfig(r *rig, s *outsideOpsServer) *rest.Config {
	cfg := r.restConfig(s.url(), transport.Config{}, "")
	cfg.QPS = -1
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

// outsideOpsRig is a rig, its server (the first LIST answered 503) and a client through kretry.
func outsideOpsRig(t *testing.T) (*rig, *outsideOpsServer, *kubernetes.Clientset) {
	r := newRig(t)
	s := newOutsideOpsServer(r, 1, 0)
	return r, s, outsideOpsClient(t, outsideOpsConfig(r, s))
}

// expectPassThrough: one 503 reaches the caller after exactly one request, the observer hears
// nothing.
func outsideOpsExpectPassThrough(t *testing.T, r *rig, cs *kubernetes.Clientset, s *outsideOpsServer) {
	t.Helper()
	lists, heard := s.count("list"), r.obs.total()
	err := outsideOpsList(cs, r.ctx())
	if !apierrors.IsServiceUnavailable(err) {
		t.Errorf("LIST: got err %v, want the server's 503 (kretry off)", err)
	}
	if n := s.count("list") - lists; n != 1 {
		t.Errorf("server saw %d LISTs, want 1 (no retry): %v", n, s)
	}
	if n := r.obs.total() - heard; n != 0 {
		t.Errorf("observer heard %d events, want 0 (kretry off)", n)
	}
}

// expectRetried: the 503 is retried and the LIST succeeds after two requests.
func outsideOpsExpectRetried(t *testing.T, r *rig, cs *kubernetes.Clientset, s *outsideOpsServer) {
	t.Helper()
	lists, retries, initial := s.count("list"), r.obs.retried(""), r.obs.initialFetches(transport.VerbList)
	if err := outsideOpsList(cs, r.ctx()); err != nil {
		t.Errorf("LIST: %v, want success after kretry's retry (kretry on)", err)
	}
	if n := s.count("list") - lists; n != 2 {
		t.Errorf("server saw %d LISTs, want 2 (one retry): %v", n, s)
	}
	if n := r.obs.retried("") - retries; n != 1 {
		t.Errorf("observer heard %d retries, want 1", n)
	}
	if n := r.obs.initialFetches(transport.VerbList) - initial; n != 1 {
		t.Errorf("observer heard %d initial-state LIST fetches, want 1", n)
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
			r, s, cs := outsideOpsRig(t)
			outsideOpsExpectPassThrough(t, r, cs, s)
		})
	}
	for _, v := range on {
		t.Run(fmt.Sprintf("on=%q", v), func(t *testing.T) {
			t.Setenv(transport.DisableEnv, v)
			r, s, cs := outsideOpsRig(t)
			outsideOpsExpectRetried(t, r, cs, s)
		})
	}
	t.Run("unset", func(t *testing.T) {
		t.Setenv(transport.DisableEnv, "x")
		os.Unsetenv(transport.DisableEnv)
		r, s, cs := outsideOpsRig(t)
		outsideOpsExpectRetried(t, r, cs, s)
	})
}

// TestOutsideOpsDisableEnvReadOnce: "It is read once per transport, when the transport is built
// ... changing it in a running process changes nothing for the clients it already built."
func TestOutsideOpsDisableEnvReadOnce(t *testing.T) {
	t.Run("set after the client is built: still kretry", func(t *testing.T) {
		os.Unsetenv(transport.DisableEnv)
		r, s, cs := outsideOpsRig(t)
		t.Setenv(transport.DisableEnv, "1")
		outsideOpsExpectRetried(t, r, cs, s)
	})
	t.Run("unset after the client is built: still off", func(t *testing.T) {
		t.Setenv(transport.DisableEnv, "1")
		r, s, cs := outsideOpsRig(t)
		os.Unsetenv(transport.DisableEnv)
		outsideOpsExpectPassThrough(t, r, cs, s)
	})
	t.Run("set after the client is built, then a second client from the same config", func(t *testing.T) {
		os.Unsetenv(transport.DisableEnv)
		r := newRig(t)
		s := newOutsideOpsServer(r, 1, 0)
		cfg := outsideOpsConfig(r, s)
		first := outsideOpsClient(t, cfg)
		t.Setenv(transport.DisableEnv, "true")
		second := outsideOpsClient(t, cfg) // built now: documented to read the variable now
		outsideOpsExpectPassThrough(t, r, second, s)
		// the first client, built before, keeps kretry
		s.fail503.Store(1)
		lists := s.count("list")
		if err := outsideOpsList(first, r.ctx()); err != nil {
			t.Errorf("first client (built before the variable was set): %v, want kretry's retry", err)
		}
		if n := s.count("list") - lists; n != 2 {
			t.Errorf("first client: server saw %d LISTs, want 2", n)
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
	r, s, cs := outsideOpsRig(t)

	err := outsideOpsList(cs, transport.WithoutRetry(r.ctx()))
	if !apierrors.IsServiceUnavailable(err) {
		t.Errorf("LIST with WithoutRetry: err %v, want the 503", err)
	}
	if n := s.count("list"); n != 1 {
		t.Errorf("LIST with WithoutRetry: server saw %d LISTs, want 1", n)
	}
	if n := r.obs.total(); n != 0 {
		t.Errorf("LIST with WithoutRetry: observer heard %d events, want 0", n)
	}

	// the same client, without the opt-out: retried
	s.fail503.Store(1)
	outsideOpsExpectRetried(t, r, cs, s)

	// a context derived from a WithoutRetry one keeps the opt-out
	s.fail503.Store(1)
	ctx, cancel := context.WithTimeout(transport.WithoutRetry(r.ctx()), time.Minute)
	defer cancel()
	lists, before := s.count("list"), r.obs.total()
	if err := outsideOpsList(cs, ctx); !apierrors.IsServiceUnavailable(err) {
		t.Errorf("LIST with a context derived from WithoutRetry: err %v, want the 503", err)
	}
	if n := s.count("list") - lists; n != 1 {
		t.Errorf("derived context: server saw %d LISTs, want 1", n)
	}
	if n := r.obs.total() - before; n != 0 {
		t.Errorf("derived context: observer heard %d events, want 0", n)
	}
}

// TestOutsideOpsWithoutRetryWatch: a watch opened under WithoutRetry whose establishment gets a
// 503 gets that 503; without it the watch is established.
func TestOutsideOpsWithoutRetryWatch(t *testing.T) {
	os.Unsetenv(transport.DisableEnv)
	r := newRig(t)
	s := newOutsideOpsServer(r, 0, 1)
	cs := outsideOpsClient(t, outsideOpsConfig(r, s))
	opts := metav1.ListOptions{Watch: true, SendInitialEvents: ptrTo(true), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, AllowWatchBookmarks: true}
	_, err := cs.CoreV1().ConfigMaps(outsideOpsNS).Watch(transport.WithoutRetry(r.ctx()), opts)
	if !apierrors.IsServiceUnavailable(err) {
		t.Errorf("watch with WithoutRetry: err %v, want the 503", err)
	}
	if wl := s.count("watch-list"); wl != 1 {
		t.Errorf("watch with WithoutRetry: server saw %d watch-lists, want 1", wl)
	}
	if n := r.obs.total(); n != 0 {
		t.Errorf("watch with WithoutRetry: observer heard %d events, want 0", n)
	}
	s.failWatch503.Store(1)
	base := s.count("watch-list")
	ctx, cancel := context.WithCancel(r.ctx())
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
	if wl := s.count("watch-list") - base; wl != 2 {
		t.Errorf("watch: server saw %d watch-lists, want 2", wl)
	}
	if v, l := r.obs.initialFetches(transport.VerbWatch), r.obs.initialFetches(transport.VerbList); v != 1 || l != 0 {
		t.Errorf("initial-state fetches watch=%d list=%d, want watch=1 only (once per call, not per retry)", v, l)
	}
}

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
	r := newRig(t)
	s := newOutsideOpsServer(r, 1, 1) // the first LIST and the first watch-list get a 503
	cs := outsideOpsClient(t, outsideOpsConfig(r, s))
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
	lists, wls, watches := s.count("list"), s.count("watch-list"), s.count("watch")
	gotWatch, gotList := r.obs.initialFetches(transport.VerbWatch), r.obs.initialFetches(transport.VerbList)
	t.Logf("server: %d LISTs, %d watch-lists, %d watches; initial-state fetches observed watch=%d list=%d; retries %d; %v",
		lists, wls, watches, gotWatch, gotList, r.obs.retried(""), s)
	switch {
	case wls > 0 && lists == 0: // streaming list, retried once
		if wls != 2 || gotWatch != 1 || gotList != 0 {
			t.Errorf("watch-list start: server saw %d watch-lists (want 2: 503 + retry), observed watch=%d list=%d, want watch=1", wls, gotWatch, gotList)
		}
	case lists > 0 && wls == 0: // LIST start, retried once
		if lists != 2 || gotList != 1 || gotWatch != 0 {
			t.Errorf("LIST start: server saw %d LISTs (want 2: 503 + retry), observed watch=%d list=%d, want list=1", lists, gotWatch, gotList)
		}
	default:
		t.Errorf("informer used both a watch-list (%d) and a LIST (%d): kretry's retry did not save the fallback; observed watch=%d list=%d", wls, lists, gotWatch, gotList)
	}
	if n := r.obs.retried(""); n != 1 {
		t.Errorf("retries observed %d, want 1", n)
	}
}
