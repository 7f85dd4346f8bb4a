package transport_test

// The rig's apiservers (see outside_rig_test.go): scripted fake
// kube-apiservers on loopback, each with its own TLS serving certificate
// unless told to share one.

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
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
)

// serverOpts says how a rigServer serves.
type serverOpts struct {
	plain bool // plain HTTP; otherwise TLS, with HTTP/2 unless http1
	http1 bool // TLS with HTTP/1.1 only
	event bool // a 410 to a watch is an ERROR event inside a 200, not a 410 answer
	// cert names its serving certificate: apiservers given the same name
	// share one, as behind a balancer that ends TLS or with one certificate
	// for all; "" is the server's own name.
	cert string
}

// rigRequest is one request an apiserver received.
type rigRequest struct {
	a     *rigServer
	n     int           // 1-based, among the apiserver's requests of the same kind
	at    time.Duration // virtual time of its arrival
	kind  string        // "watch", "watch-list" (sendInitialEvents), "exact" (a LIST at resourceVersionMatch=Exact) or "list"
	path  string
	query url.Values
	conn  int // the connection it came on, numbered from 1 in the order accepted
	seq   int // 1-based, among the requests of every apiserver of the rig, in the order they arrived
	proto int
	close bool
	end   *rigTimer // a watch's timeoutSeconds, on the rig's clock
	// gone is whether it was answered 410 (a 410 answer or an ERROR 410
	// event, answerGone), and goneAt when; both under a.mu.
	gone   bool
	goneAt time.Duration
}

func (q *rigRequest) rv() string      { return q.query.Get("resourceVersion") }
func (q *rigRequest) timeout() string { return q.query.Get("timeoutSeconds") }

// namespace is the namespace in the request's path.
func (q *rigRequest) namespace() string {
	parts := strings.Split(q.path, "/")
	if i := slices.Index(parts, "namespaces"); i >= 0 && i+1 < len(parts) {
		return parts[i+1]
	}
	return ""
}

func (q *rigRequest) String() string {
	return fmt.Sprintf("%s#%d rv=%q timeoutSeconds=%q conn#%d @%v", q.kind, q.n, q.rv(), q.timeout(), q.conn, q.at)
}

// rigAnswer answers one request.
type rigAnswer func(w http.ResponseWriter, r *http.Request, q *rigRequest)

// rigServer is a scripted kube-apiserver on loopback serving ConfigMaps:
// its script picks each request's answer (nil: answerServe).
type rigServer struct {
	r      *rig
	name   string
	opts   serverOpts
	script func(q *rigRequest) rigAnswer
	srv    *httptest.Server
	done   chan struct{} // closed when the test ends

	mu       sync.Mutex
	reqs     []*rigRequest
	kinds    map[string]int
	conns    map[string]net.Conn      // open connections, by client address
	written  map[string]*atomic.Int64 // bytes written to each connection, by client address
	accepted int
	quit     chan struct{} // closed and renewed by endWatches
	abort    chan struct{} // closed and renewed by abortWatches
}

// server starts an apiserver answering by script.
func (r *rig) server(name string, o serverOpts, script func(q *rigRequest) rigAnswer) *rigServer {
	a := &rigServer{r: r, name: name, opts: o, script: script, done: make(chan struct{}),
		kinds: map[string]int{}, conns: map[string]net.Conn{}, written: map[string]*atomic.Int64{},
		quit: make(chan struct{}), abort: make(chan struct{})}
	a.srv = httptest.NewUnstartedServer(a)
	a.srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshakes the tests cut short
	a.srv.Listener = &countingListener{Listener: a.srv.Listener, a: a}
	a.srv.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if tc, ok := c.(*tls.Conn); ok {
			c = tc.NetConn()
		}
		if wc, ok := c.(*writeCounter); ok {
			ctx = context.WithValue(ctx, connID{}, wc.id)
		}
		return ctx
	}
	a.srv.Config.ConnState = func(c net.Conn, st http.ConnState) {
		a.mu.Lock()
		switch st {
		case http.StateNew:
			a.accepted++
			a.conns[c.RemoteAddr().String()] = c
		case http.StateClosed, http.StateHijacked:
			delete(a.conns, c.RemoteAddr().String())
		}
		a.mu.Unlock()
		r.poke()
	}
	if o.plain {
		a.srv.Start()
	} else {
		cert := o.cert
		if cert == "" {
			cert = name
		}
		a.srv.TLS = &tls.Config{Certificates: []tls.Certificate{r.certs().leaf(cert)}, NextProtos: []string{"http/1.1"}}
		if !o.http1 {
			a.srv.EnableHTTP2 = true
			a.srv.TLS.NextProtos = []string{"h2", "http/1.1"}
		}
		a.srv.StartTLS()
	}
	r.mu.Lock()
	r.servers = append(r.servers, a)
	r.mu.Unlock()
	r.t.Cleanup(func() {
		close(a.done)
		a.srv.CloseClientConnections()
		a.srv.Close()
	})
	return a
}

