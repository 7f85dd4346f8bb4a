package transport_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/kretry/kretry/internal/harness/fakeclock"
	"github.com/kretry/kretry/internal/harness/listbody"
	"github.com/kretry/kretry/transport"
)

// answerTimeout is kretry's bound on an attempt left unanswered (a watch's
// open or reopen, a LIST's resume), as documented in docs/behaviour.md.
const answerTimeout = 20 * time.Second

// edgeWindow is the InternalErrorWindow of these tests.
const edgeWindow = 500 * time.Millisecond

// listAnswer answers LIST number n (from 0) of a scripted server.
type listAnswer func(w http.ResponseWriter, r *http.Request, body []byte)

// scriptedLists is a loopback API server answering the n-th LIST of
// ConfigMaps with script[n] (the last one repeated), over a body of 250
// ConfigMaps at resourceVersion 42 in JSON. WATCHes are answered by watch;
// each LIST's number is sent on arrived as it arrives.
type scriptedLists struct {
	*httptest.Server
	body    []byte
	arrived chan int

	mu     sync.Mutex
	script []listAnswer
	lists  int
}

func newScriptedLists(t *testing.T, script ...listAnswer) *scriptedLists {
	t.Helper()
	s := &scriptedLists{body: listbody.ConfigMaps(0, 250, "", "application/json"), arrived: make(chan int, 100), script: script}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") == "true" {
			edgeWatch(w, r)
			return
		}
		s.mu.Lock()
		n := s.lists
		s.lists++
		answer := s.script[min(n, len(s.script)-1)]
		s.mu.Unlock()
		s.arrived <- n
		answer(w, r, s.body)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *scriptedLists) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lists
}

// edgeWatch refuses a streaming list (client-go then falls back to a LIST,
// as against an apiserver without the feature) and holds any other watch
// open, empty, until the client goes.
func edgeWatch(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Query().Get("sendInitialEvents") == "true" {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, statusBody(400, metav1.StatusReasonBadRequest, "sendInitialEvents is not supported", nil))
		return
	}
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	<-r.Context().Done()
}

// whole answers the whole list, chunked.
func whole(w http.ResponseWriter, _ *http.Request, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(body)
}

// cutAt answers the first n bytes of the list, chunked, then drops the
// connection.
func cutAt(n int) listAnswer {
	return func(w http.ResponseWriter, _ *http.Request, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.Write(body[:n])
		w.(http.Flusher).Flush()
		hangUp(w)
	}
}

func hangUp(w http.ResponseWriter) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		panic(err)
	}
	conn.Close()
}

// unanswered accepts the LIST and never answers it.
func unanswered(_ http.ResponseWriter, r *http.Request, _ []byte) { <-r.Context().Done() }

// stallsAfter answers the first n bytes of the list, then sends nothing more
// until the client goes.
func stallsAfter(n int) listAnswer {
	return func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.Write(body[:n])
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}
}

func unavailableList(w http.ResponseWriter, _ *http.Request, _ []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusServiceUnavailable)
	fmt.Fprint(w, statusBody(503, metav1.StatusReasonServiceUnavailable, "apiserver is shutting down", nil))
}

