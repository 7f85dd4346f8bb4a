package frame

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	cborserializer "k8s.io/apimachinery/pkg/runtime/serializer/cbor"
	"k8s.io/apimachinery/pkg/runtime/serializer/cbor/direct"

	"github.com/kretry/kretry/internal/harness/fixture"
)

// The oracle's object decoder for CBOR: apimachinery's serializer (its lax
// decode mode, as a clientset's embedded decoder) into the fields jsonMeta
// and jsonStatus declare, for any kind.

type cborMetaObject struct{ jsonMeta }
type cborStatusObject struct{ jsonStatus }

func (*cborMetaObject) GetObjectKind() schema.ObjectKind                { return schema.EmptyObjectKind }
func (o *cborMetaObject) DeepCopyObject() runtime.Object                { c := *o; return &c }
func (*cborStatusObject) GetObjectKind() schema.ObjectKind              { return schema.EmptyObjectKind }
func (o *cborStatusObject) DeepCopyObject() runtime.Object              { c := *o; return &c }
func (k testKinds) New(schema.GroupVersionKind) (runtime.Object, error) { return k(), nil }
func (testKinds) Recognizes(schema.GroupVersionKind) bool               { return true }
func (testKinds) ObjectKinds(runtime.Object) ([]schema.GroupVersionKind, bool, error) {
	return []schema.GroupVersionKind{{Kind: "oracle"}}, false, nil
}

type testKinds func() runtime.Object

var (
	oracleCBORMeta = cborserializer.NewSerializer(testKinds(func() runtime.Object { return &cborMetaObject{} }),
		testKinds(func() runtime.Object { return &cborMetaObject{} }))
	oracleCBORStatus = cborserializer.NewSerializer(testKinds(func() runtime.Object { return &cborStatusObject{} }),
		testKinds(func() runtime.Object { return &cborStatusObject{} }))
)

func cborObjectDecode(data []byte) (runtime.Object, *schema.GroupVersionKind, error) {
	d := &decodedObject{}
	obj, gvk, err := oracleCBORMeta.Decode(data, nil, nil)
	if runtime.IsMissingKind(err) || runtime.IsMissingVersion(err) || gvk == nil {
		return nil, nil, err
	}
	d.metaErr = err
	if err == nil {
		m := obj.(*cborMetaObject)
		d.meta.ResourceVersion, d.meta.Annotations = m.Metadata.ResourceVersion, m.Metadata.Annotations
	}
	obj, _, d.statusErr = oracleCBORStatus.Decode(data, nil, nil)
	if d.statusErr == nil {
		s := obj.(*cborStatusObject)
		d.status.Code, d.status.Reason = s.Code, metav1.StatusReason(s.Reason)
		if s.Details != nil {
			d.status.Details = &metav1.StatusDetails{RetryAfterSeconds: s.Details.RetryAfterSeconds}
		}
	}
	return d, gvk, nil
}

// cborEnvelopeHasTypeMeta reports whether the CBOR data item at the start of
// b has a non-empty top-level apiVersion or kind.
func cborEnvelopeHasTypeMeta(b []byte) bool {
	var c cborScanner
	if done, err := c.walk(b); !done || err != nil {
		return false
	}
	var envelope map[string]any
	if err := direct.Unmarshal(b[:c.pos], &envelope); err != nil {
		return false
	}
	apiVersion, _ := envelope["apiVersion"].(string)
	kind, _ := envelope["kind"].(string)
	return apiVersion != "" || kind != ""
}

// A hand builder for CBOR shapes the serializer never writes.

func cborHeadBytes(major uint8, val uint64) []byte {
	switch {
	case val < 24:
		return []byte{major<<5 | uint8(val)}
	case val <= math.MaxUint8:
		return []byte{major<<5 | 24, uint8(val)}
	case val <= math.MaxUint16:
		return binary.BigEndian.AppendUint16([]byte{major<<5 | 25}, uint16(val))
	case val <= math.MaxUint32:
		return binary.BigEndian.AppendUint32([]byte{major<<5 | 26}, uint32(val))
	}
	return binary.BigEndian.AppendUint64([]byte{major<<5 | 27}, val)
}

