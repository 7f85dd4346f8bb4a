package watchretry_test

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"github.com/kretry/kretry/internal/harness/pairbench"
)

// BenchmarkDecodePair is client-go's watch decode (framer, streaming
// decoder, rest/watch.Decoder to typed ConfigMaps) of 2,000 events served
// from memory, from a plain body and through the resuming body, interleaved
// pair by pair in one process (see pairbench). Without a network under it,
// kretry/plain is kretry's whole cost per event next to client-go's: the
// one copy of each frame and the walk that validates it included.
func BenchmarkDecodePair(b *testing.B) {
	for _, ct := range encodings {
		name := map[string]string{jsonStream: "json", protoStream: "protobuf"}[ct]
		for _, size := range []int{1 << 10, 64 << 10} {
			b.Run(fmt.Sprintf("%s/%dKiB", name, size>>10), func(b *testing.B) {
				stream, events := benchEvents(b, ct, size, func(_, n int) bool { return n >= 2000 })
				var body io.ReadCloser
				decode := func() {
					decodeAll(b, clientGoDecoder(b, ct, body), events)
					_ = body.Close()
				}
				pairbench.Run(b,
					pairbench.Half{Name: "plain", Prepare: func() { body = plainBody{bytes.NewReader(stream)} }, Do: decode},
					pairbench.Half{Name: "kretry", Prepare: func() { body = resumingBody(b, ct, stream) }, Do: decode},
					events)
			})
		}
	}
}