// advanceWhenSilent moves clock on by the answer timeout once LIST number
// n has arrived, and again every 50 ms of real time until stop is closed:
// the timer kretry runs on the attempt (for its headers, then for each read
// of its body) fires whichever it is at that moment.
func advanceWhenSilent(clock *fakeclock.Clock, s *scriptedLists, n int, stop <-chan struct{}) {
	for arrived := range s.arrived {
		if arrived != n {
			continue
		}
		for {
			clock.Advance(answerTimeout)
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
}

func edgeConfig(clock *fakeclock.Clock) transport.Config {
	return transport.Config{Clock: clock, Rand: func() float64 { return 0.5 }, InternalErrorWindow: edgeWindow}
}

func jsonClientset(t *testing.T, s *scriptedLists, wrap func(http.RoundTripper) http.RoundTripper) *rest.Config {
	t.Helper()
	cfg := &rest.Config{Host: s.URL, ContentConfig: rest.ContentConfig{ContentType: "application/json", AcceptContentTypes: "application/json"}}
	if wrap != nil {
		cfg.Wrap(wrap)
	}
	return cfg
}

// wantBodyGiveUp fails t unless err is kretry's give-up of a LIST body,
// which still is the break to errors.Is.
func wantBodyGiveUp(t *testing.T, err error) *transport.GiveUpError {
	t.Helper()
	var giveUp *transport.GiveUpError
	if !errors.As(err, &giveUp) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("err = %v, want a *transport.GiveUpError that is io.ErrUnexpectedEOF to errors.Is", err)
	}
	if giveUp.Attempts < 2 {
		t.Errorf("GiveUpError.Attempts = %d, want the first answer and the resume's", giveUp.Attempts)
	}
	return giveUp
}

// TestClientsetUnansweredListResumeIsBounded: a LIST cut mid-body whose
// exact-resourceVersion resume reaches a server that accepts and never
// answers (or answers and stalls inside the delivered prefix) ends within
// the window plus the answer timeout, with the break, through a Clientset's
// List and through tools/pager; the caller's own deadline is far off. Fails
// before: Read hung until the caller's deadline.
func TestClientsetUnansweredListResumeIsBounded(t *testing.T) {
	body := listbody.ConfigMaps(0, 250, "", "application/json")
	for _, tt := range []struct {
		name   string
		resume listAnswer
	}{
		{"no answer", unanswered},
		{"prefix stalls", stallsAfter(len(body) / 4)},
	} {
		for _, via := range []string{"List", "pager"} {
			t.Run(tt.name+"/"+via, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
				defer cancel()
				server := newScriptedLists(t, cutAt(len(body)/2), tt.resume)
				clock := fakeclock.New(epoch)
				cs := clientsetWith(t, jsonClientset(t, server, nil), transport.Wrapper(edgeConfig(clock)))
				stop := make(chan struct{})
				go advanceWhenSilent(clock, server, 1, stop)
				done := make(chan error, 1)
				go func() {
					var err error
					if via == "List" {
						_, err = cs.CoreV1().ConfigMaps("ns").List(ctx, metav1.ListOptions{})
					} else {
						_, err = pagedList(ctx, cs, 500, metav1.ListOptions{})
					}
					done <- err
				}()
				var err error
				select {
				case err = <-done:
				case <-time.After(20 * time.Second):
					t.Fatal("the LIST was still reading 20 s (real) in: the resume was left hanging")
				}
				close(stop)
				wantBodyGiveUp(t, err)
				if n := server.count(); n != 2 {
					t.Errorf("%d LISTs, want the first and its one resume", n)
				}
			})
		}
	}
	t.Run("stock client-go", func(t *testing.T) {
		server := newScriptedLists(t, cutAt(len(body)/2), unanswered)
		cs := clientsetWith(t, jsonClientset(t, server, nil), nil)
		if _, err := cs.CoreV1().ConfigMaps("ns").List(context.Background(), metav1.ListOptions{}); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("List err = %v, want the break at once", err)
		}
	})
}

