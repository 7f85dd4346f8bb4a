package transport

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// errCaptured ends every captured request before it reaches a network.
var errCaptured = errors.New("captured")

// recorder is a RoundTripper that keeps the requests client-go builds.
type recorder struct {
	mu   sync.Mutex
	last *http.Request
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last = req.Clone(req.Context())
	return nil, errCaptured
}

// clients are the real client-go clients whose requests are classified.
type clients struct {
	typed    kubernetes.Interface
	dynamic  dynamic.Interface
	metadata metadata.Interface
}

func newClients(t *testing.T, host string, rt http.RoundTripper) clients {
	t.Helper()
	cfg := &rest.Config{Host: host, Transport: rt, RateLimiter: flowcontrol.NewFakeAlwaysRateLimiter()}
	typed, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return clients{typed: typed, dynamic: dyn, metadata: meta}
}

var (
	deployments = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	widgets     = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"} // a cluster-scoped CRD
)

func TestClassifyClientGoRequests(t *testing.T) {
	ctx := context.Background()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "x"}}
	sendInitialEvents := true
	tests := []struct {
		name string
		call func(c clients)
		// header, if set, is added to the captured request (as SPDY and
		// websocket clients do).
		header map[string]string
		want   kind
		path   string // the captured path, to keep the table honest
	}{
		// Collections: core and grouped, namespaced and cluster-scoped.
		{"pods in a namespace", func(c clients) { c.typed.CoreV1().Pods("ns").List(ctx, metav1.ListOptions{}) }, nil,
			kindList, "/api/v1/namespaces/ns/pods"},
		{"pods in all namespaces", func(c clients) {
			c.typed.CoreV1().Pods("").List(ctx, metav1.ListOptions{ResourceVersion: "0", Limit: 500})
		}, nil, kindList, "/api/v1/pods"},
		{"nodes", func(c clients) { c.typed.CoreV1().Nodes().List(ctx, metav1.ListOptions{}) }, nil,
			kindList, "/api/v1/nodes"},
		{"namespaces", func(c clients) { c.typed.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}) }, nil,
			kindList, "/api/v1/namespaces"},
		{"deployments", func(c clients) {
			c.typed.AppsV1().Deployments("ns").List(ctx, metav1.ListOptions{Continue: "token", Limit: 10})
		}, nil, kindList, "/apis/apps/v1/namespaces/ns/deployments"},
		{"dynamic deployments", func(c clients) { c.dynamic.Resource(deployments).Namespace("ns").List(ctx, metav1.ListOptions{}) }, nil,
			kindList, "/apis/apps/v1/namespaces/ns/deployments"},
		{"dynamic cluster-scoped CRD", func(c clients) { c.dynamic.Resource(widgets).List(ctx, metav1.ListOptions{}) }, nil,
			kindList, "/apis/example.com/v1/widgets"},
		{"metadata-only", func(c clients) { c.metadata.Resource(deployments).Namespace("ns").List(ctx, metav1.ListOptions{}) }, nil,
			kindList, "/apis/apps/v1/namespaces/ns/deployments"},
		{"pods in a namespace named status", func(c clients) { c.typed.CoreV1().Pods("status").List(ctx, metav1.ListOptions{}) }, nil,
			kindList, "/api/v1/namespaces/status/pods"},

		// Single objects and their subresources.
		{"pod", func(c clients) { c.typed.CoreV1().Pods("ns").Get(ctx, "p", metav1.GetOptions{}) }, nil,
			kindGet, "/api/v1/namespaces/ns/pods/p"},
		{"node", func(c clients) { c.typed.CoreV1().Nodes().Get(ctx, "n", metav1.GetOptions{}) }, nil,
			kindGet, "/api/v1/nodes/n"},
		{"namespace", func(c clients) { c.typed.CoreV1().Namespaces().Get(ctx, "x", metav1.GetOptions{}) }, nil,
			kindGet, "/api/v1/namespaces/x"},
		{"namespace status", func(c clients) {
			c.typed.CoreV1().RESTClient().Get().Resource("namespaces").Name("x").SubResource("status").Do(ctx)
		}, nil, kindGet, "/api/v1/namespaces/x/status"},
		{"namespace finalize read", func(c clients) {
			c.typed.CoreV1().RESTClient().Get().Resource("namespaces").Name("x").SubResource("finalize").Do(ctx)
		}, nil, kindGet, "/api/v1/namespaces/x/finalize"},
		{"deployment scale", func(c clients) { c.typed.AppsV1().Deployments("ns").GetScale(ctx, "d", metav1.GetOptions{}) }, nil,
			kindGet, "/apis/apps/v1/namespaces/ns/deployments/d/scale"},
		{"dynamic cluster-scoped object", func(c clients) { c.dynamic.Resource(widgets).Get(ctx, "w", metav1.GetOptions{}) }, nil,
			kindGet, "/apis/example.com/v1/widgets/w"},
		{"discovery of a group version", func(c clients) { c.typed.Discovery().ServerResourcesForGroupVersion("apps/v1") }, nil,
			kindGet, "/apis/apps/v1"},
		{"discovery of core", func(c clients) { c.typed.Discovery().ServerResourcesForGroupVersion("v1") }, nil,
			kindGet, "/api/v1"},

		// Watches.
		{"watch pods", func(c clients) { c.typed.CoreV1().Pods("ns").Watch(ctx, metav1.ListOptions{ResourceVersion: "10"}) }, nil,
			kindWatch, "/api/v1/namespaces/ns/pods"},
		{"watch namespaces", func(c clients) { c.typed.CoreV1().Namespaces().Watch(ctx, metav1.ListOptions{}) }, nil,
			kindWatch, "/api/v1/namespaces"},
		{"watch one pod by field selector", func(c clients) {
			c.typed.CoreV1().Pods("ns").Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=p"})
		}, nil, kindWatch, "/api/v1/namespaces/ns/pods"},
		{"streaming list", func(c clients) {
			c.typed.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{SendInitialEvents: &sendInitialEvents,
				ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, AllowWatchBookmarks: true})
		}, nil, kindWatch, "/api/v1/pods"},
		{"dynamic watch", func(c clients) { c.dynamic.Resource(deployments).Namespace("ns").Watch(ctx, metav1.ListOptions{}) }, nil,
			kindWatch, "/apis/apps/v1/namespaces/ns/deployments"},
		{"legacy /watch/ collection", func(c clients) {
			c.typed.CoreV1().RESTClient().Get().Prefix("watch").Resource("pods").Do(ctx)
		}, nil, kindWatch, "/api/v1/watch/pods"},
		{"legacy /watch/ namespaced object", func(c clients) {
			c.typed.CoreV1().RESTClient().Get().Prefix("watch").Namespace("ns").Resource("pods").Name("p").Do(ctx)
		}, nil, kindWatch, "/api/v1/watch/namespaces/ns/pods/p"},
		{"legacy /watch/ grouped", func(c clients) {
			c.typed.AppsV1().RESTClient().Get().Prefix("watch").Namespace("ns").Resource("deployments").Do(ctx)
		}, nil, kindWatch, "/apis/apps/v1/watch/namespaces/ns/deployments"},
		{"watch=1", func(c clients) { c.typed.CoreV1().RESTClient().Get().Resource("pods").Param("watch", "1").Do(ctx) }, nil,
			kindWatch, "/api/v1/pods"},
		{"watch=", func(c clients) { c.typed.CoreV1().RESTClient().Get().Resource("pods").Param("watch", "").Do(ctx) }, nil,
			kindWatch, "/api/v1/pods"},
		{"watch=false", func(c clients) { c.typed.CoreV1().RESTClient().Get().Resource("pods").Param("watch", "false").Do(ctx) }, nil,
			kindList, "/api/v1/pods"},
		{"watch=0", func(c clients) { c.typed.CoreV1().RESTClient().Get().Resource("pods").Param("watch", "0").Do(ctx) }, nil,
			kindList, "/api/v1/pods"},
		// kube-apiserver's conversion (runtime.Convert_Slice_string_To_bool)
		// is false only for "0" and "false" in any case.
		{"watch=FALSE", func(c clients) { c.typed.CoreV1().RESTClient().Get().Resource("pods").Param("watch", "FALSE").Do(ctx) }, nil,
			kindList, "/api/v1/pods"},
		{"watch=f is a watch to the server", func(c clients) { c.typed.CoreV1().RESTClient().Get().Resource("pods").Param("watch", "f").Do(ctx) }, nil,
			kindWatch, "/api/v1/pods"},
		{"watch=F", func(c clients) { c.typed.CoreV1().RESTClient().Get().Resource("pods").Param("watch", "F").Do(ctx) }, nil,
			kindWatch, "/api/v1/pods"},
		{"watch=yes", func(c clients) { c.typed.CoreV1().RESTClient().Get().Resource("pods").Param("watch", "yes").Do(ctx) }, nil,
			kindWatch, "/api/v1/pods"},
		{"watch=true on one object is a GET", func(c clients) {
			c.typed.CoreV1().RESTClient().Get().Namespace("ns").Resource("pods").Name("p").Param("watch", "true").Do(ctx)
		}, nil, kindGet, "/api/v1/namespaces/ns/pods/p"},

		// Streams and tunnels: never retried.
		{"logs", func(c clients) {
			c.typed.CoreV1().Pods("ns").GetLogs("p", &corev1.PodLogOptions{Follow: true}).Stream(ctx)
		}, nil,
			kindPassThrough, "/api/v1/namespaces/ns/pods/p/log"},
		{"exec over SPDY", func(c clients) {
			c.typed.CoreV1().RESTClient().Post().Namespace("ns").Resource("pods").Name("p").SubResource("exec").Param("command", "ls").Do(ctx)
		}, map[string]string{"Connection": "Upgrade", "Upgrade": "SPDY/3.1"}, kindPassThrough, "/api/v1/namespaces/ns/pods/p/exec"},
		{"exec over websocket", func(c clients) {
			c.typed.CoreV1().RESTClient().Get().Namespace("ns").Resource("pods").Name("p").SubResource("exec").Param("command", "ls").Do(ctx)
		}, map[string]string{"Connection": "Upgrade", "Upgrade": "websocket"}, kindPassThrough, "/api/v1/namespaces/ns/pods/p/exec"},
		{"exec GET without upgrade", func(c clients) {
			c.typed.CoreV1().RESTClient().Get().Namespace("ns").Resource("pods").Name("p").SubResource("exec").Do(ctx)
		}, nil, kindPassThrough, "/api/v1/namespaces/ns/pods/p/exec"},
		{"attach", func(c clients) {
			c.typed.CoreV1().RESTClient().Get().Namespace("ns").Resource("pods").Name("p").SubResource("attach").Do(ctx)
		}, nil, kindPassThrough, "/api/v1/namespaces/ns/pods/p/attach"},
		{"portforward", func(c clients) {
			c.typed.CoreV1().RESTClient().Get().Namespace("ns").Resource("pods").Name("p").SubResource("portforward").Do(ctx)
		}, nil, kindPassThrough, "/api/v1/namespaces/ns/pods/p/portforward"},
		{"service proxy", func(c clients) {
			c.typed.CoreV1().Services("ns").ProxyGet("http", "svc", "80", "/metrics", nil).DoRaw(ctx)
		}, nil, kindPassThrough, "/api/v1/namespaces/ns/services/http:svc:80/proxy/metrics"},
		{"pod proxy", func(c clients) { c.typed.CoreV1().Pods("ns").ProxyGet("http", "p", "8080", "/", nil).DoRaw(ctx) }, nil,
			kindPassThrough, "/api/v1/namespaces/ns/pods/http:p:8080/proxy"},
		{"node proxy", func(c clients) {
			c.typed.CoreV1().RESTClient().Get().Resource("nodes").Name("n").SubResource("proxy", "metrics").Do(ctx)
		}, nil, kindPassThrough, "/api/v1/nodes/n/proxy/metrics"},
		{"legacy /proxy/", func(c clients) {
			c.typed.CoreV1().RESTClient().Get().Prefix("proxy").Namespace("ns").Resource("pods").Name("p").Do(ctx)
		}, nil, kindPassThrough, "/api/v1/proxy/namespaces/ns/pods/p"},
		{"websocket watch", func(c clients) { c.typed.CoreV1().Pods("ns").Watch(ctx, metav1.ListOptions{}) },
			map[string]string{"Connection": "keep-alive, Upgrade", "Upgrade": "websocket"}, kindPassThrough, "/api/v1/namespaces/ns/pods"},

		// Writes: never retried.
		{"create", func(c clients) { c.typed.CoreV1().Pods("ns").Create(ctx, pod, metav1.CreateOptions{}) }, nil,
			kindPassThrough, "/api/v1/namespaces/ns/pods"},
		{"update", func(c clients) { c.typed.CoreV1().Pods("ns").Update(ctx, pod, metav1.UpdateOptions{}) }, nil,
			kindPassThrough, "/api/v1/namespaces/ns/pods/p"},
		{"patch", func(c clients) {
			c.typed.CoreV1().Pods("ns").Patch(ctx, "p", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{})
		}, nil, kindPassThrough, "/api/v1/namespaces/ns/pods/p"},
		{"apply", func(c clients) {
			c.typed.AppsV1().Deployments("ns").Patch(ctx, "d", types.ApplyPatchType, []byte(`{}`), metav1.PatchOptions{FieldManager: "m"})
		}, nil, kindPassThrough, "/apis/apps/v1/namespaces/ns/deployments/d"},
		{"delete", func(c clients) { c.typed.CoreV1().Pods("ns").Delete(ctx, "p", metav1.DeleteOptions{}) }, nil,
			kindPassThrough, "/api/v1/namespaces/ns/pods/p"},
		{"delete collection", func(c clients) {
			c.typed.CoreV1().Pods("ns").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		}, nil, kindPassThrough, "/api/v1/namespaces/ns/pods"},
		{"namespace status update", func(c clients) { c.typed.CoreV1().Namespaces().UpdateStatus(ctx, ns, metav1.UpdateOptions{}) }, nil,
			kindPassThrough, "/api/v1/namespaces/x/status"},
		{"namespace finalize", func(c clients) { c.typed.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{}) }, nil,
			kindPassThrough, "/api/v1/namespaces/x/finalize"},
		{"eviction", func(c clients) {
			c.typed.CoreV1().Pods("ns").EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}})
		}, nil, kindPassThrough, "/api/v1/namespaces/ns/pods/p/eviction"},
		{"create in a group", func(c clients) {
			c.typed.AppsV1().Deployments("ns").Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d"}}, metav1.CreateOptions{})
		}, nil, kindPassThrough, "/apis/apps/v1/namespaces/ns/deployments"},

		// Outside the resource API.
		{"server version", func(c clients) { c.typed.Discovery().ServerVersion() }, nil,
			kindPassThrough, "/version"},
		{"api groups", func(c clients) { c.typed.Discovery().RESTClient().Get().AbsPath("/apis").Do(ctx) }, nil,
			kindPassThrough, "/apis"},
		{"legacy api versions", func(c clients) { c.typed.Discovery().RESTClient().Get().AbsPath("/api").Do(ctx) }, nil,
			kindPassThrough, "/api"},
		{"group versions", func(c clients) { c.typed.Discovery().RESTClient().Get().AbsPath("/apis/apps").Do(ctx) }, nil,
			kindPassThrough, "/apis/apps"},
		{"healthz", func(c clients) { c.typed.Discovery().RESTClient().Get().AbsPath("/healthz").Do(ctx) }, nil,
			kindPassThrough, "/healthz"},
		{"openapi", func(c clients) { c.typed.Discovery().RESTClient().Get().AbsPath("/openapi/v3").Do(ctx) }, nil,
			kindPassThrough, "/openapi/v3"},
	}
	rec := &recorder{}
	c := newClients(t, "http://k8s.test", rec)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec.last = nil
			tt.call(c)
			req := rec.last
			if req == nil {
				t.Fatal("client-go sent no request")
			}
			if req.URL.Path != tt.path {
				t.Fatalf("client-go asked for %s, the table says %s", req.URL.Path, tt.path)
			}
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			if got := classify(req, ""); got != tt.want {
				t.Errorf("classify(%s %s) = %v, want %v", req.Method, req.URL, got, tt.want)
			}
		})
	}
}

