package frame

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"google.golang.org/protobuf/encoding/protowire"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kretry/kretry/internal/harness/fixture"
)

// Hand-built protobuf frames, for the shapes the serializer never writes.

func pbString(b []byte, num protowire.Number, s string) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func pbMessage(b []byte, num protowire.Number, m []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, m)
}

func pbVarintField(b []byte, num protowire.Number, v uint64) []byte {
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

// pbEvent builds a length-prefixed WatchEvent whose object is "k8s\0" + an
// Unknown of the given kind wrapping object.
func pbEvent(typ, kind string, object []byte) []byte {
	unknown := pbMessage(nil, 1, pbString(pbString(nil, 1, "v1"), 2, kind))
	unknown = pbMessage(unknown, 2, object)
	event := pbString(nil, 1, typ)
	event = pbMessage(event, 2, pbMessage(nil, 1, append([]byte("k8s\x00"), unknown...)))
	return lengthPrefixed(event)
}

func lengthPrefixed(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

// objectMeta builds a typed object (ObjectMeta at field 1) from ObjectMeta
// fields.
func objectWithMeta(meta []byte) []byte { return pbMessage(nil, 1, meta) }

func annotation(key, value string) []byte {
	return pbMessage(nil, 12, pbString(pbString(nil, 1, key), 2, value))
}

func rv(v string) []byte { return pbString(nil, 6, v) }

// metaHead is the head of an ObjectMeta as the serializer writes it:
// fields 1 to 8 in order (name, generateName, namespace, selfLink, uid,
// resourceVersion, generation, creationTimestamp).
func metaHead(resourceVersion string, generation uint64) []byte {
	return cat(pbString(nil, 1, "a"), pbString(nil, 2, ""), pbString(nil, 3, "ns"), pbString(nil, 4, ""),
		pbString(nil, 5, "uid"), rv(resourceVersion), pbVarintField(nil, 7, generation), pbString(nil, 8, ""))
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// protobufFrameCases are protobuf frames the serializer never writes; the
// fuzz target starts from them too.
var protobufFrameCases = []struct {
	name   string
	stream []byte
	want   []Event
	err    error
}{
	{"minimal event", pbEvent("ADDED", "ConfigMap", objectWithMeta(rv("5"))),
		[]Event{{Type: Added, ResourceVersion: []byte("5")}}, io.EOF},
	{"fields in reverse order and unknown fields",
		lengthPrefixed(cat(
			pbVarintField(nil, 99, 7),
			pbMessage(nil, 2, pbMessage(nil, 1, cat([]byte("k8s\x00"),
				pbMessage(nil, 2, objectWithMeta(cat(annotation("k8s.io/initial-events-end", "true"), rv("8"), pbString(nil, 1, "name")))),
				pbMessage(nil, 1, pbString(pbString(nil, 2, "ConfigMap"), 1, "v1")),
			))),
			pbString(nil, 1, "BOOKMARK"),
		)),
		[]Event{{Type: Bookmark, ResourceVersion: []byte("8"), InitialEventsEnd: true}}, io.EOF},
	{"repeated fields: last wins, ObjectMeta merges",
		pbEvent("DELETED", "ConfigMap", cat(objectWithMeta(cat(rv("1"), annotation("k8s.io/initial-events-end", "true"))), objectWithMeta(rv("2")))),
		[]Event{{Type: Deleted, ResourceVersion: []byte("2")}}, io.EOF},
	{"later annotation entry wins",
		pbEvent("BOOKMARK", "ConfigMap", objectWithMeta(cat(rv("3"), annotation("k8s.io/initial-events-end", "true"), annotation("k8s.io/initial-events-end", "false")))),
		[]Event{{Type: Bookmark, ResourceVersion: []byte("3")}}, io.EOF},
	{"the serializer's ObjectMeta head, then a later resourceVersion",
		pbEvent("MODIFIED", "ConfigMap", objectWithMeta(cat(metaHead("7", 300), rv("9")))),
		[]Event{{Type: Modified, ResourceVersion: []byte("9")}}, io.EOF},
	{"the serializer's ObjectMeta head, then the initial-events-end annotation",
		pbEvent("BOOKMARK", "ConfigMap", objectWithMeta(cat(metaHead("7", 1), annotation("k8s.io/initial-events-end", "true")))),
		[]Event{{Type: Bookmark, ResourceVersion: []byte("7"), InitialEventsEnd: true}}, io.EOF},
	{"an ObjectMeta head with a field missing",
		pbEvent("ADDED", "ConfigMap", objectWithMeta(cat(pbString(nil, 1, "a"), pbString(nil, 3, "ns"), rv("4"), pbVarintField(nil, 7, 1), pbString(nil, 8, "")))),
		[]Event{{Type: Added, ResourceVersion: []byte("4")}}, io.EOF},
	{"status fields",
		pbEvent("ERROR", "Status", cat(pbString(nil, 4, "TooManyRequests"), pbVarintField(nil, 6, 429), pbMessage(nil, 5, pbVarintField(nil, 5, 9)))),
		[]Event{{Type: Error, Code: 429, Reason: "TooManyRequests", RetryAfterSeconds: 9, HasRetryAfter: true}}, io.EOF},
	{"negative code", pbEvent("ERROR", "Status", pbVarintField(nil, 6, uint64(1<<64-5))),
		[]Event{{Type: Error, Code: -5}}, io.EOF},

	{"empty frame", lengthPrefixed(nil), nil, errProtoEmpty},
	{"unknown type", pbEvent("UPDATED", "ConfigMap", objectWithMeta(rv("5"))), nil, nil},
	{"no object", lengthPrefixed(pbString(nil, 1, "ADDED")), nil, errNoRaw},
	{"no prefix", lengthPrefixed(pbMessage(pbString(nil, 1, "ADDED"), 2, pbMessage(nil, 1, []byte("k9s\x00xx")))), nil, errNoPrefix},
	{"only the prefix", lengthPrefixed(pbMessage(pbString(nil, 1, "ADDED"), 2, pbMessage(nil, 1, []byte("k8s\x00")))), nil, errEmptyBody},
	{"no kind", pbEvent("ADDED", "", objectWithMeta(rv("5"))), nil, errObjectTypeMeta},
	{"no resourceVersion", pbEvent("ADDED", "ConfigMap", objectWithMeta(pbString(nil, 1, "name"))),
		[]Event{{Type: Added}}, io.EOF},
	{"metadata with the wrong wire type", pbEvent("ADDED", "ConfigMap", pbVarintField(nil, 1, 5)), nil, errProtoWireType},
	{"resourceVersion with the wrong wire type", pbEvent("ADDED", "ConfigMap", objectWithMeta(pbVarintField(nil, 6, 5))), nil, errProtoWireType},
	{"field runs past its message", pbEvent("ADDED", "ConfigMap", objectWithMeta([]byte{6<<3 | 2, 50, '1'})), nil, errProtoTruncated},
	{"field number zero", lengthPrefixed([]byte{0 << 3, 1}), nil, errProtoTag},
	{"end group without group", lengthPrefixed([]byte{1<<3 | 4}), nil, errProtoEndGroup},
	{"varint overflow", lengthPrefixed(bytes.Repeat([]byte{0xff}, 11)), nil, errProtoOverflow},

	{"torn in the prefix", []byte{0, 0}, nil, io.ErrUnexpectedEOF},
	{"torn in the body", pbEvent("ADDED", "ConfigMap", objectWithMeta(rv("5")))[:10], nil, io.ErrUnexpectedEOF},
	{"empty stream", nil, nil, io.EOF},
}

// TestScanProtobufFrames checks each of protobufFrameCases against the
// expected events and against client-go's decoder.
func TestScanProtobufFrames(t *testing.T) {
	for _, tc := range protobufFrameCases {
		t.Run(tc.name, func(t *testing.T) {
			frames, raw, _, err := scanAll(t, bytes.NewReader(tc.stream), Protobuf, 0)
			if len(frames) != len(tc.want) {
				t.Fatalf("%d frames %+v; want %+v (err %v)", len(frames), frames, tc.want, err)
			}
			for i := range frames {
				if !equalEvent(frames[i].Event, tc.want[i]) {
					t.Errorf("event %d: %+v; want %+v", i, frames[i].Event, tc.want[i])
				}
			}
			checkScanErr(t, err, tc.err)
			if err == io.EOF && !bytes.Equal(raw, tc.stream) {
				t.Fatalf("Raw differs from the stream")
			}
			compareWithOracle(t, Protobuf, tc.stream)
		})
	}
}

func TestEncodeError(t *testing.T) {
	for _, enc := range encodings {
		for _, st := range []*metav1.Status{
			status(410, metav1.StatusReasonExpired, 0),
			status(429, metav1.StatusReasonTooManyRequests, 5),
			{Code: 500, Reason: metav1.StatusReasonInternalError, Message: "etcdserver: leader changed",
				Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Message: "x"}}}},
		} {
			before := st.DeepCopy()
			frame, err := EncodeError(enc, st)
			if err != nil {
				t.Fatal(err)
			}
			if !equalStatus(st, before) {
				t.Fatalf("EncodeError modified its argument")
			}
			// client-go's own watch decoder reads it back.
			decoder := clientGoDecoder(t, enc, frame)
			typ, obj, err := decoder.Decode()
			if err != nil {
				t.Fatalf("%v: client-go cannot decode: %v", enc, err)
			}
			got, ok := obj.(*metav1.Status)
			if typ != "ERROR" || !ok {
				t.Fatalf("%v: decoded %s %T", enc, typ, obj)
			}
			want := st.DeepCopy()
			want.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}
			got.TypeMeta = want.TypeMeta // a protobuf decode leaves it to the scheme
			if !equalStatus(got, want) {
				t.Fatalf("%v: decoded %+v; want %+v", enc, got, want)
			}
			if _, _, err := decoder.Decode(); err != io.EOF {
				t.Fatalf("%v: after the frame: %v; want io.EOF", enc, err)
			}
			// And so does the scanner.
			frames, _, _, err := scanAll(t, bytes.NewReader(frame), enc, 0)
			if err != io.EOF || len(frames) != 1 {
				t.Fatalf("%v: scanner: %d frames, %v", enc, len(frames), err)
			}
			wantEvent := Event{Type: Error, Code: st.Code, Reason: string(st.Reason)}
			if st.Details != nil && st.Details.RetryAfterSeconds > 0 {
				wantEvent.RetryAfterSeconds, wantEvent.HasRetryAfter = st.Details.RetryAfterSeconds, true
			}
			if !equalEvent(frames[0].Event, wantEvent) {
				t.Fatalf("%v: scanner: %+v; want %+v", enc, frames[0].Event, wantEvent)
			}
		}
	}
	if _, err := EncodeError(JSON, nil); err == nil {
		t.Error("nil status: no error")
	}
	if _, err := EncodeError(Encoding(9), &metav1.Status{}); err == nil {
		t.Error("unknown encoding: no error")
	}
}

