package reflector

import (
	"errors"
	"io"
	"net"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// isGone reports whether err says the resourceVersion asked for cannot be served: 410
// Expired (or Gone, from servers before 1.18), or ResourceVersionTooLarge (a server whose
// cache lags the RV we got from another one). Either way, ask again at an RV it has.
func isGone(err error) bool {
	return apierrors.IsResourceExpired(err) || apierrors.IsGone(err) ||
		apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge)
}

// refusesWatchList reports whether err is a server saying that it does not serve
// watch-lists here: 422 or 400 (sendInitialEvents or resourceVersionMatch not allowed on a
// watch: a server without the WatchList feature) or 405 (the resource cannot be watched).
func refusesWatchList(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsMethodNotSupported(err)
}

// isTransient reports whether a failure is one a kretry transport absorbs, so seeing it
// means the transport is not installed (or gave up).
func isTransient(o outcome) bool {
	if o.result == broke {
		return true
	}
	err := o.err
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := status.Status().Code
		return code == 429 || (code >= 500 && code != 501)
	}
	var netErr net.Error
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		utilnet.IsProbableEOF(err) || utilnet.IsConnectionRefused(err) ||
		utilnet.IsConnectionReset(err) || (errors.As(err, &netErr) && netErr.Timeout())
}
