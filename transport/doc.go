// Package transport is kretry's entry point: an http.RoundTripper that
// client-go users plug in with one line,
//
//	cfg.Wrap(transport.Wrapper(transport.Config{})) // cfg is a *rest.Config
//
// after which every LIST and WATCH made from that config is retried and
// resumed: typed clientsets, the dynamic client, informers, hand-written
// rest calls.
//
// The package only composes. It classifies each request (classify) and
// routes it: WATCH requests to package watchretry, which resumes broken
// streams from the last resourceVersion; LIST requests (and, if configured,
// single-object GETs) to package listretry, which retries before the body,
// streams a JSON or protobuf list to the caller as it arrives and resumes a
// body broken mid-read at the list's exact resourceVersion (see
// Config.ListBufferSize for the bodies it holds whole instead). Everything else (any other method, upgrades, log, exec, attach,
// port-forward, proxy, paths outside the API) passes through untouched and
// is never retried. The decisions themselves live in internal/policy.
//
// rest.Config.Wrap places kretry below client-go's authentication,
// user-agent and impersonation wrappers and above TLS, so requests arrive
// with their credentials set. kretry never reads or changes them, and
// leaves response headers (Audit-Id, Warning) as the server sent them; the
// one exception is Retry-After, removed from an answer kretry gives up on so
// that client-go's own retries do not multiply kretry's.
//
// What kretry does is observable three ways. Config.Observer hears every
// attempt, retry, watch resume, give-up and budget refusal, and, if it is
// a ListResumeObserver, what every LIST body resume came to (package
// github.com/kretry/kretry/metrics turns them into Prometheus metrics).
// Logs go to klog.FromContext(req.Context()), the logger client-go callers
// already configure: V(2) one line per give-up, per watch resume and per
// LIST body resume, V(4)
// one per attempt and per retry, with the path, reason, counts, durations
// and a watch's resume resourceVersion, never a header value, a query or
// a body.
//
// Config.RetryBudget bounds the load one transport's retries add (see
// RetryBudget for what spends it and why watch resumes do not); a retry it
// refuses gives up at once, as a retry past its window does.
//
// Giving up never makes things worse than client-go alone. A watch resume
// that gives up (an apiserver down longer than InternalErrorWindow, a 401 or
// 403, another 4xx, a 5xx answer past the window, the caller's
// timeoutSeconds) ends the stream as a clean close after the last whole
// event, exactly as the cut would have ended it: client-go re-watches from
// its resourceVersion instead of relisting. A 410 Expired is handed over as
// an ERROR event, and so is the last ERROR 5xx of a server that answered
// the watch but sent them for a whole window: client-go then relists. A
// LIST or WATCH that gives up on connection failures returns a
// *GiveUpError, which client-go does not retry again.
package transport
