package frame

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var encodings = []Encoding{JSON, Protobuf, CBOR}

// realEvents is one of each kind of event an API server sends.
func realEvents() []watchEvent {
	return []watchEvent{
		{"ADDED", configMap("a", "101", 300)},
		{"MODIFIED", configMap("a", "102", 2000)},
		{"DELETED", configMap("a", "103", 10)},
		{"BOOKMARK", bookmark("104", false)},
		{"BOOKMARK", bookmark("105", true)},
		{"ERROR", status(410, metav1.StatusReasonExpired, 0)},
		{"ERROR", status(429, metav1.StatusReasonTooManyRequests, 7)},
		{"ERROR", status(429, metav1.StatusReasonTooManyRequests, 0)},
		{"ERROR", status(500, metav1.StatusReasonInternalError, 0)},
		{"ADDED", configMap("b", "106", 0)},
	}
}

func realEventsWant() []Event {
	return []Event{
		{Type: Added, ResourceVersion: []byte("101")},
		{Type: Modified, ResourceVersion: []byte("102")},
		{Type: Deleted, ResourceVersion: []byte("103")},
		{Type: Bookmark, ResourceVersion: []byte("104")},
		{Type: Bookmark, ResourceVersion: []byte("105"), InitialEventsEnd: true},
		{Type: Error, Code: 410, Reason: "Expired"},
		{Type: Error, Code: 429, Reason: "TooManyRequests", RetryAfterSeconds: 7, HasRetryAfter: true},
		{Type: Error, Code: 429, Reason: "TooManyRequests"},
		{Type: Error, Code: 500, Reason: "InternalError"},
		{Type: Added, ResourceVersion: []byte("106")},
	}
}

func TestScanRealEvents(t *testing.T) {
	for _, enc := range encodings {
		t.Run(enc.String(), func(t *testing.T) {
			stream := encodeEvents(t, enc, realEvents()...)
			readers := map[string]io.Reader{
				"whole":    bytes.NewReader(stream),
				"one byte": iotest.OneByteReader(bytes.NewReader(stream)),
				"half":     iotest.HalfReader(bytes.NewReader(stream)),
				"data+err": iotest.DataErrReader(bytes.NewReader(stream)),
			}
			for name, r := range readers {
				t.Run(name, func(t *testing.T) {
					frames, raw, sc, err := scanAll(t, r, enc, 0)
					if err != io.EOF {
						t.Fatalf("Next: %v; want io.EOF", err)
					}
					if got := append(raw, sc.Trailing()...); !bytes.Equal(got, stream) {
						t.Fatalf("Raw + Trailing differs from the stream")
					}
					want := realEventsWant()
					if len(frames) != len(want) {
						t.Fatalf("%d frames; want %d", len(frames), len(want))
					}
					for i, fr := range frames {
						if !equalEvent(fr.Event, want[i]) {
							t.Errorf("frame %d: %+v; want %+v", i, fr.Event, want[i])
						}
					}
				})
			}
			compareWithOracle(t, enc, stream)

			// The typed decode a clientset does agrees too.
			decoder := clientGoDecoder(t, enc, stream)
			for i, want := range realEventsWant() {
				typ, obj, err := decoder.Decode()
				if err != nil {
					t.Fatalf("client-go, event %d: %v", i, err)
				}
				if string(typ) != want.Type.String() {
					t.Fatalf("client-go, event %d: %s", i, typ)
				}
				if typ == "ERROR" {
					st := obj.(*metav1.Status)
					if st.Code != want.Code || string(st.Reason) != want.Reason {
						t.Fatalf("client-go, event %d: %+v", i, st)
					}
					continue
				}
				accessor, err := meta.Accessor(obj)
				if err != nil {
					t.Fatal(err)
				}
				if accessor.GetResourceVersion() != string(want.ResourceVersion) ||
					(accessor.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true") != want.InitialEventsEnd {
					t.Fatalf("client-go, event %d: %+v", i, accessor)
				}
			}
		})
	}
}

