package contract_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestList50ConcurrentCuts: 50 LISTs at once through one Clientset, each
// body cut 1–3 times at seeded offsets with mixed framing (Content-Length
// or chunked, close or RST), under a retry budget that allows nothing: a
// LIST resume does not spend it, so every list arrives whole, and each
// server request is the list or its exact re-request.
func TestList50ConcurrentCuts(t *testing.T) {
	const lists = 50
	rng := rand.New(rand.NewPCG(7, 11))
	type plan struct {
		body  []byte
		rv    int
		cuts  []int
		chunk []bool
		reset []bool
	}
	plans := make([]*plan, lists)
	for i := range plans {
		rv := 10000 + i*7
		p := &plan{rv: rv, body: listBody(mediaJSON, rv, 5+rng.IntN(60))}
		n := 1 + rng.IntN(3)
		for j := 0; j < n; j++ {
			p.cuts = append(p.cuts, 100+rng.IntN(len(p.body)-100))
		}
		for j := 0; j <= n; j++ {
			p.chunk = append(p.chunk, rng.IntN(2) == 0)
			p.reset = append(p.reset, rng.IntN(2) == 0)
		}
		plans[i] = p
	}
	w := newWorld(t)
	w.clk.frozen = true
	w.kc.RetryBudget = budgetAllowsNothing
	var mu sync.Mutex
	seen := map[int][]rawReq{}
	srv := newRawServer(t, w.clk, func(c *rawConn, q rawReq) bool {
		var i int
		fmt.Sscanf(strings.Split(q.url.Path, "/")[4], "ns-%d", &i)
		p := plans[i]
		mu.Lock()
		k := len(seen[i])
		seen[i] = append(seen[i], q)
		mu.Unlock()
		cut := -1
		if k < len(p.cuts) {
			cut = p.cuts[k]
		}
		return writeBody(c, mediaJSON, p.body, p.chunk[min(k, len(p.chunk)-1)], cut, p.reset[min(k, len(p.reset)-1)])
	})
	cs := w.clientset(srv.url(), nil, mediaJSON)
	ctx := realCtx(t)
	errs := allAtOnce(lists, func(i int) error {
		l, err := cs.CoreV1().Pods(fmt.Sprintf("ns-%d", i)).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		want := podList(plans[i].rv, 0)
		if l.ResourceVersion != want.ResourceVersion || string(mustJSON(l)) == "" {
			return fmt.Errorf("rv %s", l.ResourceVersion)
		}
		// re-encode and compare with what the server held
		if got, wantB := len(l.Items), strings.Count(string(plans[i].body), `"kind":"Pod"`); got != wantB {
			return fmt.Errorf("%d items, want %d", got, wantB)
		}
		return nil
	})
	for i, err := range errs {
		if err != nil {
			t.Errorf("list %d (cuts %v): %v", i, plans[i].cuts, err)
		}
	}
	for i, p := range plans {
		qs := seen[i]
		if len(qs) != len(p.cuts)+1 {
			t.Errorf("list %d: server asked %d times, want %d", i, len(qs), len(p.cuts)+1)
		}
		for _, q := range qs[1:] {
			if q.q("resourceVersion") != fmt.Sprint(p.rv) || q.q("resourceVersionMatch") != "Exact" {
				t.Errorf("list %d: resume asked %q", i, q.url.RawQuery)
			}
		}
	}
	o := w.obs.Events()
	if len(o.Refusals) != 0 {
		t.Errorf("budget refused %d retries: a LIST resume must not spend it", len(o.Refusals))
	}
}

// TestList50ConcurrentCutsHTTP2: the same over one HTTP/2 connection, each
// body cut 1–3 times by RST_STREAM, with and without a declared length.
func TestList50ConcurrentCutsHTTP2(t *testing.T) {
	const lists = 50
	rng := rand.New(rand.NewPCG(3, 5))
	type plan struct {
		body    []byte
		rv      int
		cuts    []int
		declare []bool
	}
	plans := make([]*plan, lists)
	for i := range plans {
		rv := 20000 + i
		p := &plan{rv: rv, body: listBody(mediaProtobuf, rv, 5+rng.IntN(60))}
		for j, n := 0, 1+rng.IntN(3); j < n; j++ {
			p.cuts = append(p.cuts, 80+rng.IntN(len(p.body)-80))
		}
		for j := 0; j <= len(p.cuts); j++ {
			p.declare = append(p.declare, rng.IntN(2) == 0)
		}
		plans[i] = p
	}
	var mu sync.Mutex
	seen := map[int][]h2Req{}
	srv := newH2Server(t, func(w http.ResponseWriter, r *http.Request, q h2Req) {
		var i int
		fmt.Sscanf(strings.Split(r.URL.Path, "/")[4], "ns-%d", &i)
		p := plans[i]
		mu.Lock()
		k := len(seen[i])
		seen[i] = append(seen[i], q)
		mu.Unlock()
		w.Header().Set("Content-Type", mediaProtobuf)
		if p.declare[min(k, len(p.declare)-1)] {
			w.Header().Set("Content-Length", fmt.Sprint(len(p.body)))
		}
		w.WriteHeader(200)
		if k < len(p.cuts) {
			w.Write(p.body[:p.cuts[k]])
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}
		w.Write(p.body[:len(p.body)/2])
		w.(http.Flusher).Flush()
		w.Write(p.body[len(p.body)/2:])
	})
	w := newWorld(t)
	w.clk.frozen = true
	w.kc.RetryBudget = budgetAllowsNothing
	cs := w.clientset(srv.srv.URL, srv.caPEM, mediaProtobuf)
	ctx := realCtx(t)
	errs := allAtOnce(lists, func(i int) error {
		l, err := cs.CoreV1().Pods(fmt.Sprintf("ns-%d", i)).List(ctx, metav1.ListOptions{})
		if err == nil && (l.ResourceVersion != fmt.Sprint(plans[i].rv) || !bytes.Equal(protoEncode(l), plans[i].body)) {
			err = fmt.Errorf("the list differs from the server's")
		}
		return err
	})
	for i, err := range errs {
		if err != nil {
			t.Errorf("list %d (cuts %v): %v", i, plans[i].cuts, err)
		}
	}
	conns := map[string]bool{}
	for i, p := range plans {
		if len(seen[i]) != len(p.cuts)+1 {
			t.Errorf("list %d asked %d times, want %d", i, len(seen[i]), len(p.cuts)+1)
		}
		for _, q := range seen[i] {
			conns[q.remote] = true
		}
	}
	t.Logf("%d connections", len(conns))
}
