package contract_test

import (
	"net/http"
	"strconv"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
)

// h2WatchServer serves a watch by script (HTTP/2) and LISTs with body.
func h2WatchServer(t *testing.T, media string, script func(q h2Req) watchAnswer, listBytes []byte) *h2Server {
	return newH2Server(t, func(w http.ResponseWriter, r *http.Request, q h2Req) {
		if r.URL.Query().Get("watch") == "" {
			w.Header().Set("Content-Type", media)
			w.Write(listBytes)
			return
		}
		a := script(q)
		if a.code != 0 {
			b := a.body
			if b == nil {
				b = statusJSON(a.code, reasonOf(a.code), "answer")
			}
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", strconv.Itoa(len(b)))
			w.WriteHeader(a.code)
			w.Write(b)
			return
		}
		w.Header().Set("Content-Type", watchCType(media))
		w.WriteHeader(200)
		w.Write(a.stream)
		w.(http.Flusher).Flush()
		if a.end {
			return
		}
		<-r.Context().Done()
	})
}

// TestWatch410SearchHTTP2KeepsOtherIdleConns: two clients share one
// HTTP/2 transport (as client-go's transport cache shares one between
// clients of equal TLS config), one to apiserver A, one to B. A's watch
// loses its connection and its resume is answered 410 `too old resource
// version`; the search retires only the 410's connection. B's idle
// connection, untouched by it, serves B's next request.
func TestWatch410SearchHTTP2KeepsOtherIdleConns(t *testing.T) {
	w := newWorld(t)
	a := h2WatchServer(t, mediaJSON, func(q h2Req) watchAnswer {
		switch {
		case q.n == 1:
			return openStream(mediaJSON, 100, 102)
		case q.n <= 3:
			return watchAnswer{code: 410, body: tooOld(q.q("resourceVersion"), 105)}
		}
		return watchAnswer{code: 410, body: tooOld(q.q("resourceVersion"), 106)}
	}, nil)
	b := h2WatchServer(t, mediaJSON, nil, listBody(mediaJSON, 300, 2))
	base := utilnet.SetTransportDefaults(&http.Transport{TLSClientConfig: a.clientTLS()})
	mk := func(host string) *kubernetes.Clientset {
		cfg := w.restConfig(host, nil, mediaJSON)
		cfg.Transport = base
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	csA, csB := mk(a.srv.URL), mk(b.srv.URL)
	if _, err := csB.CoreV1().Pods("ns").List(realCtx(t), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	c := watchPods(t, csA, metav1.ListOptions{ResourceVersion: "100"})
	c.waitCount(t, 2)
	a.srv.CloseClientConnections()
	if d := describe(c.waitClosed(t)); d != "MODIFIED@101 MODIFIED@102 ERROR:410" {
		t.Errorf("caller saw %q; %s", d, w.obs)
	}
	if _, err := csB.CoreV1().Pods("ns").List(realCtx(t), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := b.requests()
	if len(rb) != 2 || rb[0].remote != rb[1].remote {
		t.Errorf("B's requests came from %v: its idle connection was closed by A's search", []string{rb[0].remote, rb[len(rb)-1].remote})
	}
	ra := a.requests()
	var trail []string
	for _, q := range ra {
		trail = append(trail, q.remote+" close="+strconv.FormatBool(q.close))
	}
	t.Logf("A's requests: %v", trail)
	// The watch; the resume's 410 and its ride; then another S (another
	// apiserver behind A's certificate, heard from) on six new
	// connections, each but the last ridden once, until its sixth 410 in a
	// row ends the search.
	if len(ra) != 14 {
		t.Errorf("A asked %d times, want 14 (watch, resume 410, the ride 410, six new connections' 410s with another S and five rides)", len(ra))
	}
	if len(ra) >= 4 && (ra[2].remote != ra[1].remote || ra[3].remote == ra[1].remote) {
		t.Errorf("the search's retry must ride the 410's connection once, then dial: %v", trail)
	}
}

// TestWatch410SearchHTTP2OtherStreamSurvives: two watches of one client
// share A's HTTP/2 connection; the first loses its stream by RST, its
// resume (on the same connection) is answered 410: the search retires that
// connection, but the second watch's stream on it must not break.
func TestWatch410SearchHTTP2OtherStreamSurvives(t *testing.T) {
	w := newWorld(t)
	a := h2WatchServer(t, mediaJSON, func(q h2Req) watchAnswer {
		rv := q.q("resourceVersion")
		if q.q("labelSelector") == "second" {
			return openStream(mediaJSON, 500, 501)
		}
		if rv == "100" {
			return openStream(mediaJSON, 100, 102)
		}
		return watchAnswer{code: 410, body: tooOld(rv, 105+q.n)}
	}, nil)
	cs := w.clientset(a.srv.URL, a.caPEM, mediaJSON)
	c2 := watchPods(t, cs, metav1.ListOptions{ResourceVersion: "500", LabelSelector: "second"})
	eventually(t, "the second watch's event", func() bool { return c2.count() == 1 })
	c1 := watchPods(t, cs, metav1.ListOptions{ResourceVersion: "100"})
	c1.waitCount(t, 2)
	a.srv.CloseClientConnections()
	eventually(t, "the end of watch 1", c1.isClosed)
	// watch 2 lost its connection too (the server closed it); it is resumed
	eventually(t, "watch 2 resumed", func() bool {
		n := 0
		for _, q := range a.requests() {
			if q.q("labelSelector") == "second" {
				n++
			}
		}
		return n == 2
	})
	var w2resume, gone h2Req
	for _, q := range a.requests() {
		if q.q("labelSelector") == "second" {
			w2resume = q
		} else if q.q("resourceVersion") == "102" && gone.n == 0 {
			gone = q
		}
	}
	t.Logf("watch 2 resumed on %s (request %d), watch 1's first 410 on %s", w2resume.remote, w2resume.n, gone.remote)
	// another request of the client after the search
	if _, err := cs.CoreV1().Pods("ns").Watch(realCtx(t), metav1.ListOptions{ResourceVersion: "100"}); err != nil {
		t.Fatal(err)
	}
	if c2.isClosed() || a.hasEnded(w2resume.n) {
		t.Errorf("watch 2's resumed stream (on %s) ended: the search retired its connection under it", w2resume.remote)
	}
}