func equalEvent(a, b Event) bool {
	return a.Type == b.Type && bytes.Equal(a.ResourceVersion, b.ResourceVersion) &&
		a.InitialEventsEnd == b.InitialEventsEnd && a.Code == b.Code && a.Reason == b.Reason &&
		a.RetryAfterSeconds == b.RetryAfterSeconds && a.HasRetryAfter == b.HasRetryAfter
}

const cmKind = `"apiVersion":"v1","kind":"ConfigMap"`

// jsonFrameCases are JSON shapes a real server does not write but a JSON
// decoder accepts or refuses; the fuzz target starts from them too.
var jsonFrameCases = []struct {
	name   string
	stream string
	want   []Event
	err    error // io.EOF, io.ErrUnexpectedEOF, or a reason wrapped by *InvalidFrameError
}{
	{"no whitespace between frames",
		`{"type":"ADDED","object":{` + cmKind + `,"metadata":{"resourceVersion":"1"}}}{"type":"DELETED","object":{` + cmKind + `,"metadata":{"resourceVersion":"2"}}}`,
		[]Event{{Type: Added, ResourceVersion: []byte("1")}, {Type: Deleted, ResourceVersion: []byte("2")}}, io.EOF},
	{"all whitespace kinds",
		" \r\n\t{ \"type\" : \"ADDED\" ,\n\"object\"\t:\r{" + cmKind + " , \"metadata\" : { \"resourceVersion\" : \"1\" } } }\r\n \t",
		[]Event{{Type: Added, ResourceVersion: []byte("1")}}, io.EOF},
	{"key order shuffled",
		`{"object":{"metadata":{"annotations":{"k8s.io/initial-events-end":"true"},"resourceVersion":"9"},"kind":"ConfigMap","apiVersion":"v1"},"type":"BOOKMARK"}`,
		[]Event{{Type: Bookmark, ResourceVersion: []byte("9"), InitialEventsEnd: true}}, io.EOF},
	{"escaped keys and values",
		`{"\u0074ype":"\u0041DDED","obj\u0065ct":{"\u0061piVersion":"v\u0031","kind":"ConfigMap","meta\u0064ata":{"resource\u0056ersion":"\u0031\u0032"}}}`,
		[]Event{{Type: Added, ResourceVersion: []byte("12")}}, io.EOF},
	{"escaped annotation and reason",
		`{"type":"BOOKMARK","object":{` + cmKind + `,"metadata":{"resourceVersion":"3","annotations":{"k8s.io\/initial-events-end":"tru\u0065"}}}}` +
			`{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","code":410,"reason":"Exp\u0069red\n"}}`,
		[]Event{{Type: Bookmark, ResourceVersion: []byte("3"), InitialEventsEnd: true}, {Type: Error, Code: 410, Reason: "Expired\n"}}, io.EOF},
	{"strings with quotes, backslashes, unicode",
		`{"type":"ADDED","object":{` + cmKind + `,"data":{"k\"":"a\\\"b\\\\","é":"\ud83d\ude00 ünï"},"metadata":{"resourceVersion":"4"}}}`,
		[]Event{{Type: Added, ResourceVersion: []byte("4")}}, io.EOF},
	{"duplicate keys: last wins",
		`{"type":"DELETED","type":"ADDED","object":{` + cmKind + `,"metadata":{"resourceVersion":"1","resourceVersion":"2"}}}`,
		[]Event{{Type: Added, ResourceVersion: []byte("2")}}, io.EOF},
	{"duplicate metadata merges",
		`{"type":"BOOKMARK","object":{` + cmKind + `,"metadata":{"resourceVersion":"5","annotations":{"k8s.io/initial-events-end":"true"}},"metadata":{"name":"x"}}}`,
		[]Event{{Type: Bookmark, ResourceVersion: []byte("5"), InitialEventsEnd: true}}, io.EOF},
	{"duplicate object replaces",
		`{"type":"ADDED","object":{` + cmKind + `,"metadata":{"resourceVersion":"5"}},"object":{` + cmKind + `,"metadata":{"resourceVersion":"6"}}}`,
		[]Event{{Type: Added, ResourceVersion: []byte("6")}}, io.EOF},
	{"null object keeps the earlier one",
		`{"type":"ADDED","object":{` + cmKind + `,"metadata":{"resourceVersion":"5"}},"object":null}`,
		[]Event{{Type: Added, ResourceVersion: []byte("5")}}, io.EOF},
	{"null annotations clear initial-events-end",
		`{"type":"BOOKMARK","object":{` + cmKind + `,"metadata":{"resourceVersion":"5","annotations":{"k8s.io/initial-events-end":"true"},"annotations":null}}}`,
		[]Event{{Type: Bookmark, ResourceVersion: []byte("5")}}, io.EOF},
	{"null details clear retryAfterSeconds",
		`{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","code":429,"details":{"retryAfterSeconds":3},"details":null}}`,
		[]Event{{Type: Error, Code: 429}}, io.EOF},
	{"retryAfterSeconds",
		`{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","details":{"retryAfterSeconds":3,"causes":[{"reason":"x"}]},"code":429,"reason":"TooManyRequests"}}`,
		[]Event{{Type: Error, Code: 429, Reason: "TooManyRequests", RetryAfterSeconds: 3, HasRetryAfter: true}}, io.EOF},
	{"keys are case-sensitive",
		`{"type":"ADDED","Type":"DELETED","object":{` + cmKind + `,"metadata":{"resourceVersion":"7","ResourceVersion":"8"}}}`,
		[]Event{{Type: Added, ResourceVersion: []byte("7")}}, io.EOF},
	{"kind in any case",
		`{"type":"ADDED","object":{"APIVERSION":"v1","KIND":"ConfigMap","metadata":{"resourceVersion":"7"}}}`,
		[]Event{{Type: Added, ResourceVersion: []byte("7")}}, io.EOF},
	{"numbers of every shape elsewhere",
		`{"type":"ADDED","object":{` + cmKind + `,"n":[0,-0,1.5,-2e10,3E+2,4e-2,12345678901234567890],"t":true,"f":false,"z":null,"metadata":{"resourceVersion":"7"}}}`,
		[]Event{{Type: Added, ResourceVersion: []byte("7")}}, io.EOF},

	{"null type keeps the earlier one",
		`{"type":"ADDED","type":null,"object":{` + cmKind + `,"metadata":{"resourceVersion":"7"}}}`,
		[]Event{{Type: Added, ResourceVersion: []byte("7")}}, io.EOF},
	{"null initial-events-end is no end",
		`{"type":"BOOKMARK","object":{` + cmKind + `,"metadata":{"resourceVersion":"7","annotations":{"k8s.io/initial-events-end":"true","k8s.io/initial-events-end":null}}}}`,
		[]Event{{Type: Bookmark, ResourceVersion: []byte("7")}}, io.EOF},
	{"resourceVersion with invalid UTF-8 and lone surrogates",
		"{\"type\":\"ADDED\",\"object\":{" + cmKind + ",\"metadata\":{\"resourceVersion\":\"\xff1\\ud800\\ud83d\\ude00\\udc00A\"}}}",
		[]Event{{Type: Added, ResourceVersion: []byte("\uFFFD1\uFFFD\U0001F600\uFFFDA")}}, io.EOF},
	{"object kind with a Kelvin sign",
		`{"type":"ADDED","object":{"apiVersion":"v1","\u212aind":"ConfigMap","metadata":{"resourceVersion":"7"}}}`,
		[]Event{{Type: Added, ResourceVersion: []byte("7")}}, io.EOF},
	{"envelope apiVersion with a long s",
		`{"type":"ADDED","apiVer\u017fion":"v1","object":{` + cmKind + `,"metadata":{"resourceVersion":"7"}}}`,
		nil, errEnvelopeTypeMeta},
	{"envelope kind empty or null is fine",
		`{"kind":"","apiVersion":null,"type":"ADDED","object":{` + cmKind + `,"metadata":{"resourceVersion":"7"}}}`,
		[]Event{{Type: Added, ResourceVersion: []byte("7")}}, io.EOF},
	{"code -0 and retryAfterSeconds null",
		`{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","code":-0,"details":{"retryAfterSeconds":4},"details":{"retryAfterSeconds":null}}}`,
		[]Event{{Type: Error, RetryAfterSeconds: 4, HasRetryAfter: true}}, io.EOF},
	{"status fields of a non-ERROR object are not read",
		`{"type":"ADDED","object":{` + cmKind + `,"code":"x","details":5,"metadata":{"resourceVersion":"7"}}}`,
		[]Event{{Type: Added, ResourceVersion: []byte("7")}}, io.EOF},
	{"annotations of an ERROR object are not read",
		`{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","code":500,"metadata":{"annotations":5}}}`,
		[]Event{{Type: Error, Code: 500}}, io.EOF},

	{"unknown type", `{"type":"UPDATED","object":{` + cmKind + `,"metadata":{"resourceVersion":"1"}}}`, nil, nil},
	{"lower-case type", `{"type":"added","object":{` + cmKind + `,"metadata":{"resourceVersion":"1"}}}`, nil, nil},
	{"no type", `{"object":{` + cmKind + `,"metadata":{"resourceVersion":"1"}}}`, nil, nil},
	{"type not a string", `{"type":1,"object":{` + cmKind + `,"metadata":{"resourceVersion":"1"}}}`, nil, errTypeNotString},
	{"no object", `{"type":"ADDED"}`, nil, errNoObject},
	{"null object", `{"type":"ADDED","object":null}`, nil, errNoObject},
	{"object not an object", `{"type":"ADDED","object":"x"}`, nil, errObjectNotObject},
	{"object without kind", `{"type":"ADDED","object":{"apiVersion":"v1","metadata":{"resourceVersion":"1"}}}`, nil, errObjectTypeMeta},
	{"object with a bad apiVersion", `{"type":"ADDED","object":{"apiVersion":"a/b/c","kind":"ConfigMap","metadata":{"resourceVersion":"1"}}}`, nil, errObjectTypeMeta},
	{"no resourceVersion", `{"type":"ADDED","object":{` + cmKind + `,"metadata":{"name":"x"}}}`, []Event{{Type: Added}}, io.EOF},
	{"empty resourceVersion", `{"type":"MODIFIED","object":{` + cmKind + `,"metadata":{"resourceVersion":""}}}`, []Event{{Type: Modified}}, io.EOF},
	{"resourceVersion not a string", `{"type":"ADDED","object":{` + cmKind + `,"metadata":{"resourceVersion":1}}}`, nil, errMetadata},
	{"metadata not an object", `{"type":"ADDED","object":{` + cmKind + `,"metadata":[]}}`, nil, errMetadata},
	{"annotation not a string", `{"type":"BOOKMARK","object":{` + cmKind + `,"metadata":{"resourceVersion":"1","annotations":{"a":1}}}}`, nil, errAnnotations},
	{"code not an int32", `{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","code":4.1e2}}`, nil, errStatusFields},
	{"code out of range", `{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","code":2147483648}}`, nil, errStatusFields},
	{"envelope with its own kind", `{"kind":"WatchEvent","type":"ADDED","object":{` + cmKind + `,"metadata":{"resourceVersion":"1"}}}`, nil, errEnvelopeTypeMeta},
	{"second frame unknown", `{"type":"ADDED","object":{` + cmKind + `,"metadata":{"resourceVersion":"1"}}}` + "\n" + `{"type":"?","object":{}}`,
		[]Event{{Type: Added, ResourceVersion: []byte("1")}}, nil},

	{"not an object", `["type","ADDED"]`, nil, errNotObject},
	{"missing colon", `{"type" "ADDED"}`, nil, errSyntax},
	{"trailing comma", `{"type":"ADDED",}`, nil, errSyntax},
	{"single quotes", `{'type':'ADDED'}`, nil, errSyntax},
	{"mismatched brackets", `{"type":"ADDED","object":{"a":[}]}`, nil, errSyntax},
	{"bad literal", `{"type":"ADDED","object":{"a":nul}}`, nil, errSyntax},
	{"bad number", `{"type":"ADDED","object":{"a":01}}`, nil, errSyntax},
	{"bad escape", `{"type":"ADD\x"}`, nil, errBadEscape},
	{"control character", "{\"type\":\"ADD\tED\"}", nil, errControlInString},
	{"garbage after a frame", `{"type":"ADDED","object":{` + cmKind + `,"metadata":{"resourceVersion":"1"}}} x`,
		[]Event{{Type: Added, ResourceVersion: []byte("1")}}, errNotObject},

	{"torn in a string", `{"type":"ADDED","object":{"a":"b`, nil, io.ErrUnexpectedEOF},
	{"torn in an escape", `{"type":"ADDED","object":{"a":"\u00`, nil, io.ErrUnexpectedEOF},
	{"torn in a number", `{"type":"ADDED","object":{"a":12`, nil, io.ErrUnexpectedEOF},
	{"torn in a literal", `{"type":"ADDED","object":{"a":tr`, nil, io.ErrUnexpectedEOF},
	{"torn after whitespace", "{\"type\":\"ADDED\"  \n", nil, io.ErrUnexpectedEOF},
	{"empty", "", nil, io.EOF},
	{"whitespace only", " \n\n", nil, io.EOF},
}