func (a *rigServer) url() string { return a.srv.URL }

func (a *rigServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := &rigRequest{a: a, at: a.r.clock.elapsed(), path: r.URL.Path, query: r.URL.Query(), proto: r.ProtoMajor, close: r.Close}
	q.conn, _ = r.Context().Value(connID{}).(int)
	watching := q.query.Get("watch")
	switch {
	case watching != "" && watching != "0" && watching != "false":
		q.kind = "watch"
		if q.query.Get("sendInitialEvents") == "true" {
			q.kind = "watch-list"
		}
	case q.query.Get("resourceVersionMatch") == "Exact":
		q.kind = "exact"
	default:
		q.kind = "list"
	}
	if s, err := strconv.Atoi(q.timeout()); err == nil && s > 0 && strings.HasPrefix(q.kind, "watch") {
		// The end of a watch is timed from its arrival, before anything
		// reaches the client, which may move the clock as soon as it has.
		q.end = a.r.clock.add(timerEnd, time.Duration(s)*time.Second, make(chan time.Time, 1), nil)
		defer q.end.Stop()
	}
	a.mu.Lock()
	q.seq = int(a.r.requestSeq.Add(1))
	a.kinds[q.kind]++
	q.n = a.kinds[q.kind]
	a.reqs = append(a.reqs, q)
	a.mu.Unlock()
	a.r.poke()
	answer := answerServe
	if a.script != nil {
		if s := a.script(q); s != nil {
			answer = s
		}
	}
	answer(w, r, q)
}

// requests returns the requests of the kinds received so far (all of them
// with no kind).
func (a *rigServer) requests(kinds ...string) []*rigRequest {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []*rigRequest
	for _, q := range a.reqs {
		if len(kinds) == 0 || slices.Contains(kinds, q.kind) {
			out = append(out, q)
		}
	}
	return out
}

// resumes are the watches at another resourceVersion than rigInitialRV.
func (a *rigServer) resumes() []*rigRequest {
	return slices.DeleteFunc(a.requests("watch"), func(q *rigRequest) bool { return q.rv() == strconv.Itoa(rigInitialRV) })
}

// ---- the connections a watch's resumes came on ----------------------------

// rigConns is how the resumes of a test's one watch came to the rig's
// apiservers, connection by connection (see wantRides).
type rigConns struct {
	fresh map[*rigServer]int // resumes that were the first request on their connection, by apiserver
	rides int                // resumes that rode the connection a 410 came on (HTTP/2)
	// searched is the Observer's expired-resume retries but the rides:
	// the retries of the search that went to a new connection, whether or
	// not it reached an apiserver (a front may close it or keep it silent).
	searched int
	trail    []string
}

// at is how many new connections to a carried a resume.
func (c rigConns) at(a *rigServer) int { return c.fresh[a] }

func (c rigConns) String() string {
	var at []string
	for a, n := range c.fresh {
		at = append(at, fmt.Sprintf("%s %d", a.name, n))
	}
	slices.Sort(at)
	return fmt.Sprintf("resumes on new connections %v, rides %d, search retries to a new connection %d: %v", at, c.rides, c.searched, c.trail)
}

