package watchretry

import (
	"encoding/json"
	"io"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	cbor "k8s.io/apimachinery/pkg/runtime/serializer/cbor/direct"

	"github.com/kretry/kretry/internal/frame"
	"github.com/kretry/kretry/internal/status"
)

// responseStatus reads the Status of a non-200 answer to a resume, closing
// it. An answer that carries no Status (a text/plain 429, a proxy's HTML
// page) gets one made for its code, as client-go would make it.
func responseStatus(resp *http.Response) *metav1.Status {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, status.BodyLimit))
	_ = resp.Body.Close()
	if st, ok := status.Parse(resp.Header.Get("Content-Type"), body); ok {
		return st
	}
	generic := apierrors.NewGenericServerResponse(resp.StatusCode, "watch", schema.GroupResource{}, "", string(body), 0, false)
	st := generic.ErrStatus
	st.APIVersion, st.Kind = "v1", "Status"
	return &st
}

// errorEventStatus decodes the Status of a whole ERROR frame raw in the
// stream encoding enc (JSON, protobuf or CBOR). ERROR events are rare: this
// is the slow, general decoding, not the scanner's.
func errorEventStatus(enc frame.Encoding, raw []byte) (*metav1.Status, bool) {
	var event metav1.WatchEvent
	contentType := "application/json"
	switch enc {
	case frame.JSON:
		if json.Unmarshal(raw, &event) != nil {
			return nil, false
		}
	case frame.Protobuf:
		if len(raw) < 4 || event.Unmarshal(raw[4:]) != nil {
			return nil, false
		}
	case frame.CBOR:
		if cbor.Unmarshal(raw, &event) != nil {
			return nil, false
		}
		contentType = "application/cbor"
	default:
		return nil, false
	}
	return status.Parse(contentType, event.Object.Raw)
}
