package conformance

import "time"

// Fault constructors keep the scenario table readable.

func cutWatch(nth, frame, into int) Fault {
	return Fault{Kind: Cut, On: WatchRequest, Nth: nth, Frame: frame, Into: into}
}

func closeWatch(nth, frame int) Fault {
	return Fault{Kind: Close, On: WatchRequest, Nth: nth, Frame: frame}
}

func errorEvent(nth, frame int, code int32, retryAfter int) Fault {
	return Fault{Kind: ErrorEvent, On: WatchRequest, Nth: nth, Frame: frame, Code: code, RetryAfter: retryAfter}
}

func status(on RequestKind, nth int, code int32) Fault {
	return Fault{Kind: Status, On: on, Nth: nth, Code: code}
}

func recorded(on RequestKind, nth int, code int32, fixture string) Fault {
	return Fault{Kind: Status, On: on, Nth: nth, Code: code, Recorded: fixture}
}

func always(f Fault) Fault {
	f.Always = true
	return f
}

func refused(on RequestKind, nth int) Fault { return Fault{Kind: Refused, On: on, Nth: nth} }

func reset(on RequestKind, nth int) Fault { return Fault{Kind: Reset, On: on, Nth: nth} }

func silent(on RequestKind, nth int, elapse time.Duration) Fault {
	return Fault{Kind: Silent, On: on, Nth: nth, Elapse: elapse}
}

func cutList(nth, at int) Fault { return Fault{Kind: Cut, On: ListRequest, Nth: nth, Into: at} }

