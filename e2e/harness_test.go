//go:build e2e

package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/kretry/kretry/internal/harness/apiserver"
	"github.com/kretry/kretry/internal/harness/cmwriter"
	"github.com/kretry/kretry/internal/harness/faultproxy"
	"github.com/kretry/kretry/transport"
)

// Servers of the shared cluster.
const (
	serverA       = 0 // default flags: random cuts, failover primary, restart
	serverLimited = 1 // request-limit mode: 429 bursts
	serverC       = 2 // failover secondary, writer while A is down; also serves CBOR (cbor-cuts)
	serverLagging = 3 // reaches etcd through etcdProxy, which can stall it: 504 TooLarge
)

var (
	clusterOnce sync.Once
	cluster     *apiserver.Cluster
	clusterErr  error
	etcdProxy   *faultproxy.Proxy
	etcdProxyMu sync.Mutex
)

func TestMain(m *testing.M) {
	code := m.Run()
	if cluster != nil {
		var pids []int
		for _, s := range cluster.Servers() {
			if pid := s.PID(); pid != 0 {
				pids = append(pids, pid)
			}
		}
		if err := cluster.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: close cluster:", err)
			code = 1
		}
		for _, pid := range pids {
			if syscall.Kill(pid, 0) == nil {
				fmt.Fprintf(os.Stderr, "e2e: kube-apiserver pid %d survived Close\n", pid)
				code = 1
			}
		}
	}
	if etcdProxy != nil {
		etcdProxy.Close()
	}
	os.Exit(code)
}

// sharedCluster starts etcd and four kube-apiservers once for the whole suite.
func sharedCluster(t *testing.T) *apiserver.Cluster {
	t.Helper()
	if _, err := apiserver.FindBinDir(); err != nil {
		if os.Getenv(apiserver.E2EEnv) == "" {
			t.Skipf("%v; set %s=1 to make this a failure", err, apiserver.E2EEnv)
		}
		t.Fatal(err)
	}
	clusterOnce.Do(func() {
		start := time.Now()
		cluster, clusterErr = apiserver.Start(context.Background(), apiserver.Options{
			Servers: []apiserver.ServerOptions{
				{},
				{ExtraFlags: apiserver.RequestLimitFlags},
				{ExtraFlags: apiserver.CBORFlags},
				{EtcdVia: viaEtcdProxy},
			},
			ReadyTimeout: 120 * time.Second,
		})
		if clusterErr == nil {
			fmt.Printf("e2e: cluster (etcd + 4 kube-apiservers) ready in %v\n", time.Since(start).Round(time.Millisecond))
		}
	})
	if clusterErr != nil {
		t.Fatal(clusterErr)
	}
	return cluster
}

// viaEtcdProxy puts one fault proxy (created once, same port across restarts) in front of etcd.
func viaEtcdProxy(etcdURL string) string {
	etcdProxyMu.Lock()
	defer etcdProxyMu.Unlock()
	if etcdProxy == nil {
		u, err := url.Parse(etcdURL)
		if err != nil {
			panic(err)
		}
		if etcdProxy, err = faultproxy.New(99, u.Host); err != nil {
			panic(err)
		}
	}
	return "http://" + etcdProxy.Addr()
}

