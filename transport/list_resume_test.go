package transport_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/pager"

	"github.com/kretry/kretry/internal/harness/fakeclock"
	"github.com/kretry/kretry/internal/harness/listbody"
	"github.com/kretry/kretry/transport"
)

// listServer is a loopback API server holding n ConfigMaps at
// resourceVersion 42, answering LISTs in JSON or protobuf with pages
// (limit, continue "c<index>") as kube-apiserver does, byte-identical when
// asked again. Answer number i (from 0) is cut after cuts[i] bytes, or
// changed by change[i]; an Exact LIST at a compacted resourceVersion is a
// 410.
type listServer struct {
	*httptest.Server
	n         int
	cuts      map[int]int
	change    map[int]func([]byte) []byte
	compacted bool

	mu           sync.Mutex
	asked        []url.Values
	contentTypes []string // of each answer
}

func newListServer(t *testing.T, n int) *listServer {
	s := &listServer{n: n, cuts: map[int]int{}, change: map[int]func([]byte) []byte{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *listServer) queries() []url.Values {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]url.Values(nil), s.asked...)
}

func (s *listServer) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	number := len(s.asked)
	s.asked = append(s.asked, r.URL.Query())
	cut, isCut := s.cuts[number]
	change := s.change[number]
	s.mu.Unlock()

	q := r.URL.Query()
	if q.Get("resourceVersionMatch") == "Exact" && (s.compacted || q.Get("resourceVersion") != "42") {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusGone)
		fmt.Fprint(w, statusBody(410, metav1.StatusReasonExpired, "too old resource version: 42 (99)", nil))
		return
	}
	start := 0
	if c := q.Get("continue"); c != "" {
		start, _ = strconv.Atoi(strings.TrimPrefix(c, "c"))
	}
	end := s.n
	next := ""
	if limit, _ := strconv.Atoi(q.Get("limit")); limit > 0 && start+limit < s.n {
		end, next = start+limit, "c"+strconv.Itoa(start+limit)
	}
	contentType := "application/json"
	if strings.HasPrefix(r.Header.Get("Accept"), protobufType) {
		contentType = protobufType
	}
	s.mu.Lock()
	s.contentTypes = append(s.contentTypes, contentType)
	s.mu.Unlock()
	body := listbody.ConfigMaps(start, end, next, contentType)
	if change != nil {
		body = change(body)
	}
	w.Header().Set("Content-Type", contentType)
	if !isCut {
		w.Write(body)
		return
	}
	// Chunked, as kube-apiserver sends any list over a few KiB; then the
	// connection drops.
	w.WriteHeader(http.StatusOK)
	w.Write(body[:cut])
	w.(http.Flusher).Flush()
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		panic(err)
	}
	conn.Close()
}

func listClientset(t *testing.T, server *listServer, contentType string, wrap func(http.RoundTripper) http.RoundTripper) kubernetes.Interface {
	t.Helper()
	// The typed clientset would ask for protobuf by default: name both.
	content := rest.ContentConfig{ContentType: contentType, AcceptContentTypes: contentType}
	if contentType == protobufType {
		content.AcceptContentTypes = protobufType + ",application/json"
	}
	return clientsetWith(t, &rest.Config{Host: server.Server.URL, ContentConfig: content}, wrap)
}

// pagedList lists the ConfigMaps through client-go's pager, as informers
// do, and returns their names.
func pagedList(ctx context.Context, cs kubernetes.Interface, pageSize int64, opts metav1.ListOptions) ([]string, error) {
	p := pager.New(pager.SimplePageFunc(func(opts metav1.ListOptions) (runtime.Object, error) {
		return cs.CoreV1().ConfigMaps("ns").List(ctx, opts)
	}))
	p.PageSize = pageSize
	obj, _, err := p.List(ctx, opts)
	if err != nil {
		return nil, err
	}
	var names []string
	err = meta.EachListItem(obj, func(o runtime.Object) error {
		names = append(names, o.(*corev1.ConfigMap).Name)
		return nil
	})
	return names, err
}

func wantNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("cm-%05d", i)
	}
	return names
}

// TestClientsetListResumedAtExactResourceVersion: through a real Clientset
// and tools/pager, every page cut mid-body (at many offsets, JSON and
// protobuf) is resumed with one more request: the first page at
// resourceVersionMatch=Exact with the list's resourceVersion and its limit,
// later pages with their continue token as sent, and a whole list asked
// for at resourceVersion=0 without the limit it ignored. The pager gets
// every item once, in order. Stock client-go fails the same LIST.
func TestClientsetListResumedAtExactResourceVersion(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const items, pageSize = 250, 100
	for _, contentType := range []string{"application/json", protobufType} {
		pageLen := len(listbody.ConfigMaps(0, pageSize, "c100", contentType))
		for _, fraction := range []float64{0.05, 0.2, 0.37, 0.5, 0.71, 0.9, 0.999} {
			cut := int(fraction * float64(pageLen))
			t.Run(fmt.Sprintf("%s/pages cut at %d of ~%d", contentType, cut, pageLen), func(t *testing.T) {
				server := newListServer(t, items)
				// Answers 0, 2, 4: the first answer to each of the three pages.
				server.cuts[0], server.cuts[2], server.cuts[4] = cut, cut, cut/2
				cs := listClientset(t, server, contentType, transport.Wrapper(transport.Config{Clock: fakeclock.New(epoch)}))
				names, err := pagedList(ctx, cs, pageSize, metav1.ListOptions{})
				if err != nil {
					t.Fatalf("pager: %v", err)
				}
				if fmt.Sprint(names) != fmt.Sprint(wantNames(items)) {
					t.Fatalf("pager got %d items, want the %d in order", len(names), items)
				}
				asked := server.queries()
				want := []string{
					"limit=100", "limit=100&resourceVersion=42&resourceVersionMatch=Exact",
					"continue=c100&limit=100", "continue=c100&limit=100",
					"continue=c200&limit=100", "continue=c200&limit=100",
				}
				var got []string
				for _, q := range asked {
					got = append(got, q.Encode())
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("server was asked\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
				server.mu.Lock()
				defer server.mu.Unlock()
				for i, served := range server.contentTypes {
					if served != contentType {
						t.Errorf("answer %d in %s, want %s", i, served, contentType)
					}
				}
			})
		}
		t.Run(contentType+"/whole list at resourceVersion=0", func(t *testing.T) {
			server := newListServer(t, items)
			server.cuts[0] = len(listbody.ConfigMaps(0, items, "", contentType)) * 2 / 3
			cs := listClientset(t, server, contentType, transport.Wrapper(transport.Config{Clock: fakeclock.New(epoch)}))
			list, err := cs.CoreV1().ConfigMaps("ns").List(ctx, metav1.ListOptions{ResourceVersion: "0", Limit: 500})
			if err != nil || len(list.Items) != items {
				t.Fatalf("List: %d items, %v", len(list.Items), err)
			}
			asked := server.queries()
			if len(asked) != 2 || asked[1].Encode() != "resourceVersion=42&resourceVersionMatch=Exact" {
				t.Errorf("server was asked %v, want the resume without the limit", asked)
			}
		})
		t.Run(contentType+"/stock client-go", func(t *testing.T) {
			server := newListServer(t, items)
			server.cuts[0] = pageLen / 2
			cs := listClientset(t, server, contentType, nil)
			if _, err := pagedList(ctx, cs, pageSize, metav1.ListOptions{}); !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("pager err = %v, want the cut", err)
			}
		})
	}
}

// TestClientsetListResumeRefused: a resume whose answer differs inside the
// delivered prefix, or is a 410 at the exact resourceVersion, hands
// client-go the cut as it was: an unexpected EOF, never a 410 (client-go's
// pager would read "your continue token expired" and list again in full
// without a word) and never a spliced body.
func TestClientsetListResumeRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, contentType := range []string{"application/json", protobufType} {
		cut := len(listbody.ConfigMaps(0, 100, "c100", contentType)) / 2
		for _, tt := range []struct {
			name  string
			setup func(*listServer)
		}{
			{"prefix mismatch", func(s *listServer) {
				s.change[1] = func(b []byte) []byte {
					b = bytes.Clone(b)
					b[cut-10] ^= 1
					return b
				}
			}},
			{"410 at the exact resourceVersion", func(s *listServer) { s.compacted = true }},
		} {
			t.Run(contentType+"/"+tt.name, func(t *testing.T) {
				server := newListServer(t, 250)
				server.cuts[0] = cut
				tt.setup(server)
				cs := listClientset(t, server, contentType, transport.Wrapper(transport.Config{Clock: fakeclock.New(epoch)}))
				_, err := pagedList(ctx, cs, 100, metav1.ListOptions{})
				if !errors.Is(err, io.ErrUnexpectedEOF) || apierrors.IsGone(err) || apierrors.IsResourceExpired(err) {
					t.Errorf("pager err = %v, want the original cut", err)
				}
				if n := len(server.queries()); n != 2 {
					t.Errorf("%d requests, want 2", n)
				}
			})
		}
	}
}