// TestInformerUnansweredListResumeRelists: an informer's LIST (it has no
// deadline) whose resume is never answered fails within the window plus the
// answer timeout of virtual time, and the informer lists again and syncs.
// Fails before: the informer never synced.
func TestInformerUnansweredListResumeRelists(t *testing.T) {
	server := newScriptedLists(t, cutAt(len(listbody.ConfigMaps(0, 250, "", "application/json"))/2), unanswered, whole)
	clock := fakeclock.New(epoch)
	var mu sync.Mutex
	var gaveUpAt time.Duration
	cfg := edgeConfig(clock)
	cfg.Observer = &listResumeTimes{record: func(e transport.ListResumeEvent) {
		mu.Lock()
		defer mu.Unlock()
		gaveUpAt = clock.Since(epoch)
		if e.Outcome != transport.ListResumeGaveUp {
			t.Errorf("resume outcome %s, want gave-up", e.Outcome)
		}
	}}
	cs := clientsetWith(t, jsonClientset(t, server, nil), transport.Wrapper(cfg))
	lw := &cache.ListWatch{
		ListFunc: func(opts metav1.ListOptions) (runtime.Object, error) {
			return cs.CoreV1().ConfigMaps("ns").List(context.Background(), opts)
		},
		WatchFunc: func(opts metav1.ListOptions) (watch.Interface, error) {
			return cs.CoreV1().ConfigMaps("ns").Watch(context.Background(), opts)
		},
	}
	store, controller := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw, ObjectType: &corev1.ConfigMap{}, Handler: cache.ResourceEventHandlerFuncs{},
	})
	stop := make(chan struct{})
	defer close(stop)
	advanced := make(chan struct{})
	go advanceWhenSilent(clock, server, 1, advanced)
	go controller.Run(stop)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), controller.HasSynced) {
		close(advanced)
		t.Fatalf("the informer never synced (%d LISTs): its LIST was left hanging", server.count())
	}
	close(advanced)
	if n := len(store.List()); n != 250 {
		t.Errorf("store holds %d ConfigMaps, want 250", n)
	}
	if n := server.count(); n != 3 {
		t.Errorf("%d LISTs, want the first, its resume, the relist", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if gaveUpAt <= 0 || gaveUpAt > edgeWindow+answerTimeout {
		t.Errorf("the resume gave up %v in (virtual), want within the window plus the answer timeout (%v)", gaveUpAt, edgeWindow+answerTimeout)
	}
}

// listResumeTimes is an Observer that hears LIST resumes only.
type listResumeTimes struct {
	recorder
	record func(transport.ListResumeEvent)
}

func (o *listResumeTimes) ObserveListResume(e transport.ListResumeEvent) { o.record(e) }

// TestClientsetListGiveUpIsGiveUpError: every way a LIST resume can end
// without resuming hands client-go a *transport.GiveUpError (attempts,
// elapsed) that errors.Is still sees as the io.ErrUnexpectedEOF it met.
// Fails before: the caller got the bare break.
func TestClientsetListGiveUpIsGiveUpError(t *testing.T) {
	body := listbody.ConfigMaps(0, 250, "", "application/json")
	cut := len(body) / 2
	changed := func(w http.ResponseWriter, r *http.Request, body []byte) {
		b := bytes.Clone(body)
		b[cut-10] ^= 1
		whole(w, r, b)
	}
	gone := func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusGone)
		fmt.Fprint(w, statusBody(410, metav1.StatusReasonExpired, "too old resource version: 42 (99)", nil))
	}
	otherType := func(w http.ResponseWriter, _ *http.Request, body []byte) {
		w.Header().Set("Content-Type", "application/json;charset=utf-8")
		w.Write(body)
	}
	short := func(w http.ResponseWriter, _ *http.Request, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(body[:cut/2])
	}
	for _, tt := range []struct {
		name   string
		resume listAnswer
	}{
		{"mismatch", changed},
		{"410 at the exact resourceVersion", gone},
		{"another content type", otherType},
		{"short answer", short},
		{"503s past the window", unavailableList},
	} {
		t.Run(tt.name, func(t *testing.T) {
			server := newScriptedLists(t, cutAt(cut), tt.resume)
			cs := clientsetWith(t, jsonClientset(t, server, nil), transport.Wrapper(edgeConfig(fakeclock.New(epoch))))
			_, err := cs.CoreV1().ConfigMaps("ns").List(context.Background(), metav1.ListOptions{})
			giveUp := wantBodyGiveUp(t, err)
			if giveUp.Last == nil || !errors.Is(giveUp.Last, io.ErrUnexpectedEOF) {
				t.Errorf("GiveUpError.Last = %v, want the break", giveUp.Last)
			}
		})
	}
}

