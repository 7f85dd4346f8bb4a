package conformance

// informerListScenarios are the informer scenarios on an informer that starts with a LIST:
// client-go's pager over the recorded pages (resourceVersion=0, then each continue token),
// then the reflector's watch from the list's resourceVersion. This is how every informer of
// client-go v0.33 and v0.34 starts, and those of v0.35+ with WatchListClient=false; the
// "informer/" scenarios are the same faults on the streaming list v0.35+ starts with.
func informerListScenarios() []Scenario {
	const fixture = "informer-list"
	return []Scenario{
		{Name: "informer-list/clean", Fixture: fixture, Caller: Informer,
			Why: "the replay itself: three pages, then the watch"},
		{Name: "informer-list/page-503", Fixture: fixture, Caller: Informer,
			Faults: []Fault{status(ListRequest, 1, 503)},
			Why:    "the second page gets 503 without Retry-After: send that page again, no new LIST"},
		{Name: "informer-list/first-page-429", Fixture: fixture, Caller: Informer,
			Faults: []Fault{recorded(ListRequest, 0, 429, "list-429")},
			Why:    "the recorded 429 in place of the first page: wait and send it again"},
		{Name: "informer-list/page-refused", Fixture: fixture, Caller: Informer,
			Faults: []Fault{refused(ListRequest, 2)},
			Why:    "connection refused on the last page: send it again, no new LIST"},
		{Name: "informer-list/cut-watch", Fixture: fixture, Caller: Informer,
			Faults: []Fault{cutWatch(0, 2, Half)},
			Why:    "a cut in the watch after the LIST: client-go re-watches from its last RV by itself"},
		{Name: "informer-list/error-500", Fixture: fixture, Caller: Informer,
			Faults: []Fault{errorEvent(0, 2, 500, 0)},
			Why:    "an in-stream 500 InternalError after the LIST must not cost a relist"},
		{Name: "informer-list/error-429", Fixture: fixture, Caller: Informer,
			Faults: []Fault{errorEvent(0, 2, 429, 1)},
			Why:    "an in-stream 429 after the LIST must not cost a relist"},
		{Name: "informer-list/establish-503", Fixture: fixture, Caller: Informer,
			Faults: []Fault{status(WatchRequest, 0, 503)},
			Why:    "the watch after the LIST gets 503 without Retry-After: must not cost a relist"},
		{Name: "informer-list/resume-503", Fixture: fixture, Caller: Informer,
			Faults: []Fault{cutWatch(0, 2, Half), status(WatchRequest, 1, 503)},
			Why:    "the re-watch after a cut gets 503 without Retry-After: must not cost a relist"},
		{Name: "informer-list/short-watch", Fixture: fixture, Caller: Informer,
			Faults: []Fault{cutWatch(0, 2, Half), closeWatch(1, 0)},
			Why:    "the re-watch ends at once with no event: must not cost a relist"},
		{Name: "informer-list/resume-refused", Fixture: fixture, Caller: Informer,
			Faults: []Fault{cutWatch(0, 2, Half), refused(WatchRequest, 1)},
			Why:    "connection refused on the re-watch: client-go backs off and re-watches by itself"},
		{Name: "informer-list-protobuf/clean", Fixture: fixture + "-protobuf", Caller: Informer,
			Why: "the replay itself, protobuf pages and watch frames"},
		{Name: "informer-list-protobuf/error-500", Fixture: fixture + "-protobuf", Caller: Informer,
			Faults: []Fault{errorEvent(0, 2, 500, 0)},
			Why:    "an in-stream protobuf ERROR 500 after the LIST must not cost a relist"},
	}
}
