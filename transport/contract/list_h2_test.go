package contract_test

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// h2Plan is how the HTTP/2 server answers one request of a LIST.
type h2Plan struct {
	declare bool // a Content-Length header
	cut     int  // -1: whole; else RST_STREAM after cut bytes
	gzip    bool // gzip the body when the client accepts it (the cut is in compressed bytes)
	body    []byte
}

func h2ListServer(t *testing.T, ctype string, body []byte, plans ...h2Plan) *h2Server {
	return newH2Server(t, func(w http.ResponseWriter, r *http.Request, q h2Req) {
		p := plans[min(q.n, len(plans))-1]
		b := body
		if p.body != nil {
			b = p.body
		}
		if p.gzip && strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			b = gzipped(b)
			w.Header().Set("Content-Encoding", "gzip")
		}
		w.Header().Set("Content-Type", ctype)
		if p.declare {
			w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		}
		w.WriteHeader(200)
		part := b
		if p.cut >= 0 && p.cut < len(b) {
			part = b[:p.cut]
		}
		h := len(part) / 2
		w.Write(part[:h])
		w.(http.Flusher).Flush() // no Content-Length chosen by the server
		w.Write(part[h:])
		w.(http.Flusher).Flush()
		if p.cut >= 0 && p.cut < len(b) {
			panic(http.ErrAbortHandler)
		}
	})
}

// gzipped is b gzip-compressed.
func gzipped(b []byte) []byte {
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write(b)
	zw.Close()
	return z.Bytes()
}

func h2Base(s *h2Server) *http.Transport {
	return &http.Transport{TLSClientConfig: s.clientTLS(), ForceAttemptHTTP2: true}
}

// TestListHTTP2MixedFraming: HTTP/2 LIST bodies with and without a declared
// length, cut by RST_STREAM at many offsets: resumed, bytes exact, the
// caller's declared length kept.
func TestListHTTP2MixedFraming(t *testing.T) {
	body := listBody(mediaJSON, 1000, 40)
	itemsAt := bytes.Index(body, []byte(`"items"`))
	for _, d1 := range []bool{false, true} {
		for _, d2 := range []bool{false, true} {
			for _, cut := range []int{itemsAt + 10, len(body) / 2, len(body) - 1} {
				t.Run(fmt.Sprintf("declare%v-then-%v/cut%d", d1, d2, cut), func(t *testing.T) {
					w := newWorld(t)
					srv := h2ListServer(t, mediaJSON, body, h2Plan{declare: d1, cut: cut}, h2Plan{declare: d2, cut: -1})
					resp := w.get(h2Base(srv), srv.srv.URL+listPath)
					if resp.ProtoMajor != 2 {
						t.Fatalf("proto %d", resp.ProtoMajor)
					}
					want := int64(-1)
					if d1 {
						want = int64(len(body))
					}
					if resp.ContentLength != want {
						t.Errorf("ContentLength %d, want %d", resp.ContentLength, want)
					}
					got, err := readAll(resp.Body)
					if err != nil || !bytes.Equal(got, body) {
						t.Fatalf("read %d of %d, err %v; %s", len(got), len(body), err, w.obs)
					}
					if n := len(srv.requests()); n != 2 {
						t.Errorf("server asked %d times", n)
					}
				})
			}
		}
	}
}