func equalStatus(a, b *metav1.Status) bool {
	ab, _ := a.Marshal()
	bb, _ := b.Marshal()
	return bytes.Equal(ab, bb) && a.TypeMeta == b.TypeMeta
}

func TestEncodingFor(t *testing.T) {
	for _, tc := range []struct {
		contentType string
		want        Encoding
		ok          bool
	}{
		{"application/json", JSON, true},
		{"application/json;stream=watch", JSON, true},
		{"Application/JSON; charset=utf-8", JSON, true},
		{"application/vnd.kubernetes.protobuf;stream=watch", Protobuf, true},
		{"application/vnd.kubernetes.protobuf", Protobuf, true},
		{"", JSON, true},
		{"application/cbor-seq", CBOR, true},
		{"application/cbor-seq; charset=x", CBOR, true},
		{"application/cbor", 0, false},
		{"application/yaml", 0, false},
		{"text/plain; charset=utf-8", 0, false},
		{"application/vnd.kubernetes.protobuf;stream=watch;x", Protobuf, true},
		{"/", 0, false},
	} {
		got, ok := EncodingFor(tc.contentType)
		if got != tc.want || ok != tc.ok {
			t.Errorf("EncodingFor(%q) = %v, %v; want %v, %v", tc.contentType, got, ok, tc.want, tc.ok)
		}
	}
}

