package watchretry

import (
	"io"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

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

// responseError is a non-200 answer to a resume as an error that keeps the
// server's Status reachable with apierrors helpers.
func responseError(resp *http.Response) error {
	return &apierrors.StatusError{ErrStatus: *responseStatus(resp)}
}