// TestScanJSONFrames checks each of jsonFrameCases against the expected
// events and against client-go's decoder.
func TestScanJSONFrames(t *testing.T) {
	for _, tc := range jsonFrameCases {
		t.Run(tc.name, func(t *testing.T) {
			stream := []byte(tc.stream)
			frames, raw, sc, err := scanAll(t, bytes.NewReader(stream), JSON, 0)
			var got []Event
			for _, fr := range frames {
				got = append(got, fr.Event)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("events %+v; want %+v (err %v)", got, tc.want, err)
			}
			for i := range got {
				if !equalEvent(got[i], tc.want[i]) {
					t.Errorf("event %d: %+v; want %+v", i, got[i], tc.want[i])
				}
			}
			checkScanErr(t, err, tc.err)
			if err == io.EOF && !bytes.Equal(append(raw, sc.Trailing()...), stream) {
				t.Fatalf("Raw + Trailing %q; want %q", append(raw, sc.Trailing()...), stream)
			}
			if _, again := sc.Next(); again != err {
				t.Fatalf("Next after %v returned %v", err, again)
			}
			compareWithOracle(t, JSON, stream)
		})
	}
}

func TestScanJSONDepthLimit(t *testing.T) {
	nest := func(depth int) []byte {
		// The frame itself is depth 1, "object" depth 2.
		inner := bytes.Repeat([]byte("["), depth-2)
		inner = append(inner, bytes.Repeat([]byte("]"), depth-2)...)
		return []byte(`{"type":"ADDED","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"resourceVersion":"1"},"deep":` + string(inner) + `}}`)
	}
	for _, depth := range []int{maxNestingDepth, maxNestingDepth + 1} {
		stream := nest(depth)
		_, _, _, err := scanAll(t, bytes.NewReader(stream), JSON, 0)
		if depth <= maxNestingDepth && err != io.EOF || depth > maxNestingDepth && !errors.Is(err, errTooDeep) {
			t.Errorf("depth %d: %v", depth, err)
		}
		compareWithOracle(t, JSON, stream)
	}
}

