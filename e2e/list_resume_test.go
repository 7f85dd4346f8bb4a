//go:build e2e

package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/pager"

	"github.com/kretry/kretry/internal/harness/apiserver"
	"github.com/kretry/kretry/internal/harness/cmwriter"
	"github.com/kretry/kretry/internal/harness/faultproxy"
	"github.com/kretry/kretry/transport"
)

// bigListSize is how many ConfigMaps of about 1 KiB the large LISTs carry.
const bigListSize = 2_000

var (
	bigOnce sync.Once
	bigNS   string
	bigErr  error
)

// bigNamespace is a namespace on serverA with bigListSize ConfigMaps, created once for the
// LIST resume tests.
func bigNamespace(t *testing.T) string {
	t.Helper()
	bigOnce.Do(func() {
		ctx := context.Background()
		cs := adminClient(serverA)
		bigNS = namespace(t, serverA, "biglist", 0)
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for worker := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := worker; i < bigListSize; i += 8 {
					if _, err := cs.CoreV1().ConfigMaps(bigNS).Create(ctx, cmwriter.ConfigMap(fmt.Sprintf("seed-%04d", i), 0), metav1.CreateOptions{}); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		bigErr = <-errs
	})
	if bigErr != nil {
		t.Fatal(bigErr)
	}
	return bigNS
}

// queryLog records the query of every LIST that reaches the wire.
type queryLog struct {
	mu      sync.Mutex
	next    http.RoundTripper
	queries []url.Values
}

func (l *queryLog) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Query().Get("watch") == "" {
		l.mu.Lock()
		l.queries = append(l.queries, req.URL.Query())
		l.mu.Unlock()
	}
	return l.next.RoundTrip(req)
}

func (l *queryLog) lists() []url.Values {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]url.Values(nil), l.queries...)
}

// listClient is a client through addr in contentType; with kretry (configured by cfg) between
// its caller and wire counters, and a query log on the wire.
func listClient(addr, contentType string, kretry *transport.Config) (*client, *queryLog) {
	c := &client{cfg: cluster.ConfigFor(addr, apiserver.Admin), wire: &counter{}, caller: &counter{}, kretry: kretry != nil}
	c.cfg.ContentConfig = rest.ContentConfig{ContentType: contentType, AcceptContentTypes: contentType}
	log := &queryLog{}
	c.cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { log.next = rt; return log })
	c.cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { c.wire.next = rt; return c.wire })
	if kretry != nil {
		c.cfg.Wrap(transport.Wrapper(*kretry))
	}
	c.cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { c.caller.next = rt; return c.caller })
	return c, log
}

// wireSize is how many response bytes one LIST of ns takes on a fresh connection through a
// proxy to serverA in contentType (TLS and HTTP/2 framing included, gzip as negotiated).
func wireSize(t *testing.T, ns, contentType string) int64 {
	t.Helper()
	p := newProxy(t, 1, serverA)
	c, _ := listClient(p.Addr(), contentType, nil)
	if _, err := c.kube().CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	return p.Stats().BytesDown
}

const (
	jsonType     = "application/json"
	protobufType = "application/vnd.kubernetes.protobuf"
)

// TestListResumeLarge: a raw LIST of 2,000 ConfigMaps (JSON and protobuf) through a fault
// proxy that sends each new connection to the next of two apiservers and cuts the first one
// at 60% of the response: stock client-go fails the LIST; kretry resumes it on the other
// apiserver with one request at resourceVersionMatch=Exact and the list's resourceVersion, and
// the caller gets all 2,000 items. The same with ListBufferSize at 1 MiB, smaller than the
// list: held bodies past it were unprotected; streamed ones are not held at all.
func TestListResumeLarge(t *testing.T) {
	sharedCluster(t)
	ns := bigNamespace(t)
	for _, contentType := range []string{jsonType, protobufType} {
		size := wireSize(t, ns, contentType)
		for _, setup := range []struct {
			name   string
			kretry *transport.Config
		}{
			{"stock", nil},
			{"kretry", &transport.Config{}},
			{"kretry-buffer-1MiB", &transport.Config{ListBufferSize: 1 << 20}},
		} {
			t.Run(contentType+"/"+setup.name, func(t *testing.T) {
				p := newProxy(t, 17, serverA, serverC)
				p.SetRouting(faultproxy.RoundRobin)
				p.SetRuleFunc(func(n int64) faultproxy.Rule {
					if n == 1 {
						return faultproxy.Rule{CutAfterBytes: size * 6 / 10}
					}
					return faultproxy.Rule{}
				})
				c, log := listClient(p.Addr(), contentType, setup.kretry)
				list, err := c.kube().CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
				hits := p.Stats().PerBackendHit
				note := fmt.Sprintf("raw LIST of %d, %s, cut at %d of ~%d wire bytes; connections per apiserver %v", bigListSize, contentType, size*6/10, size, hits)
				f := figure{Fault: "list-resume", Client: setup.name, Caller: c.caller.snapshot(), Wire: c.wire.snapshot(), Converged: err == nil, Note: note}
				record(f)
				t.Logf("%s: err=%v caller=%+v wire=%+v", note, err, f.Caller, f.Wire)
				if setup.kretry == nil {
					if err == nil {
						t.Error("stock client-go: the cut LIST succeeded; the cut did not land in the body")
					}
					return
				}
				if err != nil || len(list.Items) != bigListSize {
					t.Fatalf("List: %d items, %v; want %d", len(list.Items), err, bigListSize)
				}
				asked := log.lists()
				if len(asked) != 2 || asked[1].Get("resourceVersionMatch") != "Exact" || asked[1].Get("resourceVersion") != list.ResourceVersion {
					t.Errorf("wire LISTs %v, want the LIST, then one at resourceVersion=%s&resourceVersionMatch=Exact", asked, list.ResourceVersion)
				}
				if len(hits) != 2 || hits[0] != 1 || hits[1] < 1 {
					t.Errorf("connections per apiserver %v, want the cut one on the first and the resume on the second", hits)
				}
				for i, cm := range list.Items {
					if want := fmt.Sprintf("seed-%04d", i); cm.Name != want {
						t.Fatalf("item %d is %s, want %s", i, cm.Name, want)
					}
				}
			})
		}
	}
}