// wantRides summarizes the resumes (rigServer.resumes) every apiserver of
// the rig received, connection by connection, and checks that each came on
// a new connection, one that had carried no request before it (the lost
// stream's included), but for HTTP/2's ride. The search's retry after a
// 410 that came over a connection C asks for C to be retired (Connection:
// close), and golang.org/x/net/http2, which picks a connection before it
// looks at that, sends it on C once more: the same apiserver answers it 410
// at once, C is retired, and the retry after it dials. So over HTTP/2, and
// only there, a connection whose resume was answered 410 may carry one more
// resume, the ride: the very next request the rig's apiservers received,
// sent at the instant of that 410 and answered 410 at once (no virtual
// time between); never a third. Over HTTP/1.1 every resume is on a new
// connection. Either way the first resume after the lost connection is on
// a new one. It is for tests with one watch.
func (r *rig) wantRides(t *testing.T) rigConns {
	t.Helper()
	r.mu.Lock()
	servers := slices.Clone(r.servers)
	r.mu.Unlock()
	var all []rigRequest // a copy of each, its answer as it is now
	for _, a := range servers {
		a.mu.Lock()
		for _, q := range a.reqs {
			all = append(all, *q)
		}
		a.mu.Unlock()
	}
	slices.SortFunc(all, func(x, y rigRequest) int { return x.seq - y.seq })
	type conn struct {
		a *rigServer
		n int
	}
	carried := map[conn][]int{} // the requests each connection carried, by index into all
	c := rigConns{fresh: map[*rigServer]int{}, searched: r.obs.expired()}
	var bad []string
	for i, q := range all {
		k := conn{q.a, q.conn}
		before := carried[k]
		carried[k] = append(before, i)
		if q.kind != "watch" || q.rv() == strconv.Itoa(rigInitialRV) {
			continue
		}
		what := fmt.Sprintf("%s conn#%d @%v", q.a.name, q.conn, q.at)
		if q.close {
			what += " Connection: close"
		}
		if len(before) == 0 {
			c.fresh[q.a]++
		} else {
			what = "ride " + what
			prev := all[before[len(before)-1]]
			var why string
			switch {
			case q.proto != 2:
				why = fmt.Sprintf("over HTTP/%d, where every resume is on a new connection", q.proto)
			case len(before) > 1:
				why = fmt.Sprintf("the connection's request %d: at most one resume rides a connection", len(before)+1)
			case prev.kind != "watch" || prev.rv() == strconv.Itoa(rigInitialRV):
				why = "on the connection of the " + prev.kind + " at rv " + prev.rv() + ", not of a resume"
			case !prev.gone:
				why = "on the connection of a resume not answered 410"
			case before[0] != i-1:
				why = fmt.Sprintf("not the request right after the 410 on its connection (%v)", all[i-1].String())
			case q.at != prev.goneAt:
				why = fmt.Sprintf("sent %v after the 410 on its connection, want at once", q.at-prev.goneAt)
			case !q.gone || q.goneAt != q.at:
				why = "not answered 410 at once"
			}
			if why != "" {
				bad = append(bad, what+": "+why)
			} else {
				c.rides++
			}
		}
		if q.gone {
			what += fmt.Sprintf(" 410@%v", q.goneAt)
		}
		c.trail = append(c.trail, what)
	}
	c.searched -= c.rides
	for _, b := range bad {
		t.Errorf("a resume reused a connection: %s; %v", b, c)
	}
	return c
}

func (a *rigServer) acceptedConns() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.accepted
}

func (a *rigServer) String() string {
	var s []string
	for _, q := range a.requests() {
		s = append(s, q.String())
	}
	return fmt.Sprintf("%s got %v", a.name, s)
}

// cutAll closes every connection to the apiserver (a lost connection, for
// HTTP/1.1 and HTTP/2 alike).
func (a *rigServer) cutAll() { a.srv.CloseClientConnections() }

// endWatches ends every watch it serves now, cleanly (before their
// timeoutSeconds); later ones are served as usual.
func (a *rigServer) endWatches() {
	a.mu.Lock()
	close(a.quit)
	a.quit = make(chan struct{})
	a.mu.Unlock()
}

// abortWatches resets every watch it serves now (HTTP/2: RST_STREAM);
// later ones are served as usual.
func (a *rigServer) abortWatches() {
	a.mu.Lock()
	close(a.abort)
	a.abort = make(chan struct{})
	a.mu.Unlock()
}

