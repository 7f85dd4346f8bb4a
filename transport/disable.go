package transport

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"

	"k8s.io/klog/v2"
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
// later changes nothing for the clients already built. A value ParseBool
// reads as false leaves kretry on; any other value ("yes", "off") leaves
// it on too, and each build logs an error line naming the value.
//
// Every build logs one line at klog's level 0, through klog.Background():
// "kretry: on" or "kretry: off", with why (see CurrentState).
const DisableEnv = "KRETRY_DISABLE"

// State is whether New builds kretry's transport or passes requests
// straight through, and why. CurrentState reads it as New does.
type State struct {
	// On is true when New builds kretry's transport, false when it
	// returns the next RoundTripper itself.
	On bool
	// Why is what decided, in words for a log line or a metric's reader:
	// "KRETRY_DISABLE is not set", "KRETRY_DISABLE=1",
	// `KRETRY_DISABLE="yes" is not true or false: ignored`.
	Why string
	// Value is DisableEnv's value, "" when it is not set.
	Value string
	// Unrecognised is true when Value is set but strconv.ParseBool cannot
	// read it: kretry stays on, and New logs an error line naming it.
	Unrecognised bool
}

// CurrentState reads DisableEnv now, as New reads it when it builds a
// transport: what a wrapper built now would do. The metrics module's
// kretry_enabled gauge and kretry-proxy's start lines report it.
func CurrentState() State {
	value, set := os.LookupEnv(DisableEnv)
	if !set || value == "" {
		return State{On: true, Why: DisableEnv + " is not set"}
	}
	off, err := strconv.ParseBool(value)
	if err != nil {
		return State{On: true, Value: value, Unrecognised: true,
			Why: fmt.Sprintf("%s=%q is not true or false: ignored", DisableEnv, value)}
	}
	return State{On: !off, Value: value, Why: DisableEnv + "=" + value}
}

// builtState is CurrentState, logged: the one line a transport's build
// writes, at klog's level 0 (an error line for a value it cannot read).
func builtState() State {
	state := CurrentState()
	logger := klog.Background()
	switch {
	case state.Unrecognised:
		logger.Error(nil, "kretry: on: "+state.Why, "want", "1, t, T, true, TRUE or True to turn kretry off; 0, f, F, false, FALSE or False to leave it on")
	case state.On:
		logger.Info("kretry: on", "why", state.Why)
	default:
		logger.Info("kretry: off: requests pass through untouched", "why", state.Why)
	}
	return state
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
