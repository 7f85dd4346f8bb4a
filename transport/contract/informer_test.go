package contract_test

import (
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// informerRecorder records what an informer's handler saw.
type informerRecorder struct {
	mu      sync.Mutex
	updates []int // the resourceVersions of pod "p"'s updates, in order
	adds    int
}

func (r *informerRecorder) handler() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			r.mu.Lock()
			r.adds++
			r.mu.Unlock()
		},
		UpdateFunc: func(old, obj any) {
			p := obj.(*corev1.Pod)
			if p.Name != "p" || old.(*corev1.Pod).ResourceVersion == p.ResourceVersion {
				return
			}
			n, _ := strconv.Atoi(p.ResourceVersion)
			r.mu.Lock()
			r.updates = append(r.updates, n)
			r.mu.Unlock()
		},
	}
}

func (r *informerRecorder) seen() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.updates)
}

// informerList is the LIST an informer makes: pod "p" at 100 and others.
func informerList(media string) []byte {
	l := podList(100, 3)
	p := pod("p", 100)
	l.Items = append(l.Items, *p)
	if media == mediaProtobuf {
		return protoEncode(l)
	}
	return mustJSON(l)
}

func startInformer(t *testing.T, w *world, host, media string) *informerRecorder {
	cs := w.clientset(host, nil, media)
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace("ns"))
	inf := f.Core().V1().Pods().Informer()
	rec := &informerRecorder{}
	inf.AddEventHandler(rec.handler())
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop); f.Shutdown() })
	f.Start(stop)
	return rec
}

func lists(s *watchServer) int {
	n := 0
	for _, q := range s.requests() {
		if !isWatch(q) {
			n++
		}
	}
	return n
}

// TestInformerCutsNoRelist: an informer's watch (JSON, protobuf) is cut
// again and again mid-frame: every update reaches the handler once, in
// order, and the informer lists once.
func TestInformerCutsNoRelist(t *testing.T) {
	for _, media := range []string{mediaJSON, mediaProtobuf} {
		t.Run(media, func(t *testing.T) {
			w := newWorld(t)
			const last = 130
			srv := newWatchServer(t, w, media, func(q rawReq) watchAnswer {
				rv := q.rv()
				s := events(media, rv, min(rv+7, last))
				if rv+7 >= last {
					return watchAnswer{stream: s, cut: -1}
				}
				// cut in the middle of the 5th frame or so
				return watchAnswer{stream: s, cut: len(s) * 9 / 14, reset: q.n%2 == 0}
			}, func(c *rawConn, q rawReq) bool {
				return writeBody(c, media, informerList(media), true, -1, false)
			})
			rec := startInformer(t, w, srv.url(), media)
			t.Cleanup(func() {
				if t.Failed() {
					for _, q := range srv.requests() {
						t.Logf("request %d conn %d %s %s", q.n, q.conn, q.url.Path, q.url.RawQuery)
					}
					t.Logf("seen %v; %s", rec.seen(), w.obs)
				}
			})
			eventually(t, "every update", func() bool { return len(rec.seen()) >= last-100 })
			if got := rec.seen(); !slices.Equal(got, seq(101, last)) {
				t.Errorf("handler saw %v", got)
			}
			if n := lists(srv); n != 1 {
				t.Errorf("%d LISTs: the informer relisted; %s", n, w.obs)
			}
		})
	}
}

