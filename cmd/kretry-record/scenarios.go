package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kretry/kretry/internal/harness/apiserver"
	"github.com/kretry/kretry/internal/harness/fixture"
)

// scenario records one fixture.
type scenario struct {
	name        string
	description string
	record      func(ctx context.Context, e *env) (*fixture.File, error)
}

// scenarios are recorded in this order; the restart comes late so earlier ones see a warm cache.
var scenarios = []scenario{
	{"list-paged", "Paged LIST (limit=3) of 7 ConfigMaps, JSON: three pages chained with continue; the last has no continue.",
		listPaged(JSON)},
	{"list-paged-protobuf", "Paged LIST (limit=3) of 7 ConfigMaps with client-go's default Accept (protobuf preferred).",
		listPaged(Protobuf)},
	{"watch-json", "JSON WATCH from the list RV with allowWatchBookmarks and timeoutSeconds=6 while a writer creates two ConfigMaps, updates one, deletes the other: ADDED, ADDED, MODIFIED, DELETED, then a BOOKMARK shortly before the server ends the stream at the timeout.",
		watchChurn(JSON)},
	{"watch-protobuf", "Same as watch-json with client-go's default Accept: application/vnd.kubernetes.protobuf;stream=watch frames (4-byte length + WatchEvent).",
		watchChurn(Protobuf)},
	{"watch-list", "Streaming list (sendInitialEvents=true, resourceVersionMatch=NotOlderThan, allowWatchBookmarks, resourceVersion unset) over 3 ConfigMaps, JSON: 3 initial ADDED, the BOOKMARK annotated k8s.io/initial-events-end, then the writer's events, until timeoutSeconds=6.",
		watchList(JSON)},
	{"watch-list-protobuf", "Same as watch-list with client-go's default Accept (protobuf).",
		watchList(Protobuf)},
	{"informer-list", "An informer's LIST start as client-go <= v0.34 (and v0.35+ with WatchListClient off) makes it, JSON, on a server without a watch cache for ConfigMaps (so resourceVersion=0 is paged): LIST limit=3&resourceVersion=0 of 7 ConfigMaps, then the pages after it with their continue tokens (resourceVersion cleared, as client-go's pager does), then a WATCH from the list's RV with allowWatchBookmarks and timeoutSeconds=6 while the writer creates two ConfigMaps, updates one, deletes the other.",
		informerList(JSON)},
	{"informer-list-protobuf", "Same as informer-list with client-go's default Accept (protobuf), as informers send it.",
		informerList(Protobuf)},
	{"watch-cbor", "Same as watch-json from a client asking for application/cbor (client-go's ClientsAllowCBOR gate on) to a server with CBORServingAndStorage: application/cbor-seq, one self-described CBOR data item per event, strings as byte strings, map keys in random order.",
		watchChurn(CBOR)},
	{"watch-list-cbor", "Same as watch-list in CBOR (application/cbor-seq), as watch-cbor.",
		watchList(CBOR)},
	{"watch-rv0", "JSON WATCH at resourceVersion=0 with allowWatchBookmarks over 2 ConfigMaps: the initial ADDED from the watch cache, the initial-events-end BOOKMARK, then the writer's events.",
		watchRV0},
	{"watch-list-504-too-large", "Streaming list (sendInitialEvents=true, resourceVersionMatch=NotOlderThan, allowWatchBookmarks) at resourceVersion=99999999, JSON, no client retries: 200, and after about 3s one ERROR event with Status code 504, reason Timeout, cause ResourceVersionTooLarge, retryAfterSeconds 1; then the end of the stream.",
		watchListTooLarge},
	{"watch-future-rv", "Plain JSON WATCH at resourceVersion=99999999 (far in the future) with allowWatchBookmarks and timeoutSeconds=6: 200 and nothing at all, not even a BOOKMARK, until the server ends the stream at the timeout.",
		watchFutureRV},
	{"list-504-too-large", "LIST at resourceVersion=99999999&resourceVersionMatch=NotOlderThan as a user outside system:masters, JSON, no client retries: about 3s, then 504 Timeout, reason Timeout, cause ResourceVersionTooLarge, Retry-After: 1.",
		listTooLarge(JSON)},
	{"list-504-too-large-protobuf", "Same as list-504-too-large with client-go's default Accept: the Status body is protobuf.",
		listTooLarge(Protobuf)},
	{"list-429", "Request-limit mode (--max-requests-inflight=1, APF off), user outside system:masters: while a LIST at a too-large RV holds the only slot, two LISTs (JSON, then client-go's default Accept) get 429 with Retry-After: 1 and a text/plain body, not a Status.",
		list429},
	{"watch-expired-compacted", "JSON WATCH from an RV older than etcd's compaction, on a server without a watch cache for ConfigMaps: 200, then one ERROR event (Status code 410, reason Expired), then the end of the stream.",
		watchCompacted(JSON)},
	{"watch-expired-compacted-protobuf", "Same as watch-expired-compacted with client-go's default Accept: the ERROR event and its Status in protobuf.",
		watchCompacted(Protobuf)},
	{"list-410-exact", "LIST at a compacted resourceVersion with resourceVersionMatch=Exact (server without a watch cache for ConfigMaps): HTTP 410 Gone, reason Expired.",
		listExactCompacted},
	{"list-continue-expired", "Paged LIST (limit=2), etcd compacted, then the next page with the continue token: HTTP 410, reason Expired (the continue token is too old).",
		listContinueExpired},
	{"watch-expired-after-restart", "kube-apiserver restarted against the same etcd; a JSON WATCH from an RV before the restart: 200, then an ERROR event 410 Expired (too old resource version) from the fresh watch cache.",
		watchAfterRestart},
}

