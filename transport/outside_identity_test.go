package transport_test

// Outside tests of how kretry tells apiservers apart by their TLS serving
// certificate when a resume after a lost watch stream is answered 410 `too
// old resource version: X (S)`: a 410 from another certificate than the
// lost stream's is handed over at once; one from the same certificate (the
// apiserver restarted) starts the search on new connections; a shared
// certificate or plain HTTP keeps the old search. Written from the contract
// only. Loopback TLS "apiservers", each with its own leaf certificate from a
// test CA, sit behind a TCP round-robin front (idtFront) that the test
// routes and cuts. Helpers are prefixed "idt".

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/kretry/kretry/transport"
)

const (
	idtNS     = "identity"
	idtFirst  = 100 // the watch's own resourceVersion
	idtBreak  = 102 // the last event of the first stream
	idtLast   = 105
	idtS      = 300 // the oldest RV a fresh watch cache holds
	idtBound  = 3 * time.Second
	idtSlack  = 1500 * time.Millisecond
	idtMaxNew = 20
	// idtNoSearch bounds the time from the cut to a 410 handed over with
	// no search: it takes ~10 ms here; the bound leaves room for a loaded
	// 2-core machine under -race. The resume counts are the sharp check.
	idtNoSearch = 1500 * time.Millisecond
)

// idtPKI is a CA and the means to issue leaf certificates for 127.0.0.1.
type idtPKI struct {
	ca    *x509.Certificate
	key   *ecdsa.PrivateKey
	caPEM []byte
}

func idtNewPKI(t *testing.T) *idtPKI {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "idt-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &idtPKI{ca: ca, key: key, caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

var idtSerial struct {
	sync.Mutex
	n int64
}

func (p *idtPKI) leaf(t *testing.T, name string) tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	idtSerial.Lock()
	idtSerial.n++
	serial := idtSerial.n + 1
	idtSerial.Unlock()
	tpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tpl, p.ca, &key.PublicKey, p.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// idtBackend is one apiserver: it holds every resume point (serves the
// events after it) unless tooOld is set, then it answers every watch 410
// `too old resource version: <rv> (idtS)`, as a Status or as an ERROR event.
type idtBackend struct {
	name   string
	srv    *httptest.Server
	event  bool
	mu     sync.Mutex
	tooOld bool
	s      int      // the S in its 410; 0: idtS
	msg    string   // when set, its 410's message instead of the watch cache's
	reqs   []string // resourceVersion of every watch
	lists  int
}

func (b *idtBackend) setTooOld(v bool) { b.mu.Lock(); b.tooOld = v; b.mu.Unlock() }

func (b *idtBackend) resumes() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, rv := range b.reqs {
		if rv != strconv.Itoa(idtFirst) {
			n++
		}
	}
	return n
}

func (b *idtBackend) listCount() int { b.mu.Lock(); defer b.mu.Unlock(); return b.lists }

func (b *idtBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("watch") != "true" {
		b.mu.Lock()
		b.lists++
		b.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"%d"},"items":[]}`, idtFirst)
		return
	}
	rv := q.Get("resourceVersion")
	b.mu.Lock()
	b.reqs = append(b.reqs, rv)
	old, oldest, msg := b.tooOld, b.s, b.msg
	b.mu.Unlock()
	if oldest == 0 {
		oldest = idtS
	}
	if msg == "" {
		msg = fmt.Sprintf("too old resource version: %s (%d)", rv, oldest)
	}
	w.Header().Set("Content-Type", "application/json")
	if old {
		st, _ := json.Marshal(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
			Status: metav1.StatusFailure, Message: msg,
			Reason: metav1.StatusReasonExpired, Code: http.StatusGone})
		if b.event {
			w.WriteHeader(http.StatusOK)
			fmt.Fprintf(w, `{"type":"ERROR","object":%s}`+"\n", st)
			return
		}
		w.WriteHeader(http.StatusGone)
		w.Write(st)
		return
	}
	from, err := strconv.Atoi(rv)
	if err != nil {
		http.Error(w, "bad rv", http.StatusBadRequest)
		return
	}
	last := idtLast
	if from == idtFirst {
		last = idtBreak
	}
	w.WriteHeader(http.StatusOK)
	for v := from + 1; v <= last; v++ {
		fmt.Fprintf(w, `{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm-%d","namespace":%q,"resourceVersion":"%d"}}}`+"\n", v, idtNS, v)
	}
	w.(http.Flusher).Flush()
	<-r.Context().Done()
}

