package listretry_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/kretry/kretry/internal/harness/memserver"
	"github.com/kretry/kretry/listretry"
)

// BenchmarkListNearBound reads LIST bodies just under and just over an
// 8 MiB BufferSize the way client-go does (io.ReadAll, Close), and reports
// the memory the body held (held-B/op) beside what was allocated (B/op):
// at most the bound, nothing past it when the length is declared over it.
func BenchmarkListNearBound(b *testing.B) {
	const bound = 8 << 20
	for _, size := range []struct {
		name string
		n    int
	}{{"under", bound - 1<<10}, {"over", bound + 1<<10}} {
		for _, chunked := range []bool{false, true} {
			name := size.name + "/content-length"
			if chunked {
				name = size.name + "/chunked"
			}
			server := memserver.Server{Body: bytes.Repeat([]byte("x"), size.n), Chunked: chunked}
			rt := listretry.New(server, listretry.Config{BufferSize: bound})
			b.Run(name, func(b *testing.B) {
				req, err := http.NewRequest(http.MethodGet, "http://k8s.test/api/v1/pods?limit=0", nil)
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(size.n))
				b.ReportAllocs()
				var held int
				for b.Loop() {
					resp, err := rt.RoundTrip(req)
					if err != nil {
						b.Fatal(err)
					}
					held = max(held, listretry.Held(resp.Body), 0)
					got, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					if err != nil || len(got) != size.n {
						b.Fatalf("read %d bytes, %v", len(got), err)
					}
				}
				b.ReportMetric(float64(held), "held-B/op")
			})
		}
	}
}
