package demoserver

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/pager"
	"k8s.io/utils/ptr"
)

// eventually is the bound for conditions that settle asynchronously; generous on purpose.
const eventually = 30 * time.Second

// quiet starts a server without a writer or faults; tests drive changes with Step.
func quiet(t *testing.T, cfg Config) *Server {
	t.Helper()
	if cfg.WriteInterval == 0 {
		cfg.WriteInterval = -1
	}
	if cfg.Objects == 0 {
		cfg.Objects = 25
	}
	s := Start(cfg)
	t.Cleanup(s.Close)
	return s
}

func clientset(t *testing.T, cfg *rest.Config, contentType string) kubernetes.Interface {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	if contentType != "" {
		cfg.ContentType = contentType
		cfg.AcceptContentTypes = contentType
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// next returns the next watch event or fails after the bound.
func next(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("watch closed")
		}
		return ev
	case <-time.After(eventually):
		t.Fatal("no watch event")
	}
	return watch.Event{}
}

func rvOf(t *testing.T, obj runtime.Object) uint64 {
	t.Helper()
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		t.Fatalf("object is %T, want *ConfigMap", obj)
	}
	rv, err := strconv.ParseUint(cm.ResourceVersion, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return rv
}

func TestClientsetListAndWatch(t *testing.T) {
	for _, contentType := range []string{"", runtime.ContentTypeJSON} { // "": the clientset's protobuf default
		t.Run("contentType="+contentType, func(t *testing.T) {
			s := quiet(t, Config{})
			ctx := t.Context()
			cms := clientset(t, s.RESTConfig("test"), contentType).CoreV1().ConfigMaps(s.Namespace())
			list, err := cms.List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(list.Items) != 25 || list.ResourceVersion != s.State().ResourceVersion {
				t.Fatalf("list: %d items at RV %s, want 25 at %s", len(list.Items), list.ResourceVersion, s.State().ResourceVersion)
			}
			w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			var last uint64
			for range 10 {
				want, _ := strconv.ParseUint(s.Step(), 10, 64)
				ev := next(t, w)
				if got := rvOf(t, ev.Object); got != want || got <= last {
					t.Fatalf("event %s at RV %d, want %d", ev.Type, got, want)
				}
				last = want
			}
			got, err := cms.Get(ctx, list.Items[0].Name, metav1.GetOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
			if err == nil && got.Name != list.Items[0].Name {
				t.Fatalf("get returned %q", got.Name)
			}
			if _, err := cms.Get(ctx, "missing", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Fatalf("get missing: %v, want NotFound", err)
			}
			waitStats(t, s, "test", func(st Stats) bool {
				return st.Lists == 1 && st.Watches == 1 && st.Events == 10 && st.InitialStateFetches() == 1
			})
		})
	}
}

func TestPagingAndExpiredContinue(t *testing.T) {
	s := quiet(t, Config{Objects: 30})
	ctx := t.Context()
	cms := clientset(t, s.RESTConfig("test"), "").CoreV1().ConfigMaps(s.Namespace())

	first, err := cms.List(ctx, metav1.ListOptions{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Items) != 10 || first.Continue == "" || ptr.Deref(first.RemainingItemCount, 0) != 20 {
		t.Fatalf("first page: %d items, continue %q, remaining %v", len(first.Items), first.Continue, first.RemainingItemCount)
	}
	s.Step() // pages stay at the first page's snapshot
	second, err := cms.List(ctx, metav1.ListOptions{Limit: 10, Continue: first.Continue})
	if err != nil {
		t.Fatal(err)
	}
	if second.ResourceVersion != first.ResourceVersion || second.Items[0].Name <= first.Items[9].Name {
		t.Fatalf("second page at RV %s starting %s, first at %s ending %s",
			second.ResourceVersion, second.Items[0].Name, first.ResourceVersion, first.Items[9].Name)
	}

	s.Step()
	s.Compact()
	_, err = cms.List(ctx, metav1.ListOptions{Limit: 10, Continue: second.Continue})
	if !apierrors.IsResourceExpired(err) {
		t.Fatalf("continue after compaction: %v, want 410 Expired", err)
	}

	// client-go's pager falls back to a full list when the token expires mid-way.
	calls := 0
	p := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		calls++
		if calls == 2 {
			s.Step()
			s.Compact()
		}
		return cms.List(ctx, opts)
	})
	p.PageSize = 10
	list, _, err := p.ListWithAlloc(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := metaLen(list); n != len(s.State().Objects) {
		t.Fatalf("pager list has %d items, server %d", n, len(s.State().Objects))
	}
	st := s.Stats("test")
	if st.Expired != 2 {
		t.Fatalf("expired = %d, want 2", st.Expired)
	}
}

func metaLen(obj runtime.Object) (int, error) {
	switch l := obj.(type) {
	case *corev1.ConfigMapList:
		return len(l.Items), nil
	case *metav1.List:
		return len(l.Items), nil
	}
	return 0, errors.New("not a list")
}

func TestWatchFromCompactedRVGetsExpired(t *testing.T) {
	for _, contentType := range []string{"", runtime.ContentTypeJSON} {
		t.Run("contentType="+contentType, func(t *testing.T) {
			s := quiet(t, Config{})
			cms := clientset(t, s.RESTConfig("test"), contentType).CoreV1().ConfigMaps(s.Namespace())
			old := s.Step()
			s.Step()
			s.Compact()
			w, err := cms.Watch(t.Context(), metav1.ListOptions{ResourceVersion: old})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			ev := next(t, w)
			if ev.Type != watch.Error || !apierrors.IsResourceExpired(apierrors.FromObject(ev.Object)) {
				t.Fatalf("got %s %v, want ERROR 410 Expired", ev.Type, ev.Object)
			}
			if _, ok := <-w.ResultChan(); ok {
				t.Fatal("stream went on after the ERROR event")
			}
			waitStats(t, s, "test", func(st Stats) bool { return st.Expired == 1 })
		})
	}
}

func TestWatchList(t *testing.T) {
	s := quiet(t, Config{Objects: 12})
	cms := clientset(t, s.RESTConfig("test"), "").CoreV1().ConfigMaps(s.Namespace())
	s.Step()
	s.Compact() // a watch-list names an RV not older than, so an old one is fine
	w, err := cms.Watch(t.Context(), metav1.ListOptions{
		ResourceVersion:      "1",
		SendInitialEvents:    ptr.To(true),
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		AllowWatchBookmarks:  true,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	state := s.State()
	for range state.Objects {
		if ev := next(t, w); ev.Type != watch.Added {
			t.Fatalf("got %s before the initial-events-end bookmark", ev.Type)
		}
	}
	ev := next(t, w)
	cm := ev.Object.(*corev1.ConfigMap)
	if ev.Type != watch.Bookmark || cm.Annotations[metav1.InitialEventsAnnotationKey] != "true" || cm.ResourceVersion != state.ResourceVersion {
		t.Fatalf("got %s %v, want the initial-events-end BOOKMARK at %s", ev.Type, cm.ObjectMeta, state.ResourceVersion)
	}
	rv := s.Step()
	if ev := next(t, w); ev.Object.(*corev1.ConfigMap).ResourceVersion != rv {
		t.Fatalf("after the bookmark got %s at %s, want RV %s", ev.Type, ev.Object.(*corev1.ConfigMap).ResourceVersion, rv)
	}
	waitStats(t, s, "test", func(st Stats) bool { return st.WatchLists == 1 && st.InitialStateFetches() == 1 })

	// Without allowWatchBookmarks the request is invalid, as in kube-apiserver.
	_, err = cms.Watch(t.Context(), metav1.ListOptions{SendInitialEvents: ptr.To(true), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	if !apierrors.IsBadRequest(err) {
		t.Fatalf("watch-list without bookmarks: %v, want 400", err)
	}
}

func TestWatchFromZeroSendsStateThenChanges(t *testing.T) {
	s := quiet(t, Config{Objects: 5})
	cms := clientset(t, s.RESTConfig("test"), runtime.ContentTypeJSON).CoreV1().ConfigMaps(s.Namespace())
	w, err := cms.Watch(t.Context(), metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for range 5 {
		if ev := next(t, w); ev.Type != watch.Added {
			t.Fatalf("got %s, want the state as ADDED", ev.Type)
		}
	}
	rv := s.Step()
	if ev := next(t, w); ev.Object.(*corev1.ConfigMap).ResourceVersion != rv {
		t.Fatalf("got %s, want the change at %s", ev.Type, rv)
	}
}

func TestBookmarksAndTimeout(t *testing.T) {
	s := quiet(t, Config{BookmarkInterval: 20 * time.Millisecond})
	cms := clientset(t, s.RESTConfig("test"), "").CoreV1().ConfigMaps(s.Namespace())
	rv := s.State().ResourceVersion
	w, err := cms.Watch(t.Context(), metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true, TimeoutSeconds: ptr.To[int64](1)})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ev := next(t, w)
	if ev.Type != watch.Bookmark || ev.Object.(*corev1.ConfigMap).ResourceVersion != rv {
		t.Fatalf("got %s, want BOOKMARK at %s", ev.Type, rv)
	}
	deadline := time.After(eventually)
	for {
		select {
		case _, ok := <-w.ResultChan():
			if !ok {
				return // timeoutSeconds ended the stream
			}
		case <-deadline:
			t.Fatal("timeoutSeconds=1 did not end the watch")
		}
	}
}

func TestDiscoveryAndDynamicClient(t *testing.T) {
	s := quiet(t, Config{Objects: 3})
	dc, err := discovery.NewDiscoveryClientForConfig(s.RESTConfig("test"))
	if err != nil {
		t.Fatal(err)
	}
	if v, err := dc.ServerVersion(); err != nil || v.Minor != "37" {
		t.Fatalf("version %v, %v", v, err)
	}
	resources, err := dc.ServerResourcesForGroupVersion("v1")
	if err != nil || len(resources.APIResources) != 1 || resources.APIResources[0].Name != "configmaps" {
		t.Fatalf("v1 resources %v, %v", resources, err)
	}
	if _, err := dc.ServerGroups(); err != nil {
		t.Fatal(err)
	}

	dyn, err := dynamic.NewForConfig(s.RESTConfig("test"))
	if err != nil {
		t.Fatal(err)
	}
	res := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace(s.Namespace())
	list, err := res.List(t.Context(), metav1.ListOptions{})
	if err != nil || len(list.Items) != 3 {
		t.Fatalf("dynamic list: %v, %v", list, err)
	}
	w, err := res.Watch(t.Context(), metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	rv := s.Step()
	if ev := next(t, w); ev.Object.(interface{ GetResourceVersion() string }).GetResourceVersion() != rv {
		t.Fatalf("dynamic watch got %v, want RV %s", ev, rv)
	}
}

// waitStats waits for the client's counters to satisfy ok: the server counts a frame
// after writing it, so a client may see the frame first.
func waitStats(t *testing.T, s *Server, client string, ok func(Stats) bool) {
	t.Helper()
	deadline := time.Now().Add(eventually)
	for !ok(s.Stats(client)) {
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v", s.Stats(client))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// rawWatch opens a watch with a plain HTTP client, to see the bytes on the wire.
func rawWatch(t *testing.T, s *Server, accept, query string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet,
		s.URL()+"/api/v1/namespaces/"+s.Namespace()+"/configmaps?watch=true&"+query, nil)
	req.Header.Set("Accept", accept)
	req.Header.Set("User-Agent", "raw")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestWireFraming(t *testing.T) {
	s := quiet(t, Config{})
	rv := s.State().ResourceVersion

	resp := rawWatch(t, s, "application/json", "resourceVersion="+rv)
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("JSON watch Content-Type %q", ct)
	}
	s.Step()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, `{"type":`) {
		t.Fatalf("JSON frame %q, %v", line, err)
	}

	resp = rawWatch(t, s, "application/vnd.kubernetes.protobuf, application/json", "resourceVersion="+rv)
	if ct := resp.Header.Get("Content-Type"); ct != "application/vnd.kubernetes.protobuf;stream=watch" {
		t.Fatalf("protobuf watch Content-Type %q", ct)
	}
	var length uint32
	if err := binary.Read(resp.Body, binary.BigEndian, &length); err != nil {
		t.Fatal(err)
	}
	frame := make([]byte, length)
	if _, err := io.ReadFull(resp.Body, frame); err != nil {
		t.Fatalf("protobuf frame of %d bytes: %v", length, err)
	}
	if !strings.Contains(string(frame), "k8s\x00") {
		t.Fatal("protobuf frame does not embed an enveloped object")
	}
}

func TestInjectedFaults(t *testing.T) {
	s := quiet(t, Config{})
	rv := s.State().ResourceVersion

	t.Run("torn frame", func(t *testing.T) {
		resp := rawWatch(t, s, "application/json", "resourceVersion="+rv)
		s.InjectFault("raw", TornFrame)
		s.Step()
		body, err := io.ReadAll(resp.Body)
		if !errors.Is(err, io.ErrUnexpectedEOF) || len(body) == 0 || strings.HasSuffix(string(body), "\n") {
			t.Fatalf("read %q, %v; want part of a frame, then unexpected EOF", body, err)
		}
	})
	t.Run("503 and 429s", func(t *testing.T) {
		for _, tc := range []struct {
			kind        FaultKind
			code        int
			retryAfter  string
			contentType string
		}{
			{Unavailable, 503, "", "application/json"},
			{TooManyRequests, 429, "1", "application/json"},
			{TooManyRequestsNoRetryAfter, 429, "", "application/json"},
			{TooManyRequestsPlain, 429, "1", "text/plain; charset=utf-8"},
		} {
			s.InjectFault("raw", tc.kind)
			resp := rawWatch(t, s, "application/json", "resourceVersion="+rv)
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.code || resp.Header.Get("Retry-After") != tc.retryAfter || resp.Header.Get("Content-Type") != tc.contentType {
				t.Errorf("%v: %d Retry-After %q %q %s", tc.kind, resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("Content-Type"), body)
			}
		}
	})
	t.Run("InternalError event", func(t *testing.T) {
		cms := clientset(t, s.RESTConfig("raw"), "").CoreV1().ConfigMaps(s.Namespace())
		w, err := cms.Watch(t.Context(), metav1.ListOptions{ResourceVersion: s.State().ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		s.InjectFault("raw", InternalErrorEvent)
		s.Step()
		ev := next(t, w)
		if ev.Type != watch.Error || !apierrors.IsInternalError(apierrors.FromObject(ev.Object)) {
			t.Fatalf("got %s %v, want ERROR 500", ev.Type, ev.Object)
		}
	})
	t.Run("compaction", func(t *testing.T) {
		cms := clientset(t, s.RESTConfig("raw"), "").CoreV1().ConfigMaps(s.Namespace())
		from := s.State().ResourceVersion
		w, err := cms.Watch(t.Context(), metav1.ListOptions{ResourceVersion: from})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		s.InjectFault("raw", Compaction)
		s.Step()
		if _, ok := <-w.ResultChan(); ok {
			t.Fatal("the stream delivered past the compaction")
		}
		w, err = cms.Watch(t.Context(), metav1.ListOptions{ResourceVersion: from})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		if ev := next(t, w); !apierrors.IsResourceExpired(apierrors.FromObject(ev.Object)) {
			t.Fatalf("re-watch got %s %v, want 410", ev.Type, ev.Object)
		}
	})
	waitStats(t, s, "raw", func(st Stats) bool { return st.FaultsInjected() == 7 })
}

func TestNoFaultsDuringInitialState(t *testing.T) {
	s := quiet(t, Config{Objects: 50})
	s.InjectFault("raw", TornFrame)
	w, err := clientset(t, s.RESTConfig("raw"), "").CoreV1().ConfigMaps(s.Namespace()).Watch(t.Context(), metav1.ListOptions{
		SendInitialEvents: ptr.To(true), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, AllowWatchBookmarks: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for range 51 { // 50 ADDED and the bookmark, unbroken
		next(t, w)
	}
	s.Step()
	if _, ok := <-w.ResultChan(); ok {
		t.Fatal("the armed fault did not hit the first change after the initial state")
	}
}

func TestScheduleIsSeeded(t *testing.T) {
	draw := func(seed uint64) []FaultKind {
		sch := newSchedule(seed, 10, AllFaults, time.Second)
		now := time.Unix(0, 0)
		var kinds []FaultKind
		for len(kinds) < 20 {
			sch.progress(now)
			now = now.Add(time.Minute)
			if kind := sch.midStream(now); kind != 0 {
				kinds = append(kinds, kind)
				sch.due = 0
			}
		}
		return kinds
	}
	a, b, c := draw(1), draw(1), draw(2)
	if !slices.Equal(a, b) {
		t.Fatalf("same seed drew %v and %v", a, b)
	}
	if slices.Equal(a, c) {
		t.Fatalf("seeds 1 and 2 drew the same %v", a)
	}
	// No progress, no fault.
	sch := newSchedule(1, 1000, AllFaults, time.Second)
	if kind := sch.midStream(time.Now().Add(time.Hour)); kind != 0 {
		t.Fatalf("a fault (%v) armed before any progress", kind)
	}
}

func TestNegotiate(t *testing.T) {
	for accept, want := range map[string]string{
		"":                      mediaTypeJSON,
		"application/json, */*": mediaTypeJSON,
		"application/vnd.kubernetes.protobuf,application/json":                                  mediaTypeProtobuf,
		"application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json": mediaTypeJSON,
		"application/json;q=0.5,application/vnd.kubernetes.protobuf":                            mediaTypeProtobuf,
		"*/*":              mediaTypeJSON,
		"application/yaml": "",
	} {
		c, ok := negotiate(accept)
		if got := c.mediaType; !ok && want != "" || ok && got != want {
			t.Errorf("negotiate(%q) = %q, %v; want %q", accept, got, ok, want)
		}
	}
}

func TestCompactionIsPerClient(t *testing.T) {
	s := quiet(t, Config{})
	from := s.State().ResourceVersion
	watchFrom := func(userAgent string) watch.Interface {
		w, err := clientset(t, s.RESTConfig(userAgent), "").CoreV1().ConfigMaps(s.Namespace()).Watch(t.Context(), metav1.ListOptions{ResourceVersion: from})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
		return w
	}
	compacted, bystander := watchFrom("compacted"), watchFrom("bystander")
	s.InjectFault("compacted", Compaction)
	rv := s.Step()
	if _, ok := <-compacted.ResultChan(); ok {
		t.Fatal("the compacted client's stream went on")
	}
	if ev := next(t, bystander); ev.Object.(*corev1.ConfigMap).ResourceVersion != rv {
		t.Fatalf("bystander got %s %v, want the change at %s", ev.Type, ev.Object, rv)
	}
	if ev := next(t, watchFrom("compacted")); !apierrors.IsResourceExpired(apierrors.FromObject(ev.Object)) {
		t.Fatalf("compacted client's re-watch got %s %v, want 410", ev.Type, ev.Object)
	}
	if ev := next(t, watchFrom("bystander")); ev.Type == watch.Error {
		t.Fatalf("another client got %v after someone else's compaction", ev.Object)
	}
}

func TestThrottleBurst(t *testing.T) {
	s := quiet(t, Config{ThrottleBurst: time.Hour})
	resp := rawWatch(t, s, "application/json", "resourceVersion="+s.State().ResourceVersion)
	s.InjectFault("raw", ThrottleBurst)
	s.Step()
	if body, err := io.ReadAll(resp.Body); err != nil || len(body) != 0 {
		t.Fatalf("read %q, %v; want a clean close before the change", body, err)
	}
	for _, query := range []string{"watch=true", "limit=10"} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, s.URL()+"/api/v1/namespaces/"+s.Namespace()+"/configmaps?"+query, nil)
		req.Header.Set("User-Agent", "raw")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" {
			t.Errorf("%s during the burst: %d Retry-After %q, want 429 and 1", query, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
	if _, err := clientset(t, s.RESTConfig("other"), "").CoreV1().ConfigMaps(s.Namespace()).List(t.Context(), metav1.ListOptions{}); err != nil {
		t.Fatalf("another client is throttled too: %v", err)
	}
	if st := s.Stats("raw"); st.Rejected != 2 || st.Faults[ThrottleBurst] != 1 {
		t.Fatalf("stats %+v, want 2 rejected and one burst", st)
	}
}

func TestRollout(t *testing.T) {
	var mu sync.Mutex // a client without a watch is charged the rollout by the handler of its first 503
	var recorded []Fault
	s := quiet(t, Config{OnFault: func(f Fault) { mu.Lock(); defer mu.Unlock(); recorded = append(recorded, f) }})
	reported := func() []Fault { mu.Lock(); defer mu.Unlock(); return slices.Clone(recorded) }
	cms := clientset(t, s.RESTConfig("informer"), "").CoreV1().ConfigMaps(s.Namespace())
	w, err := cms.Watch(t.Context(), metav1.ListOptions{ResourceVersion: s.State().ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	s.Rollout(time.Hour)
	if _, ok := <-w.ResultChan(); ok {
		t.Fatal("the watch survived the rollout")
	}
	if _, err := cms.List(t.Context(), metav1.ListOptions{}); !apierrors.IsServiceUnavailable(err) {
		t.Fatalf("LIST during the rollout: %v, want 503", err)
	}
	if _, err := cms.Watch(t.Context(), metav1.ListOptions{}); !apierrors.IsServiceUnavailable(err) {
		t.Fatalf("WATCH during the rollout: %v, want 503", err)
	}
	if faults := reported(); len(faults) != 1 || faults[0].Client != "informer" || faults[0].Kind != Rollout {
		t.Fatalf("faults reported %+v, want one Rollout into the informer", faults)
	}
	s.Rollout(time.Hour) // nobody watches now: a client is hit at its first 503
	if faults := reported(); len(faults) != 1 {
		t.Fatalf("faults reported %+v, want none for a rollout that hit no watch yet", faults)
	}
	for range 2 {
		if _, err := cms.List(t.Context(), metav1.ListOptions{}); !apierrors.IsServiceUnavailable(err) {
			t.Fatalf("LIST during the second rollout: %v, want 503", err)
		}
	}
	if faults := reported(); len(faults) != 2 || faults[1].Kind != Rollout {
		t.Fatalf("faults reported %+v, want the second rollout once, at the first 503", faults)
	}
	s.StopFaults()
	if _, err := cms.List(t.Context(), metav1.ListOptions{}); err != nil {
		t.Fatalf("LIST after StopFaults: %v", err)
	}
}

func TestHoldAndBegin(t *testing.T) {
	s := Start(Config{Objects: 5, Hold: true, WriteInterval: time.Millisecond, FaultRate: 1000})
	defer s.Close()
	before := s.State().ResourceVersion
	cms := clientset(t, s.RESTConfig("early"), "").CoreV1().ConfigMaps(s.Namespace())
	list, err := cms.List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if list.ResourceVersion != before || s.State().ResourceVersion != before {
		t.Fatalf("a held server moved: listed at %s, now %s, started at %s", list.ResourceVersion, s.State().ResourceVersion, before)
	}
	if st := s.Stats("early"); st.FetchBytes == 0 || st.FetchBytes != st.BytesSent {
		t.Fatalf("a LIST's bytes are all fetch bytes: %+v", st)
	}
	if begun := s.Begin(); strconv.FormatUint(begun, 10) != before {
		t.Fatalf("Begin returned %d, want %s", begun, before)
	}
	waitStats(t, s, "early", func(Stats) bool { return s.State().ResourceVersion != before })
	listed, _ := strconv.ParseUint(list.ResourceVersion, 10, 64)
	changes := s.ChangesAfter(listed)
	if len(changes) == 0 || changes[0].ResourceVersion != changes[len(changes)-1].ResourceVersion-uint64(len(changes)-1) {
		t.Fatalf("changes after %s: %+v, want consecutive RVs", before, changes)
	}
}

func TestRolloutRestartsSchedules(t *testing.T) {
	s := quiet(t, Config{})
	s.InjectFault("informer", TornFrame)
	s.Rollout(time.Millisecond)
	sch := s.client("informer").schedule
	if kind := sch.midStream(time.Now()); kind != 0 {
		t.Fatalf("a fault (%v) armed before the rollout hit the first frame after it", kind)
	}
}

func TestIsWatchAsTheAPIServerReadsIt(t *testing.T) {
	for query, want := range map[string]bool{
		"": false, "watch=0": false, "watch=false": false, "watch=FALSE": false,
		"watch=1": true, "watch=true": true, "watch=True": true, "watch=f": true, "watch=": true,
	} {
		q, err := url.ParseQuery(query)
		if err != nil {
			t.Fatal(err)
		}
		if got := isWatch(q); got != want {
			t.Errorf("isWatch(%q) = %v, want %v", query, got, want)
		}
	}
}
