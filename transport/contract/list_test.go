package contract_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/kretry/kretry/transport"
)

const listPath = "/api/v1/namespaces/ns/pods?labelSelector=app%3Dtrial&limit=500&unknownParam=kept"

// framing is how one answer of a LIST is framed on HTTP/1.1.
type framing struct {
	chunked bool
	reset   bool // the cut is a TCP RST rather than a close
}

func (f framing) String() string {
	if f.chunked {
		return "chunked"
	}
	return "length"
}

// answerPlan is how the server answers the n-th request of a LIST: with the
// body (or other), framed so, cut after cut bytes (-1: whole).
type answerPlan struct {
	f     framing
	cut   int
	body  []byte // nil: the list's own body
	ctype string // "": the list's own
	extra []string
}

// listServer serves body to the n-th request as plans[n-1] (the last plan
// repeats).
func listServer(t *testing.T, w *world, ctype string, body []byte, plans ...answerPlan) *rawServer {
	return newRawServer(t, w.clk, func(c *rawConn, q rawReq) bool {
		p := plans[min(q.n, len(plans))-1]
		b, ct := body, ctype
		if p.body != nil {
			b = p.body
		}
		if p.ctype != "" {
			ct = p.ctype
		}
		return writeBody(c, ct, b, p.f.chunked, p.cut, p.f.reset, p.extra...)
	})
}

// readAll reads resp's body in reads of odd sizes, as a caller may.
func readAll(r io.Reader) ([]byte, error) {
	var out []byte
	buf := make([]byte, 777)
	for {
		n, err := r.Read(buf)
		out = append(out, buf[:n]...)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

// TestListCutAtManyOffsetsMixedFraming cuts a JSON LIST body (HTTP/1.1) at
// many offsets, with every pair of framings for the first answer and the
// resumed one: the caller gets the exact bytes, the length its response
// declared, and the server is asked the exact list.
func TestListCutAtManyOffsetsMixedFraming(t *testing.T) {
	body := listBody(mediaJSON, 1000, 30)
	itemsAt := bytes.Index(body, []byte(`"items"`))
	offsets := []int{itemsAt + 8, itemsAt + 100, len(body) / 3, len(body) / 2, len(body) - 2, len(body) - 1}
	frames := []framing{{}, {chunked: true}, {reset: true}, {chunked: true, reset: true}}
	for _, f1 := range frames {
		for _, f2 := range []framing{{}, {chunked: true}} {
			for _, cut := range offsets {
				name := fmt.Sprintf("%v/%v-then-%v/cut%d", f1.reset, f1, f2, cut)
				t.Run(name, func(t *testing.T) {
					w := newWorld(t)
					srv := listServer(t, w, "application/json", body, answerPlan{f: f1, cut: cut}, answerPlan{f: f2, cut: -1})
					resp := w.get(plainBase(), srv.url()+listPath)
					wantLen := int64(len(body))
					if f1.chunked {
						wantLen = -1
					}
					if resp.ContentLength != wantLen {
						t.Errorf("caller's ContentLength %d, want the first answer's %d", resp.ContentLength, wantLen)
					}
					got, err := readAll(resp.Body)
					if err != nil || !bytes.Equal(got, body) {
						t.Fatalf("caller read %d bytes (equal %v), err %v; want the %d bytes; %s", len(got), bytes.Equal(got, body), err, len(body), w.obs)
					}
					reqs := srv.requests()
					if len(reqs) != 2 {
						t.Fatalf("server asked %d times, want 2", len(reqs))
					}
					rq := reqs[1].url.Query()
					if rq.Get("resourceVersion") != "1000" || rq.Get("resourceVersionMatch") != "Exact" || rq.Get("labelSelector") != "app=trial" ||
						rq.Get("unknownParam") != "kept" || rq.Has("limit") {
						t.Errorf("resume asked %q", reqs[1].url.RawQuery)
					}
					o := w.obs.Events()
					if len(o.ListResumes) != 1 || o.ListResumes[0].Outcome != transport.ListResumed || o.ListResumes[0].SkippedBytes != int64(cut) {
						t.Errorf("list resumes %+v, want one resumed skipping %d", o.ListResumes, cut)
					}
				})
			}
		}
	}
}

// TestListCutInTheHead cuts a LIST body before its resourceVersion is known
// (nothing delivered yet): whatever kretry does, the caller gets the exact
// bytes or an error, never other bytes.
func TestListCutInTheHead(t *testing.T) {
	body := listBody(mediaJSON, 1000, 30)
	itemsAt := bytes.Index(body, []byte(`"items"`))
	for cut := 0; cut <= itemsAt+8; cut += 3 {
		for _, chunked := range []bool{false, true} {
			t.Run(fmt.Sprintf("chunked=%v/cut%d", chunked, cut), func(t *testing.T) {
				w := newWorld(t)
				srv := listServer(t, w, "application/json", body, answerPlan{f: framing{chunked: chunked}, cut: cut}, answerPlan{cut: -1})
				resp, err := w.httpClient(plainBase()).Get(srv.url() + listPath)
				if err != nil {
					t.Logf("error before body: %v", err)
					return
				}
				defer resp.Body.Close()
				got, err := readAll(resp.Body)
				if err == nil && !bytes.Equal(got, body) {
					t.Fatalf("no error but %d bytes, not the body", len(got))
				}
				if err != nil && !bytes.HasPrefix(body, got) {
					t.Fatalf("error %v after bytes that are not the body's prefix", err)
				}
				if err != nil {
					t.Errorf("cut at %d in the head: caller got error %v after %d bytes; server asked %d times; %s", cut, err, len(got), len(srv.requests()), w.obs)
				}
			})
		}
	}
}

// giveUpOK checks that err is the LIST body's give-up: a *GiveUpError
// that still reads as the break.
func giveUpOK(t *testing.T, err error) {
	t.Helper()
	var g *transport.GiveUpError
	if !errors.As(err, &g) {
		t.Fatalf("error %v (%T), want a *transport.GiveUpError", err, err)
	}
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("give-up %v does not unwrap to io.ErrUnexpectedEOF", err)
	}
}

// TestListResumeDisagrees: resumed answers that are not the same answer
// end the body with the give-up, never other bytes.
func TestListResumeDisagrees(t *testing.T) {
	body := listBody(mediaJSON, 1000, 30)
	cut := len(body) / 2
	longer := append(bytes.Clone(body[:len(body)-1]), []byte(` }`)...) // one byte more, same prefix
	shorter := body[:cut-10]
	cases := []struct {
		name    string
		first   answerPlan
		resumed answerPlan
	}{
		{"length-then-other-length", answerPlan{cut: cut}, answerPlan{cut: -1, body: longer}},
		{"length-then-other-type", answerPlan{cut: cut}, answerPlan{cut: -1, ctype: "application/yaml"}},
		{"length-then-gzip-declared", answerPlan{cut: cut}, answerPlan{cut: -1, extra: []string{"Content-Encoding", "identity, br"}}},
		{"chunked-then-shorter-than-delivered", answerPlan{f: framing{chunked: true}, cut: cut}, answerPlan{cut: -1, body: shorter}},
		{"chunked-then-chunked-shorter", answerPlan{f: framing{chunked: true}, cut: cut}, answerPlan{f: framing{chunked: true}, cut: -1, body: shorter}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			srv := listServer(t, w, "application/json", body, tc.first, tc.resumed)
			resp := w.get(plainBase(), srv.url()+listPath)
			got, err := readAll(resp.Body)
			if !bytes.HasPrefix(body, got) || len(got) > cut {
				t.Errorf("caller got %d bytes (a prefix: %v), want at most the %d delivered", len(got), bytes.HasPrefix(body, got), cut)
			}
			giveUpOK(t, err)
			o := w.obs.Events()
			if len(o.ListResumes) == 0 || o.ListResumes[len(o.ListResumes)-1].Outcome != transport.ListResumeMismatch {
				t.Errorf("list resumes %+v, want a mismatch", o.ListResumes)
			}
		})
	}
}