// Scenarios returns the suite, in the order tables show it. Each is a recorded fixture from
// kube-apiserver v1.37.2 (conformance/testdata), a fault schedule and what a correct
// transport makes of it. The watch fixtures have 5 to 11 frames; faults sit in the middle of
// the stream, after the initial state where there is one.
func Scenarios() []Scenario {
	return append([]Scenario{
		// A JSON watch: ADDED, ADDED, MODIFIED, DELETED, BOOKMARK(s) from a specific RV.
		{Name: "watch-json/clean", Fixture: "watch-json", Caller: RawWatch,
			Why: "the replay itself: every transport passes it"},
		{Name: "watch-json/cut-mid-frame", Fixture: "watch-json", Caller: RawWatch,
			Faults: []Fault{cutWatch(0, 2, Half)},
			Why:    "a connection drops inside an event: resume at the last whole event, drop the partial one"},
		{Name: "watch-json/cut-at-boundary", Fixture: "watch-json", Caller: RawWatch,
			Faults: []Fault{cutWatch(0, 2, 0)},
			Why:    "a connection drops between two events"},
		{Name: "watch-json/cut-twice", Fixture: "watch-json", Caller: RawWatch,
			Faults: []Fault{cutWatch(0, 1, Half), cutWatch(1, 1, Half)},
			Why:    "the resumed stream breaks too: resume again from the newer point"},
		{Name: "watch-json/early-close", Fixture: "watch-json", Caller: RawWatch,
			Faults: []Fault{closeWatch(0, 2)},
			Why:    "the server ends the stream cleanly long before timeoutSeconds"},
		{Name: "watch-json/short-watch", Fixture: "watch-json", Caller: RawWatch,
			Faults: []Fault{cutWatch(0, 2, Half), closeWatch(1, 0)},
			Why:    "the resumed watch closes at once with no event (client-go calls it a very short watch)"},
		{Name: "watch-json/error-429", Fixture: "watch-json", Caller: RawWatch,
			Faults: []Fault{errorEvent(0, 2, 429, 1)},
			Why:    "an in-stream 429 with retryAfterSeconds=1: wait at least 1s, resume, and shorten timeoutSeconds by the wait"},
		{Name: "watch-json/error-500", Fixture: "watch-json", Caller: RawWatch,
			Faults: []Fault{errorEvent(0, 2, 500, 0)},
			Why:    "an in-stream 500 InternalError (etcd leader change): absorb it and resume"},
		{Name: "watch-json/error-410", Fixture: "watch-json", Caller: RawWatch,
			Faults:  []Fault{errorEvent(0, 2, 410, 0)},
			Outcome: Deliver, Code: 410,
			Why: "an in-stream 410 Expired must reach the caller (its cue to relist), and nothing may resume past it"},
		{Name: "watch-json/resume-gets-410", Fixture: "watch-json", Caller: RawWatch,
			Faults:  []Fault{cutWatch(0, 2, Half), status(WatchRequest, 1, 410)},
			Outcome: Deliver, Code: 410,
			Why: "the resume is answered 410: the caller gets an ERROR 410 event after the events it had"},
		{Name: "watch-json/resume-gets-410-then-silence", Fixture: "watch-json", Caller: RawWatch,
			Faults: []Fault{cutWatch(0, 2, Half), {Kind: Status, On: WatchRequest, Nth: 1, Code: 410, WatchCache: true},
				silent(WatchRequest, 2, 5*time.Second)},
			Outcome: Deliver, Code: 410, Search: 1,
			Why: "the watch cache's 410 answers the resume (a restarted apiserver behind a balancer); a search for another apiserver must still hand the 410 over within 3 s when its retry is never answered"},
		{Name: "watch-json/resume-gets-503", Fixture: "watch-json", Caller: RawWatch,
			Faults: []Fault{cutWatch(0, 2, Half), status(WatchRequest, 1, 503)},
			Why:    "the resume is answered 503 without Retry-After: retry it"},
		{Name: "watch-json/resume-refused", Fixture: "watch-json", Caller: RawWatch,
			Faults: []Fault{cutWatch(0, 2, Half), refused(WatchRequest, 1)},
			Why:    "the server is gone when the watch resumes: retry until it is back"},
		{Name: "watch-json/establish-503", Fixture: "watch-json", Caller: RawWatch,
			Faults: []Fault{status(WatchRequest, 0, 503)},
			Why:    "503 without Retry-After (rolling upgrade) in place of the watch"},
		{Name: "watch-json/establish-429", Fixture: "watch-json", Caller: RawWatch,
			Faults: []Fault{recorded(WatchRequest, 0, 429, "list-429")},
			Why:    "the recorded 429 (text/plain, Retry-After: 1) in place of the watch"},
		{Name: "watch-json/establish-500", Fixture: "watch-json", Caller: RawWatch,
			Faults: []Fault{status(WatchRequest, 0, 500)},
			Why:    "500 InternalError Status in place of the watch"},
		{Name: "watch-json/establish-refused", Fixture: "watch-json", Caller: RawWatch,
			Faults: []Fault{refused(WatchRequest, 0)},
			Why:    "connection refused before the watch is established"},
		{Name: "watch-json/establish-reset", Fixture: "watch-json", Caller: RawWatch,
			Faults: []Fault{reset(WatchRequest, 0)},
			Why:    "connection reset before the watch's response"},

		// The same stream in protobuf: 4-byte length prefixes.
		{Name: "watch-protobuf/clean", Fixture: "watch-protobuf", Caller: RawWatch,
			Why: "the replay itself"},
		{Name: "watch-protobuf/cut-in-length-prefix", Fixture: "watch-protobuf", Caller: RawWatch,
			Faults: []Fault{cutWatch(0, 2, 2)},
			Why:    "a connection drops inside a frame's 4-byte length"},
		{Name: "watch-protobuf/cut-mid-frame", Fixture: "watch-protobuf", Caller: RawWatch,
			Faults: []Fault{cutWatch(0, 3, Half)},
			Why:    "a connection drops inside a protobuf event"},
		{Name: "watch-protobuf/error-500", Fixture: "watch-protobuf", Caller: RawWatch,
			Faults: []Fault{errorEvent(0, 2, 500, 0)},
			Why:    "an in-stream protobuf ERROR 500: absorb it and resume"},
		{Name: "watch-protobuf/resume-gets-410", Fixture: "watch-protobuf", Caller: RawWatch,
			Faults:  []Fault{cutWatch(0, 2, Half), status(WatchRequest, 1, 410)},
			Outcome: Deliver, Code: 410,
			Why: "the resume is answered 410: the caller gets an ERROR 410 event in protobuf"},

		// Streaming lists (sendInitialEvents): no resume point until the initial-events-end
		// bookmark; after it, resume without sendInitialEvents and resourceVersionMatch.
		{Name: "watch-list/clean", Fixture: "watch-list", Caller: RawWatch,
			Why: "the replay itself"},
		{Name: "watch-list/cut-in-initial-events", Fixture: "watch-list", Caller: RawWatch,
			Faults:  []Fault{cutWatch(0, 2, Half)},
			Outcome: PassThrough,
			Why:     "a break before the initial state is complete has no resume point: the caller must see the end of the stream, not the initial events twice"},
		{Name: "watch-list/cut-after-initial-events", Fixture: "watch-list", Caller: RawWatch,
			Faults: []Fault{cutWatch(0, 5, Half)},
			Why:    "resume at the last event after the initial-events-end bookmark, without sendInitialEvents or resourceVersionMatch"},
		{Name: "watch-list/error-500-after-initial-events", Fixture: "watch-list", Caller: RawWatch,
			Faults: []Fault{errorEvent(0, 4, 500, 0)},
			Why:    "an ERROR 500 right after the initial-events-end bookmark: resume from the bookmark's RV"},
		{Name: "watch-list/establish-503", Fixture: "watch-list", Caller: RawWatch,
			Faults: []Fault{status(WatchRequest, 0, 503)},
			Why:    "503 in place of the streaming list: send the same request again"},
		{Name: "watch-list-protobuf/cut-after-initial-events", Fixture: "watch-list-protobuf", Caller: RawWatch,
			Faults: []Fault{cutWatch(0, 6, Half)},
			Why:    "the protobuf streaming list, cut after its initial state"},
		{Name: "watch-rv0/cut-in-initial-events", Fixture: "watch-rv0", Caller: RawWatch,
			Faults:  []Fault{cutWatch(0, 1, Half)},
			Outcome: PassThrough,
			Why:     "an RV=0 watch broken in its synthetic ADDED events has no resume point"},
		{Name: "watch-rv0/cut-after-initial-events", Fixture: "watch-rv0", Caller: RawWatch,
			Faults: []Fault{cutWatch(0, 4, Half)},
			Why:    "an RV=0 watch broken after its initial-events-end bookmark resumes at the last event"},

		// Recorded in-stream 410s: delivered, never retried.
		{Name: "watch-expired-compacted/deliver", Fixture: "watch-expired-compacted", Caller: RawWatch,
			Outcome: Deliver, Code: 410,
			Why: "the recorded ERROR 410 Expired (etcd compacted) reaches the caller and the watch ends"},
		{Name: "watch-expired-compacted-protobuf/deliver", Fixture: "watch-expired-compacted-protobuf", Caller: RawWatch,
			Outcome: Deliver, Code: 410,
			Why: "the same in protobuf"},
		{Name: "watch-expired-after-restart/deliver", Fixture: "watch-expired-after-restart", Caller: RawWatch,
			Outcome: Deliver, Code: 410,
			Why: "the recorded ERROR 410 after an apiserver restart reaches the caller"},

		// Paged LISTs through client-go's pager.
		{Name: "list-paged/clean", Fixture: "list-paged", Caller: Pager,
			Why: "the replay itself"},
		{Name: "list-paged/cut-mid-body", Fixture: "list-paged", Caller: Pager,
			Faults: []Fault{cutList(1, Half)},
			Why:    "page 2's body breaks halfway: send the same query again"},
		{Name: "list-paged/503", Fixture: "list-paged", Caller: Pager,
			Faults: []Fault{status(ListRequest, 1, 503)},
			Why:    "page 2 gets 503 without Retry-After"},
		{Name: "list-paged/429", Fixture: "list-paged", Caller: Pager,
			Faults: []Fault{recorded(ListRequest, 0, 429, "list-429")},
			Why:    "the recorded 429 (text/plain, Retry-After: 1) on page 1"},
		{Name: "list-paged/504-too-large", Fixture: "list-paged", Caller: Pager,
			Faults: []Fault{recorded(ListRequest, 0, 504, "list-504-too-large")},
			Why:    "the recorded 504 ResourceVersionTooLarge (Retry-After: 1) on page 1"},
		{Name: "list-paged/500", Fixture: "list-paged", Caller: Pager,
			Faults: []Fault{status(ListRequest, 2, 500)},
			Why:    "page 3 gets a 500 InternalError Status"},
		{Name: "list-paged/reset", Fixture: "list-paged", Caller: Pager,
			Faults: []Fault{reset(ListRequest, 0)},
			Why:    "connection reset before page 1's response"},
		{Name: "list-paged/refused", Fixture: "list-paged", Caller: Pager,
			Faults: []Fault{refused(ListRequest, 1)},
			Why:    "connection refused on page 2"},
		{Name: "list-paged/503-persistent", Fixture: "list-paged", Caller: Pager,
			Faults:  []Fault{always(status(ListRequest, 0, 503))},
			Outcome: Deliver, Code: 503,
			Why: "503 that does not go away: after its retries the caller gets the server's Status, not a transport's own error"},
		{Name: "list-paged/403", Fixture: "list-paged", Caller: Pager,
			Faults:  []Fault{always(status(ListRequest, 0, 403))},
			Outcome: Deliver, Code: 403,
			Why: "403 Forbidden goes to the caller at once, unretried"},
		{Name: "list-paged-protobuf/cut-mid-body", Fixture: "list-paged-protobuf", Caller: Pager,
			Faults: []Fault{cutList(1, Half)},
			Why:    "a protobuf page breaks halfway"},
		{Name: "list-paged-protobuf/504-too-large", Fixture: "list-paged-protobuf", Caller: Pager,
			Faults: []Fault{recorded(ListRequest, 0, 504, "list-504-too-large-protobuf")},
			Why:    "the recorded protobuf 504 ResourceVersionTooLarge (Retry-After: 1)"},
		{Name: "list-410-exact/deliver", Fixture: "list-410-exact", Caller: List,
			Outcome: Deliver, Code: 410,
			Why: "the recorded 410 for an Exact LIST at a compacted RV reaches the caller, unretried"},
		{Name: "list-continue-expired/deliver", Fixture: "list-continue-expired", Caller: List,
			Outcome: Deliver, Code: 410,
			Why: "the recorded 410 for an expired continue token reaches the caller (the pager's cue for a full list)"},

		// Writes are never retried.
		{Name: "create/503", Fixture: "list-paged", Caller: Create,
			Faults:  []Fault{always(status(CreateRequest, 0, 503))},
			Outcome: Deliver, Code: 503,
			Why: "a POST answered 503 must not be sent again"},
		{Name: "create/reset", Fixture: "list-paged", Caller: Create,
			Faults:  []Fault{always(reset(CreateRequest, 0))},
			Outcome: Deliver, Code: 0,
			Why: "a POST whose connection resets may have been applied: it must not be sent again"},

		// A SharedIndexInformer on the streaming list: one initial-state fetch, every
		// notification once.
		{Name: "informer/clean", Fixture: "watch-list", Caller: Informer,
			Why: "the replay itself"},
		{Name: "informer/cut-after-initial-events", Fixture: "watch-list", Caller: Informer,
			Faults: []Fault{cutWatch(0, 5, Half)},
			Why:    "a cut after the initial state: client-go re-watches from its last RV by itself"},
		{Name: "informer/error-500", Fixture: "watch-list", Caller: Informer,
			Faults: []Fault{errorEvent(0, 5, 500, 0)},
			Why:    "an in-stream 500 InternalError must not cost a relist"},
		{Name: "informer/error-429", Fixture: "watch-list", Caller: Informer,
			Faults: []Fault{errorEvent(0, 5, 429, 1)},
			Why:    "an in-stream 429 must not cost a relist"},
		{Name: "informer/establish-429", Fixture: "watch-list", Caller: Informer,
			Faults: []Fault{recorded(WatchRequest, 0, 429, "list-429")},
			Why:    "the recorded 429 in place of the streaming list: wait and send it again, no LIST"},
		{Name: "informer/resume-429", Fixture: "watch-list", Caller: Informer,
			Faults: []Fault{cutWatch(0, 5, Half), recorded(WatchRequest, 1, 429, "list-429")},
			Why:    "the recorded 429 in place of the re-watch after a cut: no LIST after a 429"},
		{Name: "informer/resume-503", Fixture: "watch-list", Caller: Informer,
			Faults: []Fault{cutWatch(0, 5, Half), status(WatchRequest, 1, 503)},
			Why:    "the re-watch after a cut gets 503 without Retry-After: must not cost a relist"},
		{Name: "informer/short-watch", Fixture: "watch-list", Caller: Informer,
			Faults: []Fault{cutWatch(0, 5, Half), closeWatch(1, 0)},
			Why:    "the re-watch ends at once with no event: must not cost a relist"},
		{Name: "informer/resume-refused", Fixture: "watch-list", Caller: Informer,
			Faults: []Fault{cutWatch(0, 5, Half), refused(WatchRequest, 1)},
			Why:    "connection refused on the re-watch: client-go backs off and re-watches by itself"},
		{Name: "informer-protobuf/error-500", Fixture: "watch-list-protobuf", Caller: Informer,
			Faults: []Fault{errorEvent(0, 6, 500, 0)},
			Why:    "an in-stream protobuf ERROR 500 must not cost a relist"},
	}, append(append(append(edgeScenarios(), deadlineScenarios()...), listResumeScenarios()...), append(cborScenarios(), informerListScenarios()...)...)...)
}
