package metrics

import (
	"context"
	"strconv"

	clientgometrics "k8s.io/client-go/tools/metrics"

	"github.com/kretry/kretry/transport"
)

// ClientGoRetries returns a transport.Observer that counts every kretry
// retry and watch resume into client-go's retry hook,
// k8s.io/client-go/tools/metrics.RequestRetry (rest_client_request_retries_total
// once a registry such as controller-runtime's or component-base's has
// registered it). The hook is read at each retry, so registering it after
// the transport is built works. See the package doc for what that counter
// then mixes.
func ClientGoRetries() transport.Observer { return clientGoRetries{} }

// ClientGoRetriesTo is ClientGoRetries reporting into metric instead of the
// global hook, for tests and for programs that keep their own.
func ClientGoRetriesTo(metric clientgometrics.RetryMetric) transport.Observer {
	return clientGoRetries{metric: metric}
}

type clientGoRetries struct {
	metric clientgometrics.RetryMetric // nil: clientgometrics.RequestRetry at each call
}

func (c clientGoRetries) ObserveRetry(e transport.RetryEvent) {
	metric := c.metric
	if metric == nil {
		metric = clientgometrics.RequestRetry
	}
	// client-go labels a retry without an answer "<error>"; only GETs are retried.
	code := "<error>"
	if e.Code != 0 {
		code = strconv.Itoa(e.Code)
	}
	metric.IncrementRetry(context.Background(), code, "GET", e.Host)
}

func (clientGoRetries) ObserveAttempt(transport.AttemptEvent)      {}
func (clientGoRetries) ObserveGiveUp(transport.GiveUpEvent)        {}
func (clientGoRetries) ObserveBudgetRefusal(transport.BudgetEvent) {}