// newProxy is a fault proxy in front of the given servers, closed with the test.
func newProxy(t *testing.T, seed uint64, servers ...int) *faultproxy.Proxy {
	t.Helper()
	var addrs []string
	for _, i := range servers {
		addrs = append(addrs, cluster.Server(i).Addr())
	}
	p, err := faultproxy.New(seed, addrs...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// counts are what one counting RoundTripper saw.
type counts struct {
	Requests    int   // every request (that got a response or an error)
	Lists       int   // GET on a collection without watch
	Watches     int   // watch=true without sendInitialEvents
	WatchLists  int   // watch=true&sendInitialEvents=true
	Errors      int   // requests that got no response
	TooMany     int   // 429 answers
	ServerError int   // 5xx answers
	Bytes       int64 // response body bytes read
	FetchesOK   int   // LISTs and watch-lists answered 200
}

// InitialFetches is what "initial-state fetch" means in the figures: LISTs + watch-lists.
func (c counts) InitialFetches() int { return c.Lists + c.WatchLists }

// counter is a counting http.RoundTripper; only requests under /api and /apis count.
type counter struct {
	mu   sync.Mutex
	c    counts
	next http.RoundTripper
}

func (c *counter) snapshot() counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.c
}

func (c *counter) RoundTrip(req *http.Request) (*http.Response, error) {
	api := strings.HasPrefix(req.URL.Path, "/api")
	if api {
		q := req.URL.Query()
		c.mu.Lock()
		c.c.Requests++
		switch {
		case q.Get("watch") == "true" || q.Get("watch") == "1":
			if q.Get("sendInitialEvents") == "true" {
				c.c.WatchLists++
			} else {
				c.c.Watches++
			}
		case req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/configmaps"):
			c.c.Lists++
		}
		c.mu.Unlock()
	}
	resp, err := c.next.RoundTrip(req)
	if !api {
		return resp, err
	}
	q := req.URL.Query()
	fetch := q.Get("sendInitialEvents") == "true" ||
		(q.Get("watch") == "" && req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/configmaps"))
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.c.Errors++
		return resp, err
	}
	switch {
	case resp.StatusCode == http.StatusOK && fetch:
		c.c.FetchesOK++
	case resp.StatusCode == http.StatusTooManyRequests:
		c.c.TooMany++
	case resp.StatusCode >= 500:
		c.c.ServerError++
	}
	resp.Body = &countingBody{ReadCloser: resp.Body, c: c}
	return resp, nil
}

type countingBody struct {
	io.ReadCloser
	c *counter
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.c.mu.Lock()
	b.c.c.Bytes += int64(n)
	b.c.mu.Unlock()
	return n, err
}

// client is a config through addr for user, with a counter on the wire and one at the caller;
// with kretry, kretry sits between the two.
type client struct {
	cfg           *rest.Config
	wire, caller  *counter
	kretry        bool
	clientsetOnce sync.Once
	clientset     *kubernetes.Clientset
}

func newClient(addr string, u apiserver.User, withKretry bool) *client {
	return newClientOf(cluster.ConfigFor(addr, u), withKretry)
}

// newClientOf is newClient for a config of any cluster.
func newClientOf(cfg *rest.Config, withKretry bool) *client {
	if !withKretry {
		return newClientWith(cfg, nil)
	}
	return newClientWith(cfg, &transport.Config{})
}

// newClientWith is newClientOf with kretry configured by kcfg (nil: stock client-go).
func newClientWith(cfg *rest.Config, kcfg *transport.Config) *client {
	c := &client{cfg: cfg, wire: &counter{}, caller: &counter{}, kretry: kcfg != nil}
	// Wrap order: the first wrapper is innermost (closest to TLS).
	c.cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { c.wire.next = rt; return c.wire })
	if kcfg != nil {
		c.cfg.Wrap(transport.Wrapper(*kcfg))
	}
	c.cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { c.caller.next = rt; return c.caller })
	return c
}

func (c *client) kube() *kubernetes.Clientset {
	c.clientsetOnce.Do(func() { c.clientset = kubernetes.NewForConfigOrDie(c.cfg) })
	return c.clientset
}

// informer is a stock client-go SharedInformerFactory ConfigMap informer on one namespace.
type informer struct {
	informer cache.SharedIndexInformer
	stop     chan struct{}
	done     chan struct{}
}

func startInformer(t *testing.T, c *client, ns string) *informer {
	t.Helper()
	factory := informers.NewSharedInformerFactoryWithOptions(c.kube(), 0, informers.WithNamespace(ns))
	inf := &informer{informer: factory.Core().V1().ConfigMaps().Informer(), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(inf.done)
		inf.informer.Run(inf.stop)
	}()
	t.Cleanup(inf.close)
	return inf
}

func (inf *informer) close() {
	select {
	case <-inf.stop:
	default:
		close(inf.stop)
	}
	<-inf.done
}

// state is name -> resourceVersion.
type state map[string]string

func (s state) String() string {
	names := make([]string, 0, len(s))
	for n, rv := range s {
		names = append(names, n+"@"+rv)
	}
	sort.Strings(names)
	return fmt.Sprintf("%d objects %v", len(s), names)
}

