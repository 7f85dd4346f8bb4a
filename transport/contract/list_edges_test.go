package contract_test

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kretry/kretry/transport"
)

// TestListChunkedCutAfterLastByte: a chunked LIST delivers every byte, then
// breaks before its terminating chunk. The resumed answer (with a length,
// then chunked) ends exactly there: the caller gets the body and EOF.
func TestListChunkedCutAfterLastByte(t *testing.T) {
	body := listBody(mediaJSON, 1000, 20)
	for _, resumedChunked := range []bool{false, true} {
		w := newWorld(t)
		srv := newRawServer(t, w.clk, func(c *rawConn, q rawReq) bool {
			if q.n == 1 {
				out := append(head(200, mediaJSON, -1), chunk(body)...)
				c.send(out)
				c.Close()
				return false
			}
			return writeBody(c, mediaJSON, body, resumedChunked, -1, false)
		})
		resp := w.get(plainBase(), srv.url()+listPath)
		got, err := readAll(resp.Body)
		resp.Body.Close()
		if err != nil || !bytes.Equal(got, body) {
			t.Errorf("resumed chunked=%v: read %d of %d, err %v; %s", resumedChunked, len(got), len(body), err, w.obs)
		}
	}
}

// TestListResumeGone: the resume at the exact resourceVersion is answered
// 410 (compacted): the caller's error is the break in a *GiveUpError,
// never the 410 (client-go would read it as an expired continue token).
func TestListResumeGone(t *testing.T) {
	body := listBody(mediaJSON, 1000, 20)
	w := newWorld(t)
	srv := newRawServer(t, w.clk, func(c *rawConn, q rawReq) bool {
		if q.n == 1 {
			return writeBody(c, mediaJSON, body, true, len(body)/2, false)
		}
		return writeStatus(c, 410, metav1.StatusReasonExpired, "The resourceVersion for the provided list is too old.")
	})
	cs := w.clientset(srv.url(), nil, mediaJSON)
	_, err := cs.CoreV1().Pods("ns").List(realCtx(t), metav1.ListOptions{})
	if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
		t.Errorf("the caller got the 410: %v", err)
	}
	var g *transport.GiveUpError
	if !errors.As(err, &g) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("error %v (%T), want a *GiveUpError unwrapping the break", err, err)
	}
	if o := w.obs.Events(); len(o.ListResumes) != 1 || o.ListResumes[0].Outcome != transport.ListResumeGone {
		t.Errorf("list resumes %+v", o.ListResumes)
	}
}

// TestListResumeSilentIsBounded: the resume of a broken LIST body is
// accepted and never answered: bounded (20 s without headers is a failure,
// within the window), the caller is never left hanging.
func TestListResumeSilentIsBounded(t *testing.T) {
	body := listBody(mediaJSON, 1000, 20)
	w := newWorld(t)
	w.clk.manual = true
	held := make(chan struct{}, 100)
	srv := newRawServer(t, w.clk, func(c *rawConn, q rawReq) bool {
		if q.n == 1 {
			return writeBody(c, mediaJSON, body, false, len(body)/2, false)
		}
		held <- struct{}{}
		b := make([]byte, 1)
		c.Conn.SetReadDeadline(time.Now().Add(hang))
		c.Conn.Read(b) // until the client leaves
		return false
	})
	resp := w.get(plainBase(), srv.url()+listPath)
	done := make(chan error, 1)
	go func() {
		_, err := readAll(resp.Body)
		done <- err
	}()
	start := w.clk.Now()
	for {
		select {
		case err := <-done:
			var g *transport.GiveUpError
			if !errors.As(err, &g) || !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("error %v, want the give-up of the break", err)
			}
			if el := w.clk.Now().Sub(start); el > 61*time.Second {
				t.Errorf("gave up after %v", el)
			}
			t.Logf("gave up after %v of virtual time, %d requests: %v", w.clk.Now().Sub(start), len(srv.requests()), err)
			return
		case <-held:
		case <-time.After(20 * time.Millisecond):
		}
		if w.clk.Now().Sub(start) > 5*time.Minute {
			t.Fatalf("the caller is left hanging: %v of virtual time; %s", w.clk.Now().Sub(start), w.obs)
		}
		w.clk.advance(time.Second)
	}
}

// TestListPageKeepsLimit: a first page (limit=2) whose answer carries a
// continue token is resumed with its limit; the next page, with its
// continue token, keeps it on resume.
func TestListPageKeepsLimit(t *testing.T) {
	l := podList(1000, 2)
	l.Continue = "tok-next"
	body := mustJSON(l)
	w := newWorld(t)
	srv := newRawServer(t, w.clk, func(c *rawConn, q rawReq) bool {
		if q.n == 1 || q.n == 3 {
			return writeBody(c, mediaJSON, body, false, len(body)-5, false)
		}
		return writeBody(c, mediaJSON, body, false, -1, false)
	})
	cs := w.clientset(srv.url(), nil, mediaJSON)
	if _, err := cs.CoreV1().Pods("ns").List(realCtx(t), metav1.ListOptions{Limit: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Pods("ns").List(realCtx(t), metav1.ListOptions{Limit: 2, Continue: "tok-1"}); err != nil {
		t.Fatal(err)
	}
	r := srv.requests()
	if len(r) != 4 {
		t.Fatalf("%d requests", len(r))
	}
	if r[1].q("limit") != "2" || r[1].q("resourceVersion") != "1000" || r[1].q("resourceVersionMatch") != "Exact" {
		t.Errorf("resume of the first page asked %q", r[1].url.RawQuery)
	}
	if r[3].q("limit") != "2" || r[3].q("continue") != "tok-1" {
		t.Errorf("resume of the next page asked %q", r[3].url.RawQuery)
	}
}
