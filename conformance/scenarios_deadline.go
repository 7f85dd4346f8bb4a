package conformance

// deadlineScenarios are the caller's timeoutSeconds as a bound on everything a transport
// sends for a watch, and the ERROR events a server that answers the watch keeps sending past
// the InternalError window.
func deadlineScenarios() []Scenario {
	return []Scenario{
		{Name: "watch-json/resume-retry-remaining-timeout", Fixture: "watch-json", Caller: RawWatch,
			Faults: []Fault{cutWatch(0, 2, Half), {Kind: Status, On: WatchRequest, Nth: 1, Code: 503, RetryAfter: 2}},
			Why:    "the resume meets 503 Retry-After: 2; its retry asks for what remains of timeoutSeconds (at most 6 - 2), not the 6 again"},
		{Name: "watch-json/establish-503-past-deadline", Fixture: "watch-json", Caller: RawWatch,
			Faults:  []Fault{always(Fault{Kind: Status, On: WatchRequest, Code: 503, RetryAfter: 2})},
			Outcome: Deliver, Code: 503,
			Why: "503 Retry-After: 2 on every attempt of a 6 s watch: no attempt after the deadline, each with what remains; then the 503 to Watch()"},
		{Name: "watch-json/error-500-past-window", Fixture: "watch-json", Caller: RawWatch, NoTimeout: true,
			Faults:  []Fault{cutWatch(0, 2, Half), always(errorEvent(1, 0, 500, 0))},
			Outcome: Deliver, Code: 500,
			Why: "a watch without timeoutSeconds whose every resume is a 200 then ERROR 500: past the window the ERROR is the caller's (a relist), not a clean end that re-watches into it"},
	}
}