func TestEventTypeString(t *testing.T) {
	for typ, want := range map[EventType]string{Added: "ADDED", Modified: "MODIFIED", Deleted: "DELETED", Bookmark: "BOOKMARK", Error: "ERROR", 0: "EventType(0)", 9: "EventType(9)"} {
		if got := typ.String(); got != want {
			t.Errorf("%d: %q; want %q", uint8(typ), got, want)
		}
	}
	if JSON.String() != "application/json" || CBOR.String() != "application/cbor-seq" || Encoding(7).String() != "Encoding(7)" {
		t.Error("Encoding.String")
	}
}

// readsAt is an io.Reader over a stream that records where in memory it
// wrote each stream offset and the length of each slice it was asked to
// fill, which it fills whole while bytes remain.
type readsAt struct {
	r     *bytes.Reader
	reads []readAt
}

type readAt struct {
	offset int64 // of the stream, written to p[0]
	p      []byte
	n      int
}

func (r *readsAt) Read(p []byte) (int, error) {
	offset, _ := r.r.Seek(0, io.SeekCurrent)
	n, err := r.r.Read(p)
	r.reads = append(r.reads, readAt{offset: offset, p: p, n: n})
	return n, err
}

// wroteTo reports where the read that delivered stream offset o wrote it.
func (r *readsAt) wroteTo(o int64) *byte {
	for _, rd := range r.reads {
		if o >= rd.offset && o < rd.offset+int64(rd.n) {
			return &rd.p[o-rd.offset]
		}
	}
	return nil
}