// idtNewBackend starts a TLS backend serving cert (h2 or http/1.1 only),
// or plain HTTP when cert is nil.
func idtNewBackend(t *testing.T, name string, cert *tls.Certificate, h2, event bool) *idtBackend {
	b := &idtBackend{name: name, event: event}
	b.srv = httptest.NewUnstartedServer(b)
	if cert == nil {
		b.srv.Start()
	} else {
		b.srv.TLS = &tls.Config{Certificates: []tls.Certificate{*cert}, NextProtos: []string{"http/1.1"}}
		if h2 {
			b.srv.EnableHTTP2 = true
			b.srv.TLS.NextProtos = []string{"h2", "http/1.1"}
		}
		b.srv.StartTLS()
	}
	t.Cleanup(b.srv.Close)
	return b
}

// idtFront is the TCP balancer: the n-th new connection since the last
// route call goes to route(n); nil refuses it (accept and close).
type idtFront struct {
	addr  string
	ln    net.Listener
	mu    sync.Mutex
	route func(n int) *idtBackend
	n     int
	conns map[net.Conn]*idtBackend
	wg    sync.WaitGroup
}

func idtNewFront(t *testing.T, route func(int) *idtBackend) *idtFront {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &idtFront{addr: ln.Addr().String(), ln: ln, route: route, conns: map[net.Conn]*idtBackend{}}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.mu.Lock()
			f.n++
			be := f.route(f.n)
			f.conns[c] = be
			f.mu.Unlock()
			f.wg.Add(1)
			go f.handle(c, be)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		f.mu.Lock()
		for c := range f.conns {
			c.Close()
		}
		f.mu.Unlock()
		f.wg.Wait()
	})
	return f
}

func (f *idtFront) handle(c net.Conn, be *idtBackend) {
	defer f.wg.Done()
	defer func() {
		c.Close()
		f.mu.Lock()
		delete(f.conns, c)
		f.mu.Unlock()
	}()
	if be == nil {
		return
	}
	bc, err := net.Dial("tcp", be.srv.Listener.Addr().String())
	if err != nil {
		return
	}
	done := make(chan struct{}, 2)
	go func() { io.Copy(bc, c); done <- struct{}{} }()
	go func() { io.Copy(c, bc); done <- struct{}{} }()
	<-done
	c.Close()
	bc.Close()
	<-done
}

// reroute sets the route for the next new connections (counted from 1),
// then cuts every live connection to cut (nil: none).
func (f *idtFront) reroute(route func(n int) *idtBackend, cut *idtBackend) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.route, f.n = route, 0
	for c, be := range f.conns {
		if cut != nil && be == cut {
			c.Close()
		}
	}
}

func idtAlways(b *idtBackend) func(int) *idtBackend { return func(int) *idtBackend { return b } }

// idtRoundRobin: 1st new connection to first, 2nd to second, and so on.
func idtRoundRobin(bs ...*idtBackend) func(int) *idtBackend {
	return func(n int) *idtBackend { return bs[(n-1)%len(bs)] }
}