// bs and ts are a byte string and a text string.
func bs(s string) []byte { return append(cborHeadBytes(cborBytes, uint64(len(s))), s...) }
func ts(s string) []byte { return append(cborHeadBytes(cborText, uint64(len(s))), s...) }

// cmap is a definite-length map of key, value, key, value...; imap the same
// with an indefinite length.
func cmap(kv ...[]byte) []byte {
	return cat(append([][]byte{cborHeadBytes(cborMap, uint64(len(kv)/2))}, kv...)...)
}
func imap(kv ...[]byte) []byte {
	return cat(append(append([][]byte{{cborMap<<5 | 31}}, kv...), []byte{cborBreak})...)
}

func tag(num uint64, content []byte) []byte { return append(cborHeadBytes(cborTag, num), content...) }
func self(item []byte) []byte               { return tag(cborSelfDescribed, item) }
func uintItem(v uint64) []byte              { return cborHeadBytes(cborUint, v) }

var null = []byte{cborNull}

// cborObject is a ConfigMap-like object with the given metadata map.
func cborObject(metadata []byte) []byte {
	return self(cmap(bs("apiVersion"), bs("v1"), bs("kind"), bs("ConfigMap"), bs("metadata"), metadata))
}

func cborEvent(typ string, object []byte) []byte {
	return self(cmap(bs("type"), bs(typ), bs("object"), object))
}

func cborStatus(fields ...[]byte) []byte {
	return self(cmap(append([][]byte{bs("apiVersion"), bs("v1"), bs("kind"), bs("Status")}, fields...)...))
}

var errAny = errors.New("any invalid frame")