func TestClassifyHEADAndOddMethods(t *testing.T) {
	for _, method := range []string{http.MethodHead, http.MethodOptions, "get"} {
		req, _ := http.NewRequest(method, "http://k8s.test/api/v1/pods", nil)
		if got := classify(req, ""); got != kindPassThrough {
			t.Errorf("%s: classify = %v, want pass-through", method, got)
		}
	}
}

func TestClassifyAPIPrefix(t *testing.T) {
	ctx := context.Background()
	rec := &recorder{}
	c := newClients(t, "http://rancher.test/k8s/clusters/c-1", rec)
	calls := []struct {
		name string
		call func()
		want kind
	}{
		{"list", func() { c.typed.CoreV1().Pods("ns").List(ctx, metav1.ListOptions{}) }, kindList},
		{"watch", func() { c.typed.CoreV1().Pods("ns").Watch(ctx, metav1.ListOptions{}) }, kindWatch},
		{"get", func() { c.typed.CoreV1().Pods("ns").Get(ctx, "p", metav1.GetOptions{}) }, kindGet},
		{"logs", func() { c.typed.CoreV1().Pods("ns").GetLogs("p", &corev1.PodLogOptions{}).Do(ctx) }, kindPassThrough},
	}
	for _, tt := range calls {
		t.Run(tt.name, func(t *testing.T) {
			tt.call()
			req := rec.last
			for _, prefix := range []string{"/k8s/clusters/c-1", "/k8s/clusters/c-1/"} {
				if got := classify(req, prefix); got != tt.want {
					t.Errorf("classify(%s, %q) = %v, want %v", req.URL.Path, prefix, got, tt.want)
				}
			}
			// Without the prefix configured, or with a different one, the
			// request is outside the API: passed through.
			for _, prefix := range []string{"", "/k8s/clusters/c-2", "/k8s/clusters/c"} {
				if got := classify(req, prefix); got != kindPassThrough {
					t.Errorf("classify(%s, %q) = %v, want pass-through", req.URL.Path, prefix, got)
				}
			}
		})
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[kind]string{kindPassThrough: "pass-through", kindGet: "get", kindList: "list", kindWatch: "watch"} {
		if got := k.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", k, got, want)
		}
	}
}
