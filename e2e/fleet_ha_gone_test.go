//go:build e2e

package e2e_test

import (
	"bytes"
	"encoding/binary"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// watchGone counts the 410s inside a protobuf watch stream: kube-apiserver's watch cache
// answers a watch from a resourceVersion older than it holds with a 200 whose one event is an
// ERROR 410, so apiserver_request_total counts it as a 200, and only the stream says it was a
// 410. Write is fed the body as it is read, in pieces of any size. It counts the stream's
// whole frames too (events, bookmarks and ERRORs).
type watchGone struct {
	buf    []byte
	count  int64
	frames int64
}

// protobufMagic prefixes every protobuf-encoded object (k8s.io/apimachinery's protobuf
// serializer).
var protobufMagic = []byte("k8s\x00")

func (g *watchGone) Write(p []byte) {
	g.buf = append(g.buf, p...)
	for len(g.buf) >= 4 {
		n := int(binary.BigEndian.Uint32(g.buf))
		if len(g.buf) < 4+n {
			return
		}
		g.frames++
		if isGoneEvent(g.buf[4 : 4+n]) {
			g.count++
		}
		g.buf = g.buf[4+n:]
	}
}

// isGoneEvent reports whether frame is a WatchEvent of type ERROR whose Status has code 410.
func isGoneEvent(frame []byte) bool {
	var ev metav1.WatchEvent
	if ev.Unmarshal(frame) != nil || ev.Type != "ERROR" {
		return false
	}
	raw, ok := bytes.CutPrefix(ev.Object.Raw, protobufMagic)
	if !ok {
		return false
	}
	var u runtime.Unknown
	if u.Unmarshal(raw) != nil {
		return false
	}
	var st metav1.Status
	return st.Unmarshal(u.Raw) == nil && st.Code == 410
}

func TestWatchGoneCounts(t *testing.T) {
	frame := func(typ string, code int32) []byte {
		st, err := (&metav1.Status{Status: metav1.StatusFailure, Code: code}).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		u, err := (&runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: "v1", Kind: "Status"}, Raw: st}).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		ev, err := (&metav1.WatchEvent{Type: typ, Object: runtime.RawExtension{Raw: append(bytes.Clone(protobufMagic), u...)}}).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(ev))), ev...)
	}
	for _, tc := range []struct {
		name   string
		stream []byte
		want   int64
		frames int64
	}{
		{"one ERROR 410", frame("ERROR", 410), 1, 1},
		{"ERROR 500", frame("ERROR", 500), 0, 1},
		{"a 410 Status that is not an ERROR event", frame("MODIFIED", 410), 0, 1},
		{"events, then ERROR 410", append(append(frame("ADDED", 0), frame("BOOKMARK", 0)...), frame("ERROR", 410)...), 1, 3},
		{"cut before the last byte", frame("ERROR", 410)[:len(frame("ERROR", 410))-1], 0, 0},
	} {
		for _, size := range []int{1, 3, 1 << 10} {
			var g watchGone
			for p := tc.stream; len(p) > 0; {
				n := min(size, len(p))
				g.Write(p[:n])
				p = p[n:]
			}
			if g.count != tc.want || g.frames != tc.frames {
				t.Errorf("%s, read %d bytes at a time: %d 410s in %d frames, want %d in %d", tc.name, size, g.count, g.frames, tc.want, tc.frames)
			}
		}
	}
}