func TestTooLarge(t *testing.T) {
	const limit = 1000
	small := configMap("a", "1", 100)
	large := configMap("b", "2", 2000)
	for _, enc := range encodings {
		t.Run(enc.String(), func(t *testing.T) {
			first := encodeEvents(t, enc, watchEvent{"ADDED", small})
			second := encodeEvents(t, enc, watchEvent{"ADDED", large})
			frames, _, _, err := scanAll(t, bytes.NewReader(append(first, second...)), enc, limit)
			if len(frames) != 1 || !errors.Is(err, ErrFrameTooLarge) {
				t.Fatalf("%d frames, %v; want 1 frame, then ErrFrameTooLarge", len(frames), err)
			}
			// The limit is inclusive: a frame of exactly the limit is fine.
			size := len(first)
			switch enc {
			case Protobuf:
				size -= 4
			case JSON:
				size-- // the newline
			}
			if _, _, _, err := scanAll(t, bytes.NewReader(first), enc, size); err != io.EOF {
				t.Fatalf("frame of exactly the limit: %v", err)
			}
			if _, _, _, err := scanAll(t, bytes.NewReader(first), enc, size-1); !errors.Is(err, ErrFrameTooLarge) {
				t.Fatalf("frame one byte over the limit: %v", err)
			}
		})
	}
	t.Run("protobuf before reading the frame", func(t *testing.T) {
		frame := encodeEvents(t, Protobuf, watchEvent{"ADDED", large})
		never := errors.New("the body was read")
		r := io.MultiReader(bytes.NewReader(frame[:4]), iotest.ErrReader(never))
		if _, _, _, err := scanAll(t, r, Protobuf, limit); !errors.Is(err, ErrFrameTooLarge) {
			t.Fatalf("%v; want ErrFrameTooLarge", err)
		}
	})
	t.Run("JSON once past the limit", func(t *testing.T) {
		frame := encodeEvents(t, JSON, watchEvent{"ADDED", large})
		never := errors.New("read past the limit")
		r := io.MultiReader(bytes.NewReader(frame[:limit+1]), iotest.ErrReader(never))
		if _, _, _, err := scanAll(t, iotest.OneByteReader(r), JSON, limit); !errors.Is(err, ErrFrameTooLarge) {
			t.Fatalf("%v; want ErrFrameTooLarge", err)
		}
	})
	t.Run("JSON separators", func(t *testing.T) {
		if _, _, _, err := scanAll(t, bytes.NewReader(bytes.Repeat([]byte("\n"), 2*limit)), JSON, limit); !errors.Is(err, ErrFrameTooLarge) {
			t.Fatalf("%v; want ErrFrameTooLarge", err)
		}
	})
}