func idtClientset(t *testing.T, f *idtFront, caPEM []byte) *kubernetes.Clientset {
	cfg := &rest.Config{Host: "http://" + f.addr, QPS: 1000, Burst: 1000}
	cfg.ContentType = "application/json"
	cfg.AcceptContentTypes = "application/json"
	if caPEM != nil {
		cfg.Host = "https://" + f.addr
		cfg.TLSClientConfig.CAData = caPEM
	}
	cfg.Dial = (&net.Dialer{}).DialContext // no transport shared between tests
	cfg.Wrap(transport.Wrapper(transport.Config{Rand: func() float64 { return 0.5 }}))
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

type idtSeen struct {
	typ  watch.EventType
	rv   string
	code int32
	at   time.Time
}

type idtRun struct {
	seen   []idtSeen
	closed bool
	cut    time.Time // the last cut
}

func (r *idtRun) String() string {
	s := ""
	for _, e := range r.seen {
		at := 0.0
		if !r.cut.IsZero() {
			at = e.at.Sub(r.cut).Seconds()
		}
		s += fmt.Sprintf(" %s:%s%d@%.2fs", e.typ, e.rv, e.code, at)
	}
	return fmt.Sprintf("[%s ] closed=%v", s, r.closed)
}

// idtFollow watches from idtFirst through cs; at(rv) runs when the event
// at rv arrives (it may cut; its true return marks the cut time). It ends
// when the watch closes, a second after idtLast or an ERROR, or at 30 s.
func idtFollow(t *testing.T, cs *kubernetes.Clientset, at func(rv string) bool) *idtRun {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	w, err := cs.CoreV1().ConfigMaps(idtNS).Watch(ctx, metav1.ListOptions{ResourceVersion: strconv.Itoa(idtFirst), TimeoutSeconds: ptrTo(int64(120))})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	run := &idtRun{}
	deadline := time.After(30 * time.Second)
	var quiet <-chan time.Time
	for {
		select {
		case e, ok := <-w.ResultChan():
			if !ok {
				run.closed = true
				return run
			}
			s := idtSeen{typ: e.Type, at: time.Now()}
			if st, ok := e.Object.(*metav1.Status); ok {
				s.code = st.Code
			} else if m, ok := e.Object.(metav1.Object); ok {
				s.rv = m.GetResourceVersion()
			}
			run.seen = append(run.seen, s)
			if s.rv != "" && at(s.rv) {
				run.cut = time.Now()
			}
			if s.rv == strconv.Itoa(idtLast) || e.Type == watch.Error {
				quiet = time.After(time.Second)
			}
		case <-quiet:
			return run
		case <-deadline:
			t.Errorf("the caller still waits after 30 s: %v", run)
			return run
		}
	}
}

// wantGone: the events up to upTo once each, then one ERROR 410, then the
// end; returns the time from the last cut to the ERROR.
func (r *idtRun) wantGone(t *testing.T, upTo int) time.Duration {
	t.Helper()
	n := upTo - idtFirst
	ok := len(r.seen) == n+1 && r.closed
	for i := 0; ok && i < n; i++ {
		ok = r.seen[i].typ == watch.Added && r.seen[i].rv == strconv.Itoa(idtFirst+1+i)
	}
	if !ok || r.seen[n].typ != watch.Error || r.seen[n].code != http.StatusGone {
		t.Errorf("want events %d..%d, one ERROR 410, then the end: %v", idtFirst+1, upTo, r)
		return 0
	}
	return r.seen[n].at.Sub(r.cut)
}

func (r *idtRun) wantResumed(t *testing.T) {
	t.Helper()
	ok := len(r.seen) == idtLast-idtFirst
	for i := 0; ok && i < len(r.seen); i++ {
		ok = r.seen[i].typ == watch.Added && r.seen[i].rv == strconv.Itoa(idtFirst+1+i)
	}
	if !ok {
		t.Errorf("want events %d..%d once each and no ERROR: %v", idtFirst+1, idtLast, r)
	}
}

type idtSetup struct {
	a, b *idtBackend
	f    *idtFront
	cs   *kubernetes.Clientset
}

// idtMake builds A and B (own certificates unless shared; plain HTTP when
// !tls) behind a front that sends every connection to A.
func idtMake(t *testing.T, tlsOn, h2, shared, event bool) *idtSetup {
	var ca []byte
	var ca1, cb *tls.Certificate
	if tlsOn {
		p := idtNewPKI(t)
		ca = p.caPEM
		x, y := p.leaf(t, "apiserver-a"), p.leaf(t, "apiserver-b")
		ca1, cb = &x, &y
		if shared {
			cb = ca1
		}
	}
	s := &idtSetup{a: idtNewBackend(t, "A", ca1, h2, event), b: idtNewBackend(t, "B", cb, h2, event)}
	s.f = idtNewFront(t, idtAlways(s.a))
	s.cs = idtClientset(t, s.f, ca)
	return s
}

type idtVariant struct {
	name          string
	tls, h2, evnt bool
}

var idtTLSVariants = []idtVariant{
	{"h2/status-410", true, true, false},
	{"h2/error-event", true, true, true},
	{"http1.1/status-410", true, false, false},
	{"http1.1/error-event", true, false, true},
}

func idtEach(t *testing.T, vs []idtVariant, f func(t *testing.T, v idtVariant)) {
	for _, v := range vs {
		t.Run(v.name, func(t *testing.T) { t.Parallel(); f(t, v) })
	}
}

// TestOutsideIdentity: the stream's connection to A is cut at idtBreak and
// new connections are routed as each case says; kretry resumes, searches
// or hands the 410 over by whose certificate answered.
func TestOutsideIdentity(t *testing.T) {
	t.Parallel()
	const whenever = -1 // no bound on the time to the 410
	for _, tc := range []struct {
		name     string
		variants []idtVariant
		shared   bool // one certificate for both backends
		// prepare sets the backends' answers at the cut; route then routes
		// the new connections.
		prepare func(s *idtSetup)
		route   func(s *idtSetup) func(int) *idtBackend
		resumed bool // the watch resumes; otherwise one 410 reaches the caller
		a, b    int  // the resumes A and B must see
		within  time.Duration
	}{
		// (1) Fast pace: A leaves the front; every new connection reaches
		// B, which answers 410 with another certificate: handed over at
		// once, one resume request, no search.
		{name: "fast pace: another certificate's 410", variants: idtTLSVariants,
			prepare: func(s *idtSetup) { s.b.setTooOld(true) },
			route:   func(s *idtSetup) func(int) *idtBackend { return idtAlways(s.b) },
			a:       0, b: 1, within: idtNoSearch},
		// (2) Restart in place: A answers 410 with the same certificate;
		// round robin reaches B, which holds the point.
		{name: "restart in place", variants: idtTLSVariants,
			prepare: func(s *idtSetup) { s.a.setTooOld(true) },
			route:   func(s *idtSetup) func(int) *idtBackend { return idtRoundRobin(s.a, s.b) },
			resumed: true, a: 1, b: 1},
		// (3) The search ends at another certificate's 410: A (restarted)
		// 410s, the next new connection reaches B, fresh too.
		{name: "the search ends at another certificate's 410", variants: idtTLSVariants,
			prepare: func(s *idtSetup) { s.a.setTooOld(true); s.b.setTooOld(true) },
			route:   func(s *idtSetup) func(int) *idtBackend { return idtRoundRobin(s.a, s.b, s.b) },
			a:       1, b: 1, within: idtBound},
		// (6) The search meets A's 410 twice more (same certificate, same
		// S) before B answers: it goes on and resumes at B.
		{name: "the same certificate's 410 again: the search goes on", variants: idtTLSVariants,
			prepare: func(s *idtSetup) { s.a.setTooOld(true) },
			route:   func(s *idtSetup) func(int) *idtBackend { return idtRoundRobin(s.a, s.a, s.a, s.b) },
			resumed: true, a: 3, b: 1},
		// (7) A's 410 is not the watch cache's (etcd's compaction
		// message): handed over at once, no search.
		{name: "a compaction's 410 from the same certificate", variants: idtTLSVariants,
			prepare: func(s *idtSetup) {
				s.a.mu.Lock()
				s.a.msg = "The resourceVersion for the provided watch is too old."
				s.a.mu.Unlock()
				s.a.setTooOld(true)
			},
			route: func(s *idtSetup) func(int) *idtBackend { return idtRoundRobin(s.a, s.b) },
			a:     1, b: 0, within: whenever},
		// (8) Shared certificate: A's 410 (S) then B's with another S ends
		// the search there.
		{name: "shared certificate, another S", variants: idtTLSVariants[:2], shared: true,
			prepare: func(s *idtSetup) {
				s.b.mu.Lock()
				s.b.s = idtS + 7
				s.b.mu.Unlock()
				s.a.setTooOld(true)
				s.b.setTooOld(true)
			},
			route: func(s *idtSetup) func(int) *idtBackend { return idtRoundRobin(s.a, s.b) },
			a:     1, b: 1, within: whenever},
		// (9) The first new connection is accepted and closed (A still
		// coming up) before A's 410 and B: the failed connection does not
		// change whose stream was lost; the search resumes at B.
		{name: "a failed connection, then the same certificate's 410", variants: idtTLSVariants,
			prepare: func(s *idtSetup) { s.a.setTooOld(true) },
			route:   func(s *idtSetup) func(int) *idtBackend { return idtRoundRobin(nil, s.a, s.b) },
			resumed: true, a: 1, b: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			idtEach(t, tc.variants, func(t *testing.T, v idtVariant) {
				s := idtMake(t, v.tls, v.h2, tc.shared, v.evnt)
				r := idtFollow(t, s.cs, func(rv string) bool {
					if rv != strconv.Itoa(idtBreak) {
						return false
					}
					tc.prepare(s)
					s.f.reroute(tc.route(s), s.a)
					return true
				})
				if tc.resumed {
					r.wantResumed(t)
				} else if d := r.wantGone(t, idtBreak); tc.within != whenever && d > tc.within {
					t.Errorf("the 410 took %v after the cut, want at most %v", d, tc.within)
				}
				if s.a.resumes() != tc.a || s.b.resumes() != tc.b {
					t.Errorf("resumes: A %d, B %d; want A %d, B %d; %v", s.a.resumes(), s.b.resumes(), tc.a, tc.b, r)
				}
			})
		})
	}
}

