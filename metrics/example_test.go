package metrics_test

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kretry/kretry/metrics"
	"github.com/kretry/kretry/transport"
)

// New registers kretry's collectors on a registry (in a controller-runtime
// manager pass ctrlmetrics.Registry, in a Kubernetes component
// legacyregistry.Registerer()); the Observer then goes into
// transport.Config. Here it is told directly what the transport reports for
// a watch resumed after a cut whose reopening was answered 503 once.
func Example() {
	registry := prometheus.NewRegistry()
	m, err := metrics.New(registry)
	if err != nil {
		panic(err)
	}
	watch := transport.VerbWatch
	m.ObserveAttempt(transport.AttemptEvent{Verb: watch, Outcome: transport.OutcomeSuccess, Code: 200})
	m.ObserveRetry(transport.RetryEvent{Verb: watch, Reason: transport.ReasonBrokenBody, Resume: true})
	m.ObserveAttempt(transport.AttemptEvent{Verb: watch, Outcome: transport.OutcomeServerError, Code: 503})
	m.ObserveRetry(transport.RetryEvent{Verb: watch, Reason: transport.ReasonServerError, Code: 503, Wait: 800 * time.Millisecond, Resume: true})
	m.ObserveAttempt(transport.AttemptEvent{Verb: watch, Outcome: transport.OutcomeSuccess, Code: 200})

	families, _ := registry.Gather()
	for _, family := range families {
		for _, sample := range family.GetMetric() {
			labels := ""
			for _, label := range sample.GetLabel() {
				labels += fmt.Sprintf(" %s=%s", label.GetName(), label.GetValue())
			}
			value := sample.GetCounter().GetValue()
			if h := sample.GetHistogram(); h != nil {
				value = h.GetSampleSum()
			}
			if value == 0 {
				continue // every counter's series start at 0
			}
			fmt.Printf("%s%s %g\n", family.GetName(), labels, value)
		}
	}
	// Output:
	// kretry_requests_total outcome=2xx verb=watch 2
	// kretry_requests_total outcome=5xx verb=watch 1
	// kretry_retries_total reason=5xx verb=watch 1
	// kretry_retries_total reason=broken-body verb=watch 1
	// kretry_retry_wait_seconds verb=watch 0.8
	// kretry_watch_resumes_total reason=5xx 1
	// kretry_watch_resumes_total reason=broken-body 1
}

// A process that talks to two clusters gives each cluster's transport its
// own Metrics, told apart by a constant label; both count into one
// registry.
func ExampleNewWithOptions() {
	registry := prometheus.NewRegistry()
	for _, cluster := range []string{"prod-eu-1", "prod-us-1"} {
		m, err := metrics.NewWithOptions(registry, metrics.Options{ConstLabels: prometheus.Labels{"cluster": cluster}})
		if err != nil {
			panic(err)
		}
		// cfg.Wrap(transport.Wrapper(transport.Config{Observer: m})) for that cluster's rest.Config;
		// here the transport's report of a give-up is made directly.
		m.ObserveGiveUp(transport.GiveUpEvent{Verb: transport.VerbList, Reason: transport.ReasonConnection})
	}
	families, _ := registry.Gather()
	for _, family := range families {
		if family.GetName() != "kretry_giveups_total" {
			continue
		}
		for _, sample := range family.GetMetric() {
			if v := sample.GetCounter().GetValue(); v != 0 {
				fmt.Println(sample.GetLabel()[0].GetName(), sample.GetLabel()[0].GetValue(), v)
			}
		}
	}
	// Output:
	// cluster prod-eu-1 1
	// cluster prod-us-1 1
}