// cborFrameCases are CBOR frames the serializer never writes; the fuzz
// target starts from them too. Each is checked against client-go as well.
var cborFrameCases = []struct {
	name   string
	stream []byte
	want   []Event
	err    error
}{
	{"text strings, no tags",
		cmap(ts("type"), ts("ADDED"), ts("object"), cmap(ts("kind"), ts("ConfigMap"), ts("apiVersion"), ts("v1"), ts("metadata"), cmap(ts("resourceVersion"), ts("7")))),
		[]Event{{Type: Added, ResourceVersion: []byte("7")}}, io.EOF},
	{"indefinite-length maps, object first",
		self(imap(bs("object"), self(imap(bs("metadata"), imap(bs("annotations"), imap(bs(keyInitialEventsEnd), bs("true")), bs("resourceVersion"), bs("8")), bs("kind"), bs("ConfigMap"), bs("apiVersion"), bs("v1"))), bs("type"), bs("BOOKMARK"))),
		[]Event{{Type: Bookmark, ResourceVersion: []byte("8"), InitialEventsEnd: true}}, io.EOF},
	{"two events back to back",
		cat(cborEvent("ADDED", cborObject(cmap(bs("resourceVersion"), bs("1")))), cborEvent("DELETED", cborObject(cmap(bs("resourceVersion"), bs("2"))))),
		[]Event{{Type: Added, ResourceVersion: []byte("1")}, {Type: Deleted, ResourceVersion: []byte("2")}}, io.EOF},
	{"no resourceVersion", cborEvent("ADDED", cborObject(cmap(bs("name"), bs("a")))),
		[]Event{{Type: Added, ResourceVersion: []byte{}}}, io.EOF},
	{"null metadata, null resourceVersion",
		cat(cborEvent("ADDED", cborObject(null)), cborEvent("MODIFIED", cborObject(cmap(bs("resourceVersion"), null)))),
		[]Event{{Type: Added}, {Type: Modified}}, io.EOF},
	{"null annotation value, null annotations",
		cat(cborEvent("BOOKMARK", cborObject(cmap(bs("resourceVersion"), bs("3"), bs("annotations"), cmap(bs(keyInitialEventsEnd), null)))),
			cborEvent("BOOKMARK", cborObject(cmap(bs("resourceVersion"), bs("4"), bs("annotations"), null)))),
		[]Event{{Type: Bookmark, ResourceVersion: []byte("3")}, {Type: Bookmark, ResourceVersion: []byte("4")}}, io.EOF},
	{"labels are not read: a duplicate there is fine",
		cborEvent("ADDED", cborObject(cmap(bs("labels"), cmap(bs("a"), bs("1"), bs("a"), bs("2")), bs("resourceVersion"), bs("5")))),
		[]Event{{Type: Added, ResourceVersion: []byte("5")}}, io.EOF},
	{"ERROR: negative code, null details, annotations not read",
		cborEvent("ERROR", cborStatus(bs("code"), cborHeadBytes(cborNint, 9), bs("reason"), ts("Odd"), bs("details"), null, bs("metadata"), cmap(bs("annotations"), uintItem(1)))),
		[]Event{{Type: Error, Code: -10, Reason: "Odd"}}, io.EOF},
	{"ERROR: retryAfterSeconds",
		cborEvent("ERROR", cborStatus(bs("code"), uintItem(429), bs("details"), cmap(bs("causes"), null, bs("retryAfterSeconds"), uintItem(3)))),
		[]Event{{Type: Error, Code: 429, RetryAfterSeconds: 3, HasRetryAfter: true}}, io.EOF},
	{"Status fields of another event are not read",
		cborEvent("ADDED", self(cmap(bs("apiVersion"), bs("v1"), bs("kind"), bs("Foo"), bs("code"), bs("x"),
			bs("details"), cmap(bs("retryAfterSeconds"), bs("y"), bs("retryAfterSeconds"), bs("z")), bs("metadata"), cmap(bs("resourceVersion"), bs("12"))))),
		[]Event{{Type: Added, ResourceVersion: []byte("12")}}, io.EOF},
	{"object without the self-described tag",
		cborEvent("ADDED", cmap(bs("apiVersion"), bs("v1"), bs("kind"), bs("ConfigMap"), bs("metadata"), cmap(bs("resourceVersion"), bs("6")))),
		[]Event{{Type: Added, ResourceVersion: []byte("6")}}, io.EOF},
	// Decoded on the exact path.
	{"indefinite-length resourceVersion",
		cborEvent("ADDED", cborObject(cmap(bs("resourceVersion"), cat([]byte{cborBytes<<5 | 31}, bs("12"), bs("34"), []byte{cborBreak})))),
		[]Event{{Type: Added, ResourceVersion: []byte("1234")}}, io.EOF},
	{"resourceVersion under an expected-base64 tag",
		cborEvent("ADDED", cborObject(cmap(bs("resourceVersion"), tag(22, bs("\x01\x02"))))),
		[]Event{{Type: Added, ResourceVersion: []byte("AQI=")}}, io.EOF},
	{"integer key in the envelope",
		self(cmap(uintItem(1), bs("x"), bs("type"), bs("ADDED"), bs("object"), cborObject(cmap(bs("resourceVersion"), bs("9"))))),
		[]Event{{Type: Added, ResourceVersion: []byte("9")}}, io.EOF},
	{"envelope of kind WatchEvent",
		self(cmap(bs("kind"), bs("WatchEvent"), bs("apiVersion"), bs("v1"), bs("type"), bs("ADDED"), bs("object"), cborObject(cmap(bs("resourceVersion"), bs("10"))))),
		[]Event{{Type: Added, ResourceVersion: []byte("10")}}, io.EOF},
	{"other tag on the object",
		cborEvent("ADDED", tag(1000, cborObject(cmap(bs("resourceVersion"), bs("11"))))),
		[]Event{{Type: Added, ResourceVersion: []byte("11")}}, io.EOF},
	// Invalid.
	{"duplicate envelope key", self(cmap(bs("type"), bs("ADDED"), ts("type"), bs("ADDED"), bs("object"), cborObject(null))), nil, errCBOREnvelope},
	{"duplicate metadata key", cborEvent("ADDED", cborObject(cmap(bs("name"), bs("a"), bs("name"), bs("b")))), nil, errCBORObject},
	{"duplicate annotation", cborEvent("ADDED", cborObject(cmap(bs("annotations"), cmap(bs("a"), bs("1"), ts("a"), bs("2"))))), nil, errCBORObject},
	{"resourceVersion is a number", cborEvent("ADDED", cborObject(cmap(bs("resourceVersion"), uintItem(5)))), nil, errCBORObject},
	{"resourceVersion is undefined", cborEvent("ADDED", cborObject(cmap(bs("resourceVersion"), []byte{0xf7}))), nil, errCBORObject},
	{"ERROR with details of the wrong type", cborEvent("ERROR", cborStatus(bs("code"), uintItem(500), bs("details"), cmap(bs("retryAfterSeconds"), bs("1")), bs("reason"), bs("X"))), nil, errCBORObject},
	{"code overflows int32", cborEvent("ERROR", cborStatus(bs("code"), uintItem(1<<31))), nil, errCBORObject},
	{"unknown type", cborEvent("UPDATED", cborObject(null)), nil, &unknownTypeError{}},
	{"null object", cborEvent("ADDED", null), nil, errNoObject},
	{"no object", self(cmap(bs("type"), bs("ADDED"))), nil, errNoObject},
	{"object without kind", cborEvent("ADDED", self(cmap(bs("apiVersion"), bs("v1")))), nil, errObjectTypeMeta},
	{"object without version", cborEvent("ADDED", self(cmap(bs("apiVersion"), bs("apps/"), bs("kind"), bs("X")))), nil, errObjectTypeMeta},
	{"object is an array", cborEvent("ADDED", []byte{0x80}), nil, errCBORObject},
	{"envelope is a string", bs("ADDED"), nil, errCBOREnvelope},
	{"key of invalid UTF-8", self(cmap(ts("ty\xffpe"), bs("ADDED"), bs("type"), bs("ADDED"), bs("object"), cborObject(null))), nil, errCBOREnvelope},
	{"NaN in data", cborEvent("ADDED", cborObject(cmap(bs("x"), []byte{0xf9, 0x7e, 0x00}))), nil, errCBORFloat},
	{"bignum in data", cborEvent("ADDED", cborObject(cmap(bs("x"), tag(2, bs("\x01"))))), nil, errCBORBignum},
	{"break at the top", []byte{cborBreak}, nil, errCBORBreak},
	{"reserved additional information", []byte{0x1c}, nil, errCBORHead},
	{"two-byte simple value below 32", []byte{0xf8, 0x10}, nil, errCBORSimple},
	{"odd indefinite-length map", []byte{0xbf, 0x01, 0xff}, nil, errCBOROddMap},
	{"indefinite-length string of arrays", []byte{0x5f, 0x80, 0xff}, nil, errCBORChunk},
	{"torn", cborEvent("ADDED", cborObject(null))[:20], nil, io.ErrUnexpectedEOF},
	{"torn after a NaN is torn", cborEvent("ADDED", cborObject(cmap(bs("x"), []byte{0xf9, 0x7e, 0x00})))[:60], nil, io.ErrUnexpectedEOF},
}