func listPaged(encoding string) func(context.Context, *env) (*fixture.File, error) {
	return func(ctx context.Context, e *env) (*fixture.File, error) {
		ns, err := e.namespace(ctx, "list-paged"+suffix(encoding))
		if err != nil {
			return nil, err
		}
		if _, err := e.seed(ctx, serverDefault, ns, "cm", 7); err != nil {
			return nil, err
		}
		rec := &fixture.Recorder{}
		cs := e.recorded(serverDefault, apiserver.Admin, encoding, rec)
		opts := metav1.ListOptions{Limit: 3}
		total := 0
		for {
			list, err := cs.CoreV1().ConfigMaps(ns).List(ctx, opts)
			if err != nil {
				return nil, err
			}
			total += len(list.Items)
			if list.Continue == "" {
				break
			}
			opts.Continue = list.Continue
		}
		if total != 7 {
			return nil, fmt.Errorf("paged list returned %d items, want 7", total)
		}
		return &fixture.File{Exchanges: rec.Exchanges()}, nil
	}
}

func suffix(encoding string) string {
	switch encoding {
	case JSON:
		return ""
	case CBOR:
		return "-cbor"
	}
	return "-pb"
}

func watchChurn(encoding string) func(context.Context, *env) (*fixture.File, error) {
	return func(ctx context.Context, e *env) (*fixture.File, error) {
		ns, err := e.namespace(ctx, "watch"+suffix(encoding))
		if err != nil {
			return nil, err
		}
		rv, err := e.seed(ctx, serverFor(encoding), ns, "cm", 1)
		if err != nil {
			return nil, err
		}
		rec := &fixture.Recorder{}
		cs := e.recorded(serverFor(encoding), apiserver.Admin, encoding, rec)
		w, err := cs.CoreV1().ConfigMaps(ns).Watch(ctx, watchFrom(rv))
		if err != nil {
			return nil, err
		}
		s, err := drainWhile(w, func() error { return e.churn(ctx, serverFor(encoding), ns, "w") })
		if err != nil {
			return nil, err
		}
		if err := s.expect(watch.Added, watch.Modified, watch.Deleted, watch.Bookmark); err != nil {
			return nil, err
		}
		return &fixture.File{Exchanges: rec.Exchanges()}, nil
	}
}

// drainWhile drains w while writer runs, and returns both outcomes.
func drainWhile(w watch.Interface, writer func() error) (seen, error) {
	var wg sync.WaitGroup
	var writeErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		time.Sleep(300 * time.Millisecond)
		writeErr = writer()
	}()
	s := drain(w)
	wg.Wait()
	return s, writeErr
}

