package watchretry_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jarcoal/httpmock"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	cborserializer "k8s.io/apimachinery/pkg/runtime/serializer/cbor"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	restclientwatch "k8s.io/client-go/rest/watch"

	"github.com/kretry/kretry/internal/harness/fakeclock"
	"github.com/kretry/kretry/internal/policy"
	"github.com/kretry/kretry/watchretry"
)

// cborStream is a CBOR watch stream's content type (issue 12).
const cborStream = "application/cbor-seq"

// cborCodecs is scheme.Codecs with CBOR, as a clientset has them when
// client-go's ClientsAllowCBOR gate is on.
var cborCodecs = serializer.NewCodecFactory(scheme.Scheme, serializer.WithSerializer(cborserializer.NewSerializerInfo))

// codecsFor returns the codecs and media type that write and read a
// stream of contentType.
func codecsFor(contentType string) (serializer.CodecFactory, string) {
	if contentType == cborStream {
		return cborCodecs, apiruntime.ContentTypeCBOR
	}
	return scheme.Codecs, strings.Split(contentType, ";")[0]
}

// benchEvent is event, and CBOR events as kube-apiserver writes them.
func benchEvent(b *testing.B, contentType string, typ watch.EventType, cm *corev1.ConfigMap) []byte {
	if contentType != cborStream {
		return event(b, contentType, typ, cm)
	}
	codecs, mediaType := codecsFor(contentType)
	info, _ := apiruntime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), mediaType)
	raw, err := apiruntime.Encode(codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion), cm)
	if err != nil {
		b.Fatal(err)
	}
	var out bytes.Buffer
	encoder := streaming.NewEncoder(info.StreamSerializer.Framer.NewFrameWriter(&out), info.StreamSerializer.Serializer)
	if err := encoder.Encode(&metav1.WatchEvent{Type: string(typ), Object: apiruntime.RawExtension{Raw: raw}}); err != nil {
		b.Fatal(err)
	}
	return out.Bytes()
}

// benchStream is about 8 MiB of MODIFIED events of eventSize bytes each.
func benchStream(b *testing.B, contentType string, eventSize int) ([]byte, int) {
	return benchEvents(b, contentType, eventSize, func(size, _ int) bool { return size >= 8<<20 })
}

// benchEvents is MODIFIED events of eventSize bytes each until full(stream
// length, events) says the stream is long enough.
func benchEvents(b *testing.B, contentType string, eventSize int, full func(size, events int) bool) ([]byte, int) {
	cm := configMap("bench", "1000")
	var stream []byte
	events := 0
	for !full(len(stream), events) {
		cm.ResourceVersion = fmt.Sprint(1000 + events)
		cm.Data["blob"] = ""
		overhead := len(benchEvent(b, contentType, watch.Modified, cm))
		cm.Data["blob"] = strings.Repeat("x", max(0, eventSize-overhead))
		stream = append(stream, benchEvent(b, contentType, watch.Modified, cm)...)
		events++
	}
	return stream, events
}

// resumingBody opens a watch over stream through watchretry. The caller's
// timeout has elapsed by the time the stream ends, so its end is the end.
func resumingBody(b *testing.B, contentType string, stream []byte) io.ReadCloser {
	mock := httpmock.NewMockTransport()
	mock.RegisterNoResponder(func(req *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {contentType}}, Body: io.NopCloser(bytes.NewReader(stream))}, nil
	})
	clock := fakeclock.New(epoch)
	rt := watchretry.NewForTest(mock, watchretry.TestConfig{Policy: policy.New(policy.Config{Clock: clock})})
	req, _ := http.NewRequest(http.MethodGet, "http://kretry.test/api/v1/configmaps?watch=true&resourceVersion=999&timeoutSeconds=1", nil)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		b.Fatal(err)
	}
	clock.Advance(time.Minute)
	return resp.Body
}

// clientGoDecoder is the decoder client-go's rest client puts on a watch body.
func clientGoDecoder(b *testing.B, contentType string, body io.ReadCloser) watch.Decoder {
	codecs, mediaType := codecsFor(contentType)
	info, ok := apiruntime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), mediaType)
	if !ok || info.StreamSerializer == nil {
		b.Fatalf("no stream serializer for %s", mediaType)
	}
	frames := info.StreamSerializer.Framer.NewFrameReader(body)
	events := streaming.NewDecoder(frames, info.StreamSerializer.Serializer)
	return restclientwatch.NewDecoder(events, codecs.UniversalDeserializer())
}

// plainBody is a response body with nothing but Read, as net/http's is.
type plainBody struct{ io.Reader }

func (plainBody) Close() error { return nil }

// discard is io.Discard without ReaderFrom, so that copies go through a
// caller's buffer the way a decoder reads.
type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

func BenchmarkWatchStream(b *testing.B) {
	for _, ct := range append(encodings[:len(encodings):len(encodings)], cborStream) {
		name := map[string]string{jsonStream: "json", protoStream: "protobuf", cborStream: "cbor"}[ct]
		for _, size := range []int{1 << 10, 64 << 10} {
			stream, events := benchStream(b, ct, size)
			prefix := fmt.Sprintf("%s/%dKiB", name, size>>10)
			plain := func() io.ReadCloser { return plainBody{bytes.NewReader(stream)} }
			resuming := func() io.ReadCloser { return resumingBody(b, ct, stream) }
			buf := make([]byte, 32<<10)
			copyAll := func(body io.ReadCloser) {
				if n, err := io.CopyBuffer(discard{}, body, buf); err != nil || n != int64(len(stream)) {
					b.Fatalf("copied %d of %d: %v", n, len(stream), err)
				}
			}
			decode := func(body io.ReadCloser) { decodeAll(b, clientGoDecoder(b, ct, body), events) }
			b.Run(prefix+"/copy-plain", func(b *testing.B) { measure(b, stream, events, plain, copyAll) })
			b.Run(prefix+"/copy-resuming", func(b *testing.B) { measure(b, stream, events, resuming, copyAll) })
			b.Run(prefix+"/decode-plain", func(b *testing.B) { measure(b, stream, events, plain, decode) })
			b.Run(prefix+"/decode-resuming", func(b *testing.B) { measure(b, stream, events, resuming, decode) })
		}
	}
}

func decodeAll(b *testing.B, decoder watch.Decoder, events int) {
	for i := 0; ; i++ {
		_, obj, err := decoder.Decode()
		if err == io.EOF {
			if i != events {
				b.Fatalf("decoded %d of %d events", i, events)
			}
			return
		}
		if err != nil {
			b.Fatal(err)
		}
		if _, ok := obj.(metav1.Object); !ok {
			b.Fatalf("decoded %T", obj)
		}
	}
}

// measure reads a fresh body b.N times and reports throughput and the
// allocations per event of the reading alone: opening the watch (request,
// response, policy) is set-up, outside the timer and the count.
func measure(b *testing.B, stream []byte, events int, open func() io.ReadCloser, read func(io.ReadCloser)) {
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	var mallocs uint64
	var before, after runtime.MemStats
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		body := open()
		runtime.ReadMemStats(&before)
		b.StartTimer()
		read(body)
		b.StopTimer()
		runtime.ReadMemStats(&after)
		mallocs += after.Mallocs - before.Mallocs
		_ = body.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(mallocs)/float64(b.N*events), "allocs/event")
}