// TestClientsetListFirstAnswerBytesEndTheRun: a LIST answered 503, retried,
// answered 200, whose body streams for longer than the window and is then
// cut, is resumed: the bytes of the first 200 ended the run the 503 began.
// Fails before: no resume was sent and the caller got a truncated body.
func TestClientsetListFirstAnswerBytesEndTheRun(t *testing.T) {
	clock := fakeclock.New(epoch)
	body := listbody.ConfigMaps(0, 250, "", "application/json")
	slowThenCut := func(w http.ResponseWriter, _ *http.Request, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.Write(body[:len(body)/3])
		w.(http.Flusher).Flush()
		clock.Advance(2 * edgeWindow) // a long, healthy stream
		w.Write(body[len(body)/3 : len(body)*2/3])
		w.(http.Flusher).Flush()
		hangUp(w)
	}
	server := newScriptedLists(t, unavailableList, slowThenCut, whole)
	cs := clientsetWith(t, jsonClientset(t, server, nil), transport.Wrapper(edgeConfig(clock)))
	list, err := cs.CoreV1().ConfigMaps("ns").List(context.Background(), metav1.ListOptions{})
	if err != nil || len(list.Items) != 250 {
		t.Fatalf("List: %d items, %v; want all 250 (body %d bytes)", len(list.Items), err, len(body))
	}
	if n := server.count(); n != 3 {
		t.Errorf("%d LISTs, want the 503, the cut answer, its resume", n)
	}
}

// TestListResumeMustAgreeWithTheFirstAnswer: the first answer declared its
// Content-Length; a resume that begins with the same bytes but declares
// another length, or declares none and runs past it, or comes in another
// encoding, is a mismatch: the caller, a raw http.Client as kretry-proxy
// is, never reads past the length it was told. One that declares no length
// for the very same bytes agrees (framing is the server's choice). Fails
// before: it read the resume's longer body; and (the row "no length, the
// same bytes") the resume without a length was given up.
func TestListResumeMustAgreeWithTheFirstAnswer(t *testing.T) {
	declared := func(w http.ResponseWriter, _ *http.Request, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusOK)
		w.Write(body[:len(body)/2])
		w.(http.Flusher).Flush()
		hangUp(w)
	}
	longer := func(w http.ResponseWriter, _ *http.Request, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		b := append(bytes.Clone(body[:len(body)-1]), `,"extra":true}`...)
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		w.Write(b)
	}
	chunked := func(w http.ResponseWriter, _ *http.Request, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.Write(body)
		w.(http.Flusher).Flush()
	}
	chunkedLonger := func(w http.ResponseWriter, r *http.Request, body []byte) {
		chunked(w, r, append(bytes.Clone(body[:len(body)-1]), `,"extra":true}`...))
	}
	gzipped := func(w http.ResponseWriter, _ *http.Request, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Encoding", "identity")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
	}
	for _, tt := range []struct {
		name   string
		resume listAnswer
		agrees bool
	}{
		{"longer", longer, false},
		{"no length, longer", chunkedLonger, false},
		{"another encoding", gzipped, false},
		{"no length, the same bytes", chunked, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			server := newScriptedLists(t, declared, tt.resume)
			client := &http.Client{Transport: transport.New(http.DefaultTransport.(*http.Transport).Clone(), edgeConfig(fakeclock.New(epoch)))}
			resp, err := client.Get(server.URL + "/api/v1/namespaces/ns/configmaps")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			got, err := io.ReadAll(resp.Body)
			if int64(len(got)) > resp.ContentLength {
				t.Errorf("read %d bytes, past the Content-Length %d", len(got), resp.ContentLength)
			}
			if tt.agrees {
				if err != nil || int64(len(got)) != resp.ContentLength {
					t.Errorf("read %d of %d bytes, %v; want the whole body", len(got), resp.ContentLength, err)
				}
			} else {
				wantBodyGiveUp(t, err)
			}
			if n := server.count(); n != 2 {
				t.Errorf("%d LISTs, want 2", n)
			}
		})
	}
}
