package reflector

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestClassify(t *testing.T) {
	tooLarge := apierrors.NewTimeoutError("too large resource version", 1)
	tooLarge.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge}}
	for _, tc := range []struct {
		name      string
		err       error
		gone      bool
		transient bool
	}{
		{"400", apierrors.NewBadRequest("x"), false, false},
		{"405", apierrors.NewMethodNotSupported(configMaps, "watch"), false, false},
		{"410 Expired", apierrors.NewResourceExpired("too old"), true, false},
		{"410 Gone", apierrors.NewGone("gone"), true, false},
		{"ResourceVersionTooLarge", tooLarge, true, true},
		{"wrapped 410", fmt.Errorf("list: %w", apierrors.NewResourceExpired("x")), true, false},
		{"429", apierrors.NewTooManyRequests("slow", 1), false, true},
		{"500", apierrors.NewInternalError(errors.New("leader changed")), false, true},
		{"503", apierrors.NewServiceUnavailable("x"), false, true},
		{"504", apierrors.NewTimeoutError("x", 1), false, true},
		{"501", apierrors.NewGenericServerResponse(501, "GET", configMaps, "", "", 0, false), false, false},
		{"403", apierrors.NewForbidden(configMaps, "", errors.New("no")), false, false},
		{"422", apierrors.NewInvalid(configMaps.WithVersion("v1").GroupVersion().WithKind("X").GroupKind(), "", nil), false, false},
		{"EOF", io.EOF, false, true},
		{"unexpected EOF", fmt.Errorf("watch: %w", io.ErrUnexpectedEOF), false, true},
		{"connection refused", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, false, true},
		{"connection reset", &net.OpError{Op: "read", Err: syscall.ECONNRESET}, false, true},
		{"GOAWAY", errors.New("http2: server sent GOAWAY and closed the connection"), false, true},
		{"timeout", &net.DNSError{IsTimeout: true}, false, true},
		{"TLS certificate", errors.New("x509: certificate signed by unknown authority"), false, false},
		{"context", context.Canceled, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := isGone(tc.err); got != tc.gone {
				t.Errorf("isGone = %v, want %v", got, tc.gone)
			}
			if got := isTransient(outcome{result: failed, err: tc.err}); got != tc.transient {
				t.Errorf("isTransient = %v, want %v", got, tc.transient)
			}
		})
	}
	for _, tc := range []struct {
		name    string
		err     error
		refuses bool
	}{
		{"422", apierrors.NewInvalid(configMaps.WithVersion("v1").GroupVersion().WithKind("ListOptions").GroupKind(), "", nil), true},
		{"400", apierrors.NewBadRequest("sendInitialEvents"), true},
		{"405", apierrors.NewMethodNotSupported(configMaps, "watch"), true},
		{"wrapped 422", fmt.Errorf("watch: %w", apierrors.NewInvalid(configMaps.WithVersion("v1").GroupVersion().WithKind("X").GroupKind(), "", nil)), true},
		{"401", apierrors.NewUnauthorized("expired"), false},
		{"403", apierrors.NewForbidden(configMaps, "", errors.New("no")), false},
		{"404", apierrors.NewNotFound(configMaps, "x"), false},
		{"410", apierrors.NewResourceExpired("x"), false},
		{"500", apierrors.NewInternalError(errors.New("x")), false},
		{"EOF", io.EOF, false},
	} {
		if got := refusesWatchList(tc.err); got != tc.refuses {
			t.Errorf("%s: refusesWatchList = %v, want %v", tc.name, got, tc.refuses)
		}
	}
	if !isTransient(outcome{result: broke, err: errors.New("stream ended early")}) {
		t.Errorf("a broken stream is transient")
	}
}
