package main

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/kretry/kretry/internal/harness/apiserver"
	"github.com/kretry/kretry/internal/harness/fixture"
)

// Encodings a recorded client asks for.
const (
	// JSON sets ContentType application/json: client-go then sends "Accept: application/json, */*".
	JSON = "application/json"
	// Protobuf leaves client-go's default for built-in types: it sends
	// "Accept: application/vnd.kubernetes.protobuf,application/json", as informers do.
	Protobuf = ""
	// CBOR sets ContentType application/cbor ("Accept: application/cbor, */*"), which client-go
	// honours with its ClientsAllowCBOR gate on (the recorder turns it on); a watch is then
	// answered application/cbor-seq by a server with CBORServingAndStorage.
	CBOR = "application/cbor"
)

// server indexes, in the order main starts them.
const (
	serverDefault  = 0
	serverLimited  = 1
	serverNoCache  = 2
	serverCBOR     = 3
	tooLargeRV     = "99999999"
	watchSeconds   = 6
	initialEndsKey = "k8s.io/initial-events-end"
)

type env struct {
	cluster *apiserver.Cluster
}

// recorded returns a clientset for server as user, whose requests rec records.
func (e *env) recorded(server int, u apiserver.User, encoding string, rec *fixture.Recorder) *kubernetes.Clientset {
	cfg := e.cluster.ConfigFor(e.cluster.Server(server).Addr(), u)
	cfg.UserAgent = "" // client-go's default: <binary>/<version> (<os>/<arch>) kubernetes/<commit>
	cfg.ContentType = encoding
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		rec.Next = rt
		return rec
	})
	return kubernetes.NewForConfigOrDie(cfg)
}

// serverFor is the server a scenario recording encoding talks to: the one serving CBOR for
// CBOR, the default one otherwise.
func serverFor(encoding string) int {
	if encoding == CBOR {
		return serverCBOR
	}
	return serverDefault
}

// allowCBOR turns on client-go's ClientsAllowCBOR gate for the process, as
// KUBE_FEATURE_ClientsAllowCBOR=true does, so that a client asking for CBOR decodes it.
func allowCBOR() error {
	gates, ok := clientfeatures.FeatureGates().(interface {
		Set(clientfeatures.Feature, bool) error
	})
	if !ok {
		return fmt.Errorf("client-go's feature gates cannot be set")
	}
	return gates.Set(clientfeatures.ClientsAllowCBOR, true)
}

// admin returns an unrecorded admin clientset for server: the writer and the setup.
func (e *env) admin(server int) *kubernetes.Clientset {
	return kubernetes.NewForConfigOrDie(e.cluster.ConfigFor(e.cluster.Server(server).Addr(), apiserver.Admin))
}

// namespace creates a fresh namespace named after the scenario.
func (e *env) namespace(ctx context.Context, name string) (string, error) {
	ns := "rec-" + name
	_, err := e.admin(serverDefault).CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	return ns, err
}

// seed creates n ConfigMaps prefix-0 .. prefix-(n-1) and returns the collection's list RV.
func (e *env) seed(ctx context.Context, server int, ns, prefix string, n int) (string, error) {
	cs := e.admin(server)
	for i := range n {
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap(fmt.Sprintf("%s-%d", prefix, i), "v0"), metav1.CreateOptions{}); err != nil {
			return "", err
		}
	}
	list, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	return list.ResourceVersion, nil
}

// churn is the writer: it creates, updates and deletes ConfigMaps, 200ms apart.
func (e *env) churn(ctx context.Context, server int, ns, prefix string) error {
	cs := e.admin(server).CoreV1().ConfigMaps(ns)
	step := func(f func() error) error {
		time.Sleep(200 * time.Millisecond)
		return f()
	}
	a, b := prefix+"-a", prefix+"-b"
	return firstErr(
		step(func() error { _, err := cs.Create(ctx, configMap(a, "v1"), metav1.CreateOptions{}); return err }),
		step(func() error { _, err := cs.Create(ctx, configMap(b, "v1"), metav1.CreateOptions{}); return err }),
		step(func() error { _, err := cs.Update(ctx, configMap(a, "v2"), metav1.UpdateOptions{}); return err }),
		step(func() error { return cs.Delete(ctx, b, metav1.DeleteOptions{}) }),
	)
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func configMap(name, value string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"value": value}}
}

// seen summarizes the events a watch delivered.
type seen struct {
	types       []watch.EventType
	initialEnds int // index in types of the initial-events-end bookmark, -1 if none
	errorStatus *metav1.Status
}

func (s seen) has(t watch.EventType) bool {
	for _, x := range s.types {
		if x == t {
			return true
		}
	}
	return false
}

func (s seen) String() string { return fmt.Sprint(s.types) }

// drain reads w until the server ends the stream.
func drain(w watch.Interface) seen {
	s := seen{initialEnds: -1}
	for ev := range w.ResultChan() {
		s.types = append(s.types, ev.Type)
		switch obj := ev.Object.(type) {
		case *metav1.Status:
			s.errorStatus = obj
		case metav1.Object:
			if ev.Type == watch.Bookmark && obj.GetAnnotations()[initialEndsKey] == "true" {
				s.initialEnds = len(s.types) - 1
			}
		}
	}
	return s
}

// expect fails unless every wanted type was seen.
func (s seen) expect(want ...watch.EventType) error {
	for _, t := range want {
		if !s.has(t) {
			return fmt.Errorf("no %s event among %v", t, s.types)
		}
	}
	return nil
}

// expectError fails unless the watch delivered an ERROR event with Status code (after says
// when, for the error).
func (s seen) expectError(code int32, after string) error {
	if s.errorStatus == nil || s.errorStatus.Code != code {
		return fmt.Errorf("want an ERROR event %d%s, got %v (%v)", code, after, s, s.errorStatus)
	}
	return nil
}

// watchFrom is a watch from rv with bookmarks, which the server ends after watchSeconds.
func watchFrom(rv string) metav1.ListOptions {
	return metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true, TimeoutSeconds: int64ptr(watchSeconds)}
}

func ptr[T any](v T) *T { return &v }

func int64ptr(n int) *int64 { v := int64(n); return &v }

func atoi64(s string) int64 { n, _ := strconv.ParseInt(s, 10, 64); return n }

// rawWatch opens a watch as the typed client does (protobuf preferred unless the config asks for
// JSON) but without client-go's own retries, so that an establishment error is recorded once.
func rawWatch(ctx context.Context, cs *kubernetes.Clientset, ns string, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return cs.CoreV1().RESTClient().Get().UseProtobufAsDefaultIfPreferred(true).Namespace(ns).Resource("configmaps").
		VersionedParams(&opts, scheme.ParameterCodec).
		Timeout(time.Duration(*opts.TimeoutSeconds) * time.Second).
		MaxRetries(0).Watch(ctx)
}

// rawList is a LIST as the typed client sends it, without client-go's own retries.
func rawList(ctx context.Context, cs *kubernetes.Clientset, ns string, opts metav1.ListOptions) rest.Result {
	return cs.CoreV1().RESTClient().Get().UseProtobufAsDefaultIfPreferred(true).Namespace(ns).Resource("configmaps").
		VersionedParams(&opts, scheme.ParameterCodec).MaxRetries(0).Do(ctx)
}