// TestListHTTP2ClientsetProtobuf: a typed Clientset LIST in protobuf over
// HTTP/2, cut three times, mixed framing: the caller gets the whole list.
func TestListHTTP2ClientsetProtobuf(t *testing.T) {
	body := listBody(mediaProtobuf, 5000, 80)
	w := newWorld(t)
	srv := h2ListServer(t, mediaProtobuf, body,
		h2Plan{declare: false, cut: len(body) / 4},
		h2Plan{declare: true, cut: len(body) / 2},
		h2Plan{declare: false, cut: len(body) - 3},
		h2Plan{declare: true, cut: -1})
	cs := w.clientset(srv.srv.URL, srv.caPEM, mediaProtobuf)
	l, err := cs.CoreV1().Pods("ns").List(realCtx(t), metav1.ListOptions{LabelSelector: "app=trial"})
	if err != nil {
		t.Fatalf("list: %v; %s", err, w.obs)
	}
	want := podList(5000, 80)
	if len(l.Items) != len(want.Items) || l.ResourceVersion != "5000" {
		t.Fatalf("got %d items at %q", len(l.Items), l.ResourceVersion)
	}
	for i := range l.Items {
		if l.Items[i].Name != want.Items[i].Name || l.Items[i].Spec.Containers[0].Image != want.Items[i].Spec.Containers[0].Image {
			t.Fatalf("item %d differs", i)
		}
	}
	reqs := srv.requests()
	if len(reqs) != 4 {
		t.Errorf("server asked %d times, want 4", len(reqs))
	}
	for _, r := range reqs[1:] {
		if r.q("resourceVersion") != "5000" || r.q("resourceVersionMatch") != "Exact" {
			t.Errorf("resume asked %q", r.url.RawQuery)
		}
	}
}

// TestListGzipTransparent: net/http's transparent gzip, the cut in the
// compressed bytes, over HTTP/1.1-less HTTP/2 and with the resumed answer
// gzipped or not (the server's choice): the caller gets the list.
func TestListGzipTransparent(t *testing.T) {
	body := listBody(mediaJSON, 1000, 200)
	zlen := len(gzipped(body))
	for _, g2 := range []bool{true, false} {
		for _, cut := range []int{zlen / 5, zlen / 2, zlen - 10} {
			t.Run(fmt.Sprintf("resumedGzip%v/cut%d", g2, cut), func(t *testing.T) {
				w := newWorld(t)
				srv := h2ListServer(t, mediaJSON, body, h2Plan{gzip: true, cut: cut, declare: true}, h2Plan{gzip: g2, cut: -1, declare: !g2})
				resp := w.get(h2Base(srv), srv.srv.URL+listPath)
				got, err := readAll(resp.Body)
				if !bytes.HasPrefix(body, got) {
					t.Fatalf("caller got bytes that are not the list's")
				}
				if err != nil || len(got) != len(body) {
					if g2 {
						t.Fatalf("read %d of %d, err %v; %s", len(got), len(body), err, w.obs)
					}
					t.Logf("gzip then identity: read %d of %d, err %v; %s", len(got), len(body), err, w.obs)
				}
			})
		}
	}
}

// TestListCallerDecodesGzip: a caller that asks for gzip itself decodes the
// body: it is held, asked for again whole, and the caller gets the exact
// compressed bytes of one answer.
func TestListCallerDecodesGzip(t *testing.T) {
	body := listBody(mediaJSON, 1000, 100)
	z := gzipped(body)
	for _, cut := range []int{5, len(z) / 2, len(z) - 1} {
		t.Run(fmt.Sprint(cut), func(t *testing.T) {
			w := newWorld(t)
			srv := h2ListServer(t, mediaJSON, body, h2Plan{gzip: true, declare: true, cut: cut}, h2Plan{gzip: true, cut: -1})
			req, _ := http.NewRequest("GET", srv.srv.URL+listPath, nil)
			req.Header.Set("Accept-Encoding", "gzip")
			resp, err := w.httpClient(h2Base(srv)).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			got, err := readAll(resp.Body)
			if err != nil || !bytes.Equal(got, z) {
				t.Fatalf("read %d of %d compressed bytes, err %v; %s", len(got), len(z), err, w.obs)
			}
			if resp.ContentLength != -1 && resp.ContentLength != int64(len(z)) {
				t.Errorf("ContentLength %d, want %d or none", resp.ContentLength, len(z))
			}
			if r := srv.requests(); len(r) != 2 || r[1].url.RawQuery != r[0].url.RawQuery {
				t.Errorf("asked %d times; the retry must be the identical query", len(r))
			}
		})
	}
}