func TestScanCBORFrames(t *testing.T) {
	for _, tc := range cborFrameCases {
		t.Run(tc.name, func(t *testing.T) {
			frames, raw, _, err := scanAll(t, bytes.NewReader(tc.stream), CBOR, 0)
			if len(frames) != len(tc.want) {
				t.Fatalf("%d frames (%v); want %d", len(frames), err, len(tc.want))
			}
			for i := range frames {
				if !equalEvent(frames[i].Event, tc.want[i]) {
					t.Errorf("event %d: %+v; want %+v", i, frames[i].Event, tc.want[i])
				}
			}
			var unknown *unknownTypeError
			switch {
			case errors.As(tc.err, &unknown):
				if !errors.As(err, &unknown) {
					t.Fatalf("err %v; want an unknown type", err)
				}
			default:
				checkScanErr(t, err, tc.err)
			}
			if err == io.EOF && !bytes.Equal(raw, tc.stream) {
				t.Fatalf("Raw differs from the stream")
			}
			compareWithOracle(t, CBOR, tc.stream)
		})
	}
}

// TestCBORLimits: the frame reader's depth and size limits, counted as
// fxamacker/cbor counts them.
func TestCBORLimits(t *testing.T) {
	nested := func(depth int, open []byte) []byte {
		item := []byte{0x00}
		for range depth {
			item = append(bytes.Clone(open), item...)
		}
		return item
	}
	for _, tc := range []struct {
		name string
		item []byte
		err  error
	}{
		{"arrays 32 deep", nested(32, []byte{0x81}), errAny},
		{"arrays 33 deep", nested(33, []byte{0x81}), errCBORTooDeep},
		{"indefinite arrays 33 deep", nested(33, []byte{0x9f}), errCBORTooDeep},
		{"a tag on each of 32 arrays", nested(32, []byte{0xc6, 0x81}), errAny},
		{"two tags on each of 16 arrays", nested(16, []byte{0xc6, 0xc6, 0x81}), errAny},
		{"two tags on each of 17 arrays", nested(17, []byte{0xc6, 0xc6, 0x81}), errCBORTooDeep},
		{"33 tags", nested(33, []byte{0xc6}), errAny},
		{"34 tags", nested(34, []byte{0xc6}), errCBORTooDeep},
		{"array of 131073", cborHeadBytes(cborArray, cborMaxArrayElements+1), errCBORTooMany},
		{"map of 131073", cborHeadBytes(cborMap, cborMaxMapPairs+1), errCBORTooMany},
		{"string longer than an int", cborHeadBytes(cborBytes, math.MaxInt64+1), errCBORLength},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, _, err := scanAll(t, bytes.NewReader(tc.item), CBOR, 0)
			if tc.err == errAny {
				// Well-formed, not a watch event.
				if !errors.Is(err, errCBOREnvelope) {
					t.Fatalf("%v; want a well-formed item that is no watch event", err)
				}
			} else {
				checkScanErr(t, err, tc.err)
			}
			compareWithOracle(t, CBOR, tc.item)
		})
	}
	t.Run("indefinite array of 131073", func(t *testing.T) {
		item := append([]byte{0x9f}, bytes.Repeat([]byte{0x00}, cborMaxArrayElements+1)...)
		_, _, _, err := scanAll(t, bytes.NewReader(append(item, cborBreak)), CBOR, 1<<20)
		checkScanErr(t, err, errCBORTooMany)
		_, _, _, err = scanAll(t, bytes.NewReader(item[:len(item)-1]), CBOR, 1<<20)
		checkScanErr(t, err, io.ErrUnexpectedEOF)
	})
}

