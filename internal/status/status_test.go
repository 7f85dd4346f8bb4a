package status

import (
	"bytes"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	cborserializer "k8s.io/apimachinery/pkg/runtime/serializer/cbor"
)

// protobufStatus encodes st as the API server does for
// application/vnd.kubernetes.protobuf: "k8s\0" and a runtime.Unknown.
func protobufStatus(t *testing.T, st *metav1.Status) []byte {
	t.Helper()
	raw, err := st.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	unknown := runtime.Unknown{
		TypeMeta:    runtime.TypeMeta{APIVersion: "v1", Kind: st.Kind},
		Raw:         raw,
		ContentType: "application/vnd.kubernetes.protobuf",
	}
	body, err := unknown.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte("k8s\x00"), body...)
}

// cborStatusBody encodes st as the API server does for application/cbor.
func cborStatusBody(t *testing.T, st *metav1.Status) []byte {
	t.Helper()
	var body bytes.Buffer
	if err := cborserializer.NewSerializer(nil, nil).Encode(st, &body); err != nil {
		t.Fatal(err)
	}
	return body.Bytes()
}

func TestParse(t *testing.T) {
	tooMany := &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Reason: metav1.StatusReasonTooManyRequests, Code: 429,
		Details: &metav1.StatusDetails{RetryAfterSeconds: 7},
	}
	notStatus := &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Pod"}}
	jsonStatus := []byte(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too many requests","reason":"TooManyRequests","details":{"retryAfterSeconds":7},"code":429}`)
	tests := []struct {
		name        string
		contentType string
		body        []byte
		wantCode    int32
		wantOK      bool
	}{
		{"JSON", "application/json", jsonStatus, 429, true},
		{"JSON with charset", "application/json; charset=utf-8", jsonStatus, 429, true},
		{"protobuf", "application/vnd.kubernetes.protobuf", protobufStatus(t, tooMany), 429, true},
		{"protobuf, not a Status", "application/vnd.kubernetes.protobuf", protobufStatus(t, notStatus), 0, false},
		{"protobuf, truncated", "application/vnd.kubernetes.protobuf", protobufStatus(t, tooMany)[:12], 0, false},
		{"CBOR", "application/cbor", cborStatusBody(t, tooMany), 429, true},
		{"CBOR, not a Status", "application/cbor", cborStatusBody(t, notStatus), 0, false},
		{"CBOR, truncated", "application/cbor", cborStatusBody(t, tooMany)[:20], 0, false},
		{"CBOR body, JSON content type", "application/json", cborStatusBody(t, tooMany), 0, false},
		{"inflight limiter's text/plain", "text/plain; charset=utf-8", []byte("Too many requests, please try again later.\n"), 0, false},
		{"JSON body, text content type", "text/plain", jsonStatus, 0, false},
		{"HTML from a proxy", "text/html", []byte("<html><body>502 Bad Gateway</body></html>"), 0, false},
		{"JSON, not a Status", "application/json", []byte(`{"kind":"PodList","items":[]}`), 0, false},
		{"JSON, truncated", "application/json", jsonStatus[:40], 0, false},
		{"no content type", "", jsonStatus, 0, false},
		{"empty", "application/json", nil, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, ok := Parse(tt.contentType, tt.body)
			if ok != tt.wantOK {
				t.Fatalf("Parse ok = %v, want %v", ok, tt.wantOK)
			}
			if ok && st.Code != tt.wantCode {
				t.Errorf("Code = %d, want %d", st.Code, tt.wantCode)
			}
			if ok && (st.Reason != metav1.StatusReasonTooManyRequests || st.Details == nil || st.Details.RetryAfterSeconds != 7) {
				t.Errorf("decoded %+v", st)
			}
		})
	}
	if !bytes.HasPrefix(protobufStatus(t, tooMany), protobufPrefix) {
		t.Fatal("test encoding lacks the protobuf prefix")
	}
}

func TestRetryAfter(t *testing.T) {
	withSeconds := func(s int32) *metav1.Status {
		return &metav1.Status{Details: &metav1.StatusDetails{RetryAfterSeconds: s}}
	}
	tests := []struct {
		name   string
		status *metav1.Status
		want   time.Duration
		ok     bool
	}{
		{"nil", nil, 0, false},
		{"no details", &metav1.Status{}, 0, false},
		{"zero", withSeconds(0), 0, false},
		{"negative", withSeconds(-3), 0, false},
		{"seconds", withSeconds(7), 7 * time.Second, true},
		{"largest int32", withSeconds(1<<31 - 1), (1<<31 - 1) * time.Second, true},
	}
	for _, tt := range tests {
		got, ok := RetryAfter(tt.status)
		if got != tt.want || ok != tt.ok {
			t.Errorf("%s: RetryAfter = %v, %v; want %v, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}