// goAway shuts the apiserver down as kube-apiserver's process does: its
// HTTP/2 server sends GOAWAY on every connection (http.Server.Shutdown),
// and once every client has read it the connections close, their watches
// still open, so that client-go reports "server sent GOAWAY and closed the
// connection" on each stream. It returns the virtual time of the close:
// the break the clients see.
func (a *rigServer) goAway() time.Duration {
	a.r.t.Helper()
	a.mu.Lock()
	before := map[string]int64{}
	for remote := range a.conns {
		if n := a.written[remote]; n != nil {
			before[remote] = n.Load()
		}
	}
	a.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = a.srv.Config.Shutdown(ctx); close(done) }()
	a.r.waitFor(a.name+"'s GOAWAY read by every client", func() bool {
		for remote, n0 := range before {
			a.mu.Lock()
			n := a.written[remote].Load()
			a.mu.Unlock()
			if n == n0 || a.r.clientRead(remote) < n {
				return false
			}
		}
		return true
	})
	at := a.r.clock.elapsed()
	a.srv.CloseClientConnections()
	cancel()
	<-done
	return at
}

// countingListener numbers the connections and counts the bytes written
// to each.
type countingListener struct {
	net.Listener
	a *rigServer
	n int
}

type connID struct{}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	n := &atomic.Int64{}
	l.a.mu.Lock()
	l.a.written[c.RemoteAddr().String()] = n
	l.a.mu.Unlock()
	l.n++
	return &writeCounter{Conn: c, n: n, id: l.n}, nil
}

type writeCounter struct {
	net.Conn
	n  *atomic.Int64
	id int
}

func (c *writeCounter) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.n.Add(int64(n))
	return n, err
}

// answerServe is a watch cache of ConfigMaps: a LIST is empty at
// rigInitialRV; a watch from rv gets ADDED rv+1..rigBreakRV (from
// rigInitialRV) or ..rigLastRV (from any later rv), then stays open (stay);
// a watch from no rv (a watch-list) is refused, so an informer lists.
func answerServe(w http.ResponseWriter, r *http.Request, q *rigRequest) {
	if !strings.HasPrefix(q.kind, "watch") {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"%d"},"items":[]}`, rigInitialRV)
		return
	}
	from, err := strconv.Atoi(q.rv())
	if err != nil {
		http.Error(w, "bad rv", http.StatusBadRequest)
		return
	}
	last := rigLastRV
	if from == rigInitialRV {
		last = rigBreakRV
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	for v := from + 1; v <= last; v++ {
		fmt.Fprintf(w, `{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm-%d","namespace":%q,"resourceVersion":"%d"}}}`+"\n", v, q.namespace(), v)
	}
	q.a.stay(w, r, q)
}

// answerOpen answers a watch 200 with no event and stays.
func answerOpen(w http.ResponseWriter, r *http.Request, q *rigRequest) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	q.a.stay(w, r, q)
}

// stay flushes a watch and keeps it open until the client leaves, the test
// ends, the apiserver ends or aborts its watches, or its timeoutSeconds has
// passed on the rig's clock. A watch served is not a hold: kretry reads it.
func (a *rigServer) stay(w http.ResponseWriter, r *http.Request, q *rigRequest) {
	a.mu.Lock()
	quit, abort := a.quit, a.abort
	a.mu.Unlock()
	var end <-chan time.Time
	if q.end != nil {
		end = q.end.ch
	}
	w.(http.Flusher).Flush()
	select {
	case <-r.Context().Done():
	case <-a.done:
	case <-quit:
	case <-end:
	case <-abort:
		panic(http.ErrAbortHandler) // HTTP/2: RST_STREAM INTERNAL_ERROR
	}
}

// answerHang accepts a request and never answers it.
func answerHang(w http.ResponseWriter, r *http.Request, q *rigRequest) {
	release := q.a.r.hold(q.a.name + " holds " + q.String())
	defer release()
	select {
	case <-r.Context().Done():
	case <-q.a.done:
	}
}

// answerAfter answers with then after d of virtual time.
func answerAfter(d time.Duration, then rigAnswer) rigAnswer {
	return func(w http.ResponseWriter, r *http.Request, q *rigRequest) {
		if q.a.pause(r, d) {
			then(w, r, q)
		}
	}
}

// pause holds a request for d of virtual time; false when the client left
// or the test ended first.
func (a *rigServer) pause(r *http.Request, d time.Duration) bool {
	return a.r.delay(r.Context(), a.done, d, fmt.Sprintf("%s pauses %v", a.name, d))
}