// TestListResumedLongerThanDeclared: the first answer declared N bytes and
// broke; the resumed one, chunked, has the same bytes and more. The
// caller's response never delivers other than the N it declared.
func TestListResumedLongerThanDeclared(t *testing.T) {
	body := listBody(mediaJSON, 1000, 30)
	cut := len(body) / 2
	longer := append(bytes.Clone(body), []byte("\n\n\n\n\n\n\n\n")...)
	w := newWorld(t)
	srv := listServer(t, w, "application/json", body, answerPlan{cut: cut}, answerPlan{f: framing{chunked: true}, cut: -1, body: longer})
	resp := w.get(plainBase(), srv.url()+listPath)
	got, err := readAll(resp.Body)
	if int64(len(got)) > resp.ContentLength {
		t.Errorf("caller's response declared %d and delivered %d (err %v)", resp.ContentLength, len(got), err)
	}
	if !bytes.HasPrefix(body, got) {
		t.Errorf("caller got bytes that are not the body's")
	}
	t.Logf("delivered %d of %d declared, err %v; %s", len(got), resp.ContentLength, err, w.obs)
}

// TestListResumeCutAgainMidSkip: resumes cut before they pass the delivered
// prefix, and after, again and again, with framing alternating: the body
// still arrives whole, and the server is asked nothing but the exact list.
func TestListResumeCutAgainMidSkip(t *testing.T) {
	body := listBody(mediaJSON, 1000, 60)
	n := len(body)
	plans := []answerPlan{
		{f: framing{chunked: true}, cut: n / 2},
		{f: framing{}, cut: n / 4},                           // cut inside the prefix being skipped
		{f: framing{chunked: true, reset: true}, cut: n / 2}, // cut exactly at the resume point
		{f: framing{}, cut: n/2 + 1},                         // one new byte
		{f: framing{chunked: true}, cut: n - 1},
		{f: framing{}, cut: -1},
	}
	w := newWorld(t)
	srv := listServer(t, w, "application/json", body, plans...)
	resp := w.get(plainBase(), srv.url()+listPath)
	if resp.ContentLength != -1 {
		t.Errorf("ContentLength %d, want -1 as the first answer", resp.ContentLength)
	}
	got, err := readAll(resp.Body)
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("read %d bytes, err %v; %s", len(got), err, w.obs)
	}
	reqs := srv.requests()
	if len(reqs) != len(plans) {
		t.Errorf("server asked %d times, want %d", len(reqs), len(plans))
	}
	for _, r := range reqs[1:] {
		if r.q("resourceVersion") != "1000" || r.q("resourceVersionMatch") != "Exact" {
			t.Errorf("resume %d asked %q", r.n, r.url.RawQuery)
		}
	}
}