// TestCBORFastPathMatchesDecoder: whatever the in-place reading accepts, the
// exact path (apimachinery's decoder) reads the same way.
func TestCBORFastPathMatchesDecoder(t *testing.T) {
	var streams [][]byte
	streams = append(streams, seedStreams(t, CBOR)...)
	for _, tc := range cborFrameCases {
		streams = append(streams, tc.stream)
	}
	fast := 0
	for _, stream := range streams {
		checkFastPath(t, stream, &fast)
	}
	if fast < 20 {
		t.Fatalf("only %d frames took the fast path", fast)
	}
}

// checkFastPath compares the fast and the exact path on every whole frame
// of stream, and counts those the fast path read.
func checkFastPath(t testing.TB, stream []byte, fast *int) {
	t.Helper()
	var c cborScanner
	for len(stream) > 0 {
		c.reset()
		done, err := c.walk(stream)
		if !done || err != nil || c.laxErr != nil {
			return
		}
		frame := stream[:c.pos]
		stream = stream[c.pos:]
		var fastEv, exactEv Event
		if !c.fields.fastEvent(frame, &fastEv) {
			continue
		}
		*fast++
		var rvBuf []byte
		if err := decodeCBOREvent(frame, &exactEv, &rvBuf); err != nil {
			t.Fatalf("fast path read %+v; the decoder refuses the frame: %v\n%x", fastEv, err, frame)
		}
		if !equalEvent(fastEv, exactEv) {
			t.Fatalf("fast path read %+v; the decoder %+v\n%x", fastEv, exactEv, frame)
		}
	}
}

