package listretry

import (
	"bytes"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/kretry/kretry/internal/harness/listbody"
)

func encodeProtobuf(t *testing.T, obj runtime.Object) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(obj, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestScanHead walks the head scanners over every shape of body they meet:
// what streams (with its resourceVersion and continue), what is held, and
// when the head is too short to say, at every length of its prefix.
func TestScanHead(t *testing.T) {
	pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "p", GenerateName: "p-", ResourceVersion: "7"}}
	noRV := &corev1.ConfigMapList{TypeMeta: metav1.TypeMeta{Kind: "ConfigMapList", APIVersion: "v1"}}
	tests := []struct {
		name string
		scan func([]byte) (listMeta, verdict)
		body []byte
		want verdict
		meta listMeta
	}{
		{"JSON list", scanJSON, listbody.ConfigMaps(0, 3, "", "application/json"), stream, listMeta{resourceVersion: "42"}},
		{"JSON page", scanJSON, listbody.ConfigMaps(0, 3, "next", "application/json"), stream, listMeta{resourceVersion: "42", hasContinue: true}},
		{"JSON empty list", scanJSON, listbody.ConfigMaps(0, 0, "", "application/json"), stream, listMeta{resourceVersion: "42"}},
		{"JSON with spaces", scanJSON, []byte(` { "kind" : "PodList" , "metadata" : { "resourceVersion" : "9" } , "items" : [ ] }`), stream, listMeta{resourceVersion: "9"}},
		{"custom resource JSON: items first", scanJSON, []byte(`{"apiVersion":"x/v1","items":[],"kind":"WList","metadata":{"resourceVersion":"9"}}`), hold, listMeta{}},
		{"Table: columnDefinitions after metadata", scanJSON, []byte(`{"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"9"},"columnDefinitions":[]}`), hold, listMeta{}},
		{"single object JSON", scanJSON, []byte(`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","resourceVersion":"7"},"spec":{}}`), hold, listMeta{}},
		{"JSON list without a resourceVersion", scanJSON, []byte(`{"kind":"XList","metadata":{},"items":[]}`), hold, listMeta{}},
		{"not an object", scanJSON, []byte(`["items"]`), hold, listMeta{}},
		{"not JSON", scanJSON, []byte(`<html>`), hold, listMeta{}},
		{"protobuf list", scanProtobuf, listbody.ConfigMaps(0, 3, "", listbody.Protobuf), stream, listMeta{resourceVersion: "42"}},
		{"protobuf page", scanProtobuf, listbody.ConfigMaps(0, 3, "next", listbody.Protobuf), stream, listMeta{resourceVersion: "42", hasContinue: true}},
		{"protobuf empty list", scanProtobuf, listbody.ConfigMaps(0, 0, "", listbody.Protobuf), stream, listMeta{resourceVersion: "42"}},
		{"protobuf list without a resourceVersion", scanProtobuf, encodeProtobuf(t, noRV), hold, listMeta{}},
		{"protobuf single object", scanProtobuf, encodeProtobuf(t, pod), hold, listMeta{}},
		{"protobuf magic missing", scanProtobuf, []byte("k9s\x00\x0a\x00"), hold, listMeta{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			meta, got := tt.scan(tt.body)
			if got != tt.want || meta != tt.meta {
				t.Fatalf("scan = %+v, %v; want %+v, %v", meta, got, tt.meta, tt.want)
			}
			// Any shorter head says the same or asks for more, never something else.
			for n := range len(tt.body) {
				if meta, got := tt.scan(tt.body[:n]); got != needMore && (got != tt.want || meta != tt.meta) {
					t.Fatalf("head of %d bytes: %+v, %v; want %v or more bytes", n, meta, got, tt.want)
				}
			}
		})
	}
}
