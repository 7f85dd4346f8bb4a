package conformance

// listResumeFailures are the LIST resume scenarios stock client-go and go-retryablehttp fail:
// every broken body (neither retries inside one). The 410 at the exact resourceVersion they
// pass: the caller gets the cut, as it must.
var listResumeFailures = []string{
	"list-exact/cut-page-1",
	"list-exact/cut-page-2",
	"list-exact/cut-twice",
	"list-exact/cut-near-end",
	"list-exact/resume-gets-503",
	"list-exact/resume-unanswered",
	"list-exact/503-then-long-body-cut",
	"list-exact-protobuf/cut-page-1",
	"list-exact-protobuf/cut-page-2",
	"list-rv0-exact/cut-mid-body",
}