// TestOutsideIdentityRestartInPlaceInformer: (2) with an informer: one
// LIST, no relist, each object added once.
func TestOutsideIdentityRestartInPlaceInformer(t *testing.T) {
	t.Parallel()
	idtEach(t, idtTLSVariants[:3], func(t *testing.T, v idtVariant) {
		s := idtMake(t, v.tls, v.h2, false, v.evnt)
		var mu sync.Mutex
		adds := map[string]int{}
		got := make(chan struct{}, 16)
		inf := informers.NewSharedInformerFactoryWithOptions(s.cs, 0, informers.WithNamespace(idtNS)).Core().V1().ConfigMaps().Informer()
		inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(o interface{}) {
			mu.Lock()
			adds[o.(metav1.Object).GetName()]++
			mu.Unlock()
			got <- struct{}{}
		}})
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() { inf.Run(stop); close(done) }()
		defer func() { close(stop); <-done }()
		count := func() int { mu.Lock(); defer mu.Unlock(); return len(adds) }
		waitFor := func(n int) bool {
			timeout := time.After(20 * time.Second)
			for count() < n {
				select {
				case <-got:
				case <-timeout:
					return false
				}
			}
			return true
		}
		if !waitFor(idtBreak - idtFirst) {
			t.Fatalf("informer never got the first events: %v", adds)
		}
		s.a.setTooOld(true)
		s.f.reroute(idtRoundRobin(s.a, s.b), s.a)
		if !waitFor(idtLast - idtFirst) {
			t.Errorf("informer has %v after 20 s", adds)
		}
		lists := s.a.listCount() + s.b.listCount()
		mu.Lock()
		defer mu.Unlock()
		for n, c := range adds {
			if c != 1 {
				t.Errorf("%s added %d times", n, c)
			}
		}
		if lists != 1 || len(adds) != idtLast-idtFirst {
			t.Errorf("want one LIST (no relist) and %d objects: %d LISTs, %v; A resumes %d, B resumes %d",
				idtLast-idtFirst, lists, adds, s.a.resumes(), s.b.resumes())
		}
	})
}

