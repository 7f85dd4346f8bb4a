package transport

import (
	"context"
	"regexp"
	"time"

	"k8s.io/klog/v2"

	"github.com/kretry/kretry/internal/establish"
)

// Log verbosities, client-go's convention: V(2) for what an operator wants
// to see in a healthy cluster's logs now and then, V(4) for every request.
const (
	logGiveUps  = 2 // one line per give-up, per watch resume and per LIST body resume
	logAttempts = 4 // one line per attempt and per retry of an establishment
)

// reporter turns what the retry loops report for requests of verb into the
// Observer's events and contextual logs (klog.FromContext(req.Context())).
// A log line carries the path, the reason, counts and durations, and a
// resume point: never a header, a query or a body.
type reporter struct {
	verb     Verb
	observer Observer           // nil: none
	lists    ListResumeObserver // the Observer, if it hears LIST resumes
}

// reporter returns the reporter of the requests of verb.
func (c Config) reporter(verb Verb) *reporter {
	lists, _ := c.Observer.(ListResumeObserver)
	return &reporter{verb: verb, observer: c.Observer, lists: lists}
}

func (r *reporter) Attempt(ctx context.Context, a establish.Attempt) {
	outcome := OutcomeOf(a.Code)
	if a.Canceled {
		outcome = OutcomeCallerStopped
	}
	if logger := klog.FromContext(ctx).V(logAttempts); logger.Enabled() {
		logger.Info("kretry: attempt", "verb", r.verb, "path", a.Path, "attempt", a.Number,
			"outcome", outcome, "code", a.Code, "resume", a.Resume, "resourceVersion", a.ResourceVersion)
	}
	if r.observer != nil {
		r.observer.ObserveAttempt(AttemptEvent{Verb: r.verb, Host: a.Host, Outcome: outcome, Code: a.Code})
	}
}

func (r *reporter) Retry(ctx context.Context, e establish.Retry) {
	level := logAttempts
	if e.Resume {
		level = logGiveUps
	}
	if logger := klog.FromContext(ctx).V(level); logger.Enabled() {
		msg := "kretry: retrying"
		switch {
		case e.Resume && r.verb == VerbList:
			msg = "kretry: resuming list"
		case e.Resume:
			msg = "kretry: resuming watch"
		}
		logger.Info(msg, "verb", r.verb, "path", e.Path, "reason", e.Reason, "cause", withoutQuery(e.Cause),
			"attempts", e.Attempts, "elapsed", e.Elapsed.Round(time.Millisecond), "wait", e.Wait.Round(time.Millisecond),
			"resourceVersion", e.ResourceVersion)
	}
	if r.observer != nil {
		r.observer.ObserveRetry(RetryEvent{Verb: r.verb, Host: e.Host, Reason: Reason(e.Reason), Code: e.Code, Wait: e.Wait, Resume: e.Resume})
	}
}

func (r *reporter) GiveUp(ctx context.Context, g establish.GiveUp) {
	if logger := klog.FromContext(ctx).V(logGiveUps); logger.Enabled() {
		logger.Info("kretry: gave up", "verb", r.verb, "path", g.Path, "reason", g.Reason, "budgetRefused", g.BudgetRefused,
			"attempts", g.Attempts, "elapsed", g.Elapsed.Round(time.Millisecond), "resume", g.Resume,
			"resourceVersion", g.ResourceVersion)
	}
	if r.observer == nil {
		return
	}
	if g.BudgetRefused {
		r.observer.ObserveBudgetRefusal(BudgetEvent{Verb: r.verb, Reason: Reason(g.Reason)})
	}
	r.observer.ObserveGiveUp(GiveUpEvent{Verb: r.verb, Reason: Reason(g.Reason), Attempts: g.Attempts, Elapsed: g.Elapsed})
}

func (r *reporter) ListResume(ctx context.Context, l establish.ListResume) {
	outcome := listResumeOutcomes[l.Outcome]
	if logger := klog.FromContext(ctx).V(logGiveUps); logger.Enabled() {
		logger.Info("kretry: list resume", "verb", r.verb, "path", l.Path, "outcome", outcome,
			"skippedBytes", l.Skipped, "requests", l.Requests, "elapsed", l.Elapsed.Round(time.Millisecond),
			"resourceVersion", l.ResourceVersion)
	}
	if r.lists != nil {
		r.lists.ObserveListResume(ListResumeEvent{Outcome: outcome, SkippedBytes: l.Skipped, Requests: l.Requests, Elapsed: l.Elapsed})
	}
}

// urlQuery matches the query of a URL quoted in an error message
// (`Get "https://host/api/v1/pods?labelSelector=...": ...`).
var urlQuery = regexp.MustCompile(`\?[^\s"']*`)

// withoutQuery is an error's message with any URL query in it elided: a
// query may carry selectors or field values that do not belong in logs.
func withoutQuery(msg string) string {
	return urlQuery.ReplaceAllString(msg, "?…")
}
