package listretry_test

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"hash/maphash"
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
			rt := listretry.NewForTest(server, listretry.TestConfig{BufferSize: bound})
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

// BenchmarkRunningHash is the running hash a streamed LIST body keeps, per read of the size
// client-go's decoders ask for (32 KiB, and 4 KiB for the head): CRC-32 IEEE (carry-less
// multiplication), which the body uses, against CRC-32C (the CPU's CRC instruction) and
// hash/maphash, the other candidates.
func BenchmarkRunningHash(b *testing.B) {
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	seed := maphash.MakeSeed()
	for _, size := range []int{4 << 10, 32 << 10} {
		data := bytes.Repeat([]byte(`{"metadata":{"name":"pod-0001"}},`), size/32+1)[:size]
		b.Run(fmt.Sprintf("crc32/%dKiB", size>>10), func(b *testing.B) {
			b.SetBytes(int64(size))
			var sum uint32
			for b.Loop() {
				sum = crc32.Update(sum, crc32.IEEETable, data)
			}
		})
		b.Run(fmt.Sprintf("crc32c/%dKiB", size>>10), func(b *testing.B) {
			b.SetBytes(int64(size))
			var sum uint32
			for b.Loop() {
				sum = crc32.Update(sum, castagnoli, data)
			}
		})
		b.Run(fmt.Sprintf("maphash/%dKiB", size>>10), func(b *testing.B) {
			b.SetBytes(int64(size))
			var h maphash.Hash
			h.SetSeed(seed)
			for b.Loop() {
				h.Write(data)
			}
		})
	}
}