// TestTornEveryOffset cuts a stream of three events at every byte: the whole
// frames before the cut come out exactly once and byte for byte, the cut one
// never yields an event, and the error says how the stream ended.
func TestTornEveryOffset(t *testing.T) {
	readerErr := errors.New("connection reset by peer")
	for _, enc := range encodings {
		t.Run(enc.String(), func(t *testing.T) {
			events := []watchEvent{
				{"ADDED", configMap("a", "11", 200)},
				{"BOOKMARK", bookmark("12", true)},
				{"ERROR", status(429, metav1.StatusReasonTooManyRequests, 2)},
			}
			var stream []byte
			var ends []int // where each frame ends, separators included
			for _, ev := range events {
				stream = append(stream, encodeEvents(t, enc, ev)...)
				if enc == JSON {
					stream = append(stream, " \r\n"...) // more separators
				}
				ends = append(ends, len(stream))
			}
			frameStarts := []int{0, ends[0], ends[1]}
			for cut := 0; cut <= len(stream); cut++ {
				whole := 0 // frames wholly before the cut
				for whole < len(ends) && frameEnd(enc, stream, frameStarts[whole], ends[whole]) <= cut {
					whole++
				}
				lastEnd := 0
				if whole > 0 {
					lastEnd = frameEnd(enc, stream, frameStarts[whole-1], ends[whole-1])
				}
				// A clean cut leaves nothing but separators after the last frame.
				clean := cut == lastEnd || enc == JSON && isSpace(stream[lastEnd:cut])
				for _, tail := range []error{io.EOF, readerErr} {
					r := io.MultiReader(bytes.NewReader(stream[:cut]), iotest.ErrReader(tail))
					frames, raw, sc, err := scanAll(t, iotest.HalfReader(r), enc, 0)
					if len(frames) != whole {
						t.Fatalf("cut %d: %d frames; want %d", cut, len(frames), whole)
					}
					// Raw ends at the last whole frame, or past separators
					// that arrived after it.
					if !bytes.Equal(raw, stream[:len(raw)]) || len(raw) < lastEnd || !isSpace(stream[lastEnd:len(raw)]) {
						t.Fatalf("cut %d: Raw is not the whole frames", cut)
					}
					for i, fr := range frames {
						if fr.Event.Type.String() != events[i].typ {
							t.Fatalf("cut %d: frame %d is %v", cut, i, fr.Event.Type)
						}
					}
					wantErr := tail
					if tail == io.EOF && !clean {
						wantErr = io.ErrUnexpectedEOF
					}
					if err != wantErr || !errors.Is(err, tail) && tail != io.EOF {
						t.Fatalf("cut %d, reader ends with %v: %v; want %v", cut, tail, err, wantErr)
					}
					if got := append(raw, sc.Trailing()...); !bytes.Equal(got, stream[:len(got)]) || clean && len(got) != cut {
						t.Fatalf("cut %d: Raw + Trailing %q", cut, got)
					}
				}
				if cut%7 == 0 || cut == len(stream) {
					compareWithOracle(t, enc, stream[:cut])
				}
			}
		})
	}
}

