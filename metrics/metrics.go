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
	listSkipped    *prometheus.CounterVec // no labels
	initialState   *prometheus.CounterVec
	buildInfo      prometheus.Gauge
	enabled        prometheus.GaugeFunc
}

var (
	_ transport.Observer             = (*Metrics)(nil)
	_ transport.ListResumeObserver   = (*Metrics)(nil)
	_ transport.InitialStateObserver = (*Metrics)(nil)
)

// Options are the settings of NewWithOptions.
type Options struct {
	// ConstLabels are added to every series of these collectors, the same
	// values on all of them: a bounded way to tell apart the clusters (or
	// API servers) one process talks to, one Metrics per cluster, e.g.
	// prometheus.Labels{"cluster": "prod-eu-1"}. Every Metrics on one
	// registry must use the same label names (values may differ); default
	// none. Never a value taken from a request.
	ConstLabels prometheus.Labels
}

// WaitBuckets are the buckets of kretry_retry_wait_seconds, in seconds:
// from an immediate resume to the 60s cap on a server-named wait.
var WaitBuckets = []float64{0, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 30, 60}

// New creates kretry's collectors and registers them on reg (see the
// package doc for which registerer to pass). If reg already holds
// collectors of the same names and labels (a second New on one registry),
// those are reused, so two transports can count into one registry. It also
// registers kretry_build_info{version} and kretry_enabled (see the package
// doc), so that a process with kretry off is told from one that is fine. Every
// counter's series for the label values kretry can report are there from
// the start, at 0, so that increase() and rate() see the first event.
func New(reg prometheus.Registerer) (*Metrics, error) {
	return NewWithOptions(reg, Options{})
}

// NewWithOptions is New with opts: NewWithOptions(reg, Options{}) is
// New(reg). Collectors with other ConstLabels values are other collectors:
// two clusters' Metrics on one registry count apart.
func NewWithOptions(reg prometheus.Registerer, opts Options) (*Metrics, error) {
	constLabels := opts.ConstLabels
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "kretry_requests_total",
			ConstLabels: constLabels,
			Help:        "Requests kretry sent to the API server (first attempts, retries and watch resumes), by verb and answer class.",
		}, []string{"verb", "outcome"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "kretry_retries_total",
			ConstLabels: constLabels,
			Help:        "Retries and watch resumes kretry made, by verb and reason.",
		}, []string{"verb", "reason"}),
		resumes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "kretry_watch_resumes_total",
			ConstLabels: constLabels,
			Help:        "Reopenings of an established watch stream at its last resourceVersion, by reason.",
		}, []string{"reason"}),
		giveUps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "kretry_giveups_total",
			ConstLabels: constLabels,
			Help:        "Failures kretry stopped retrying and handed to the caller (or ended a watch cleanly on), by verb and reason.",
		}, []string{"verb", "reason"}),
		retryWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:        "kretry_retry_wait_seconds",
			ConstLabels: constLabels,
			Help:        "How long kretry waited before a retry or watch resume, by verb.",
			Buckets:     WaitBuckets,
		}, []string{"verb"}),
		budgetRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "kretry_budget_refusals_total",
			ConstLabels: constLabels,
			Help:        "Retries the retry budget refused (the failure went to the caller at once), by verb.",
		}, []string{"verb"}),
		listResumes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "kretry_list_resumes_total",
			ConstLabels: constLabels,
			Help:        "LIST bodies broken mid-read and asked for again at their exact resourceVersion, by outcome (resumed, mismatch, gone, gave-up).",
		}, []string{"outcome"}),
		listSkipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "kretry_list_resume_skipped_bytes_total",
			ConstLabels: constLabels,
			Help:        "Bytes of LIST bodies read again on a resume and checked against what was already delivered.",
		}, nil),
		initialState: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "kretry_initial_state_fetches_total",
			ConstLabels: constLabels,
			Help:        "Initial-state fetches callers sent through kretry (a LIST's first page: verb list; a watch with sendInitialEvents=true: verb watch), once per call, kretry's own retries and resumes not included.",
		}, []string{"verb"}),
	}
	m.buildInfo, m.enabled = buildCollectors(constLabels)
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
	if err == nil {
		m.initialState, err = register(reg, m.initialState)
	}
	if err == nil {
		m.buildInfo, err = register(reg, m.buildInfo)
	}
	if err == nil {
		m.enabled, err = register(reg, m.enabled)
	}
	if err != nil {
		return nil, err
	}
	m.initialise()
	return m, nil
}

// The label values kretry reports, by verb: what each counter starts at 0
// for.
var (
	verbs    = []transport.Verb{transport.VerbList, transport.VerbWatch, transport.VerbGet}
	outcomes = []transport.Outcome{
		transport.OutcomeSuccess, transport.OutcomeRedirect, transport.OutcomeClientError, transport.OutcomeThrottled,
		transport.OutcomeServerError, transport.OutcomeNoResponse, transport.OutcomeCallerStopped,
	}
	// requestReasons are a LIST's or GET's reasons; a watch has these and watchReasons.
	requestReasons = []transport.Reason{
		transport.ReasonTooManyRequests, transport.ReasonServerError, transport.ReasonConnection, transport.ReasonBrokenBody,
	}
	watchReasons = []transport.Reason{
		transport.ReasonErrorEvent, transport.ReasonInvalidFrame, transport.ReasonStall, transport.ReasonExpiredResume,
	}
	listResumeOutcomes = []transport.ListResumeOutcome{
		transport.ListResumed, transport.ListResumeMismatch, transport.ListResumeGone, transport.ListResumeGaveUp,
	}
)

// reasonsOf are the retry reasons requests of verb can have.
func reasonsOf(verb transport.Verb) []transport.Reason {
	if verb == transport.VerbWatch {
		return append(append([]transport.Reason(nil), requestReasons...), watchReasons...)
	}
	return requestReasons
}

// initialise creates every counter series kretry can report, at 0. The
// wait histogram is left to its first observation: its buckets would
// multiply the series for no alert's sake.
func (m *Metrics) initialise() {
	for _, verb := range verbs {
		v := string(verb)
		for _, outcome := range outcomes {
			m.requests.WithLabelValues(v, string(outcome))
		}
		for _, reason := range reasonsOf(verb) {
			m.retries.WithLabelValues(v, string(reason))
			m.giveUps.WithLabelValues(v, string(reason))
			if verb == transport.VerbWatch {
				m.resumes.WithLabelValues(string(reason))
			}
		}
		m.budgetRefusals.WithLabelValues(v)
	}
	m.giveUps.WithLabelValues(string(transport.VerbWatch), string(transport.ReasonDeadline))
	for _, outcome := range listResumeOutcomes {
		m.listResumes.WithLabelValues(string(outcome))
	}
	m.listSkipped.WithLabelValues()
	m.initialState.WithLabelValues(string(transport.VerbList))
	m.initialState.WithLabelValues(string(transport.VerbWatch))
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

// ObserveInitialState counts kretry_initial_state_fetches_total.
func (m *Metrics) ObserveInitialState(e transport.InitialStateEvent) {
	m.initialState.WithLabelValues(string(e.Verb)).Inc()
}
