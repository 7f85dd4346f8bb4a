package conformance

import "time"

// listResumeScenarios are LIST bodies broken mid-read, replayed from fixtures that recorded,
// next to each answer, the same list asked for again as a resume asks for it (at the exact
// resourceVersion the answer carried, or with the page's continue token), byte-identical to
// the first. A correct transport delivers every item once; a transport that retries a page
// whole with the identical query passes too, but one that asks for anything else (a page at
// another resourceVersion, a list without the continue) gets no answer from the replay.
func listResumeScenarios() []Scenario {
	return []Scenario{
		{Name: "list-exact/cut-page-1", Fixture: "list-exact", Caller: Pager,
			Faults: []Fault{cutList(0, Half)},
			Why:    "page 1's body breaks halfway: ask for it again at resourceVersionMatch=Exact with its RV and limit"},
		{Name: "list-exact/cut-page-2", Fixture: "list-exact", Caller: Pager,
			Faults: []Fault{cutList(1, Half)},
			Why:    "page 2's body breaks halfway: ask for it again with its continue token"},
		{Name: "list-exact/cut-twice", Fixture: "list-exact", Caller: Pager,
			Faults: []Fault{cutList(0, 400), cutList(1, 900)},
			Why:    "page 1 breaks, and its resume breaks further on: resume again from there"},
		{Name: "list-exact/cut-near-end", Fixture: "list-exact", Caller: Pager,
			Faults: []Fault{cutList(0, 1300)},
			Why:    "page 1 breaks 9 bytes before its end"},
		{Name: "list-exact/resume-gets-503", Fixture: "list-exact", Caller: Pager,
			Faults: []Fault{cutList(0, Half), status(ListRequest, 1, 503)},
			Why:    "the resume of a broken page gets 503 without Retry-After: retry it"},
		{Name: "list-exact/resume-gets-410", Fixture: "list-exact", Caller: Pager,
			Faults:  []Fault{cutList(0, Half), status(ListRequest, 1, 410)},
			Outcome: Deliver, Code: 0,
			Why: "the RV is compacted when the page is asked for again: the caller gets the cut as it was, never the 410 (the pager would take it for an expired continue token)"},
		{Name: "list-exact-protobuf/cut-page-1", Fixture: "list-exact-protobuf", Caller: Pager,
			Faults: []Fault{cutList(0, Half)},
			Why:    "a protobuf page 1 breaks halfway: ask for it again at its exact RV"},
		{Name: "list-exact-protobuf/cut-page-2", Fixture: "list-exact-protobuf", Caller: Pager,
			Faults: []Fault{cutList(1, Half)},
			Why:    "a protobuf page 2 breaks halfway: ask for it again with its continue token"},
		{Name: "list-exact/resume-unanswered", Fixture: "list-exact", Caller: Pager,
			Faults: []Fault{cutList(0, Half), silent(ListRequest, 1, 25*time.Second)},
			Why:    "the resume of a broken page reaches a server that accepts it and never answers: abandon it (a bounded wait for an answer) and resume again within the window"},
		{Name: "list-exact/resume-never-answered", Fixture: "list-exact", Caller: List,
			Faults:  []Fault{cutList(0, Half), always(silent(ListRequest, 1, 25*time.Second))},
			Outcome: Deliver, Code: 0,
			Why: "every resume goes unanswered: the caller (a LIST with no deadline, as an informer's) gets the cut within the window plus the bound, never a hang"},
		{Name: "list-exact/503-then-long-body-cut", Fixture: "list-exact", Caller: Pager,
			Faults: []Fault{status(ListRequest, 0, 503), {Kind: Cut, On: ListRequest, Nth: 1, Into: Half, Elapse: 40 * time.Second}},
			Why:    "a 503, then the retry's body streams for longer than the window and is cut: its bytes ended the failure run the 503 began, so resume it"},
		{Name: "list-rv0-exact/cut-mid-body", Fixture: "list-rv0-exact", Caller: Pager,
			Faults: []Fault{cutList(0, Half)},
			Why:    "a whole list from the watch cache (resourceVersion=0, its limit ignored) breaks: ask at its exact RV without the limit"},
	}
}