// frameEnd is where the frame in stream[start:end] ends, not counting
// separators after it (JSON writes a newline after each frame; this test
// adds more).
func frameEnd(enc Encoding, stream []byte, start, end int) int {
	if enc != JSON {
		return end
	}
	for end > start && isSpace(stream[end-1:end]) {
		end--
	}
	return end
}

func isSpace(b []byte) bool { return leadingSpace(b) == len(b) }

func TestReaderErrorsPassThrough(t *testing.T) {
	errReset := errors.New("read: connection reset")
	for _, enc := range encodings {
		stream := encodeEvents(t, enc, watchEvent{"ADDED", configMap("a", "1", 10)})
		for _, cut := range []int{0, len(stream) / 2, len(stream)} {
			r := io.MultiReader(bytes.NewReader(stream[:cut]), iotest.ErrReader(errReset))
			_, _, sc, err := scanAll(t, r, enc, 0)
			if err != errReset {
				t.Errorf("%v cut %d: %v; want the reader's error itself", enc, cut, err)
			}
			if _, again := sc.Next(); again != errReset {
				t.Errorf("%v cut %d: Next again: %v", enc, cut, again)
			}
		}
	}
}

// A reader that returns data together with io.EOF ends cleanly.
func TestDataWithEOF(t *testing.T) {
	for _, enc := range encodings {
		stream := encodeEvents(t, enc, realEvents()...)
		frames, _, _, err := scanAll(t, iotest.DataErrReader(bytes.NewReader(stream)), enc, 0)
		if err != io.EOF || len(frames) != len(realEvents()) {
			t.Errorf("%v: %d frames, %v", enc, len(frames), err)
		}
	}
}

