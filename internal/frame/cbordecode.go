// The exact path for CBOR frames the in-place reading does not take on:
// apimachinery's own CBOR serializer decodes the event as client-go does, at
// the cost of allocations. kube-apiserver never writes such frames; a
// hand-written CBOR encoder or an unusual proxy might.

package frame

import (
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	cborserializer "k8s.io/apimachinery/pkg/runtime/serializer/cbor"
)

// Reasons a well-formed CBOR frame is not a watch event client-go decodes.
var (
	errCBOREnvelope = errors.New("CBOR frame does not decode as a metav1.WatchEvent")
	errCBORObject   = errors.New("CBOR watch event object does not decode")
)

// cborEventMeta is what the typed decode of a non-ERROR event's object
// checks and the scanner reads: the fields of ObjectMeta it needs, with
// ObjectMeta's Go types, so they decode exactly as into the real object.
type cborEventMeta struct {
	Metadata struct {
		ResourceVersion string            `json:"resourceVersion,omitempty"`
		Annotations     map[string]string `json:"annotations,omitempty"`
	} `json:"metadata,omitempty"`
}

// cborEventStatus is the same for an ERROR event's metav1.Status.
type cborEventStatus struct {
	Metadata struct {
		ResourceVersion string `json:"resourceVersion,omitempty"`
	} `json:"metadata,omitempty"`
	Code    int32                `json:"code,omitempty"`
	Reason  metav1.StatusReason  `json:"reason,omitempty"`
	Details *cborEventRetryAfter `json:"details,omitempty"`
}

type cborEventRetryAfter struct {
	RetryAfterSeconds int32 `json:"retryAfterSeconds,omitempty"`
}

func (*cborEventMeta) GetObjectKind() schema.ObjectKind   { return schema.EmptyObjectKind }
func (m *cborEventMeta) DeepCopyObject() runtime.Object   { c := *m; return &c }
func (*cborEventStatus) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }
func (s *cborEventStatus) DeepCopyObject() runtime.Object { c := *s; return &c }

// anyKind makes the serializer decode an object of every kind into one Go
// type, as a clientset decodes it into the kind's own type.
type anyKind struct{ newObject func() runtime.Object }

func (k anyKind) New(schema.GroupVersionKind) (runtime.Object, error) { return k.newObject(), nil }
func (anyKind) ObjectKinds(runtime.Object) ([]schema.GroupVersionKind, bool, error) {
	return []schema.GroupVersionKind{{Kind: "frame.scanner"}}, false, nil
}
func (anyKind) Recognizes(schema.GroupVersionKind) bool { return true }

var (
	// cborEnvelopeDecoder is client-go's CBOR stream serializer (no
	// transcoding) over a scheme that knows metav1.WatchEvent.
	cborEnvelopeDecoder = func() runtime.Decoder {
		scheme := runtime.NewScheme()
		metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
		return cborserializer.NewSerializer(scheme, scheme, cborserializer.Transcode(false))
	}()
	cborMetaDecoder = func() runtime.Decoder {
		kinds := anyKind{func() runtime.Object { return &cborEventMeta{} }}
		return cborserializer.NewSerializer(kinds, kinds)
	}()
	cborStatusDecoder = func() runtime.Decoder {
		kinds := anyKind{func() runtime.Object { return &cborEventStatus{} }}
		return cborserializer.NewSerializer(kinds, kinds)
	}()
)

// decodeCBOREvent decodes the whole, well-formed frame b as client-go's
// watch decoder does, and fills ev. The resourceVersion is copied into
// *rvBuf, so that ev aliases scanner memory as on the fast path.
func decodeCBOREvent(b []byte, ev *Event, rvBuf *[]byte) error {
	var envelope metav1.WatchEvent
	decoded, _, err := cborEnvelopeDecoder.Decode(b, nil, &envelope)
	if err != nil {
		return fmt.Errorf("%w: %w", errCBOREnvelope, err)
	}
	if decoded != &envelope {
		// The envelope named a kind of its own (as in JSON, refused rather
		// than looked up in a scheme).
		return errEnvelopeTypeMeta
	}
	typ := eventTypeOf([]byte(envelope.Type))
	if typ == 0 {
		return &unknownTypeError{name: envelope.Type}
	}
	if len(envelope.Object.Raw) == 0 {
		return errNoObject
	}
	if typ == Error {
		object, err := decodeCBORObject(cborStatusDecoder, envelope.Object.Raw)
		if err != nil {
			return err
		}
		st := object.(*cborEventStatus)
		var retryAfter int32
		if st.Details != nil {
			retryAfter = st.Details.RetryAfterSeconds
		}
		*ev = Event{Type: Error}
		ev.setStatus(st.Code, []byte(st.Reason), retryAfter)
		return nil
	}
	object, err := decodeCBORObject(cborMetaDecoder, envelope.Object.Raw)
	if err != nil {
		return err
	}
	meta := object.(*cborEventMeta).Metadata
	*rvBuf = append((*rvBuf)[:0], meta.ResourceVersion...)
	*ev = Event{Type: typ}
	ev.setResumePoint(*rvBuf, meta.Annotations[metav1.InitialEventsAnnotationKey] == "true")
	return nil
}

// decodeCBORObject decodes an event's object as the clientset's embedded
// decoder does.
func decodeCBORObject(decoder runtime.Decoder, raw []byte) (runtime.Object, error) {
	object, _, err := decoder.Decode(raw, nil, nil)
	switch {
	case runtime.IsMissingKind(err), runtime.IsMissingVersion(err):
		return nil, errObjectTypeMeta
	case err != nil:
		return nil, fmt.Errorf("%w: %w", errCBORObject, err)
	}
	return object, nil
}