// (4) Shared certificate and plain HTTP: the old search, bounded by 3 s and
// 20 new connections, then one 410.
func TestOutsideIdentitySharedCertSearches(t *testing.T) {
	t.Parallel()
	vs := append([]idtVariant{{"plain-http/status-410", false, false, false}}, idtTLSVariants...)
	idtEach(t, vs, func(t *testing.T, v idtVariant) {
		s := idtMake(t, v.tls, v.h2, true, v.evnt)
		s.b.setTooOld(true)
		r := idtFollow(t, s.cs, func(rv string) bool {
			if rv != strconv.Itoa(idtBreak) {
				return false
			}
			s.f.reroute(idtAlways(s.b), s.a)
			return true
		})
		d := r.wantGone(t, idtBreak)
		t.Logf("search: %d resumes at B, 410 %v after the cut", s.b.resumes(), d)
		if n := s.b.resumes(); n < 2 || n > idtMaxNew+1 {
			t.Errorf("want a search (2..%d resumes at B): %d; %v", idtMaxNew+1, n, r)
		}
		if d > idtBound+idtSlack {
			t.Errorf("the 410 took %v after the cut, want at most %v", d, idtBound)
		}
	})
}

// (5) The stream broke on A and resumed on B; then it breaks on B and the
// resume reaches A, which answers 410 (A's certificate is not the lost
// stream's, B's): handed over at once.
func TestOutsideIdentityLostStreamIsTheLatest(t *testing.T) {
	t.Parallel()
	idtEach(t, idtTLSVariants, func(t *testing.T, v idtVariant) {
		s := idtMake(t, v.tls, v.h2, false, v.evnt)
		r := idtFollow(t, s.cs, func(rv string) bool {
			switch rv {
			case strconv.Itoa(idtBreak):
				s.f.reroute(idtAlways(s.b), s.a)
				return true
			case strconv.Itoa(idtLast):
				s.a.setTooOld(true)
				s.f.reroute(idtAlways(s.a), s.b)
				return true
			}
			return false
		})
		d := r.wantGone(t, idtLast)
		if s.a.resumes() != 1 || s.b.resumes() != 1 {
			t.Errorf("want one resume at B, then one at A: A %d, B %d; %v", s.a.resumes(), s.b.resumes(), r)
		}
		if d > idtNoSearch {
			t.Errorf("the 410 took %v after the second cut, want well under 1 s (no search)", d)
		}
	})
}
