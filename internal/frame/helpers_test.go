package frame

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	cborserializer "k8s.io/apimachinery/pkg/runtime/serializer/cbor"
	jsonserializer "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/client-go/kubernetes/scheme"
	restclientwatch "k8s.io/client-go/rest/watch"
)

// This file builds real-shaped watch streams the way kube-apiserver writes
// them and decodes streams the way client-go reads them (the oracle).

// cborCodecs is scheme.Codecs with CBOR, as a clientset has them when
// client-go's ClientsAllowCBOR gate is on (rest.CodecFactoryForGeneratedClient).
var cborCodecs = serializer.NewCodecFactory(scheme.Scheme, serializer.WithSerializer(cborserializer.NewSerializerInfo))

func codecs(enc Encoding) serializer.CodecFactory {
	if enc == CBOR {
		return cborCodecs
	}
	return scheme.Codecs
}

func serializerInfo(t testing.TB, enc Encoding) runtime.SerializerInfo {
	t.Helper()
	info, ok := runtime.SerializerInfoForMediaType(codecs(enc).SupportedMediaTypes(), mediaType(enc))
	if !ok || info.StreamSerializer == nil {
		t.Fatalf("no stream serializer for %s", mediaType(enc))
	}
	return info
}

// mediaType is the media type of the serializer that writes and reads enc
// (a CBOR watch stream is application/cbor-seq, read by the application/cbor
// serializer's framer).
func mediaType(enc Encoding) string {
	switch enc {
	case Protobuf:
		return runtime.ContentTypeProtobuf
	case CBOR:
		return runtime.ContentTypeCBOR
	}
	return runtime.ContentTypeJSON
}

// configMap returns a ConfigMap at resourceVersion rv whose data is about
// size bytes.
func configMap(name, rv string, size int) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "default", ResourceVersion: rv,
			UID:         "6b1e3c3e-4a8f-4c0e-9d8a-2f1b7c9d0e11",
			Labels:      map[string]string{"app": "kretry", "tier": "test"},
			Annotations: map[string]string{"note": `quoted "value" with \ backslash`},
		},
		Data: map[string]string{},
	}
	const line = "The quick brown fox jumps over the lazy dog; 0123456789 ABCDEFGHIJKLMNOPQRSTUVWXYZ.\n"
	for i := 0; size > 0; i++ {
		n := min(size, 512)
		cm.Data["key-"+strconv.Itoa(i)] = strings.Repeat(line, n/len(line)+1)[:n]
		size -= n + 16
	}
	return cm
}

// bookmark returns the object of a BOOKMARK event: only the kind and the RV
// (and the initial-events-end annotation when end is set).
func bookmark(rv string, end bool) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: rv}}
	if end {
		cm.Annotations = map[string]string{metav1.InitialEventsAnnotationKey: "true"}
	}
	return cm
}

func status(code int32, reason metav1.StatusReason, retryAfter int32) *metav1.Status {
	st := &metav1.Status{Status: metav1.StatusFailure, Code: code, Reason: reason, Message: "test " + string(reason)}
	if retryAfter != 0 {
		st.Details = &metav1.StatusDetails{RetryAfterSeconds: retryAfter}
	}
	return st
}

type watchEvent struct {
	typ string
	obj runtime.Object
}

// encodeEvents writes events as kube-apiserver does: the object with the
// media type's serializer (apiVersion/kind set), wrapped in a
// metav1.WatchEvent written by the stream serializer through the framer.
func encodeEvents(t testing.TB, enc Encoding, events ...watchEvent) []byte {
	t.Helper()
	info := serializerInfo(t, enc)
	objectEncoder := codecs(enc).EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion)
	var out bytes.Buffer
	framed := info.StreamSerializer.Framer.NewFrameWriter(&out)
	encoder := streaming.NewEncoder(framed, info.StreamSerializer.Serializer)
	for _, ev := range events {
		raw, err := runtime.Encode(objectEncoder, ev.obj.DeepCopyObject())
		if err != nil {
			t.Fatal(err)
		}
		if enc == JSON {
			raw = bytes.TrimSuffix(raw, []byte("\n"))
		}
		if err := encoder.Encode(&metav1.WatchEvent{Type: ev.typ, Object: runtime.RawExtension{Raw: raw}}); err != nil {
			t.Fatal(err)
		}
	}
	return out.Bytes()
}

