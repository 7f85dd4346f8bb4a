package transport

import (
	"context"
	"regexp"
	"time"

	"k8s.io/klog/v2"

	"github.com/kretry/kretry/internal/policy"
)

// Log verbosities, client-go's convention: V(2) for what an operator wants
// to see in a healthy cluster's logs now and then, V(4) for every request.
const (
	logGiveUps  = 2 // one line per give-up and per watch resume
	logAttempts = 4 // one line per attempt and per retry of an establishment
)

// hooks adapts what the retry loops report for requests of verb into the
// Observer's events, OnRetry and contextual logs
// (klog.FromContext(req.Context())). A log line carries the path, the
// reason, counts and durations, and a watch's resume point: never a header,
// a query or a body.
func (c Config) hooks(verb Verb) policy.Hooks {
	observer, onRetry := c.Observer, c.OnRetry
	return policy.Hooks{
		Attempt: func(ctx context.Context, a policy.Attempt) {
			outcome := OutcomeOf(a.Code)
			if a.Canceled {
				outcome = OutcomeCallerStopped
			}
			if logger := klog.FromContext(ctx).V(logAttempts); logger.Enabled() {
				logger.Info("kretry: attempt", "verb", verb, "path", a.Path, "attempt", a.Number,
					"outcome", outcome, "code", a.Code, "resume", a.Resume, "resourceVersion", a.ResourceVersion)
			}
			if observer != nil {
				observer.ObserveAttempt(AttemptEvent{Verb: verb, Host: a.Host, Outcome: outcome, Code: a.Code})
			}
		},
		Retry: func(ctx context.Context, r policy.Retry) {
			level := logAttempts
			if r.Resume {
				level = logGiveUps
			}
			if logger := klog.FromContext(ctx).V(level); logger.Enabled() {
				msg := "kretry: retrying"
				switch {
				case r.Resume && verb == VerbList:
					msg = "kretry: resuming list"
				case r.Resume:
					msg = "kretry: resuming watch"
				}
				logger.Info(msg, "verb", verb, "path", r.Path, "reason", r.Reason, "cause", withoutQuery(r.Cause),
					"attempts", r.Attempts, "elapsed", r.Elapsed.Round(time.Millisecond), "wait", r.Wait.Round(time.Millisecond),
					"resourceVersion", r.ResourceVersion)
			}
			if onRetry != nil {
				onRetry(Retry{Path: r.Path, Reason: Reason(r.Reason), Cause: r.Cause, Wait: r.Wait, ResourceVersion: r.ResourceVersion})
			}
			if observer != nil {
				observer.ObserveRetry(RetryEvent{Verb: verb, Host: r.Host, Reason: Reason(r.Reason), Code: r.Code, Wait: r.Wait, Resume: r.Resume})
			}
		},
		GiveUp: func(ctx context.Context, g policy.GiveUp) {
			if logger := klog.FromContext(ctx).V(logGiveUps); logger.Enabled() {
				logger.Info("kretry: gave up", "verb", verb, "path", g.Path, "reason", g.Reason, "budgetRefused", g.BudgetRefused,
					"attempts", g.Attempts, "elapsed", g.Elapsed.Round(time.Millisecond), "resume", g.Resume,
					"resourceVersion", g.ResourceVersion)
			}
			if observer == nil {
				return
			}
			if g.BudgetRefused {
				observer.ObserveBudgetRefusal(BudgetEvent{Verb: verb, Reason: Reason(g.Reason)})
			}
			observer.ObserveGiveUp(GiveUpEvent{Verb: verb, Reason: Reason(g.Reason), Attempts: g.Attempts, Elapsed: g.Elapsed})
		},
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