// TestInformerErrorEvent500Relists: an informer's watch gets an ERROR 500
// on every stream: past the window kretry delivers it, the informer
// relists; then the server serves again and updates flow.
func TestInformerErrorEvent500Relists(t *testing.T) {
	w := newWorld(t)
	var mu sync.Mutex
	healthy := false // after the second LIST
	listed := 0
	srv := newWatchServer(t, w, mediaJSON, func(q rawReq) watchAnswer {
		mu.Lock()
		ok := healthy
		mu.Unlock()
		rv := q.rv()
		if ok {
			return openStream(mediaJSON, rv, 105)
		}
		s := errorEvent(mediaJSON, 500, "etcdserver: leader changed")
		if rv == 100 {
			s = append(events(mediaJSON, 100, 101), s...)
		}
		return watchAnswer{stream: s, cut: -1, end: true}
	}, func(c *rawConn, q rawReq) bool {
		mu.Lock()
		listed++
		second := listed >= 2
		healthy = second
		mu.Unlock()
		b := informerList(mediaJSON)
		if second {
			l := podList(101, 3)
			l.Items = append(l.Items, *pod("p", 101))
			b = mustJSON(l)
		}
		return writeBody(c, mediaJSON, b, false, -1, false)
	})
	rec := startInformer(t, w, srv.url(), mediaJSON)
	t.Cleanup(func() {
		if t.Failed() {
			for _, q := range srv.requests() {
				t.Logf("request %d conn %d @%v %s", q.n, q.conn, q.at.Sub(srv.requests()[0].at), q.url.RawQuery)
			}
			t.Logf("seen %v; %s", rec.seen(), w.obs)
		}
	})
	eventually(t, "the relist and updates after it", func() bool { return lists(srv) == 2 && len(rec.seen()) >= 5 })
	if got := rec.seen(); !slices.Equal(got, seq(101, 105)) {
		t.Errorf("handler saw %v", got)
	}
	var trail []string
	for _, q := range srv.requests() {
		trail = append(trail, fmt.Sprintf("%s@%v", q.url.RawQuery, q.at.Sub(srv.requests()[0].at).Round(time.Millisecond)))
	}
	t.Logf("%s", trail)
}

// TestInformerReopenThrottledAndUnavailable: an informer's watch is cut;
// its reopens are answered 503, then 429 with Retry-After, then served:
// every update once, in order, one LIST.
func TestInformerReopenThrottledAndUnavailable(t *testing.T) {
	w := newWorld(t)
	var n atomic.Int64
	srv := newWatchServer(t, w, mediaProtobuf, func(q rawReq) watchAnswer {
		rv := q.rv()
		switch n.Add(1) % 4 {
		case 1:
			s := events(mediaProtobuf, rv, rv+3)
			return watchAnswer{stream: s, cut: len(s) - 7}
		case 2:
			return watchAnswer{code: 503}
		case 3:
			return watchAnswer{code: 429, extra: []string{"Retry-After", "3"}}
		}
		return openStream(mediaProtobuf, rv, 112)
	}, func(c *rawConn, q rawReq) bool {
		return writeBody(c, mediaProtobuf, informerList(mediaProtobuf), false, -1, false)
	})
	rec := startInformer(t, w, srv.url(), mediaProtobuf)
	eventually(t, "every update", func() bool { return len(rec.seen()) >= 12 })
	if got := rec.seen(); !slices.Equal(got, seq(101, 112)) {
		t.Errorf("handler saw %v", got)
	}
	if n := lists(srv); n != 1 {
		t.Errorf("%d LISTs", n)
	}
	var codes []string
	for _, a := range w.obs.Events().Attempts {
		codes = append(codes, fmt.Sprint(a.Code))
	}
	t.Logf("attempts %v", codes)
}

// TestInformerResume410Relists: an informer's watch loses its connection
// and the resume is answered 410 (another S each time: the search ends at
// once): the informer gets the ERROR 410 and relists, once.
func TestInformerResume410Relists(t *testing.T) {
	w := newWorld(t)
	var mu sync.Mutex
	listed := 0
	srv := newWatchServer(t, w, mediaJSON, func(q rawReq) watchAnswer {
		rv := q.q("resourceVersion")
		mu.Lock()
		n := listed
		mu.Unlock()
		if n >= 2 {
			return watchAnswer{cut: -1}
		}
		if rv == "100" {
			return watchAnswer{stream: events(mediaJSON, 100, 102), cut: -1, end: false}
		}
		return watchAnswer{code: 410, body: tooOld(rv, 300+q.n)}
	}, func(c *rawConn, q rawReq) bool {
		mu.Lock()
		listed++
		mu.Unlock()
		return writeBody(c, mediaJSON, informerList(mediaJSON), false, -1, false)
	})
	rec := startInformer(t, w, srv.url(), mediaJSON)
	eventually(t, "2 updates", func() bool { return len(rec.seen()) == 2 && srv.stayingNow() == 1 })
	srv.cutStaying()
	eventually(t, "the relist", func() bool { return lists(srv) == 2 })
	if got := rec.seen(); len(got) < 2 || !slices.Equal(got[:2], seq(101, 102)) {
		t.Errorf("handler saw %v", got)
	}
}