// TestLargeProtobufFramesAreNotMoved checks how a protobuf stream of large
// frames is read when the connection has every byte at hand: each frame
// after the first is returned where the read from the connection put it
// (no byte of it moved within the buffer: a copy client-go's framer does
// not make), and a run of frames of one length is read a frame a read.
// Frames of other lengths in between are scanned as client-go decodes them.
func TestLargeProtobufFramesAreNotMoved(t *testing.T) {
	var events []watchEvent
	for i := range 12 {
		events = append(events, watchEvent{"MODIFIED", configMap("large", strconv.Itoa(100+i), 64<<10)})
	}
	run := encodeEvents(t, Protobuf, events...)
	frameLen := len(run) / len(events)
	if frameLen < largeFrame || len(run)%len(events) != 0 {
		t.Fatalf("the run's frames are not all %d bytes long", frameLen)
	}

	src := &readsAt{r: bytes.NewReader(run)}
	sc := NewScanner(src, Protobuf, 0)
	for i := range events {
		f, err := sc.Next()
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if want := strconv.Itoa(100 + i); string(f.Event.ResourceVersion) != want {
			t.Fatalf("frame %d: resourceVersion %q; want %q", i, f.Event.ResourceVersion, want)
		}
		// The first frame is read as the buffer grows to hold it.
		if i > 0 {
			o := int64(i * frameLen)
			if &f.Raw[0] != src.wroteTo(o) || &f.Raw[len(f.Raw)-1] != src.wroteTo(o+int64(frameLen)-1) {
				t.Errorf("frame %d was moved in the buffer after it was read", i)
			}
		}
	}
	reads := src.reads
	for len(reads) > 0 && reads[0].offset < int64(frameLen) {
		reads = reads[1:]
	}
	if len(reads) < len(events)-1 {
		t.Fatalf("%d reads after the first frame; want one for each of the %d frames after it", len(reads), len(events)-1)
	}
	for i, rd := range reads[:len(events)-1] {
		if len(rd.p) != frameLen || rd.offset != int64((i+1)*frameLen) {
			t.Fatalf("read %d after the first frame asked for %d bytes at offset %d; want a frame, %d bytes at %d", i, len(rd.p), rd.offset, frameLen, (i+1)*frameLen)
		}
	}

	// Lengths that change: larger, smaller, small, large again.
	mixed := encodeEvents(t, Protobuf,
		watchEvent{"MODIFIED", configMap("a", "1", 40<<10)},
		watchEvent{"MODIFIED", configMap("b", "2", 200<<10)},
		watchEvent{"MODIFIED", configMap("c", "3", 20<<10)},
		watchEvent{"ADDED", configMap("d", "4", 100)},
		watchEvent{"MODIFIED", configMap("e", "5", 17<<10)},
		watchEvent{"MODIFIED", configMap("f", "6", 90<<10)},
		watchEvent{"DELETED", configMap("g", "7", 1<<10)},
		watchEvent{"MODIFIED", configMap("h", "8", 90<<10)},
	)
	compareWithOracle(t, Protobuf, mixed)
	for _, chunk := range []int{1, 3, 4096, 16 << 10, 70 << 10} {
		frames, raw, _, err := scanAll(t, iotest.HalfReader(&limitedReads{r: bytes.NewReader(mixed), n: chunk}), Protobuf, 0)
		if err != io.EOF || len(frames) != 8 || !bytes.Equal(raw, mixed) {
			t.Fatalf("chunks of %d: %d frames, err %v, raw equal: %v", chunk, len(frames), err, bytes.Equal(raw, mixed))
		}
	}
}

// limitedReads returns at most n bytes a read.
type limitedReads struct {
	r io.Reader
	n int
}

func (c *limitedReads) Read(p []byte) (int, error) { return c.r.Read(p[:min(len(p), c.n)]) }

