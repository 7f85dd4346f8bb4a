package main

import (
	"context"
	"net/http"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	kretrymetrics "github.com/kretry/kretry/metrics"
	"github.com/kretry/kretry/transport"
)

// kretryObserver counts what kretry does (kretry_requests_total, kretry_retries_total,
// kretry_watch_resumes_total, kretry_giveups_total, kretry_retry_wait_seconds,
// kretry_budget_refusals_total) on controller-runtime's metrics.Registry, which the
// manager's /metrics serves, and adds kretry's retries and resumes to client-go's retry hook:
// served as rest_client_request_retries_total{code,verb,host} only after
// metrics.RegisterRESTClientMetrics(metrics.MetricRequestRetry) (controller-runtime v0.25 and
// later), which this example does not call; earlier versions never serve it.
var kretryObserver = transport.JoinObservers(mustMetrics(kretrymetrics.New(metrics.Registry)), kretrymetrics.ClientGoRetries())

func mustMetrics(m *kretrymetrics.Metrics, err error) *kretrymetrics.Metrics {
	if err != nil {
		panic(err)
	}
	return m
}

// options configure newManager.
type options struct {
	// namespace is the one namespace the manager caches and reconciles.
	namespace string
	// metricsAddr is where /metrics is served; "0" turns it off.
	metricsAddr string
	// withoutKretry builds a stock manager, for comparisons.
	withoutKretry bool
	// above, if set, wraps the transport above kretry (tests count what client-go sends).
	above func(http.RoundTripper) http.RoundTripper
}

// newManager builds a manager on cfg, with kretry under every client it makes, and a
// ConfigMap reconciler.
func newManager(cfg *rest.Config, opts options) (ctrl.Manager, *reconciler, error) {
	cfg = rest.CopyConfig(cfg)
	if !opts.withoutKretry {
		cfg.Wrap(transport.Wrapper(transport.Config{Observer: kretryObserver})) // the whole adoption
	}
	if opts.above != nil {
		cfg.Wrap(opts.above)
	}
	skipNameValidation := true // tests run more than one manager in a process
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{opts.namespace: {}}},
		Metrics:                metricsserver.Options{BindAddress: opts.metricsAddr},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: &skipNameValidation},
	})
	if err != nil {
		return nil, nil, err
	}
	r := &reconciler{client: mgr.GetClient()}
	if err := ctrl.NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Complete(r); err != nil {
		return nil, nil, err
	}
	return mgr, r, nil
}

// reconciler reads each ConfigMap it is asked about from the manager's cache, as a
// controller does before it acts, and counts its work.
type reconciler struct {
	client     client.Client
	reconciles atomic.Int64
	notFound   atomic.Int64 // deleted by the time it was reconciled
}

// Reconcile implements reconcile.Reconciler.
func (r *reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	r.reconciles.Add(1)
	var cm corev1.ConfigMap
	if err := r.client.Get(ctx, req.NamespacedName, &cm); err != nil {
		if client.IgnoreNotFound(err) == nil {
			r.notFound.Add(1)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, nil
}