func (inf *informer) state() state {
	s := state{}
	for _, obj := range inf.informer.GetStore().List() {
		cm := obj.(*corev1.ConfigMap)
		s[cm.Name] = cm.ResourceVersion
	}
	return s
}

// adminClient is an admin clientset straight to server (no fault proxy).
func adminClient(server int) *kubernetes.Clientset {
	return kubernetes.NewForConfigOrDie(cluster.ConfigFor(cluster.Server(server).Addr(), apiserver.Admin))
}

func serverState(ctx context.Context, server int, ns string) (state, error) {
	return configMapState(ctx, adminClient(server).CoreV1().ConfigMaps(ns))
}

// configMapState is the ConfigMaps cms reaches, by a consistent LIST: name -> resourceVersion.
func configMapState(ctx context.Context, cms typedcorev1.ConfigMapInterface) (state, error) {
	list, err := cms.List(ctx, metav1.ListOptions{}) // consistent read
	if err != nil {
		return nil, err
	}
	s := state{}
	for _, cm := range list.Items {
		s[cm.Name] = cm.ResourceVersion
	}
	return s, nil
}

// converge waits until the informer's cache equals the server's state; it returns how long it
// took, or the last difference.
func converge(ctx context.Context, inf *informer, server int, ns string, timeout time.Duration) (time.Duration, error) {
	return convergeTo(ctx, inf, func(ctx context.Context) (state, error) { return serverState(ctx, server, ns) }, timeout)
}