// clientGoDecoder is client-go's watch decoder over stream, with the scheme's
// own object decoder, as a typed clientset has it.
func clientGoDecoder(t testing.TB, enc Encoding, stream []byte) *restclientwatch.Decoder {
	t.Helper()
	info := serializerInfo(t, enc)
	frames := info.StreamSerializer.Framer.NewFrameReader(io.NopCloser(bytes.NewReader(stream)))
	return restclientwatch.NewDecoder(streaming.NewDecoder(frames, info.StreamSerializer.Serializer), codecs(enc).UniversalDeserializer())
}

// oracleEvent is what client-go's decoders make of one frame.
type oracleEvent struct {
	typ        string
	rv         string
	eventsEnd  bool
	code       int32
	reason     string
	retryAfter int32
	// objectErr is the error decoding the object's metadata (for ERROR, the
	// Status fields) gave; the frame is not usable when it is set.
	objectErr error
}

// oracleDecode decodes stream with client-go's watch decoder
// (rest/watch.Decoder over the streaming decoder and the framer of the media
// type, as rest.Request.newStreamWatcher builds it). The embedded object is
// decoded by objectDecoder, which reads the metadata (or Status fields) with
// the libraries client-go uses, leaving out the scheme lookup of the kind.
// It returns the events up to the first error, and that error.
func oracleDecode(t testing.TB, enc Encoding, stream []byte) ([]oracleEvent, error) {
	t.Helper()
	info := serializerInfo(t, enc)
	frames := info.StreamSerializer.Framer.NewFrameReader(io.NopCloser(bytes.NewReader(stream)))
	decoder := restclientwatch.NewDecoder(streaming.NewDecoder(frames, info.StreamSerializer.Serializer), objectDecoder{enc: enc})
	var events []oracleEvent
	for {
		typ, obj, err := decoder.Decode()
		if err != nil {
			return events, err
		}
		d := obj.(*decodedObject)
		ev := oracleEvent{typ: string(typ)}
		if typ == "ERROR" {
			ev.objectErr = d.statusErr
			ev.code, ev.reason = d.status.Code, string(d.status.Reason)
			if d.status.Details != nil {
				ev.retryAfter = d.status.Details.RetryAfterSeconds
			}
		} else {
			ev.objectErr = d.metaErr
			ev.rv = d.meta.ResourceVersion
			ev.eventsEnd = typ == "BOOKMARK" && d.meta.Annotations[metav1.InitialEventsAnnotationKey] == "true"
		}
		events = append(events, ev)
	}
}

// jsonMeta and jsonStatus are the fields the scanner promises to read, as a
// typed object (ObjectMeta, or Status with its ListMeta) declares them.
type jsonMeta struct {
	Metadata struct {
		ResourceVersion string            `json:"resourceVersion,omitempty"`
		Annotations     map[string]string `json:"annotations,omitempty"`
	} `json:"metadata,omitempty"`
}