func watchList(encoding string) func(context.Context, *env) (*fixture.File, error) {
	return func(ctx context.Context, e *env) (*fixture.File, error) {
		ns, err := e.namespace(ctx, "watch-list"+suffix(encoding))
		if err != nil {
			return nil, err
		}
		if _, err := e.seed(ctx, serverFor(encoding), ns, "cm", 3); err != nil {
			return nil, err
		}
		rec := &fixture.Recorder{}
		cs := e.recorded(serverFor(encoding), apiserver.Admin, encoding, rec)
		w, err := cs.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{
			SendInitialEvents:    ptr(true),
			ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
			AllowWatchBookmarks:  true,
			TimeoutSeconds:       int64ptr(watchSeconds),
		})
		if err != nil {
			return nil, err
		}
		s, err := drainWhile(w, func() error { return e.churn(ctx, serverFor(encoding), ns, "w") })
		if err != nil {
			return nil, err
		}
		if s.initialEnds != 3 {
			return nil, fmt.Errorf("initial-events-end bookmark at %d, want 3, events %v", s.initialEnds, s)
		}
		if err := s.expect(watch.Modified, watch.Deleted); err != nil {
			return nil, err
		}
		return &fixture.File{Exchanges: rec.Exchanges()}, nil
	}
}

func watchRV0(ctx context.Context, e *env) (*fixture.File, error) {
	ns, err := e.namespace(ctx, "watch-rv0")
	if err != nil {
		return nil, err
	}
	if _, err := e.seed(ctx, serverDefault, ns, "cm", 2); err != nil {
		return nil, err
	}
	rec := &fixture.Recorder{}
	cs := e.recorded(serverDefault, apiserver.Admin, JSON, rec)
	w, err := cs.CoreV1().ConfigMaps(ns).Watch(ctx, watchFrom("0"))
	if err != nil {
		return nil, err
	}
	s, err := drainWhile(w, func() error { return e.churn(ctx, serverDefault, ns, "w") })
	if err != nil {
		return nil, err
	}
	if s.initialEnds != 2 {
		return nil, fmt.Errorf("initial-events-end bookmark at %d, want 2, events %v", s.initialEnds, s)
	}
	return &fixture.File{Exchanges: rec.Exchanges()}, s.expect(watch.Modified, watch.Deleted)
}

func watchListTooLarge(ctx context.Context, e *env) (*fixture.File, error) {
	ns, err := e.namespace(ctx, "watch-list-too-large")
	if err != nil {
		return nil, err
	}
	rec := &fixture.Recorder{}
	cs := e.recorded(serverDefault, apiserver.Admin, JSON, rec)
	w, err := rawWatch(ctx, cs, ns, metav1.ListOptions{
		ResourceVersion:      tooLargeRV,
		SendInitialEvents:    ptr(true),
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		AllowWatchBookmarks:  true,
		TimeoutSeconds:       int64ptr(watchSeconds),
	})
	if err != nil {
		return nil, err
	}
	if err := drain(w).expectError(http.StatusGatewayTimeout, ""); err != nil {
		return nil, err
	}
	return &fixture.File{Exchanges: rec.Exchanges()}, nil
}

func watchFutureRV(ctx context.Context, e *env) (*fixture.File, error) {
	ns, err := e.namespace(ctx, "watch-future-rv")
	if err != nil {
		return nil, err
	}
	rec := &fixture.Recorder{}
	cs := e.recorded(serverDefault, apiserver.Admin, JSON, rec)
	w, err := rawWatch(ctx, cs, ns, watchFrom(tooLargeRV))
	if err != nil {
		return nil, err
	}
	if s := drain(w); len(s.types) != 0 {
		return nil, fmt.Errorf("watch at a future RV delivered %v", s)
	}
	return &fixture.File{Exchanges: rec.Exchanges()}, nil
}

func listTooLarge(encoding string) func(context.Context, *env) (*fixture.File, error) {
	return func(ctx context.Context, e *env) (*fixture.File, error) {
		ns, err := e.namespace(ctx, "list-too-large"+suffix(encoding))
		if err != nil {
			return nil, err
		}
		rec := &fixture.Recorder{}
		cs := e.recorded(serverLimited, apiserver.Limited, encoding, rec)
		err = holdSlot(ctx, cs, ns).Error()
		if !apierrors.IsTimeout(err) {
			return nil, fmt.Errorf("want 504 Timeout, got %v", err)
		}
		if err := retryAfterOne(rec); err != nil {
			return nil, err
		}
		return &fixture.File{Exchanges: rec.Exchanges()}, nil
	}
}