// answerStatus answers with a Status.
func answerStatus(code int, reason metav1.StatusReason, msg string) rigAnswer {
	return func(w http.ResponseWriter, _ *http.Request, _ *rigRequest) { writeStatus(w, code, reason, msg) }
}

// answerGone is a 410 Expired with msg: an ERROR event inside a 200 to a
// watch of an apiserver with serverOpts.event, else a 410 answer.
func answerGone(msg string) rigAnswer {
	return func(w http.ResponseWriter, _ *http.Request, q *rigRequest) {
		q.a.mu.Lock()
		q.gone, q.goneAt = true, q.a.r.clock.elapsed()
		q.a.mu.Unlock()
		if !q.a.opts.event || !strings.HasPrefix(q.kind, "watch") {
			writeStatus(w, http.StatusGone, metav1.StatusReasonExpired, msg)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		fmt.Fprintf(w, `{"type":"ERROR","object":%s}`+"\n", statusJSON(http.StatusGone, metav1.StatusReasonExpired, msg))
	}
}

// answerTooOld is the watch cache's 410: its oldest resourceVersion is s.
func answerTooOld(s int) rigAnswer {
	return func(w http.ResponseWriter, r *http.Request, q *rigRequest) {
		answerGone(fmt.Sprintf("too old resource version: %s (%d)", q.rv(), s))(w, r, q)
	}
}

// answerBalancer503 is a balancer's own 503, in plain text.
func answerBalancer503(w http.ResponseWriter, _ *http.Request, _ *rigRequest) {
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusServiceUnavailable)
	fmt.Fprintln(w, "no server is available to handle this request")
}

func statusJSON(code int, reason metav1.StatusReason, msg string) []byte {
	b, _ := json.Marshal(&metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status: metav1.StatusFailure, Message: msg, Reason: reason, Code: int32(code)})
	return b
}

func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, msg string) {
	b := statusJSON(code, reason, msg)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// answerBody answers 200 with Content-Length len(body), writes the first
// cut bytes and, if that is not all of it, breaks the connection.
func answerBody(contentType string, body []byte, cut int) rigAnswer {
	return func(w http.ResponseWriter, _ *http.Request, _ *rigRequest) {
		w.Header().Set("Content-Type", contentType)
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(body[:cut])
		w.(http.Flusher).Flush()
		if cut < len(body) {
			panic(http.ErrAbortHandler)
		}
	}
}

// listBody is a ConfigMapList at resourceVersion 100 of n items of 1 KiB,
// in mediaType.
func listBody(mediaType string, n int, cont string) []byte {
	list := &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: "100", Continue: cont}}
	for i := 0; i < n; i++ {
		list.Items = append(list.Items, corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%03d", i), Namespace: "default", ResourceVersion: strconv.Itoa(50 + i)},
			Data:       map[string]string{"v": strings.Repeat(string(rune('a'+i%26)), 1024)},
		})
	}
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), mediaType)
	if !ok {
		panic("no serializer for " + mediaType)
	}
	b, err := runtime.Encode(scheme.Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion), list)
	if err != nil {
		panic(err)
	}
	return b
}

// ---- serving certificates ---------------------------------------------------

// rigPKI is a test CA and the leaf certificates it issued, by name.
type rigPKI struct {
	ca    *x509.Certificate
	key   *ecdsa.PrivateKey
	caPEM []byte
	mu    sync.Mutex
	leafs map[string]tls.Certificate
}

var rigSerial atomic.Int64

// certs is the rig's CA, made on first use.
func (r *rig) certs() *rigPKI {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pki != nil {
		return r.pki
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	tpl := &x509.Certificate{SerialNumber: big.NewInt(rigSerial.Add(1)), Subject: pkix.Name{CommonName: "rig-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		panic(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		panic(err)
	}
	r.pki = &rigPKI{ca: ca, key: key, caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), leafs: map[string]tls.Certificate{}}
	return r.pki
}

// leaf is the serving certificate for 127.0.0.1 named name.
func (p *rigPKI) leaf(name string) tls.Certificate {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.leafs[name]; ok {
		return c
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	tpl := &x509.Certificate{SerialNumber: big.NewInt(rigSerial.Add(1)), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tpl, p.ca, &key.PublicKey, p.key)
	if err != nil {
		panic(err)
	}
	c := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	p.leafs[name] = c
	return c
}
