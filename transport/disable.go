package transport

import (
	"context"
	"net/http"
	"os"
	"strconv"
)

// DisableEnv is the environment variable that turns kretry off in a
// running fleet without a rebuild. When it holds a value strconv.ParseBool
// reads as true ("1", "t", "T", "true", "TRUE", "True"), New and Wrapper
// return the next RoundTripper itself: no request is classified, retried,
// resumed or observed, exactly as if kretry were not there.
//
// It is read once per transport, when New builds it; with
// rest.Config.Wrap that is when client-go builds the client's transport
// (kubernetes.NewForConfig, rest.HTTPClientFor, a manager's start), so
// setting it takes effect at the process's next start, and changing it
// later changes nothing for the clients already built. Any other value,
// unparsable ones included, leaves kretry on.
const DisableEnv = "KRETRY_DISABLE"

// disabledByEnv reports whether DisableEnv turns kretry off now.
func disabledByEnv() bool {
	off, err := strconv.ParseBool(os.Getenv(DisableEnv))
	return err == nil && off
}

// withoutRetryKey is the context key of WithoutRetry.
type withoutRetryKey struct{}

// WithoutRetry returns a copy of ctx under which kretry lets every request
// pass through untouched: it is sent once, its answer (a 503, a broken
// watch stream) reaches the caller as the server gave it, and the Observer
// hears nothing of it. Pass it to one call, as any context:
//
//	pods, err := clientset.CoreV1().Pods(ns).List(transport.WithoutRetry(ctx), opts)
//
// To take a whole client out of kretry instead, build it from a copy of
// the rest.Config made before Wrap (rest.CopyConfig).
func WithoutRetry(ctx context.Context) context.Context {
	return context.WithValue(ctx, withoutRetryKey{}, true)
}

// retryOff reports whether req's context came from WithoutRetry.
func retryOff(req *http.Request) bool {
	off, _ := req.Context().Value(withoutRetryKey{}).(bool)
	return off
}