// convergeTo is converge against the state serverState returns.
func convergeTo(ctx context.Context, inf *informer, serverState func(context.Context) (state, error), timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	var last string
	for time.Since(start) < timeout {
		want, err := serverState(ctx)
		if err != nil {
			last = err.Error()
		} else if got := inf.state(); fmt.Sprint(got) == fmt.Sprint(want) {
			return time.Since(start), nil
		} else {
			last = fmt.Sprintf("cache %v\nserver %v", got, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return time.Since(start), errors.New("cache != server state after " + timeout.String() + ":\n" + last)
}

// namespace creates a namespace with n seeded ConfigMaps of about 1 KiB each.
func namespace(t *testing.T, server int, name string, n int) string {
	t.Helper()
	ctx := context.Background()
	cs := adminClient(server)
	ns := fmt.Sprintf("%s-%d", name, time.Now().UnixNano()%1_000_000)
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cmwriter.ConfigMap(fmt.Sprintf("seed-%d", i), 0), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return ns
}

// startWriter starts the ConfigMap writer on ns through one server directly (never through
// the fault proxy), stopped when the test ends.
func startWriter(t *testing.T, server int, ns string, seed uint64, every time.Duration) *cmwriter.Writer {
	w := cmwriter.Start(adminClient(server).CoreV1().ConfigMaps(ns), seed, every)
	t.Cleanup(w.Stop)
	return w
}

// figure is one row of the figures table.
type figure struct {
	Fault     string
	Client    string
	Caller    counts
	Wire      counts
	Writes    int
	Converged bool
	Converge  time.Duration
	Note      string
}

var (
	figuresMu sync.Mutex
	figures   []figure
)

func record(f figure) {
	figuresMu.Lock()
	figures = append(figures, f)
	figuresMu.Unlock()
}

func figuresTable() string {
	figuresMu.Lock()
	defer figuresMu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "%-14s %-7s %7s %7s %6s %6s %6s %6s %5s %5s %5s %10s %6s %-13s %s\n",
		"fault", "client", "fetches", "200s", "wire", "LIST", "WL", "WATCH", "429", "5xx", "err", "bytes", "writes", "cache=server", "note")
	for _, f := range figures {
		conv := "yes"
		if !f.Converged {
			conv = "NO"
		}
		fmt.Fprintf(&b, "%-14s %-7s %7d %7d %6d %6d %6d %6d %5d %5d %5d %10d %6d %-13s %s\n",
			f.Fault, f.Client, f.Caller.InitialFetches(), f.Wire.FetchesOK, f.Wire.Requests, f.Wire.Lists, f.Wire.WatchLists, f.Wire.Watches,
			f.Wire.TooMany, f.Wire.ServerError, f.Wire.Errors, f.Wire.Bytes, f.Writes, conv+" "+f.Converge.Round(100*time.Millisecond).String(), f.Note)
	}
	b.WriteString("fetches: initial-state fetches (LIST + sendInitialEvents watch) client-go sent, counted above kretry (for stock this\n" +
		"  includes client-go's own 429/Retry-After retries); 200s: those the server answered 200 (the ones that cost a full list);\n" +
		"wire, LIST, WL, WATCH: requests below kretry (what the server got); 429/5xx: answers; err: requests without a response;\n" +
		"bytes: response body bytes on the wire; cache=server: informer cache equal to a consistent LIST at the end (time to converge).\n")
	return b.String()
}

func writeFiguresFile() {
	if path := figuresPath("e2e-figures.txt"); path != "" {
		os.WriteFile(path, []byte(figuresTable()), 0o644)
	}
}

// figuresPath is name in $KRETRY_FIGURES_DIR (make compat-apiserver sets it), else in the
// checkout's .apiserver directory, where make e2e finds the runs' figures; the directory is
// made if missing, and "" is returned if it cannot be.
func figuresPath(name string) string {
	dir := os.Getenv("KRETRY_FIGURES_DIR")
	if dir == "" {
		root, err := os.Getwd()
		if err != nil {
			return ""
		}
		dir = filepath.Join(filepath.Dir(root), ".apiserver")
	}
	if os.MkdirAll(dir, 0o755) != nil {
		return ""
	}
	return filepath.Join(dir, name)
}

// stockAndKretry runs body once without and once with kretry.
func stockAndKretry(t *testing.T, body func(t *testing.T, withKretry bool) figure) {
	for _, withKretry := range []bool{false, true} {
		name := "stock"
		if withKretry {
			name = "kretry"
		}
		t.Run(name, func(t *testing.T) {
			f := body(t, withKretry)
			f.Client = name
			record(f)
			t.Logf("%s/%s: fetches=%d wire=%+v writes=%d converged=%v in %v %s", f.Fault, name,
				f.Caller.InitialFetches(), f.Wire, f.Writes, f.Converged, f.Converge, f.Note)
		})
	}
}

// kretryLog is a transport.Observer of one client's kretry: it keeps the give-ups (named when a
// watcher ends early), counts the retries and resumes from a mark on, those of a 410 apart, and
// with trace set logs every attempt, retry and give-up with the time since began.
type kretryLog struct {
	began time.Time
	name  string                           // the client, in trace lines
	trace func(format string, args ...any) // nil: no trace

	mu               sync.Mutex
	giveUps          []string
	marked           bool
	retries, expired int
}

func (l *kretryLog) at() time.Duration { return time.Since(l.began).Round(time.Millisecond) }

func (l *kretryLog) logf(format string, args ...any) {
	if l.trace != nil {
		l.trace("trace %v %s: "+format, append([]any{l.at(), l.name}, args...)...)
	}
}

func (l *kretryLog) ObserveAttempt(e transport.AttemptEvent) {
	l.logf("attempt %s %s %d", e.Verb, e.Outcome, e.Code)
}

func (l *kretryLog) ObserveRetry(e transport.RetryEvent) {
	l.logf("retry %s %s code %d wait %v resume %v", e.Verb, e.Reason, e.Code, e.Wait.Round(time.Millisecond), e.Resume)
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.marked {
		return
	}
	l.retries++
	if e.Reason == transport.ReasonExpiredResume {
		l.expired++
	}
}

func (l *kretryLog) ObserveGiveUp(e transport.GiveUpEvent) {
	line := fmt.Sprintf("at %v: %s %s after %d attempts in %v", l.at(), e.Verb, e.Reason, e.Attempts, e.Elapsed.Round(time.Millisecond))
	l.logf("give-up %s", line)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.giveUps = append(l.giveUps, line)
}

func (l *kretryLog) ObserveBudgetRefusal(e transport.BudgetEvent) {
	l.logf("budget refused %s %s", e.Verb, e.Reason)
}

// mark starts the count of retries.
func (l *kretryLog) mark() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.marked = true
}

// since returns the retries and resumes since mark, and how many of them were of a 410.
func (l *kretryLog) since() (expired, total int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.expired, l.retries
}

// String lists the give-ups, or says "none".
func (l *kretryLog) String() string {
	if l == nil {
		return "none"
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.giveUps) == 0 {
		return "none"
	}
	return strings.Join(l.giveUps, "; ")
}
