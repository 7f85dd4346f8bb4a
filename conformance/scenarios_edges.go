package conformance

// edgeScenarios are the edges of a long outage: what a transport does when it must give up.
// Giving up must never make things worse than client-go alone: a resume that gives up ends
// the caller's watch as the break itself would have (see GiveUp), and only a 410 is handed
// over as an ERROR event.
func edgeScenarios() []Scenario {
	return []Scenario{
		{Name: "watch-json/resume-gets-401", Fixture: "watch-json", Caller: RawWatch,
			Faults:  []Fault{cutWatch(0, 2, Half), status(WatchRequest, 1, 401)},
			Outcome: GiveUp,
			Why:     "the resume is answered 401 (a token expired): the caller's own re-watch must meet it, where its credential plugins act"},
		{Name: "watch-json/resume-gets-403", Fixture: "watch-json", Caller: RawWatch,
			Faults:  []Fault{cutWatch(0, 2, Half), status(WatchRequest, 1, 403)},
			Outcome: GiveUp,
			Why:     "the resume is answered 403: end the watch cleanly; no ERROR event, no error"},
		{Name: "watch-json/resume-gets-404", Fixture: "watch-json", Caller: RawWatch,
			Faults:  []Fault{cutWatch(0, 2, Half), status(WatchRequest, 1, 404)},
			Outcome: GiveUp,
			Why:     "the resume is answered 404 (the namespace went away): end the watch cleanly"},
		{Name: "watch-protobuf/resume-gets-403", Fixture: "watch-protobuf", Caller: RawWatch,
			Faults:  []Fault{cutWatch(0, 2, Half), status(WatchRequest, 1, 403)},
			Outcome: GiveUp,
			Why:     "the same in protobuf"},
		{Name: "watch-json/outage-past-window", Fixture: "watch-json", Caller: RawWatch,
			Faults:  []Fault{cutWatch(0, 2, Half), always(refused(WatchRequest, 1))},
			Outcome: GiveUp,
			Why:     "the apiserver is down longer than the InternalError window: give up with a clean end, not an error client-go would relist on"},
		{Name: "watch-json/503-past-window", Fixture: "watch-json", Caller: RawWatch,
			Faults:  []Fault{cutWatch(0, 2, Half), always(status(WatchRequest, 1, 503))},
			Outcome: GiveUp,
			Why:     "503 on every resume past the window: a clean end"},
		{Name: "watch-json/error-500-forever", Fixture: "watch-json", Caller: RawWatch,
			Faults:  []Fault{cutWatch(0, 2, Half), always(errorEvent(1, 0, 500, 0))},
			Outcome: GiveUp,
			Why:     "every resume of a 6 s watch is a bare 200 then ERROR 500: a 200 is not a success, and the caller's deadline comes before the window's end: a clean end"},
		{Name: "list-paged/reset-past-window", Fixture: "list-paged", Caller: Pager,
			Faults:  []Fault{always(reset(ListRequest, 0))},
			Outcome: Deliver, Code: 0,
			Why: "resets past the window: the caller gets a connection error that client-go does not retry again (its 10 GET retries would each start a new window)"},
		{Name: "list-paged/refused-past-window", Fixture: "list-paged", Caller: Pager,
			Faults:  []Fault{always(refused(ListRequest, 0))},
			Outcome: Deliver, Code: 0,
			Why: "refused past the window: the caller gets the error, still seen as a refused connection"},
	}
}
