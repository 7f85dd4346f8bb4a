package demoserver

import (
	"bytes"
	"mime"
	"net/http"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
)

// The media types the server speaks; the same two the typed and dynamic clients ask for.
const (
	mediaTypeJSON     = runtime.ContentTypeJSON
	mediaTypeProtobuf = runtime.ContentTypeProtobuf
)

// codec encodes responses in one negotiated media type, with client-go's own serializers.
type codec struct {
	mediaType string
	info      runtime.SerializerInfo
	object    runtime.Encoder // objects and lists, as v1
}

// negotiate picks JSON or protobuf from the Accept header, in the client's order of
// preference, as the apiserver does; ok is false when neither is acceptable.
// Parameterised types such as aggregated discovery (`;as=APIGroupDiscoveryList`) are not
// served, so the client falls back to the plain type it lists after them.
func negotiate(accept string) (c codec, ok bool) {
	if strings.TrimSpace(accept) == "" {
		return newCodec(mediaTypeJSON), true
	}
	type candidate struct {
		mediaType string
		quality   float64
	}
	var best *candidate
	for _, part := range strings.Split(accept, ",") {
		mediaType, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		quality := 1.0
		if q, found := params["q"]; found {
			quality = parseQuality(q)
			delete(params, "q")
		}
		delete(params, "stream") // "application/json;stream=watch" is still JSON
		if len(params) > 0 || quality == 0 {
			continue
		}
		var served string
		switch mediaType {
		case mediaTypeJSON, "application/*", "*/*":
			served = mediaTypeJSON
		case mediaTypeProtobuf:
			served = mediaTypeProtobuf
		default:
			continue
		}
		if best == nil || quality > best.quality {
			best = &candidate{served, quality}
		}
	}
	if best == nil {
		return codec{}, false
	}
	return newCodec(best.mediaType), true
}

// parseQuality reads a q parameter; a malformed one counts as 0, so that type is skipped.
func parseQuality(q string) float64 {
	value, err := strconv.ParseFloat(q, 64)
	if err != nil || value < 0 {
		return 0
	}
	return min(value, 1)
}

func newCodec(mediaType string) codec {
	for _, info := range scheme.Codecs.SupportedMediaTypes() {
		if info.MediaType == mediaType {
			return codec{
				mediaType: mediaType,
				info:      info,
				object:    scheme.Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion),
			}
		}
	}
	panic("demoserver: client-go's scheme has no serializer for " + mediaType)
}

// watchContentType is the Content-Type of a watch response: plain "application/json" for
// JSON, the stream variant for protobuf, as kube-apiserver sends them.
func (c codec) watchContentType() string {
	if c.mediaType == mediaTypeJSON {
		return mediaTypeJSON
	}
	return c.mediaType + ";stream=watch"
}

// encode serializes obj. A stored ConfigMap is shared by every stream, and client-go's
// versioning encoder sets and restores the TypeMeta of what it encodes, so it encodes a
// shallow copy.
func (c codec) encode(obj runtime.Object) ([]byte, error) {
	if cm, ok := obj.(*corev1.ConfigMap); ok {
		own := *cm
		obj = &own
	}
	return runtime.Encode(c.object, obj)
}

// frame serializes one watch event as one frame of the stream: a JSON object followed by a
// newline, or a 4-byte big-endian length and a raw metav1.WatchEvent. The event's object is
// embedded in its own (enveloped) encoding, as kube-apiserver embeds it.
func (c codec) frame(eventType watch.EventType, obj runtime.Object) ([]byte, error) {
	embedded, err := c.encode(obj)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	framed := c.info.StreamSerializer.Framer.NewFrameWriter(&buf)
	event := &metav1.WatchEvent{Type: string(eventType), Object: runtime.RawExtension{Raw: embedded}}
	if err := c.info.StreamSerializer.Serializer.Encode(event, framed); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeObject writes a whole response.
func (c codec) writeObject(w http.ResponseWriter, code int, obj runtime.Object) {
	body, err := c.encode(obj)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", c.mediaType)
	w.WriteHeader(code)
	_, _ = w.Write(body)
}
