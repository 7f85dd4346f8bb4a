// Command controller-runtime is a controller-runtime manager with kretry under every client
// it makes: the cache's informers (streaming lists and watches), the client's reads, leader
// election and discovery alike, from one line on the rest.Config before the manager is built:
//
//	cfg := ctrl.GetConfigOrDie()
//	cfg.Wrap(transport.Wrapper(transport.Config{Observer: kretryObserver}))
//	mgr, err := ctrl.NewManager(cfg, ctrl.Options{...})
//
// Its reconciler on ConfigMaps counts what it reconciles. kretryObserver is kretry's metrics
// module (github.com/kretry/kretry/metrics) registered on controller-runtime's
// metrics.Registry, so that the manager's /metrics serves kretry_requests_total,
// kretry_retries_total and the rest beside controller-runtime's own, joined with
// metrics.ClientGoRetries, which adds kretry's retries to client-go's retry hook. That hook
// reaches /metrics as rest_client_request_retries_total{code,verb,host} only once
// metrics.RegisterRESTClientMetrics(metrics.MetricRequestRetry) has been called
// (controller-runtime v0.25 and later; this example does not call it, so its /metrics has no
// such series); controller-runtime v0.22 to v0.24 never serve it. kretry_retries_total counts
// kretry's retries either way.
//
// It is a module of its own so that the library's go.mod does not grow by controller-runtime
// and its dependencies. Run it against a cluster (read-only: it never writes):
//
//	go run . --kubeconfig ~/.kube/config --namespace default
//
// main_test.go runs the manager against the in-process demo server under faults;
// e2e_test.go (build tag e2e, KRETRY_E2E=1) runs a stock manager and one with kretry against
// a real kube-apiserver through a TCP fault proxy (random cuts) and an HTTP fault injector
// (a 503 burst), as `make e2e` does.
package main