// holdSlot is the LIST that occupies the only request slot for about 3s.
func holdSlot(ctx context.Context, cs *kubernetes.Clientset, ns string) rest.Result {
	return rawList(ctx, cs, ns, metav1.ListOptions{ResourceVersion: tooLargeRV, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
}

func retryAfterOne(rec *fixture.Recorder) error {
	for _, ex := range rec.Exchanges() {
		if ex.Response.Header.Get("Retry-After") != "1" {
			return fmt.Errorf("%s answered %d without Retry-After: 1 (%v)", ex.Request.URL, ex.Response.Status, ex.Response.Header)
		}
	}
	return nil
}

func list429(ctx context.Context, e *env) (*fixture.File, error) {
	ns, err := e.namespace(ctx, "list-429")
	if err != nil {
		return nil, err
	}
	holder := e.recorded(serverLimited, apiserver.Limited, JSON, &fixture.Recorder{})
	held := make(chan error, 1)
	go func() { held <- holdSlot(ctx, holder, ns).Error() }()
	time.Sleep(700 * time.Millisecond) // the holder is in flight

	rec := &fixture.Recorder{}
	for _, encoding := range []string{JSON, Protobuf} {
		cs := e.recorded(serverLimited, apiserver.Limited, encoding, rec)
		err := rawList(ctx, cs, ns, metav1.ListOptions{Limit: 500}).Error()
		if !apierrors.IsTooManyRequests(err) {
			return nil, fmt.Errorf("want 429 while the slot is held, got %v", err)
		}
	}
	if err := <-held; !apierrors.IsTimeout(err) {
		return nil, fmt.Errorf("holder: want 504, got %v", err)
	}
	if err := retryAfterOne(rec); err != nil {
		return nil, err
	}
	for _, ex := range rec.Exchanges() {
		if ex.Response.Status != http.StatusTooManyRequests {
			return nil, fmt.Errorf("recorded %d, want only 429s", ex.Response.Status)
		}
	}
	return &fixture.File{Exchanges: rec.Exchanges()}, nil
}

// compactAfterWrites returns an RV, then writes and compacts etcd past it.
func (e *env) compactAfterWrites(ctx context.Context, ns string, seedCount int) (string, error) {
	rv, err := e.seed(ctx, serverNoCache, ns, "cm", seedCount)
	if err != nil {
		return "", err
	}
	if err := e.churnAndCompact(ctx, ns, rv); err != nil {
		return "", err
	}
	return rv, nil
}

// churnAndCompact writes through the server without a watch cache, then compacts etcd at its
// current revision, which must be past rv unless rv is "".
func (e *env) churnAndCompact(ctx context.Context, ns, rv string) error {
	if err := e.churn(ctx, serverNoCache, ns, "pre"); err != nil {
		return err
	}
	rev, err := e.cluster.EtcdRevision(ctx)
	if err != nil {
		return err
	}
	if rv != "" && rev <= atoi64(rv) {
		return fmt.Errorf("etcd revision %d not past %s", rev, rv)
	}
	return e.cluster.CompactEtcd(ctx, rev)
}

func watchCompacted(encoding string) func(context.Context, *env) (*fixture.File, error) {
	return func(ctx context.Context, e *env) (*fixture.File, error) {
		ns, err := e.namespace(ctx, "watch-compacted"+suffix(encoding))
		if err != nil {
			return nil, err
		}
		rv, err := e.compactAfterWrites(ctx, ns, 1)
		if err != nil {
			return nil, err
		}
		return e.watchGone(ctx, serverNoCache, encoding, ns, rv, "")
	}
}

func listExactCompacted(ctx context.Context, e *env) (*fixture.File, error) {
	ns, err := e.namespace(ctx, "list-exact")
	if err != nil {
		return nil, err
	}
	rv, err := e.compactAfterWrites(ctx, ns, 2)
	if err != nil {
		return nil, err
	}
	rec := &fixture.Recorder{}
	cs := e.recorded(serverNoCache, apiserver.Admin, JSON, rec)
	_, err = cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchExact})
	if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
		return nil, fmt.Errorf("want 410, got %v", err)
	}
	return &fixture.File{Exchanges: rec.Exchanges()}, nil
}

