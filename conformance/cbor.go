package conformance

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/fxamacker/cbor/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	cborserializer "k8s.io/apimachinery/pkg/runtime/serializer/cbor"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/client-go/kubernetes/scheme"
)

// CBOR watch streams (application/cbor-seq), read and written with the serializer and framer
// client-go uses for them when its ClientsAllowCBOR gate is on.

var (
	// cborCodecs are the codecs of a clientset with ClientsAllowCBOR on
	// (rest.CodecFactoryForGeneratedClient).
	cborCodecs = serializer.NewCodecFactory(scheme.Scheme, serializer.WithSerializer(cborserializer.NewSerializerInfo))
	// cborStream decodes a watch event's envelope, as the stream serializer client-go uses.
	cborStream = cborserializer.NewSerializer(scheme.Scheme, scheme.Scheme, cborserializer.Transcode(false))
)

// objectDecoder decodes a watch event's object as client-go's embedded decoder does.
func objectDecoder(enc encoding) runtime.Decoder {
	if enc == encCBOR {
		return cborCodecs.UniversalDeserializer()
	}
	return scheme.Codecs.UniversalDeserializer()
}

// nextCBORFrame finds the first CBOR data item of b as client-go's CBOR framer does (a
// cbor.Decoder with its default options, which hands over the item without its leading
// self-described tag, hence the count of bytes read) and decodes its envelope.
func nextCBORFrame(b []byte) (int, string, []byte, error) {
	items := cbor.NewDecoder(bytes.NewReader(b))
	var item cbor.RawMessage
	if err := items.Decode(&item); err != nil {
		return 0, "", nil, err
	}
	var we metav1.WatchEvent
	if _, _, err := cborStream.Decode(item, nil, &we); err != nil {
		return 0, "", nil, err
	}
	return items.NumBytesRead(), we.Type, we.Object.Raw, nil
}

// cborErrorFrame is an ERROR event carrying st as kube-apiserver writes it in CBOR: the
// WatchEvent and its Status, each a self-described data item.
func cborErrorFrame(st *metav1.Status) ([]byte, error) {
	encoder := cborserializer.NewSerializer(scheme.Scheme, scheme.Scheme)
	var object, frame bytes.Buffer
	if err := encoder.Encode(st, &object); err != nil {
		return nil, err
	}
	if err := encoder.Encode(&metav1.WatchEvent{Type: "ERROR", Object: runtime.RawExtension{Raw: object.Bytes()}}, &frame); err != nil {
		return nil, err
	}
	return frame.Bytes(), nil
}

// encodeCBORStatus writes st as kube-apiserver answers a CBOR request with an error.
func encodeCBORStatus(st *metav1.Status, w io.Writer) error {
	return cborserializer.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(st, w)
}

func prefersCBOR(accept string) bool {
	return strings.HasPrefix(strings.TrimSpace(accept), "application/cbor")
}

var (
	allowCBOROnce sync.Once
	allowCBORErr  error
)

// allowCBOR turns client-go's ClientsAllowCBOR gate on for the process (what
// KUBE_FEATURE_ClientsAllowCBOR=true does), once a CBOR scenario needs a client that decodes
// CBOR. It changes nothing for clients that do not ask for CBOR.
func allowCBOR() error {
	allowCBOROnce.Do(func() {
		gates, ok := clientfeatures.FeatureGates().(interface {
			Set(clientfeatures.Feature, bool) error
		})
		if !ok {
			allowCBORErr = errors.New("client-go's feature gates were replaced; CBOR scenarios need ClientsAllowCBOR")
			return
		}
		if err := gates.Set(clientfeatures.ClientsAllowCBOR, true); err != nil {
			allowCBORErr = fmt.Errorf("turning on ClientsAllowCBOR: %w", err)
		}
	})
	return allowCBORErr
}