type emptyReader struct{}

func (emptyReader) Read([]byte) (int, error) { return 0, nil }

func TestNoProgress(t *testing.T) {
	if _, err := NewScanner(emptyReader{}, JSON, 0).Next(); err != io.ErrNoProgress {
		t.Fatalf("%v; want io.ErrNoProgress", err)
	}
}

func TestReset(t *testing.T) {
	for _, enc := range encodings {
		stream := encodeEvents(t, enc, realEvents()...)
		sc := NewScanner(bytes.NewReader(stream[:len(stream)/2]), enc, 0)
		for {
			if _, err := sc.Next(); err != nil {
				break
			}
		}
		sc.Reset(bytes.NewReader(stream))
		n := 0
		var err error
		for ; err == nil; n++ {
			_, err = sc.Next()
		}
		if err != io.EOF || n-1 != len(realEvents()) {
			t.Errorf("%v after Reset: %d frames, %v", enc, n-1, err)
		}
	}
}

func TestInvalidFrameError(t *testing.T) {
	stream := []byte(`{"type":"ADDED","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"resourceVersion":"1"}}}` + "\n  " + `{"type":"NOPE"}`)
	_, _, sc, err := scanAll(t, bytes.NewReader(stream), JSON, 0)
	var invalid *InvalidFrameError
	if !errors.As(err, &invalid) {
		t.Fatalf("%v; want *InvalidFrameError", err)
	}
	if want := int64(bytes.LastIndexByte(stream, '{')); invalid.Offset != want || invalid.Encoding != JSON {
		t.Errorf("%+v; want offset %d", invalid, want)
	}
	if invalid.Unwrap() == nil || invalid.Error() == "" {
		t.Errorf("empty reason")
	}
	// The separators that arrived with the valid frame went with it.
	if _, raw, _, _ := scanAll(t, bytes.NewReader(stream), JSON, 0); !bytes.HasSuffix(raw, []byte("}\n  ")) || len(sc.Trailing()) != 0 {
		t.Errorf("Raw %q, Trailing %q; want the separators after the valid frame in its Raw", raw, sc.Trailing())
	}
}