// listRecorder is a recorder that also hears LIST resumes.
type listRecorder struct{ recorder }

func (r *listRecorder) ObserveListResume(e transport.ListResumeEvent) {
	r.add("list-resume %s skipped=%d requests=%d", e.Outcome, e.SkippedBytes, e.Requests)
}

// TestListResumeObserved: an Observer that is a ListResumeObserver hears each resume's
// outcome after the attempts and the resume's retry, a compacted resourceVersion included;
// a plain Observer still hears the attempts and the retry.
func TestListResumeObserved(t *testing.T) {
	ctx := context.Background()
	body := listbody.ConfigMaps(0, 250, "", "application/json")
	for _, compacted := range []bool{false, true} {
		server := newListServer(t, 250)
		server.cuts[0] = len(body) / 2
		server.compacted = compacted
		observer := &listRecorder{}
		cs := listClientset(t, server, "application/json", transport.Wrapper(transport.Config{Clock: fakeclock.New(epoch), Observer: observer}))
		_, err := cs.CoreV1().ConfigMaps("ns").List(ctx, metav1.ListOptions{})
		outcome := "resumed"
		if compacted {
			outcome = "gone"
		}
		want := []string{
			"attempt list 2xx 200",
			"resume list broken-body 0 wait=0s",
			"attempt list " + map[bool]string{false: "2xx 200", true: "4xx 410"}[compacted],
			fmt.Sprintf("list-resume %s skipped=%d requests=1", outcome, map[bool]int{false: len(body) / 2, true: 0}[compacted]),
		}
		if got := observer.lines(); fmt.Sprint(got) != fmt.Sprint(want) || (err != nil) != compacted {
			t.Errorf("compacted=%v: List err %v, events\n%s\nwant\n%s", compacted, err, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

// TestClientsetListCallerContextEnds: the caller's context ending mid-body ends the LIST with
// the context's error, and kretry asks for nothing again.
func TestClientsetListCallerContextEnds(t *testing.T) {
	body := listbody.ConfigMaps(0, 250, "", "application/json")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var requests atomic.Int32
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.Write(body[:len(body)/2])
		w.(http.Flusher).Flush()
		cancel() // the caller gives up while the body is coming
		<-r.Context().Done()
	}))
	t.Cleanup(server.Close)
	cfg := &rest.Config{Host: server.URL, ContentConfig: rest.ContentConfig{ContentType: "application/json", AcceptContentTypes: "application/json"}}
	cs := clientsetWith(t, cfg, transport.Wrapper(transport.Config{Clock: fakeclock.New(epoch)}))
	_, err := cs.CoreV1().ConfigMaps("ns").List(ctx, metav1.ListOptions{})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("List err = %v, want the caller's context.Canceled", err)
	}
	if n := requests.Load(); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}