func listContinueExpired(ctx context.Context, e *env) (*fixture.File, error) {
	ns, err := e.namespace(ctx, "list-continue")
	if err != nil {
		return nil, err
	}
	if _, err := e.seed(ctx, serverNoCache, ns, "cm", 5); err != nil {
		return nil, err
	}
	rec := &fixture.Recorder{}
	cs := e.recorded(serverNoCache, apiserver.Admin, JSON, rec)
	first, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{Limit: 2})
	if err != nil {
		return nil, err
	}
	if first.Continue == "" {
		return nil, errors.New("first page has no continue token")
	}
	if err := e.churnAndCompact(ctx, ns, ""); err != nil {
		return nil, err
	}
	_, err = cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{Limit: 2, Continue: first.Continue})
	if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
		return nil, fmt.Errorf("want 410 for an expired continue, got %v", err)
	}
	return &fixture.File{Exchanges: rec.Exchanges()}, nil
}

func watchAfterRestart(ctx context.Context, e *env) (*fixture.File, error) {
	ns, err := e.namespace(ctx, "watch-restart")
	if err != nil {
		return nil, err
	}
	rv, err := e.seed(ctx, serverDefault, ns, "cm", 1)
	if err != nil {
		return nil, err
	}
	if err := e.churn(ctx, serverDefault, ns, "pre"); err != nil {
		return nil, err
	}
	if err := e.cluster.Server(serverDefault).Restart(ctx); err != nil {
		return nil, err
	}
	return e.watchGone(ctx, serverDefault, JSON, ns, rv, " after the restart")
}

// watchGone records a watch from rv on server, drains it and wants an ERROR event 410 (after
// says when, for the error).
func (e *env) watchGone(ctx context.Context, server int, encoding, ns, rv, after string) (*fixture.File, error) {
	rec := &fixture.Recorder{}
	cs := e.recorded(server, apiserver.Admin, encoding, rec)
	w, err := cs.CoreV1().ConfigMaps(ns).Watch(ctx, watchFrom(rv))
	if err != nil {
		return nil, err
	}
	if err := drain(w).expectError(http.StatusGone, after); err != nil {
		return nil, err
	}
	return &fixture.File{Exchanges: rec.Exchanges()}, nil
}

// informerList records what a SharedIndexInformer starting with a LIST sends, page size 3:
// client-go's pager (LIST at resourceVersion=0, then each continue token with resourceVersion
// cleared), then the reflector's WATCH from the list's resourceVersion.
func informerList(encoding string) func(context.Context, *env) (*fixture.File, error) {
	return func(ctx context.Context, e *env) (*fixture.File, error) {
		ns, err := e.namespace(ctx, "informer-list"+suffix(encoding))
		if err != nil {
			return nil, err
		}
		if _, err := e.seed(ctx, serverNoCache, ns, "cm", 7); err != nil {
			return nil, err
		}
		rec := &fixture.Recorder{}
		cs := e.recorded(serverNoCache, apiserver.Admin, encoding, rec)
		opts := metav1.ListOptions{ResourceVersion: "0", Limit: 3}
		listRV, total, pages := "", 0, 0
		for {
			list, err := cs.CoreV1().ConfigMaps(ns).List(ctx, opts)
			if err != nil {
				return nil, err
			}
			pages++
			total += len(list.Items)
			if listRV == "" {
				listRV = list.ResourceVersion
			} else if list.ResourceVersion != listRV {
				return nil, fmt.Errorf("page %d at resourceVersion %s, the first at %s", pages, list.ResourceVersion, listRV)
			}
			if list.Continue == "" {
				break
			}
			opts.Continue, opts.ResourceVersion = list.Continue, ""
		}
		if total != 7 || pages != 3 {
			return nil, fmt.Errorf("LIST from resourceVersion=0 returned %d items in %d pages, want 7 in 3", total, pages)
		}
		w, err := cs.CoreV1().ConfigMaps(ns).Watch(ctx, watchFrom(listRV))
		if err != nil {
			return nil, err
		}
		s, err := drainWhile(w, func() error { return e.churn(ctx, serverNoCache, ns, "w") })
		if err != nil {
			return nil, err
		}
		if err := s.expect(watch.Added, watch.Modified, watch.Deleted); err != nil {
			return nil, err
		}
		return &fixture.File{Exchanges: rec.Exchanges()}, nil
	}
}
