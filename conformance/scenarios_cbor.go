package conformance

// cborScenarios are the CBOR watch scenarios: streams recorded from a kube-apiserver with
// CBORServingAndStorage by a client asking for application/cbor (client-go's ClientsAllowCBOR
// gate on), answered application/cbor-seq: self-delimiting CBOR data items, nothing between
// them, map keys in random order.
func cborScenarios() []Scenario {
	return []Scenario{
		{Name: "watch-cbor/clean", Fixture: "watch-cbor", Caller: RawWatch,
			Why: "the replay itself"},
		{Name: "watch-cbor/cut-mid-item", Fixture: "watch-cbor", Caller: RawWatch,
			Faults: []Fault{cutWatch(0, 2, Half)},
			Why:    "a connection drops inside a CBOR data item: resume at the last whole event, drop the partial one"},
		{Name: "watch-cbor/cut-in-head", Fixture: "watch-cbor", Caller: RawWatch,
			Faults: []Fault{cutWatch(0, 3, 2)},
			Why:    "a connection drops two bytes into an item, inside its self-described tag"},
		{Name: "watch-cbor/cut-at-boundary", Fixture: "watch-cbor", Caller: RawWatch,
			Faults: []Fault{cutWatch(0, 2, 0)},
			Why:    "a connection drops between two CBOR data items"},
		{Name: "watch-cbor/error-500", Fixture: "watch-cbor", Caller: RawWatch,
			Faults: []Fault{errorEvent(0, 2, 500, 0)},
			Why:    "an in-stream CBOR ERROR 500 InternalError: absorb it and resume"},
		{Name: "watch-cbor/error-410", Fixture: "watch-cbor", Caller: RawWatch,
			Faults:  []Fault{errorEvent(0, 2, 410, 0)},
			Outcome: Deliver, Code: 410,
			Why: "an in-stream CBOR ERROR 410 Expired reaches the caller, and nothing resumes past it"},
		{Name: "watch-cbor/resume-gets-410", Fixture: "watch-cbor", Caller: RawWatch,
			Faults:  []Fault{cutWatch(0, 2, Half), status(WatchRequest, 1, 410)},
			Outcome: Deliver, Code: 410,
			Why: "the resume is answered 410: the caller gets an ERROR 410 event in CBOR"},
		{Name: "watch-cbor/resume-gets-503", Fixture: "watch-cbor", Caller: RawWatch,
			Faults: []Fault{cutWatch(0, 2, Half), status(WatchRequest, 1, 503)},
			Why:    "the resume is answered 503 (a CBOR Status) without Retry-After: retry it"},
		{Name: "watch-list-cbor/cut-in-initial-events", Fixture: "watch-list-cbor", Caller: RawWatch,
			Faults:  []Fault{cutWatch(0, 2, Half)},
			Outcome: PassThrough,
			Why:     "a CBOR streaming list broken before its initial-events-end bookmark has no resume point"},
		{Name: "watch-list-cbor/cut-after-initial-events", Fixture: "watch-list-cbor", Caller: RawWatch,
			Faults: []Fault{cutWatch(0, 5, Half)},
			Why:    "the CBOR streaming list, cut after its initial state: resume without sendInitialEvents"},
		{Name: "informer-cbor/error-500", Fixture: "watch-list-cbor", Caller: Informer,
			Faults: []Fault{errorEvent(0, 5, 500, 0)},
			Why:    "an informer on CBOR: an in-stream ERROR 500 must not cost a relist"},
		{Name: "informer-cbor/cut-after-initial-events", Fixture: "watch-list-cbor", Caller: Informer,
			Faults: []Fault{cutWatch(0, 5, Half)},
			Why:    "an informer on CBOR, cut after the initial state: no relist"},
	}
}