// TestCBORLargeMapDuplicates: duplicates in a map too large to check key by
// key are found once it ends.
func TestCBORLargeMapDuplicates(t *testing.T) {
	for _, dup := range []bool{false, true} {
		var kv [][]byte
		for i := range 40 {
			kv = append(kv, bs(strings.Repeat("k", i+1)), bs("v"))
		}
		if dup {
			kv = append(kv, bs("kkkkk"), bs("again"))
		}
		kv = append(kv, bs(keyInitialEventsEnd), bs("true"))
		stream := cborEvent("BOOKMARK", cborObject(cmap(bs("resourceVersion"), bs("1"), bs("annotations"), cmap(kv...))))
		frames, _, _, err := scanAll(t, bytes.NewReader(stream), CBOR, 0)
		if dup && (len(frames) != 0 || !errors.Is(err, errCBORObject)) || !dup && (len(frames) != 1 || !frames[0].Event.InitialEventsEnd) {
			t.Fatalf("duplicate %v: %d frames, %v", dup, len(frames), err)
		}
		compareWithOracle(t, CBOR, stream)
	}
}

// TestCBORNondeterministicEncoding: kube-apiserver writes watch events with
// map keys in random order (UseNondeterministicEncoding).
func TestCBORNondeterministicEncoding(t *testing.T) {
	info := serializerInfo(t, CBOR)
	encoder := runtime.UseNondeterministicEncoding(info.StreamSerializer.Serializer)
	objectEncoder := runtime.UseNondeterministicEncoding(info.Serializer)
	for range 20 {
		var object, out bytes.Buffer
		cm := configMap("a", "77", 100)
		cm.APIVersion, cm.Kind = "v1", "ConfigMap"
		if err := objectEncoder.Encode(cm, &object); err != nil {
			t.Fatal(err)
		}
		if err := encoder.Encode(&metav1.WatchEvent{Type: "MODIFIED", Object: runtime.RawExtension{Raw: object.Bytes()}}, &out); err != nil {
			t.Fatal(err)
		}
		frames, _, _, err := scanAll(t, bytes.NewReader(out.Bytes()), CBOR, 0)
		if err != io.EOF || len(frames) != 1 || string(frames[0].Event.ResourceVersion) != "77" {
			t.Fatalf("%d frames, %v", len(frames), err)
		}
		fast := 0
		checkFastPath(t, out.Bytes(), &fast)
		if fast != 1 {
			t.Fatalf("the fast path did not read what kube-apiserver writes")
		}
	}
}

// TestScanRecordedCBOR: the CBOR watch streams recorded from kube-apiserver
// v1.37.2 with CBORServingAndStorage (conformance/testdata) are read on the
// fast path, frame by frame, as client-go reads them.
func TestScanRecordedCBOR(t *testing.T) {
	for _, name := range []string{"watch-cbor", "watch-list-cbor"} {
		t.Run(name, func(t *testing.T) {
			f, err := fixture.Load(filepath.Join("..", "..", "conformance", "testdata", name+".json"))
			if err != nil {
				t.Fatal(err)
			}
			resp := f.Exchanges[0].Response
			if enc, ok := EncodingFor(resp.ContentType()); !ok || enc != CBOR {
				t.Fatalf("recorded Content-Type %q", resp.ContentType())
			}
			stream := resp.Body()
			frames, raw, _, err := scanAll(t, bytes.NewReader(stream), CBOR, 0)
			if err != io.EOF || !bytes.Equal(raw, stream) || len(frames) < 5 {
				t.Fatalf("%d frames, %v", len(frames), err)
			}
			fast := 0
			checkFastPath(t, stream, &fast)
			if fast != len(frames) {
				t.Fatalf("%d of %d recorded frames took the fast path", fast, len(frames))
			}
			compareWithOracle(t, CBOR, stream)
			for _, fr := range frames {
				if len(fr.Event.ResourceVersion) == 0 {
					t.Fatalf("frame without a resourceVersion: %+v", fr.Event)
				}
			}
		})
	}
}