// TestListResumePaged: client-go's pager lists the 2,000 ConfigMaps 500 at a time from etcd
// (resourceVersion unset, so every page after the first carries a continue token), through a
// fault proxy that cuts the first connection in the middle of the second page and sends the
// next connection to the other apiserver. Stock client-go's pager fails; kretry asks for the
// cut page again with the same continue token, reads past what it delivered, and the pager
// gets every item once, in order.
func TestListResumePaged(t *testing.T) {
	sharedCluster(t)
	ns := bigNamespace(t)
	const pageSize = 500
	for _, contentType := range []string{jsonType, protobufType} {
		size := wireSize(t, ns, contentType)
		for _, withKretry := range []bool{false, true} {
			name := contentType + "/stock"
			var cfg *transport.Config
			if withKretry {
				name, cfg = contentType+"/kretry", &transport.Config{}
			}
			t.Run(name, func(t *testing.T) {
				p := newProxy(t, 20, serverA, serverC)
				p.SetRouting(faultproxy.RoundRobin)
				// Four pages of about size/4 each: 3/8 of the whole is the middle of the second.
				cut := size * 3 / 8
				p.SetRuleFunc(func(n int64) faultproxy.Rule {
					if n == 1 {
						return faultproxy.Rule{CutAfterBytes: cut}
					}
					return faultproxy.Rule{}
				})
				c, log := listClient(p.Addr(), contentType, cfg)
				cs := c.kube()
				lp := pager.New(pager.SimplePageFunc(func(opts metav1.ListOptions) (runtime.Object, error) {
					return cs.CoreV1().ConfigMaps(ns).List(context.Background(), opts)
				}))
				lp.PageSize = pageSize
				var names []string
				err := lp.EachListItem(context.Background(), metav1.ListOptions{}, func(obj runtime.Object) error {
					names = append(names, obj.(metav1.Object).GetName())
					return nil
				})
				asked := log.lists()
				note := fmt.Sprintf("paged LIST of %d by %d, %s, cut at %d of ~%d wire bytes; %d wire LISTs", bigListSize, pageSize, contentType, cut, size, len(asked))
				f := figure{Fault: "list-resume-paged", Client: name, Caller: c.caller.snapshot(), Wire: c.wire.snapshot(), Converged: err == nil, Note: note}
				record(f)
				t.Logf("%s: err=%v caller=%+v wire=%+v", note, err, f.Caller, f.Wire)
				if !withKretry {
					if err == nil {
						t.Error("stock client-go: the cut paged LIST succeeded; the cut did not land in a body")
					}
					if len(asked) != 2 {
						t.Errorf("stock client-go asked %d pages before the error, want the cut in the second", len(asked))
					}
					return
				}
				if err != nil || len(names) != bigListSize {
					t.Fatalf("pager: %d items, %v; want %d", len(names), err, bigListSize)
				}
				for i, name := range names {
					if want := fmt.Sprintf("seed-%04d", i); name != want {
						t.Fatalf("item %d is %s, want %s", i, name, want)
					}
				}
				// Four pages and one resume: the page cut (the second) asked for again with its
				// own continue token, and nothing asked twice otherwise.
				if len(asked) != bigListSize/pageSize+1 {
					t.Fatalf("wire LISTs %v, want %d pages and one resume", asked, bigListSize/pageSize)
				}
				if asked[1].Get("continue") == "" || asked[2].Get("continue") != asked[1].Get("continue") {
					t.Errorf("the resume asked continue=%q, want the cut page's continue=%q", asked[2].Get("continue"), asked[1].Get("continue"))
				}
			})
		}
	}
}