type jsonStatus struct {
	Metadata struct {
		ResourceVersion string `json:"resourceVersion,omitempty"`
	} `json:"metadata,omitempty"`
	Code    int32  `json:"code,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Details *struct {
		RetryAfterSeconds int32 `json:"retryAfterSeconds,omitempty"`
	} `json:"details,omitempty"`
}

type decodedObject struct {
	meta      metav1.ObjectMeta
	metaErr   error
	status    metav1.Status
	statusErr error
}

func (*decodedObject) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }
func (d *decodedObject) DeepCopyObject() runtime.Object { c := *d; return &c }

// objectDecoder stands in for client-go's embedded object decoder.
type objectDecoder struct{ enc Encoding }

func (o objectDecoder) Decode(data []byte, _ *schema.GroupVersionKind, _ runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	d := &decodedObject{}
	if o.enc == JSON {
		// As the JSON serializer: kind and apiVersion first (encoding/json,
		// any case), then the typed fields (sigs.k8s.io/json, exact case).
		gvk, err := jsonserializer.DefaultMetaFactory.Interpret(data)
		if err != nil {
			return nil, nil, err
		}
		if gvk.Kind == "" || gvk.Version == "" {
			return nil, nil, fmt.Errorf("object has no kind or version: %v", gvk)
		}
		var m jsonMeta
		d.metaErr = utiljson.Unmarshal(data, &m)
		d.meta.ResourceVersion, d.meta.Annotations = m.Metadata.ResourceVersion, m.Metadata.Annotations
		var s jsonStatus
		d.statusErr = utiljson.Unmarshal(data, &s)
		d.status.Code, d.status.Reason = s.Code, metav1.StatusReason(s.Reason)
		if s.Details != nil {
			d.status.Details = &metav1.StatusDetails{RetryAfterSeconds: s.Details.RetryAfterSeconds}
		}
		return d, gvk, nil
	}
	if o.enc == CBOR {
		return cborObjectDecode(data)
	}
	// As the protobuf serializer: the "k8s\0" prefix and runtime.Unknown,
	// a kind and version, then the typed object (PartialObjectMetadata has
	// just the ObjectMeta at field 1, like every typed object).
	var unk runtime.Unknown
	if _, _, err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Decode(data, nil, &unk); err != nil {
		return nil, nil, err
	}
	gvk := unk.GroupVersionKind()
	if gvk.Kind == "" || gvk.Version == "" {
		return nil, nil, fmt.Errorf("object has no kind or version: %v", gvk)
	}
	var pom metav1.PartialObjectMetadata
	d.metaErr = pom.Unmarshal(unk.Raw)
	d.meta = pom.ObjectMeta
	d.statusErr = d.status.Unmarshal(unk.Raw)
	return d, &gvk, nil
}

// scanAll runs a Scanner over stream until it returns an error.
func scanAll(t testing.TB, r io.Reader, enc Encoding, maxSize int) (frames []Frame, raw []byte, sc *Scanner, err error) {
	t.Helper()
	sc = NewScanner(r, enc, maxSize)
	for {
		fr, err := sc.Next()
		if err != nil {
			return frames, raw, sc, err
		}
		raw = append(raw, fr.Raw...)
		fr.Raw = nil
		fr.Event.ResourceVersion = bytes.Clone(fr.Event.ResourceVersion)
		frames = append(frames, fr)
	}
}

// checkScanErr checks the error that ended a scan against want: io.EOF and
// io.ErrUnexpectedEOF must be returned as they are; anything else must be an
// *InvalidFrameError, wrapping want unless want is nil.
func checkScanErr(t testing.TB, err, want error) {
	t.Helper()
	var invalid *InvalidFrameError
	switch {
	case want == io.EOF || want == io.ErrUnexpectedEOF:
		if err != want {
			t.Fatalf("err %v; want %v", err, want)
		}
	case !errors.As(err, &invalid):
		t.Fatalf("err %v; want an *InvalidFrameError", err)
	case want != nil && !errors.Is(err, want):
		t.Fatalf("err %v; want it to wrap %v", err, want)
	}
}

// compareWithOracle checks the Scanner against client-go on stream: every
// frame the Scanner returns is one client-go decodes, with the same type and
// fields; it returns an error exactly where client-go does (of the same
// kind), except where the Scanner is documented to be stricter.
func compareWithOracle(t testing.TB, enc Encoding, stream []byte) {
	t.Helper()
	want, wantErr := oracleDecode(t, enc, stream)
	sc := NewScanner(bytes.NewReader(stream), enc, 0)
	var consumed []byte
	for i := 0; ; i++ {
		fr, err := sc.Next()
		if err == nil {
			consumed = append(consumed, fr.Raw...)
			if !bytes.HasPrefix(stream, consumed) {
				t.Fatalf("frame %d: Raw %q is not the next bytes of the stream", i, fr.Raw)
			}
			if i >= len(want) {
				t.Fatalf("frame %d: scanner returned %+v; client-go: %v", i, fr.Event, wantErr)
			}
			w := want[i]
			if w.objectErr != nil {
				if enc != Protobuf {
					t.Fatalf("frame %d: scanner returned %+v; client-go cannot decode the object: %v", i, fr.Event, w.objectErr)
				}
				// The scanner does not check every nested protobuf message.
				continue
			}
			checkEvent(t, i, fr.Event, w)
			continue
		}
		// The scanner stopped.
		if !bytes.HasPrefix(stream, append(consumed, sc.Trailing()...)) {
			t.Fatalf("Raw + Trailing is not a prefix of the stream")
		}
		var invalid *InvalidFrameError
		if errors.Is(err, ErrFrameTooLarge) {
			// client-go finds out only after reading 16 MiB; the scanner
			// believes a protobuf length prefix at once.
			rest := stream[len(consumed):]
			if enc != Protobuf || len(rest) < 4 || binary.BigEndian.Uint32(rest) <= DefaultMaxFrameSize {
				t.Fatalf("after %d frames: %v", i, err)
			}
			return
		}
		if i < len(want) {
			// client-go decoded this frame; the scanner refused it.
			w := want[i]
			switch {
			case w.objectErr != nil:
			case !errors.As(err, &invalid):
				t.Fatalf("frame %d: scanner: %v; client-go decoded %+v", i, err, w)
			case errors.Is(err, errEnvelopeTypeMeta) && envelopeHasTypeMeta(enc, stream[invalid.Offset:]):
				// Stricter: client-go would look the envelope's kind up.
			default:
				t.Fatalf("frame %d: scanner: %v; client-go decoded %+v", i, err, w)
			}
			return
		}
		switch {
		case wantErr == io.EOF:
			if err == io.ErrUnexpectedEOF && enc == Protobuf {
				// client-go takes a frame cut right after its length
				// prefix for a clean end.
				return
			}
			if err != io.EOF {
				t.Fatalf("after %d frames: scanner: %v; client-go: clean EOF", i, err)
			}
			if got := append(consumed, sc.Trailing()...); !bytes.Equal(got, stream) {
				t.Fatalf("at EOF, Raw + Trailing = %q; stream %q", got, stream)
			}
		case wantErr == io.ErrUnexpectedEOF:
			switch {
			case err == io.ErrUnexpectedEOF:
			case errors.As(err, &invalid) && enc == JSON && errors.Is(err, errNotObject):
				// Stricter: a frame that does not start with '{' is refused
				// before it ends.
			case errors.As(err, &invalid) && enc == Protobuf && wholeProtobufFrame(stream[invalid.Offset:]):
				// The generated Unmarshal says io.ErrUnexpectedEOF for a
				// field that runs past a whole frame.
			default:
				t.Fatalf("after %d frames: scanner: %v; client-go: %v", i, err, wantErr)
			}
		default:
			if !errors.As(err, &invalid) {
				t.Fatalf("after %d frames: scanner: %v; client-go: %v", i, err, wantErr)
			}
		}
		if err == io.ErrUnexpectedEOF && len(consumed)+len(sc.Trailing()) >= len(stream) {
			t.Fatalf("scanner says torn, yet returned the whole stream")
		}
		return
	}
}

func checkEvent(t testing.TB, i int, got Event, w oracleEvent) {
	t.Helper()
	if got.Type.String() != w.typ {
		t.Fatalf("frame %d: type %v; client-go %s", i, got.Type, w.typ)
	}
	if w.typ == "ERROR" {
		if got.ResourceVersion != nil || got.InitialEventsEnd {
			t.Fatalf("frame %d: ERROR event with resume data: %+v", i, got)
		}
		if got.Code != w.code || got.Reason != w.reason || got.RetryAfterSeconds != w.retryAfter || got.HasRetryAfter != (w.retryAfter > 0) {
			t.Fatalf("frame %d: %+v; client-go code %d reason %q retryAfter %d", i, got, w.code, w.reason, w.retryAfter)
		}
		return
	}
	if string(got.ResourceVersion) != w.rv || got.InitialEventsEnd != w.eventsEnd {
		t.Fatalf("frame %d: rv %q end %v; client-go rv %q end %v", i, got.ResourceVersion, got.InitialEventsEnd, w.rv, w.eventsEnd)
	}
	if got.Code != 0 || got.Reason != "" || got.RetryAfterSeconds != 0 || got.HasRetryAfter {
		t.Fatalf("frame %d: non-ERROR event with status fields: %+v", i, got)
	}
}

// envelopeHasTypeMeta reports whether the JSON value (CBOR data item) at the
// start of b has a non-empty top-level apiVersion or kind, as the serializer
// reads them.
func envelopeHasTypeMeta(enc Encoding, b []byte) bool {
	if enc == CBOR {
		return cborEnvelopeHasTypeMeta(b)
	}
	var frame json.RawMessage
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(&frame); err != nil {
		return false
	}
	gvk, err := jsonserializer.DefaultMetaFactory.Interpret(frame)
	return err != nil || !gvk.Empty()
}

// wholeProtobufFrame reports whether b starts with a whole length-prefixed
// frame.
func wholeProtobufFrame(b []byte) bool {
	return len(b) >= 4 && uint64(len(b)-4) >= uint64(b[0])<<24|uint64(b[1])<<16|uint64(b[2])<<8|uint64(b[3])
}
