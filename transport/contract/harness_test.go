package contract_test

// The trial's loopback world: a raw HTTP/1.1 server whose every byte the
// test writes (framing, cuts, keep-alive against the client's wishes), an
// HTTP/2 server (httptest, TLS), kube objects in JSON and protobuf, and
// clients through kretry (a kubernetes.Clientset or a raw http.Client)
// with the trial's clock and an observer.

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/kretry/kretry/internal/harness/observe"
	"github.com/kretry/kretry/transport"
)

// hang bounds in real time every wait of a test: reaching it is a hang.
const hang = 15 * time.Second

func realCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond (real time, bounded by hang).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hang)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("hang: no %s after %v", what, hang)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// allAtOnce runs f(0) .. f(n-1), each in its own goroutine, and returns
// their errors by i once all have returned.
func allAtOnce(n int, f func(i int) error) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(i)
		}()
	}
	wg.Wait()
	return errs
}

// ---- observer ------------------------------------------------------------

// observer is the trial's Observer: it records everything kretry reports.
type observer struct{ observe.Recorder }

func (o *observer) String() string {
	ev := o.Events()
	return fmt.Sprintf("attempts %v; retries %v; give-ups %v; refusals %v; list resumes %v",
		ev.Attempts, ev.Retries, ev.GiveUps, ev.Refusals, ev.ListResumes)
}

// ---- clients --------------------------------------------------------------

// world is one test's clock and observer, and the kretry Config they make.
type world struct {
	t   *testing.T
	clk *vclock
	obs *observer
	kc  transport.Config
}

// budgetAllowsNothing is a retry budget that refuses every retry it counts.
var budgetAllowsNothing = transport.RetryBudget{Ratio: 1e-9, MinPerSecond: 1e-9}

func newWorld(t *testing.T) *world {
	w := &world{t: t, clk: newVClock(), obs: &observer{}}
	w.kc = transport.Config{Clock: w.clk, Observer: w.obs, Rand: func() float64 { return 0 }}
	return w
}

// restConfig is a rest.Config to host through kretry (w.kc); caPEM for https.
func (w *world) restConfig(host string, caPEM []byte, media string) *rest.Config {
	cfg := &rest.Config{Host: host, QPS: 10000, Burst: 10000}
	if media != "" {
		cfg.ContentType = media
	}
	if caPEM != nil {
		cfg.TLSClientConfig.CAData = caPEM
	}
	cfg.Wrap(w.clk.inflight.Wrap)
	cfg.Wrap(transport.Wrapper(w.kc))
	return cfg
}

func (w *world) clientset(host string, caPEM []byte, media string) *kubernetes.Clientset {
	w.t.Helper()
	cs, err := kubernetes.NewForConfig(w.restConfig(host, caPEM, media))
	if err != nil {
		w.t.Fatal(err)
	}
	return cs
}

// httpClient is a raw http.Client through kretry over base.
func (w *world) httpClient(base http.RoundTripper) *http.Client {
	return &http.Client{Transport: transport.New(w.clk.inflight.Wrap(base), w.kc)}
}

