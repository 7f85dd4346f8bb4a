package frame

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	cborserializer "k8s.io/apimachinery/pkg/runtime/serializer/cbor"
)

// cborEncoder writes CBOR as kube-apiserver's serializer does. Encoding
// needs neither a creater nor a typer.
var cborEncoder = cborserializer.NewSerializer(nil, nil)

// EncodeError returns one whole ERROR watch frame carrying status, in the
// stream encoding enc, as an API server writes it: for JSON
// {"type":"ERROR","object":{...status...}} and a newline; for protobuf a
// length prefix and a metav1.WatchEvent whose object is "k8s\0" + a
// runtime.Unknown of kind v1 Status; for CBOR one data item, a
// metav1.WatchEvent whose object is the Status's own data item, both written
// by apimachinery's CBOR serializer (self-described, strings as byte
// strings). The status's kind and apiVersion are set
// to Status and v1 in the frame whatever the argument says; the argument is
// not modified.
func EncodeError(enc Encoding, status *metav1.Status) ([]byte, error) {
	if status == nil {
		return nil, fmt.Errorf("frame: EncodeError: nil status")
	}
	st := *status
	st.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}
	switch enc {
	case JSON:
		object, err := json.Marshal(&st)
		if err != nil {
			return nil, fmt.Errorf("frame: encoding Status as JSON: %w", err)
		}
		var out bytes.Buffer
		out.Grow(len(object) + 32)
		out.WriteString(`{"type":"ERROR","object":`)
		out.Write(object)
		out.WriteString("}\n")
		return out.Bytes(), nil
	case Protobuf:
		object, err := st.Marshal()
		if err != nil {
			return nil, fmt.Errorf("frame: encoding Status as protobuf: %w", err)
		}
		unknown := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: "v1", Kind: "Status"}, Raw: object}
		wrapped, err := unknown.Marshal()
		if err != nil {
			return nil, fmt.Errorf("frame: encoding runtime.Unknown: %w", err)
		}
		event := metav1.WatchEvent{
			Type:   "ERROR",
			Object: runtime.RawExtension{Raw: append(protoPrefix[:], wrapped...)},
		}
		body, err := event.Marshal()
		if err != nil {
			return nil, fmt.Errorf("frame: encoding WatchEvent: %w", err)
		}
		out := make([]byte, 4, 4+len(body))
		binary.BigEndian.PutUint32(out, uint32(len(body)))
		return append(out, body...), nil
	case CBOR:
		var object bytes.Buffer
		if err := cborEncoder.Encode(&st, &object); err != nil {
			return nil, fmt.Errorf("frame: encoding Status as CBOR: %w", err)
		}
		var out bytes.Buffer
		event := metav1.WatchEvent{Type: "ERROR", Object: runtime.RawExtension{Raw: object.Bytes()}}
		if err := cborEncoder.Encode(&event, &out); err != nil {
			return nil, fmt.Errorf("frame: encoding WatchEvent as CBOR: %w", err)
		}
		return out.Bytes(), nil
	}
	return nil, fmt.Errorf("frame: EncodeError: unknown encoding %s", enc)
}
