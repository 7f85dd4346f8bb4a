package transport_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kretry/kretry/internal/harness/fakeclock"
	"github.com/kretry/kretry/internal/harness/pairbench"
	"github.com/kretry/kretry/transport"
)

// pairEvents is how many events one op of the paired benchmarks receives.
const pairEvents = 2000

// sameTwice, set by KRETRY_BENCH_AA=1, makes BenchmarkTypedWatchPair's
// kretry half a second plain client (an A/A run): the ratio it reports is
// then what the method gives with no difference to find.
var sameTwice = os.Getenv("KRETRY_BENCH_AA") != ""

// twoThousand is watchEvents' stop rule for pairEvents events.
func twoThousand(_, events int) bool { return events >= pairEvents }

// BenchmarkTypedWatchPair is what a user meets: a typed clientset's Watch()
// (rest client, StreamWatcher, client-go's decoders) receiving 2,000
// ConfigMap events over loopback HTTP/1.1 and TLS HTTP/2, plain and with
// kretry under it, interleaved pair by pair in one process (see pairbench:
// the collector runs before each half, the first half alternates). It
// reports each half's time per event and kretry/plain, the figure to read.
func BenchmarkTypedWatchPair(b *testing.B) {
	for _, proto := range []string{"http1", "h2"} {
		for _, mediaType := range []string{"application/json", protobufType} {
			name := map[string]string{"application/json": "json", protobufType: "protobuf"}[mediaType]
			for _, size := range []int{1 << 10, 64 << 10} {
				b.Run(fmt.Sprintf("%s/%s/%dKiB", proto, name, size>>10), func(b *testing.B) {
					stream, events := watchEvents(b, mediaType, size, twoThousand)
					server := watchServer(proto, mediaType, stream)
					defer server.Close()
					receive := func(withKretry bool) pairbench.Half {
						cs := watchClient(b, server, mediaType, withKretry && !sameTwice)
						return pairbench.Half{Name: map[bool]string{false: "plain", true: "kretry"}[withKretry], Do: func() {
							w, err := cs.CoreV1().ConfigMaps("demo").Watch(context.Background(), metav1.ListOptions{ResourceVersion: "999", TimeoutSeconds: ptrTo(int64(300))})
							if err != nil {
								b.Fatal(err)
							}
							for i := range events {
								if ev, ok := <-w.ResultChan(); !ok || ev.Type != "MODIFIED" {
									b.Fatalf("event %d of %d: %v %v", i, events, ev.Type, ok)
								}
							}
							w.Stop()
						}}
					}
					pairbench.Run(b, receive(false), receive(true), events)
				})
			}
		}
	}
}

// BenchmarkWatchRaw8KiB is kretry's own pass over a watch stream, read the
// way a relay or a decoder with a bufio.Reader reads it: io.CopyBuffer with
// an 8 KiB buffer from the body transport.New returns, over 2,000 events
// answered from memory. MB/s is the figure to read (a plain body copies the
// same bytes at memory speed).
func BenchmarkWatchRaw8KiB(b *testing.B) {
	for _, mediaType := range []string{"application/json", protobufType} {
		name := map[string]string{"application/json": "json", protobufType: "protobuf"}[mediaType]
		for _, size := range []int{1 << 10, 64 << 10} {
			b.Run(fmt.Sprintf("%s/%dKiB", name, size>>10), func(b *testing.B) {
				stream, _ := watchEvents(b, mediaType, size, twoThousand)
				buf := make([]byte, 8<<10)
				b.SetBytes(int64(len(stream)))
				b.ReportAllocs()
				for b.Loop() {
					b.StopTimer()
					body := rawWatchBody(b, mediaType, stream)
					b.StartTimer()
					if n, err := io.CopyBuffer(struct{ io.Writer }{io.Discard}, body, buf); err != nil || n != int64(len(stream)) {
						b.Fatalf("copied %d of %d: %v", n, len(stream), err)
					}
					_ = body.Close()
				}
			})
		}
	}
}

// rawWatchBody opens a watch through transport.New whose next RoundTripper
// answers stream from memory. The caller's timeout has elapsed (on the fake
// clock) by the time the stream ends, so its end is the end.
func rawWatchBody(b *testing.B, mediaType string, stream []byte) io.ReadCloser {
	clock := fakeclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	next := roundTripperFunc(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {mediaType}}, Body: io.NopCloser(bytes.NewReader(stream))}, nil
	})
	req, _ := http.NewRequest(http.MethodGet, "http://kretry.test/api/v1/namespaces/demo/configmaps?watch=true&resourceVersion=999&timeoutSeconds=1", nil)
	resp, err := transport.New(next, transport.Config{Clock: clock}).RoundTrip(req)
	if err != nil {
		b.Fatal(err)
	}
	clock.Advance(time.Minute)
	return resp.Body
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
