package metrics

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kretry/kretry/transport"
)

// Metrics is a transport.Observer that counts into Prometheus collectors.
// Create it with New; it is safe for concurrent use.
type Metrics struct {
	requests       *prometheus.CounterVec
	retries        *prometheus.CounterVec
	resumes        *prometheus.CounterVec
	giveUps        *prometheus.CounterVec
	retryWait      *prometheus.HistogramVec
	budgetRefusals *prometheus.CounterVec
	listResumes    *prometheus.CounterVec
	listSkipped    *prometheus.CounterVec // no labels: no series before the first resume
}

var (
	_ transport.Observer           = (*Metrics)(nil)
	_ transport.ListResumeObserver = (*Metrics)(nil)
)

// WaitBuckets are the buckets of kretry_retry_wait_seconds, in seconds:
// from an immediate resume to the 60s cap on a server-named wait.
var WaitBuckets = []float64{0, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 30, 60}

// New creates kretry's collectors and registers them on reg (see the
// package doc for which registerer to pass). If reg already holds
// collectors of the same names and labels (a second New on one registry),
// those are reused, so two transports can count into one registry.
func New(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kretry_requests_total",
			Help: "Requests kretry sent to the API server (first attempts, retries and watch resumes), by verb and answer class.",
		}, []string{"verb", "outcome"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kretry_retries_total",
			Help: "Retries and watch resumes kretry made, by verb and reason.",
		}, []string{"verb", "reason"}),
		resumes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kretry_watch_resumes_total",
			Help: "Reopenings of an established watch stream at its last resourceVersion, by reason.",
		}, []string{"reason"}),
		giveUps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kretry_giveups_total",
			Help: "Failures kretry stopped retrying and handed to the caller (or ended a watch cleanly on), by verb and reason.",
		}, []string{"verb", "reason"}),
		retryWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kretry_retry_wait_seconds",
			Help:    "How long kretry waited before a retry or watch resume, by verb.",
			Buckets: WaitBuckets,
		}, []string{"verb"}),
		budgetRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kretry_budget_refusals_total",
			Help: "Retries the retry budget refused (the failure went to the caller at once), by verb.",
		}, []string{"verb"}),
		listResumes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kretry_list_resumes_total",
			Help: "LIST bodies broken mid-read and asked for again at their exact resourceVersion, by outcome (resumed, mismatch, gone, gave-up).",
		}, []string{"outcome"}),
		listSkipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kretry_list_resume_skipped_bytes_total",
			Help: "Bytes of LIST bodies read again on a resume and checked against what was already delivered.",
		}, nil),
	}
	var err error
	m.requests, err = register(reg, m.requests)
	if err == nil {
		m.retries, err = register(reg, m.retries)
	}
	if err == nil {
		m.resumes, err = register(reg, m.resumes)
	}
	if err == nil {
		m.giveUps, err = register(reg, m.giveUps)
	}
	if err == nil {
		m.retryWait, err = register(reg, m.retryWait)
	}
	if err == nil {
		m.budgetRefusals, err = register(reg, m.budgetRefusals)
	}
	if err == nil {
		m.listResumes, err = register(reg, m.listResumes)
	}
	if err == nil {
		m.listSkipped, err = register(reg, m.listSkipped)
	}
	if err != nil {
		return nil, err
	}
	return m, nil
}

// register registers c, or returns the collector reg already holds under
// its description.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	var already prometheus.AlreadyRegisteredError
	if errors.As(err, &already) {
		if existing, ok := already.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, err
}

// ObserveAttempt counts kretry_requests_total.
func (m *Metrics) ObserveAttempt(e transport.AttemptEvent) {
	m.requests.WithLabelValues(string(e.Verb), string(e.Outcome)).Inc()
}

// ObserveRetry counts kretry_retries_total, kretry_watch_resumes_total for
// a watch resume, and the wait into kretry_retry_wait_seconds.
func (m *Metrics) ObserveRetry(e transport.RetryEvent) {
	m.retries.WithLabelValues(string(e.Verb), string(e.Reason)).Inc()
	if e.Resume && e.Verb == transport.VerbWatch {
		m.resumes.WithLabelValues(string(e.Reason)).Inc()
	}
	m.retryWait.WithLabelValues(string(e.Verb)).Observe(e.Wait.Seconds())
}

// ObserveGiveUp counts kretry_giveups_total.
func (m *Metrics) ObserveGiveUp(e transport.GiveUpEvent) {
	m.giveUps.WithLabelValues(string(e.Verb), string(e.Reason)).Inc()
}

// ObserveBudgetRefusal counts kretry_budget_refusals_total.
func (m *Metrics) ObserveBudgetRefusal(e transport.BudgetEvent) {
	m.budgetRefusals.WithLabelValues(string(e.Verb)).Inc()
}

// ObserveListResume counts kretry_list_resumes_total by outcome and the
// bytes checked into kretry_list_resume_skipped_bytes_total.
func (m *Metrics) ObserveListResume(e transport.ListResumeEvent) {
	m.listResumes.WithLabelValues(string(e.Outcome)).Inc()
	m.listSkipped.WithLabelValues().Add(float64(e.SkippedBytes))
}