// TestOneByteTagsAgreeWithGeneral: for every message and one-byte tag, walk
// (through oneByteTags) records what general alone records, and fails the
// same way, on a field of each length form and one that runs past its end.
func TestOneByteTagsAgreeWithGeneral(t *testing.T) {
	payloads := [][]byte{
		{0}, {1, 'x'}, {0x7f}, {0x81, 0x01}, {0x80}, {0x80, 0x80, 0x01}, {5, 'a'},
		append([]byte{0x90, 0x01}, bytes.Repeat([]byte{'y'}, 0x90)...),
		append([]byte{3}, pbString(nil, 1, "k")...),
	}
	for msg := range msgCount {
		for tag := range 0x80 {
			for _, payload := range payloads {
				b := append([]byte{byte(tag)}, payload...)
				var viaTable, viaGeneral protoScanner
				viaTable.bookmark, viaGeneral.bookmark = true, true
				tableErr := viaTable.walk(msg, b, 0)
				var generalErr error
				for i := 0; i < len(b) && generalErr == nil; {
					i, generalErr = viaGeneral.general(msg, b, i)
				}
				if viaTable != viaGeneral || tableErr != generalErr {
					t.Fatalf("message %d, field % x: walk %+v, %v; general %+v, %v", msg, b, viaTable, tableErr, viaGeneral, generalErr)
				}
			}
		}
	}
}

// TestProtobufFastPathsMatchWalk: on every seed, hand-written case, real
// and benchmarked event, recorded stream and fuzz corpus input, the
// envelope and ObjectMeta fast paths record what walk alone records.
func TestProtobufFastPathsMatchWalk(t *testing.T) {
	streams := seedStreams(t, Protobuf) // the hand-written protobufFrameCases among them
	streams = append(streams, encodeEvents(t, Protobuf, realEvents()...))
	for _, bs := range benchSizes {
		stream, _ := benchStream(t, Protobuf, bs.size)
		streams = append(streams, stream)
	}
	for _, name := range []string{"watch-protobuf", "watch-list-protobuf", "watch-expired-compacted-protobuf"} {
		f, err := fixture.Load(filepath.Join("..", "..", "conformance", "testdata", name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		for _, ex := range f.Exchanges {
			if enc, ok := EncodingFor(ex.Response.ContentType()); ok && enc == Protobuf {
				streams = append(streams, ex.Response.Body())
			}
		}
	}
	streams = append(streams, fuzzCorpus(t, "FuzzScanProtobuf")...)
	fast := 0
	for _, stream := range streams {
		checkProtoFastPaths(t, stream, &fast)
	}
	if fast < 50 {
		t.Fatalf("only %d frames took the envelope fast path", fast)
	}
}

// checkProtoFastPaths reads every whole frame of stream with the fast
// paths and with walk alone, compares what each records and returns, and
// counts the frames whose envelope the fast path read.
func checkProtoFastPaths(t testing.TB, stream []byte, fast *int) {
	t.Helper()
	for len(stream) >= 4 {
		total := 4 + int(binary.BigEndian.Uint32(stream))
		if total < 4 || total > len(stream) {
			return
		}
		body := stream[4:total]
		stream = stream[total:]
		var withFast, walkOnly protoScanner
		walkOnly.walkOnly = true
		var fastEv, walkEv Event
		fastErr := withFast.event(body, &fastEv)
		walkErr := walkOnly.event(body, &walkEv)
		walkOnly.walkOnly = false
		if withFast != walkOnly || !equalEvent(fastEv, walkEv) || fmt.Sprint(fastErr) != fmt.Sprint(walkErr) {
			t.Fatalf("fast paths: %+v, %+v, %v\nwalk: %+v, %+v, %v\n% x", withFast, fastEv, fastErr, walkOnly, walkEv, walkErr, body)
		}
		if len(body) > 0 && new(protoScanner).envelope(body) {
			*fast++
		}
	}
}

// fuzzCorpus returns the inputs of testdata/fuzz/target.
func fuzzCorpus(t testing.TB, target string) [][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "fuzz", target, "*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus for %s: %v", target, err)
	}
	var inputs [][]byte
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		if len(lines) != 2 || lines[0] != "go test fuzz v1" || !strings.HasPrefix(lines[1], "[]byte(") || !strings.HasSuffix(lines[1], ")") {
			t.Fatalf("%s: not one []byte input", file)
		}
		input, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		inputs = append(inputs, []byte(input))
	}
	return inputs
}
