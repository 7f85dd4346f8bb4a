package watchretry_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"

	apiruntime "k8s.io/apimachinery/pkg/runtime"
)

// BenchmarkReadPath reads 2,000 events of 1 KiB through the resuming body
// the way client-go's framers read a watch body, and nothing else: for
// protobuf the length-delimited framer's 4-byte read and then the body read
// into a 1 KiB buffer doubled on io.ErrShortBuffer (streaming.Decoder's), for
// JSON the JSON framer's json.Decoder reads. It isolates kretry's Read from
// the decode behind it, for a CPU profile or a count of instructions under
// callgrind (valgrind --tool=callgrind --toggle-collect='*stream).Read').
func BenchmarkReadPath(b *testing.B) {
	for _, ct := range encodings {
		name := map[string]string{jsonStream: "json", protoStream: "protobuf"}[ct]
		b.Run(fmt.Sprintf("%s/1KiB", name), func(b *testing.B) {
			stream, events := benchEvents(b, ct, 1<<10, func(_, n int) bool { return n >= 2000 })
			codecs, mediaType := codecsFor(ct)
			info, _ := apiruntime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), mediaType)
			buf := make([]byte, 1024)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				body := resumingBody(b, ct, stream)
				frames := info.StreamSerializer.Framer.NewFrameReader(body)
				b.StartTimer()
				got := 0
				for base := 0; ; {
					n, err := frames.Read(buf[base:])
					if errors.Is(err, io.ErrShortBuffer) {
						base += n
						buf = append(buf, make([]byte, len(buf))...)
						continue
					}
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					base = 0
					got++
				}
				if got != events {
					b.Fatalf("read %d of %d frames", got, events)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*events), "ns/event")
		})
	}
}

// BenchmarkDecodeHalves is BenchmarkDecodePair's two halves, each on its
// own, for callgrind: instructions counted in decodeAll
// (--toggle-collect='*decodeAll') give kretry/plain without the noise of a
// shared machine, the collector's share aside.
func BenchmarkDecodeHalves(b *testing.B) {
	for _, ct := range encodings {
		name := map[string]string{jsonStream: "json", protoStream: "protobuf"}[ct]
		stream, events := benchEvents(b, ct, 1<<10, func(_, n int) bool { return n >= 2000 })
		for _, half := range []string{"plain", "kretry"} {
			b.Run(fmt.Sprintf("%s/1KiB/%s", name, half), func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					var body io.ReadCloser = plainBody{bytes.NewReader(stream)}
					if half == "kretry" {
						body = resumingBody(b, ct, stream)
					}
					b.StartTimer()
					decodeAll(b, clientGoDecoder(b, ct, body), events)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*events), "ns/event")
			})
		}
	}
}