// get GETs url with a raw http.Client through kretry over base; the body is
// closed when the test ends.
func (w *world) get(base http.RoundTripper, url string) *http.Response {
	w.t.Helper()
	resp, err := w.httpClient(base).Get(url)
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func plainBase() *http.Transport {
	return &http.Transport{Proxy: nil, DialContext: (&net.Dialer{}).DialContext, MaxIdleConnsPerHost: 10}
}

// ---- the raw HTTP/1.1 server ----------------------------------------------

type rawReq struct {
	conn  int
	n     int // 1-based among all requests
	url   *url.URL
	hdr   http.Header
	close bool // the client asked Connection: close
	at    time.Time
}

func (q rawReq) q(k string) string { return q.url.Query().Get(k) }

// rv is the resourceVersion the request asked, as a number (0 if none).
func (q rawReq) rv() int {
	n, _ := strconv.Atoi(q.q("resourceVersion"))
	return n
}

// rawConn is one accepted connection; the handler writes raw bytes.
type rawConn struct {
	id int
	net.Conn
	bw *bufio.Writer
}

func (c *rawConn) send(s []byte) error {
	if _, err := c.bw.Write(s); err != nil {
		return err
	}
	return c.bw.Flush()
}

// reset closes the connection with a TCP RST.
func (c *rawConn) reset() {
	if tc, ok := c.Conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// rawServer answers each request with handle; handle returns whether the
// connection stays open for another request (whatever the client asked).
type rawServer struct {
	t      *testing.T
	ln     net.Listener
	clk    *vclock
	handle func(c *rawConn, q rawReq) bool

	mu    sync.Mutex
	reqs  []rawReq
	conns int
	open  map[*rawConn]bool
	done  chan struct{}
}

func newRawServer(t *testing.T, clk *vclock, handle func(c *rawConn, q rawReq) bool) *rawServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{t: t, ln: ln, clk: clk, handle: handle, open: map[*rawConn]bool{}, done: make(chan struct{})}
	go s.serve()
	t.Cleanup(func() {
		close(s.done)
		ln.Close()
		s.mu.Lock()
		for c := range s.open {
			c.Close()
		}
		s.mu.Unlock()
	})
	return s
}

func (s *rawServer) url() string { return "http://" + s.ln.Addr().String() }

func (s *rawServer) serve() {
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns++
		c := &rawConn{id: s.conns, Conn: nc, bw: bufio.NewWriter(nc)}
		s.open[c] = true
		s.mu.Unlock()
		go s.serveConn(c)
	}
}

func (s *rawServer) serveConn(c *rawConn) {
	defer func() {
		c.Close()
		s.mu.Lock()
		delete(s.open, c)
		s.mu.Unlock()
	}()
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		io.Copy(io.Discard, req.Body)
		s.mu.Lock()
		q := rawReq{conn: c.id, n: len(s.reqs) + 1, url: req.URL, hdr: req.Header, close: req.Close, at: s.clk.Now()}
		s.reqs = append(s.reqs, q)
		s.mu.Unlock()
		if !s.handle(c, q) {
			return
		}
	}
}

func (s *rawServer) requests() []rawReq {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]rawReq(nil), s.reqs...)
}

func (s *rawServer) accepted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns
}

// head is a response head; length < 0 means chunked.
func head(code int, ctype string, length int, extra ...string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\n", code, http.StatusText(code), ctype)
	if length >= 0 {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", length)
	} else {
		b.WriteString("Transfer-Encoding: chunked\r\n")
	}
	for i := 0; i+1 < len(extra); i += 2 {
		fmt.Fprintf(&b, "%s: %s\r\n", extra[i], extra[i+1])
	}
	b.WriteString("\r\n")
	return []byte(b.String())
}

func chunk(p []byte) []byte {
	if len(p) == 0 {
		return nil
	}
	return append(append([]byte(strconv.FormatInt(int64(len(p)), 16)+"\r\n"), p...), '\r', '\n')
}

// writeBody answers with body, framed by Content-Length (chunked false) or
// chunked; cut >= 0 closes the connection after cut bytes of the body
// (reset: with a TCP RST). It reports whether the connection stays open.
func writeBody(c *rawConn, ctype string, body []byte, chunked bool, cut int, reset bool, extra ...string) bool {
	length := len(body)
	if chunked {
		length = -1
	}
	part := body
	if cut >= 0 && cut < len(body) {
		part = body[:cut]
	}
	out := head(200, ctype, length, extra...)
	if chunked {
		// two chunks where possible: framing must not matter
		h := len(part) / 2
		out = append(out, chunk(part[:h])...)
		out = append(out, chunk(part[h:])...)
		if cut < 0 || cut >= len(body) {
			out = append(out, "0\r\n\r\n"...)
		}
	} else {
		out = append(out, part...)
	}
	if err := c.send(out); err != nil {
		return false
	}
	if cut >= 0 && cut < len(body) {
		if reset {
			c.reset()
		} else {
			c.Close()
		}
		return false
	}
	return true
}

func writeStatus(c *rawConn, code int, reason metav1.StatusReason, msg string, extra ...string) bool {
	b := statusJSON(code, reason, msg)
	return c.send(append(head(code, "application/json", len(b), extra...), b...)) == nil
}

