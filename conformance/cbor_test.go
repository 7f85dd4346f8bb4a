package conformance

// cborFailures are the CBOR scenarios stock client-go and go-retryablehttp both fail, as
// they fail their JSON and protobuf twins: every break inside a CBOR stream, an in-stream
// ERROR 500 (client-go decodes the injected CBOR frame and hands it over, or relists), and
// the resumes. They pass the clean replay, the delivered 410, the break inside a streaming
// list's initial state, and an informer cut after it (client-go re-watches from its RV).
var cborFailures = []string{
	"watch-cbor/cut-mid-item",
	"watch-cbor/cut-in-head",
	"watch-cbor/cut-at-boundary",
	"watch-cbor/error-500",
	"watch-cbor/resume-gets-410",
	"watch-cbor/resume-gets-503",
	"watch-list-cbor/cut-after-initial-events",
	"informer-cbor/error-500",
}
