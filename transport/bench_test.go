package transport_test

import (
	"bytes"
	"io"
	"net/http"
	"runtime"
	"runtime/debug"
	"strconv"
	"testing"

	"github.com/kretry/kretry/internal/harness/memserver"
	"github.com/kretry/kretry/transport"
)

// tenMiBList is a PodList of about 10 MiB.
func tenMiBList() []byte {
	var b bytes.Buffer
	b.WriteString(`{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"42"},"items":[`)
	for i := 0; b.Len() < 10<<20; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"metadata":{"name":"pod-`)
		b.WriteString(strconv.Itoa(i))
		b.WriteString(`","namespace":"default","labels":{"app":"web","tier":"frontend"}},"spec":{"containers":[{"name":"app","image":"registry.example/app:v1"}]}}`)
	}
	b.WriteString("]}")
	return b.Bytes()
}

// BenchmarkList10MiB reads a 10 MiB LIST the way client-go does (io.ReadAll
// of the body, then Close), straight from the next RoundTripper and through
// kretry, which holds the body before handing it over.
func BenchmarkList10MiB(b *testing.B) {
	eachList(b, func(b *testing.B, list func() []byte) {
		b.SetBytes(10 << 20)
		b.ReportAllocs()
		for b.Loop() {
			list()
		}
	})
}

// BenchmarkList10MiBHeap measures the heap a 10 MiB LIST needs at its peak,
// directly and through kretry: the collector is run before each LIST and
// kept off during it, so HeapInuse once io.ReadAll has returned (the body
// still open, kretry's segments still held) is the LIST's high-water mark.
// It reports the largest over the run as heap-peak-B/op (the benchmark's own
// 10 MiB source body, the same in both, included), beside the bytes
// allocated (B/op). Its time per op is the LIST's own work, without the
// collector's.
func BenchmarkList10MiBHeap(b *testing.B) {
	eachList(b, func(b *testing.B, list func() []byte) {
		defer debug.SetGCPercent(debug.SetGCPercent(-1))
		b.ReportAllocs()
		var peak uint64
		var stats runtime.MemStats
		for b.Loop() {
			b.StopTimer()
			runtime.GC()
			b.StartTimer()
			list()
			b.StopTimer()
			runtime.ReadMemStats(&stats)
			peak = max(peak, stats.HeapInuse)
			b.StartTimer()
		}
		b.ReportMetric(float64(peak), "heap-peak-B/op")
	})
}

// eachList runs bench for a 10 MiB LIST answered with a Content-Length and
// chunked, each direct and through kretry. list makes one LIST: it reads the
// body with io.ReadAll, as client-go does, and returns what it read; the
// body is closed by the next call (or at the end), so that the measure in
// between sees it open.
func eachList(b *testing.B, bench func(b *testing.B, list func() []byte)) {
	body := tenMiBList()
	for _, variant := range []struct {
		name    string
		chunked bool
	}{{"", false}, {"chunked", true}} {
		server := memserver.Server{Body: body, Chunked: variant.chunked}
		for _, rt := range []struct {
			name string
			rt   http.RoundTripper
		}{
			{"direct", server},
			{"kretry", transport.New(server, transport.Config{})},
		} {
			name := rt.name
			if variant.name != "" {
				name += "-" + variant.name
			}
			b.Run(name, func(b *testing.B) {
				req, err := http.NewRequest(http.MethodGet, host+"/api/v1/pods?limit=0&resourceVersion=0", nil)
				if err != nil {
					b.Fatal(err)
				}
				var open io.Closer
				defer func() {
					if open != nil {
						open.Close()
					}
				}()
				bench(b, func() []byte {
					if open != nil {
						open.Close()
					}
					resp, err := rt.rt.RoundTrip(req)
					if err != nil {
						b.Fatal(err)
					}
					open = resp.Body
					got, err := io.ReadAll(resp.Body)
					if err != nil || len(got) != len(body) {
						b.Fatalf("read %d bytes, %v", len(got), err)
					}
					return got
				})
			})
		}
	}
}