func TestZeroAllocsPerEvent(t *testing.T) {
	for _, enc := range encodings {
		one := encodeEvents(t, enc, watchEvent{"MODIFIED", configMap("a", "123", 1000)},
			watchEvent{"BOOKMARK", bookmark("124", true)})
		stream := bytes.Repeat(one, 100)
		r := bytes.NewReader(stream)
		sc := NewScanner(r, enc, 0)
		for range 10 { // warm up: buffers grow once
			if _, err := sc.Next(); err != nil {
				t.Fatal(err)
			}
		}
		allocs := testing.AllocsPerRun(50, func() {
			if _, err := sc.Next(); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%v: %v allocs per event; want 0", enc, allocs)
		}
	}
}

// The string scan reads a buffer's spare capacity but must not believe it.
func TestScanStringIgnoresSpareCapacity(t *testing.T) {
	for n := 0; n < 40; n++ {
		buf := bytes.Repeat([]byte{'"'}, n+40)
		for i := range n {
			buf[i] = 'a'
		}
		b := buf[:n]
		var flags uint8
		end, resume, err := scanStringBody(b, 0, &flags)
		if err != nil || end != -1 || resume != n {
			t.Fatalf("len %d: end %d resume %d err %v; want to need more from %d", n, end, resume, err, n)
		}
		b = buf[:n+1]
		if end, _, _ := scanStringBody(b, 0, &flags); end != n {
			t.Fatalf("len %d: end %d; want %d", n+1, end, n)
		}
	}
}

// TestSeparator: the newline after a frame returned without it is handed
// over on its own, read once; bytes of the next frame are not.
func TestSeparator(t *testing.T) {
	event := `{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","resourceVersion":"1"}}}`
	r := &chunkReader{chunks: []string{event, "\n", event + "\n"}}
	s := NewScanner(r, JSON, 0)
	if f, err := s.Next(); err != nil || string(f.Raw) != event {
		t.Fatalf("Next = %q, %v", f.Raw, err)
	}
	if sep, open := s.Separator(); string(sep) != "\n" || !open {
		t.Fatalf("Separator = %q, %v; want the newline, and that more may follow", sep, open)
	}
	if f, err := s.Next(); err != nil || string(f.Raw) != event+"\n" {
		t.Fatalf("Next = %q, %v; want the second frame whole", f.Raw, err)
	}
	if sep, open := s.Separator(); sep != nil || !open {
		t.Fatalf("Separator = %q, %v at the end, want nil and open (Next reports the end)", sep, open)
	}
	if _, err := s.Next(); err != io.EOF {
		t.Fatalf("Next = %v, want io.EOF", err)
	}
}

// TestSeparatorInPieces: a separator whose pieces arrive apart is handed
// over piece by piece, each saying that more may follow, until the next
// frame's first byte.
func TestSeparatorInPieces(t *testing.T) {
	event := `{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","resourceVersion":"1"}}}`
	r := &chunkReader{chunks: []string{event, " ", "\r", "\n" + event}}
	s := NewScanner(r, JSON, 0)
	if f, err := s.Next(); err != nil || string(f.Raw) != event {
		t.Fatalf("Next = %q, %v", f.Raw, err)
	}
	for _, want := range []struct {
		sep  string
		more bool
	}{{" ", true}, {"\r", true}, {"\n", false}, {"", false}} {
		if sep, more := s.Separator(); string(sep) != want.sep || more != want.more {
			t.Fatalf("Separator = %q, %v; want %q, %v", sep, more, want.sep, want.more)
		}
	}
	if f, err := s.Next(); err != nil || string(f.Raw) != event {
		t.Fatalf("Next = %q, %v; want the second frame whole", f.Raw, err)
	}
}

// chunkReader returns one chunk per Read.
type chunkReader struct{ chunks []string }

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.chunks[0])
	r.chunks[0] = r.chunks[0][n:]
	if r.chunks[0] == "" {
		r.chunks = r.chunks[1:]
	}
	return n, nil
}