// ---- the HTTP/2 server ----------------------------------------------------

type h2Req struct {
	n      int
	remote string
	proto  int
	url    *url.URL
	close  bool
	hdr    http.Header
}

func (q h2Req) q(k string) string { return q.url.Query().Get(k) }

type h2Server struct {
	srv   *httptest.Server
	caPEM []byte
	mu    sync.Mutex
	reqs  []h2Req
	ended map[int]bool // requests whose handler returned, by n
	conns map[string]bool
}

func newH2Server(t *testing.T, h func(w http.ResponseWriter, r *http.Request, q h2Req)) *h2Server {
	s := &h2Server{conns: map[string]bool{}, ended: map[int]bool{}}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		q := h2Req{n: len(s.reqs) + 1, remote: r.RemoteAddr, proto: r.ProtoMajor, url: r.URL, close: r.Close, hdr: r.Header}
		s.reqs = append(s.reqs, q)
		s.conns[r.RemoteAddr] = true
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			s.ended[q.n] = true
			s.mu.Unlock()
		}()
		h(w, r, q)
	}))
	s.srv.EnableHTTP2 = true
	s.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	s.srv.StartTLS()
	s.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.srv.Certificate().Raw})
	t.Cleanup(s.srv.Close)
	return s
}

// clientTLS is a client TLS config that trusts s's certificate.
func (s *h2Server) clientTLS() *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(s.srv.Certificate())
	return &tls.Config{RootCAs: pool}
}

func (s *h2Server) hasEnded(n int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ended[n]
}

func (s *h2Server) requests() []h2Req {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]h2Req(nil), s.reqs...)
}

// ---- kube objects ---------------------------------------------------------

func pod(name string, rv int) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", ResourceVersion: strconv.Itoa(rv), Labels: map[string]string{"app": "trial"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example/image:" + name}}},
	}
}

func podList(rv, n int) *corev1.PodList {
	l := &corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, ListMeta: metav1.ListMeta{ResourceVersion: strconv.Itoa(rv)}}
	for i := 0; i < n; i++ {
		l.Items = append(l.Items, *pod(fmt.Sprintf("pod-%04d", i), rv-n+i))
	}
	return l
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

const (
	mediaJSON     = "application/json"
	mediaProtobuf = "application/vnd.kubernetes.protobuf"
)

func protoEncode(obj runtime.Object) []byte {
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), mediaProtobuf)
	if !ok {
		panic("no protobuf")
	}
	enc := scheme.Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion)
	b, err := runtime.Encode(enc, obj)
	if err != nil {
		panic(err)
	}
	return b
}

func listBody(media string, rv, n int) []byte {
	if media == mediaProtobuf {
		return protoEncode(podList(rv, n))
	}
	return mustJSON(podList(rv, n))
}

// jsonEvent is one JSON watch event, without its separator.
func jsonEvent(typ string, obj any) []byte {
	return mustJSON(map[string]any{"type": typ, "object": obj})
}

func protoEvent(typ string, obj runtime.Object) []byte {
	ev := &metav1.WatchEvent{Type: typ, Object: runtime.RawExtension{Raw: protoEncode(obj)}}
	b, err := ev.Marshal()
	if err != nil {
		panic(err)
	}
	out := make([]byte, 4, 4+len(b))
	binary.BigEndian.PutUint32(out, uint32(len(b)))
	return append(out, b...)
}

func status(code int, reason metav1.StatusReason, msg string) *metav1.Status {
	return &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
		Code: int32(code), Reason: reason, Message: msg}
}

func statusJSON(code int, reason metav1.StatusReason, msg string) []byte {
	return mustJSON(status(code, reason, msg))
}

// event encodes a watch event in media, with the JSON separator.
func event(media, typ string, obj runtime.Object) []byte {
	if media == mediaProtobuf {
		return protoEvent(typ, obj)
	}
	return append(jsonEvent(typ, obj), '\n')
}

func watchCType(media string) string {
	if media == mediaProtobuf {
		return mediaProtobuf + ";stream=watch"
	}
	return mediaJSON
}
