package frame

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// BenchmarkScanLent8KiB is the scan as the resuming body drives it under a
// caller that reads 8 KiB at a time (a relay's io.CopyBuffer, a decoder's
// bufio.Reader): each read lends the caller's 8 KiB slice, takes every
// whole frame in it and gives the torn tail back (Lend, Next until
// ErrNeedMore, Return).
func BenchmarkScanLent8KiB(b *testing.B) {
	for _, enc := range encodings {
		for _, bs := range benchSizes {
			b.Run(enc.String()[len("application/"):]+"/"+bs.name, func(b *testing.B) {
				stream, events := benchStream(b, enc, bs.size)
				r := bytes.NewReader(stream)
				sc := NewScanner(r, enc, 0)
				p := make([]byte, 8<<10)
				b.SetBytes(int64(len(stream)))
				b.ReportAllocs()
				for b.Loop() {
					r.Reset(stream)
					sc.Reset(r)
					if n := scanLent(b, sc, p); n != events {
						b.Fatalf("%d events; want %d", n, events)
					}
				}
			})
		}
	}
}

// scanLent reads the whole stream through lent slices p and returns the
// frames seen. A frame larger than p is read through the Scanner's buffer.
func scanLent(b *testing.B, sc *Scanner, p []byte) int {
	frames := 0
	for {
		lent := sc.Lend(p)
		for {
			fr, err := sc.Next()
			if errors.Is(err, ErrNeedMore) {
				break
			}
			if err == io.EOF {
				if lent {
					sc.Return()
				}
				return frames
			}
			if err != nil {
				b.Fatal(err)
			}
			if len(fr.Event.ResourceVersion) == 0 {
				b.Fatal("no resourceVersion")
			}
			frames++
			if !lent {
				break
			}
		}
		if lent && sc.Return() == 0 {
			// The frame is larger than p: read it whole in the Scanner's buffer.
			if _, err := sc.Next(); err != nil {
				if err == io.EOF {
					return frames
				}
				b.Fatal(err)
			}
			frames++
		}
	}
}
