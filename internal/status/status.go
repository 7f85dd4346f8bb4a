package status

import (
	"bytes"
	"encoding/json"
	"mime"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	cborserializer "k8s.io/apimachinery/pkg/runtime/serializer/cbor"

	"github.com/kretry/kretry/internal/policy"
)

// BodyLimit bounds how much of an error answer is read to find its Status.
// API server Status bodies are a few hundred bytes.
const BodyLimit = 64 << 10

// protobufPrefix starts every protobuf-encoded Kubernetes object.
var protobufPrefix = []byte("k8s\x00")

// cborStatus decodes a CBOR Status (kube-apiserver's answer to a client that
// accepts application/cbor) as client-go does: apimachinery's CBOR serializer
// over a scheme that knows metav1.Status.
var cborStatus = func() runtime.Decoder {
	scheme := runtime.NewScheme()
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	return cborserializer.NewSerializer(scheme, scheme)
}()

// Parse decodes body as a metav1.Status if it is one (JSON, protobuf or
// CBOR). It reports false for anything else: a text/plain 429 from the
// inflight limiter, an HTML error page from a proxy, a truncated body.
func Parse(contentType string, body []byte) (*metav1.Status, bool) {
	if bytes.HasPrefix(body, protobufPrefix) {
		var unknown runtime.Unknown
		if err := unknown.Unmarshal(body[len(protobufPrefix):]); err != nil || unknown.Kind != "Status" {
			return nil, false
		}
		status := &metav1.Status{}
		if err := status.Unmarshal(unknown.Raw); err != nil {
			return nil, false
		}
		return status, true
	}
	mediaType, _, err := mime.ParseMediaType(contentType)
	if err == nil && mediaType == "application/cbor" {
		status := &metav1.Status{}
		if _, _, err := cborStatus.Decode(body, nil, status); err != nil || status.Kind != "Status" {
			return nil, false
		}
		return status, true
	}
	if err != nil || mediaType != "application/json" {
		return nil, false
	}
	status := &metav1.Status{}
	if err := json.Unmarshal(body, status); err != nil || status.Kind != "Status" {
		return nil, false
	}
	return status, true
}

// RetryAfter is the wait a Status asks for in details.retryAfterSeconds.
func RetryAfter(status *metav1.Status) (time.Duration, bool) {
	if status == nil || status.Details == nil {
		return 0, false
	}
	return policy.SecondsToDuration(int64(status.Details.RetryAfterSeconds))
}
