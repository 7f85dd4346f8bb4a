package frame

import (
	"bytes"
	"io"
	"runtime"
	"strconv"
	"testing"
)

// benchSizes are the event sizes benchmarked; each stream holds about 1 MiB
// of such events.
var benchSizes = []struct {
	name string
	size int
}{{"1KiB", 1 << 10}, {"64KiB", 64 << 10}}

// benchStream returns a stream of real-shaped MODIFIED events of about size
// bytes each (as encoded), and how many events it holds.
func benchStream(b testing.TB, enc Encoding, size int) ([]byte, int) {
	b.Helper()
	event := func(i, data int) []byte {
		return encodeEvents(b, enc, watchEvent{"MODIFIED", configMap("cm", strconv.Itoa(100000+i), data)})
	}
	// Grow the data until the encoded event reaches size.
	data := size - len(event(0, 0))
	for len(event(0, data)) < size {
		data += 8
	}
	events := max(1, (1<<20)/size)
	var stream []byte
	for i := range events {
		stream = append(stream, event(i, data)...)
	}
	return stream, events
}

func BenchmarkScanJSON(b *testing.B)     { benchScan(b, JSON) }
func BenchmarkScanProtobuf(b *testing.B) { benchScan(b, Protobuf) }
func BenchmarkScanCBOR(b *testing.B)     { benchScan(b, CBOR) }

func benchScan(b *testing.B, enc Encoding) {
	for _, bs := range benchSizes {
		b.Run(bs.name, func(b *testing.B) {
			stream, events := benchStream(b, enc, bs.size)
			r := bytes.NewReader(stream)
			sc := NewScanner(r, enc, 0)
			b.SetBytes(int64(len(stream)))
			b.ReportAllocs()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			b.ResetTimer()
			for range b.N {
				r.Reset(stream)
				sc.Reset(r)
				n := 0
				for {
					fr, err := sc.Next()
					if err != nil {
						if err != io.EOF {
							b.Fatal(err)
						}
						break
					}
					if len(fr.Event.ResourceVersion) == 0 {
						b.Fatal("no resourceVersion")
					}
					n++
				}
				if n != events {
					b.Fatalf("%d events; want %d", n, events)
				}
			}
			b.StopTimer()
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(b.N*events), "allocs/event")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*events), "ns/event")
		})
	}
}

// BenchmarkCopy is the baseline: the same streams relayed with io.CopyBuffer
// through a 32 KiB buffer (the wrappers stop io.Copy from skipping the
// buffer), which is all a byte-for-byte relay that does not scan must do.
func BenchmarkCopy(b *testing.B) {
	eachStream(b, func(b *testing.B, _ Encoding, stream []byte, _ int) {
		r := bytes.NewReader(stream)
		buf := make([]byte, 32<<10)
		for range b.N {
			r.Reset(stream)
			if _, err := io.CopyBuffer(struct{ io.Writer }{io.Discard}, struct{ io.Reader }{r}, buf); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// eachStream runs bench as a sub-benchmark over the stream of each encoding
// and event size, with the stream's bytes per op and allocations reported;
// building the stream is not timed.
func eachStream(b *testing.B, bench func(b *testing.B, enc Encoding, stream []byte, events int)) {
	for _, enc := range encodings {
		for _, bs := range benchSizes {
			b.Run(enc.String()[len("application/"):]+"/"+bs.name, func(b *testing.B) {
				stream, events := benchStream(b, enc, bs.size)
				b.SetBytes(int64(len(stream)))
				b.ReportAllocs()
				b.ResetTimer()
				bench(b, enc, stream, events)
			})
		}
	}
}

// BenchmarkClientGoDecode is what the scan is added to: client-go's own watch decoder (the
// media type's framer, the streaming decoder and rest/watch.Decoder with the clientset's
// object decoder, as rest.Request.Watch puts them on a body) over the same streams, to the
// typed objects. Scan time per event over decode time per event is the share kretry's
// scanner adds to what a client spends on each event.
func BenchmarkClientGoDecode(b *testing.B) {
	for _, enc := range encodings {
		for _, bs := range benchSizes {
			b.Run(enc.String()[len("application/"):]+"/"+bs.name, func(b *testing.B) {
				stream, events := benchStream(b, enc, bs.size)
				b.SetBytes(int64(len(stream)))
				b.ReportAllocs()
				for range b.N {
					decoder := clientGoDecoder(b, enc, stream)
					n := 0
					for {
						if _, _, err := decoder.Decode(); err != nil {
							if err != io.EOF {
								b.Fatal(err)
							}
							break
						}
						n++
					}
					if n != events {
						b.Fatalf("%d events; want %d", n, events)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*events), "ns/event")
			})
		}
	}
}
