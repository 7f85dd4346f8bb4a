package transport

import "time"

// Observer is told what kretry does, for metrics: every attempt it sends
// and its outcome, every retry and watch resume with its reason and wait,
// every give-up, and every retry the retry budget refused. It has no
// dependencies, so the core imports no metrics library; package
// github.com/kretry/kretry/metrics implements it with Prometheus
// collectors, and a nil Observer in Config costs nothing.
//
// Requests call it from their own goroutines, so an implementation must be
// safe for concurrent use, and it must not block. The events carry labels
// from closed, small sets (Verb, Outcome, Reason) and never a URL path,
// query, header value, object name or body.
type Observer interface {
	// ObserveAttempt is called when an attempt kretry sent (a first
	// attempt, a retry or a watch resume) has its answer or error.
	ObserveAttempt(AttemptEvent)
	// ObserveRetry is called before the wait of every retry and every
	// watch resume.
	ObserveRetry(RetryEvent)
	// ObserveGiveUp is called when kretry stops retrying and hands a
	// failure to the caller, or ends a watch stream cleanly instead.
	ObserveGiveUp(GiveUpEvent)
	// ObserveBudgetRefusal is called when the retry budget refuses a
	// retry. The failure then goes to the caller at once, and
	// ObserveGiveUp follows with the failure's own reason, so that
	// give-ups by reason stay comparable with and without a budget.
	ObserveBudgetRefusal(BudgetEvent)
}

// Verb is the kind of request kretry retries: a closed set, fit for a
// metrics label.
type Verb string

// The verbs kretry retries.
const (
	VerbList  Verb = "list"  // a GET on a collection
	VerbWatch Verb = "watch" // a watch=true GET or a legacy /watch/ path
	VerbGet   Verb = "get"   // a single-object GET, retried with Config.RetryGets
)

// Outcome is what one attempt came to, by the class of its answer: a
// closed set, fit for a metrics label.
type Outcome string

// The outcomes of an attempt.
const (
	OutcomeSuccess       Outcome = "2xx"        // a 2xx answer (for a watch: the stream opened)
	OutcomeRedirect      Outcome = "3xx"        // a 3xx answer, handed to the caller
	OutcomeClientError   Outcome = "4xx"        // a 4xx answer other than 429 (410 included)
	OutcomeThrottled     Outcome = "429"        // a 429 answer
	OutcomeServerError   Outcome = "5xx"        // a 5xx answer
	OutcomeNoResponse    Outcome = "connection" // no answer: refused, reset, EOF, timeout
	OutcomeCallerStopped Outcome = "canceled"   // the caller's context ended first
)

// OutcomeOf classifies an HTTP status code (0: no answer) into an Outcome.
func OutcomeOf(code int) Outcome {
	switch {
	case code == 0:
		return OutcomeNoResponse
	case code == 429:
		return OutcomeThrottled
	case code >= 500:
		return OutcomeServerError
	case code >= 400:
		return OutcomeClientError
	case code >= 300:
		return OutcomeRedirect
	}
	return OutcomeSuccess
}

// ReasonDeadline is the give-up reason of a watch whose next wait would
// run past the caller's timeoutSeconds: the stream ends cleanly instead.
const ReasonDeadline Reason = "deadline"

// AttemptEvent is one attempt kretry sent and what it came to.
type AttemptEvent struct {
	// Verb is the kind of request.
	Verb Verb
	// Host is the request's host (host:port), as client-go labels its own
	// request metrics; not a label of kretry's metrics.
	Host string
	// Outcome is the class of the answer.
	Outcome Outcome
	// Code is the HTTP status, 0 when no answer arrived.
	Code int
}

// RetryEvent is one retry or watch resume kretry is about to make.
type RetryEvent struct {
	// Verb is the kind of request.
	Verb Verb
	// Host is the request's host, for client-go's retry metric.
	Host string
	// Reason is why.
	Reason Reason
	// Code is the HTTP status (or the watch ERROR event's code) that led
	// to the retry, 0 when there was none (a connection or stream break).
	Code int
	// Wait is how long kretry waits first.
	Wait time.Duration
	// Resume is set for the reopening of an established watch stream at
	// its resume point, and for the re-request of a LIST body broken
	// mid-read at its resourceVersion (Verb list), rather than a retry of
	// a request's establishment.
	Resume bool
}

// GiveUpEvent is kretry handing a failure over.
type GiveUpEvent struct {
	// Verb is the kind of request.
	Verb Verb
	// Reason is the last failure's reason, or ReasonDeadline.
	Reason Reason
	// Attempts is how many requests were sent for it.
	Attempts int
	// Elapsed is the time since the first failure of the run.
	Elapsed time.Duration
}

// BudgetEvent is a retry the retry budget refused.
type BudgetEvent struct {
	// Verb is the kind of request.
	Verb Verb
	// Reason is the reason of the refused retry.
	Reason Reason
}

// JoinObservers returns an Observer that tells each of observers in turn;
// nil ones are skipped. With none left it returns nil, which costs
// nothing in Config.
func JoinObservers(observers ...Observer) Observer {
	var joined multiObserver
	for _, o := range observers {
		if o != nil {
			joined = append(joined, o)
		}
	}
	switch len(joined) {
	case 0:
		return nil
	case 1:
		return joined[0]
	}
	return joined
}

type multiObserver []Observer

func (m multiObserver) ObserveAttempt(e AttemptEvent) {
	for _, o := range m {
		o.ObserveAttempt(e)
	}
}

func (m multiObserver) ObserveRetry(e RetryEvent) {
	for _, o := range m {
		o.ObserveRetry(e)
	}
}

func (m multiObserver) ObserveGiveUp(e GiveUpEvent) {
	for _, o := range m {
		o.ObserveGiveUp(e)
	}
}

func (m multiObserver) ObserveBudgetRefusal(e BudgetEvent) {
	for _, o := range m {
		o.ObserveBudgetRefusal(e)
	}
}