// TestListResumeInformer: an informer (watch-list off: it starts with a LIST) of 2,000
// ConfigMaps whose first connection is cut mid-LIST: stock client-go lists again, kretry
// resumes the body and the informer fetches its initial state once.
func TestListResumeInformer(t *testing.T) {
	sharedCluster(t)
	disableWatchList(t)
	ns := bigNamespace(t)
	for _, contentType := range []string{jsonType, protobufType} {
		size := wireSize(t, ns, contentType)
		stockAndKretry(t, func(t *testing.T, withKretry bool) figure {
			p := newProxy(t, 18, serverA)
			p.SetRuleFunc(func(n int64) faultproxy.Rule {
				if n == 1 {
					return faultproxy.Rule{CutAfterBytes: size / 2}
				}
				return faultproxy.Rule{}
			})
			var cfg *transport.Config
			if withKretry {
				cfg = &transport.Config{}
			}
			c, log := listClient(p.Addr(), contentType, cfg)
			inf := startInformer(t, c, ns)
			d, err := converge(context.Background(), inf, serverA, ns, convergeTimeout)
			if err != nil {
				t.Error(err)
			}
			f := figure{Fault: "list-resume-inf", Caller: c.caller.snapshot(), Wire: c.wire.snapshot(), Converged: err == nil, Converge: d,
				Note: fmt.Sprintf("informer on %d ConfigMaps, %s, first connection cut mid-LIST; wire LISTs %d", bigListSize, contentType, len(log.lists()))}
			wantFetches(t, withKretry, f, 1, "the LIST broken mid-body is resumed at its exact resourceVersion")
			return f
		})
	}
}

// TestListResumeCustomResources: a custom resource's JSON list carries its metadata last, so
// kretry holds it whole and asks for it again as it was when its body breaks: no Exact LIST.
func TestListResumeCustomResources(t *testing.T) {
	sharedCluster(t)
	ctx := context.Background()
	gvr, ns := widgets(t, 300)
	// The wire size of the list on a connection of its own (client-go shares connections
	// between configs to the same address: one proxy each).
	measure := newProxy(t, 19, serverA)
	mc, _ := listClient(measure.Addr(), jsonType, nil)
	if _, err := dynamic.NewForConfigOrDie(mc.cfg).Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	size := measure.Stats().BytesDown
	for _, withKretry := range []bool{false, true} {
		var cfg *transport.Config
		if withKretry {
			cfg = &transport.Config{}
		}
		p := newProxy(t, 19, serverA)
		p.SetRuleFunc(func(n int64) faultproxy.Rule {
			if n == 1 {
				return faultproxy.Rule{CutAfterBytes: size / 2}
			}
			return faultproxy.Rule{}
		})
		c, log := listClient(p.Addr(), jsonType, cfg)
		list, err := dynamic.NewForConfigOrDie(c.cfg).Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
		asked := log.lists()
		t.Logf("kretry=%v: err=%v, wire LISTs %v", withKretry, err, asked)
		if !withKretry {
			if err == nil {
				t.Error("stock client-go: the cut LIST succeeded")
			}
			continue
		}
		if err != nil || len(list.Items) != 300 {
			t.Fatalf("List: %v", err)
		}
		if len(asked) != 2 || asked[1].Encode() != asked[0].Encode() {
			t.Errorf("wire LISTs %v, want the same query twice (held, retried whole)", asked)
		}
	}
}

// widgets creates a namespaced CRD (through the dynamic client, as unstructured) and n of its
// objects, and returns its resource and namespace.
func widgets(t *testing.T, n int) (schema.GroupVersionResource, string) {
	t.Helper()
	ctx := context.Background()
	cfg := cluster.ConfigFor(cluster.Server(serverA).Addr(), apiserver.Admin)
	dyn := dynamic.NewForConfigOrDie(cfg)
	suffix := time.Now().UnixNano() % 1_000_000
	group := fmt.Sprintf("e2e%d.kretry.test", suffix)
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "widgets." + group},
		"spec": map[string]any{
			"group": group, "scope": "Namespaced",
			"names": map[string]any{"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
		},
	}}
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	if _, err := dyn.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = dyn.Resource(crdGVR).Delete(context.Background(), "widgets."+group, metav1.DeleteOptions{})
	})
	gvr := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}
	ns := namespace(t, serverA, "widgets", 0)
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; i < n; {
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": group + "/v1", "kind": "Widget",
			"metadata": map[string]any{"name": fmt.Sprintf("w-%04d", i)},
			"spec":     map[string]any{"pad": fmt.Sprintf("%01000d", i)},
		}}
		_, err := dyn.Resource(gvr).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{})
		switch {
		case err == nil:
			i++
		case time.Now().Before(deadline): // the CRD is not served yet
			time.Sleep(200 * time.Millisecond)
		default:
			t.Fatal(err)
		}
	}
	return gvr, ns
}
