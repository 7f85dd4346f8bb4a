package transport_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/kretry/kretry/transport"
)

const protobufType = "application/vnd.kubernetes.protobuf"

// watchStream is about 8 MiB of MODIFIED ConfigMap events of eventSize
// bytes each, as kube-apiserver writes them in the media type.
func watchStream(b *testing.B, mediaType string, eventSize int) (stream []byte, events int) {
	return watchEvents(b, mediaType, eventSize, func(size, _ int) bool { return size >= 8<<20 })
}

// watchEvents is MODIFIED ConfigMap events of eventSize bytes each, as
// kube-apiserver writes them in the media type, until full(stream length,
// events) says the stream is long enough.
func watchEvents(b *testing.B, mediaType string, eventSize int, full func(size, events int) bool) (stream []byte, events int) {
	encode := func(cm *corev1.ConfigMap) []byte {
		if mediaType == "application/json" {
			raw, _ := json.Marshal(cm)
			data, _ := json.Marshal(metav1.WatchEvent{Type: "MODIFIED", Object: runtime.RawExtension{Raw: raw}})
			return append(data, '\n')
		}
		var raw bytes.Buffer
		if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(cm, &raw); err != nil {
			b.Fatal(err)
		}
		data, err := (&metav1.WatchEvent{Type: "MODIFIED", Object: runtime.RawExtension{Raw: raw.Bytes()}}).Marshal()
		if err != nil {
			b.Fatal(err)
		}
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(data))), data...)
	}
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "bench", Namespace: "demo"},
		Data:       map[string]string{"blob": ""},
	}
	for !full(len(stream), events) {
		cm.ResourceVersion = fmt.Sprint(1000 + events)
		cm.Data["blob"] = ""
		overhead := len(encode(cm))
		cm.Data["blob"] = strings.Repeat("x", max(0, eventSize-overhead))
		stream = append(stream, encode(cm)...)
		events++
	}
	return stream, events
}

// BenchmarkTypedWatch is the real path: a typed clientset's Watch() (rest
// client, StreamWatcher, client-go's decoders) over loopback HTTP/1.1 and
// TLS HTTP/2 from an httptest server that writes the whole stream and holds
// the watch open; one op receives every event. The plain client and the
// client with kretry under it run against the same server.
func BenchmarkTypedWatch(b *testing.B) {
	for _, proto := range []string{"http1", "h2"} {
		for _, mediaType := range []string{"application/json", protobufType} {
			name := map[string]string{"application/json": "json", protobufType: "protobuf"}[mediaType]
			for _, size := range []int{1 << 10, 64 << 10} {
				stream, events := watchStream(b, mediaType, size)
				server := watchServer(proto, mediaType, stream)
				for _, client := range []string{"plain", "kretry"} {
					b.Run(fmt.Sprintf("%s/%s/%dKiB/%s", proto, name, size>>10, client), func(b *testing.B) {
						cs := watchClient(b, server, mediaType, client == "kretry")
						b.SetBytes(int64(len(stream)))
						b.ReportAllocs()
						for b.Loop() {
							w, err := cs.CoreV1().ConfigMaps("demo").Watch(context.Background(), metav1.ListOptions{ResourceVersion: "999", TimeoutSeconds: ptrTo(int64(300))})
							if err != nil {
								b.Fatal(err)
							}
							for i := 0; i < events; i++ {
								if ev, ok := <-w.ResultChan(); !ok || ev.Type != "MODIFIED" {
									b.Fatalf("event %d of %d: %v %v", i, events, ev.Type, ok)
								}
							}
							w.Stop()
						}
					})
				}
				server.Close()
			}
		}
	}
}

func ptrTo[T any](v T) *T { return &v }

// watchServer answers every request with the stream in mediaType, flushed,
// then holds the watch open until the client goes.
func watchServer(proto, mediaType string, stream []byte) *httptest.Server {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", mediaType+";stream=watch")
		if mediaType == "application/json" {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(stream)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	if proto == "http1" {
		return httptest.NewServer(handler)
	}
	server := httptest.NewUnstartedServer(handler)
	server.EnableHTTP2 = true
	server.StartTLS()
	return server
}

// watchClient is a typed clientset for server asking for mediaType, with
// kretry under it when withKretry.
func watchClient(b *testing.B, server *httptest.Server, mediaType string, withKretry bool) kubernetes.Interface {
	cfg := &rest.Config{Host: server.URL, QPS: -1, ContentConfig: rest.ContentConfig{ContentType: mediaType, AcceptContentTypes: mediaType}}
	if server.TLS != nil {
		cfg.TLSClientConfig = rest.TLSClientConfig{Insecure: true}
	}
	if withKretry {
		cfg.Wrap(transport.Wrapper(transport.Config{}))
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return cs
}
