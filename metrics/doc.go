// Package metrics exports what kretry does as Prometheus metrics, and
// reports kretry's retries into client-go's own retry metric.
//
// It is a Go module of its own (github.com/kretry/kretry/metrics), so that
// kretry's core never imports Prometheus: the core only knows the
// dependency-free [transport.Observer], which [New] implements.
//
//	m, err := metrics.New(registerer) // any prometheus.Registerer
//	if err != nil {
//		return err
//	}
//	cfg.Wrap(transport.Wrapper(transport.Config{
//		Observer: transport.JoinObservers(m, metrics.ClientGoRetries()),
//	}))
//
// The registerer is whichever registry your process already serves:
//
//	ctrlmetrics.Registry            // sigs.k8s.io/controller-runtime/pkg/metrics: a controller-runtime manager's /metrics
//	legacyregistry.Registerer()     // k8s.io/component-base/metrics/legacyregistry: a Kubernetes component's /metrics
//	prometheus.DefaultRegisterer    // client_golang's default registry
//
// The metrics, all in base units, labelled only from closed, small sets
// (never a URL, namespace, object name, query or header):
//
//	kretry_requests_total{verb,outcome}   attempts sent to the API server, by answer class (2xx 3xx 4xx 429 5xx connection canceled)
//	kretry_retries_total{verb,reason}     retries of a request's establishment, and resumes (watch streams, LIST bodies)
//	kretry_watch_resumes_total{reason}    reopenings of an established watch stream at its resume point
//	kretry_giveups_total{verb,reason}     failures kretry stopped retrying and handed over (or ended a watch cleanly on)
//	kretry_retry_wait_seconds{verb}       how long kretry waited before each retry or resume (histogram)
//	kretry_budget_refusals_total{verb}    retries the retry budget refused
//	kretry_list_resumes_total{outcome}    LIST bodies broken mid-read and asked for again at their resourceVersion (resumed mismatch gone gave-up)
//	kretry_list_resume_skipped_bytes_total  bytes of those re-requests read again and checked against what was delivered
//	kretry_initial_state_fetches_total{verb}  initial-state fetches callers sent: a LIST's first page (list), a watch with sendInitialEvents=true (watch)
//	kretry_build_info{version}            always 1; version is the library's module version in the binary ([LibraryVersion])
//	kretry_enabled                        1 when kretry is on, 0 when KRETRY_DISABLE turns it off ([transport.CurrentState], read at each scrape)
//
// With kretry off every counter stays at 0, as it does when nothing fails:
// kretry_enabled tells the two apart (the KretryDisabled alert and the
// dashboard's first panel read it).
//
// verb is list, watch or get; reason is 429, 5xx, connection, broken-body,
// error-event, invalid-frame, stall, expired-resume (a 410 answering a watch
// resume, retried on a new connection) or deadline (give-ups only).
//
// In every kretry_* metric, verb is the kind of request kretry retried (list,
// watch or get), not an HTTP method. [NewWithOptions] adds constant labels to
// every series (Options.ConstLabels, e.g. cluster="prod-eu-1"): one Metrics
// per cluster a process talks to, on one registry.
//
// Every counter's series for the label values kretry reports are served from
// the start, at 0, so that increase() and rate() see the first event; the
// wait histogram appears with its first observation.
//
// [ClientGoRetries] also counts each kretry retry and resume into
// client-go's k8s.io/client-go/tools/metrics.RequestRetry, the hook behind
// rest_client_request_retries_total{code,verb,host} (the labels that
// component-base and controller-runtime give it; verb holds the HTTP method,
// GET for every kretry retry). Who serves that counter:
//
//   - a Kubernetes component (component-base's restclient metrics) does;
//   - controller-runtime v0.25 and later only after
//     metrics.RegisterRESTClientMetrics(metrics.MetricRequestRetry)
//     (sigs.k8s.io/controller-runtime/pkg/metrics), before the manager starts;
//   - controller-runtime v0.22 to v0.24 never: they register only
//     rest_client_requests_total, and client-go takes the first registration
//     only, so ClientGoRetries counts into a no-op there. Use
//     kretry_retries_total.
//
// That counter then mixes client-go's own retries (a GET whose error looks
// like EOF or a reset, an answer with Retry-After; kretry hides both from
// client-go while it retries) with kretry's retries and watch resumes, which
// client-go never sees as requests. Its code label is the HTTP status that led
// to the retry, or "<error>" where client-go would write it (a connection or
// stream break); host is the API server's host:port, as client-go labels it.
package metrics
