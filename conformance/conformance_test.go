package conformance

import (
	"flag"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	"k8s.io/klog/v2"

	"github.com/kretry/kretry/internal/harness/fakeclock"
	"github.com/kretry/kretry/transport"
)

func TestMain(m *testing.M) {
	// client-go's reflector logs every broken watch of the stock runs.
	silenceKlog()
	os.Exit(m.Run())
}

// silenceKlog sends klog nowhere: by default it writes errors to stderr whatever its output.
func silenceKlog() {
	flags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(flags)
	_ = flags.Set("logtostderr", "false")
	_ = flags.Set("alsologtostderr", "false")
	_ = flags.Set("stderrthreshold", "FATAL")
	klog.SetOutput(io.Discard)
}

// kretry on a virtual clock: its waits (Retry-After, backoff, the 30s InternalErrorWindow of
// a 503 that never ends) take no real time, and a fixed jitter makes them repeatable. The
// clock is returned for Options.Elapse: a silent server's silence passes on it.
func kretry() (func(http.RoundTripper) http.RoundTripper, *fakeclock.Clock) {
	clock := fakeclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	return transport.Wrapper(transport.Config{
		Clock: clock,
		Rand:  func() float64 { return 0.5 },
	}), clock
}

// TestKretry is the suite's verdict on kretry: it must pass every scenario.
func TestKretry(t *testing.T) {
	wrap, clock := kretry()
	RunWith(t, wrap, Options{Elapse: clock.Advance})
}

// failures runs the suite on wrap and returns the names of the scenarios it fails, and
// fails t on any skipped scenario (a fixture gone missing would shrink the suite silently).
func failures(t *testing.T, wrap func(http.RoundTripper) http.RoundTripper) (map[string]string, []Result) {
	t.Helper()
	// Stock client-go and go-retryablehttp sleep on their own wall clocks (client-go's 1s
	// Retry-After waits, its reflector's backoff); scenarios run side by side so that the
	// sleeps overlap.
	results := EvaluateWith(wrap, Options{Parallel: len(Scenarios())})
	failed := map[string]string{}
	for _, res := range results {
		switch {
		case res.Skipped && res.Reason == WatchListOff:
			// This client-go's informers start with a LIST: informer-list covers them.
		case res.Skipped:
			t.Errorf("%s skipped: %s", res.Scenario.Name, res.Reason)
		case !res.Passed:
			failed[res.Scenario.Name] = res.Reason
		}
	}
	return failed, results
}

// timingDependent are the scenarios whose stock verdict depends on client-go's own wall
// clock: its reflector calls a re-watch that ends without an event "very short" (and
// relists) only if it lasted under a second, which a heavily loaded machine can exceed.
var timingDependent = []string{"informer/short-watch", "informer-list/short-watch"}

// gateSkipped are the scenarios of results skipped because this client-go's informers do not
// start with a streaming list.
func gateSkipped(results []Result) map[string]bool {
	skipped := map[string]bool{}
	for _, res := range results {
		if res.Skipped && res.Reason == WatchListOff {
			skipped[res.Scenario.Name] = true
		}
	}
	return skipped
}

// assertFailureSet compares the failed scenarios with want, both ways; a scenario this
// client-go skips (gateSkipped) need not fail.
func assertFailureSet(t *testing.T, failed map[string]string, results []Result, want []string) {
	t.Helper()
	skipped := gateSkipped(results)
	for _, name := range want {
		if _, ok := failed[name]; !ok && !slices.Contains(timingDependent, name) && !skipped[name] {
			t.Errorf("%s passed; the suite must catch it failing", name)
		}
	}
	for name, reason := range failed {
		if !slices.Contains(want, name) {
			t.Errorf("%s failed unexpectedly: %s", name, reason)
		}
	}
}

// TestStockClientGoFails proves the suite detects what kretry exists for: stock client-go
// fails exactly these scenarios, and passes those where retrying is wrong or client-go
// already copes (429 and 504 with Retry-After, a reset before a GET's response, an informer
// re-watching after a cut, a 429 or a refused connection).
func TestStockClientGoFails(t *testing.T) {
	failed, results := failures(t, nil)
	assertFailureSet(t, failed, results, append([]string{
		"watch-json/cut-mid-frame",
		"watch-json/cut-at-boundary",
		"watch-json/cut-twice",
		"watch-json/early-close",
		"watch-json/short-watch",
		"watch-json/error-429",
		"watch-json/error-500",
		"watch-json/resume-gets-410",
		"watch-json/resume-gets-410-then-silence",
		"watch-json/resume-gets-503",
		"watch-json/resume-refused",
		"watch-json/establish-503",
		"watch-json/establish-500",
		"watch-json/establish-refused",
		"watch-protobuf/cut-in-length-prefix",
		"watch-protobuf/cut-mid-frame",
		"watch-protobuf/error-500",
		"watch-protobuf/resume-gets-410",
		"watch-list/cut-after-initial-events",
		"watch-list/error-500-after-initial-events",
		"watch-list/establish-503",
		"watch-list-protobuf/cut-after-initial-events",
		"watch-rv0/cut-after-initial-events",
		"list-paged/cut-mid-body",
		"list-paged/503",
		"list-paged/500",
		"list-paged/refused",
		"list-paged-protobuf/cut-mid-body",
		"informer/error-500",
		"informer/resume-503",
		"informer/short-watch",
		"informer-protobuf/error-500",
		"informer-list/page-503",
		"informer-list/page-refused",
		"informer-list/error-500",
		"informer-list/establish-503",
		"informer-list/resume-503",
		"informer-list/short-watch",
		"informer-list-protobuf/error-500",
		"watch-json/resume-retry-remaining-timeout",
		"watch-json/establish-503-past-deadline",
		"watch-json/error-500-past-window",
	}, append(cborFailures, listResumeFailures...)...))
	// The reasons are the caller's view: client-go decoded the injected ERROR frames
	// (JSON and protobuf) and the relists were seen by the server.
	for name, want := range map[string]string{
		"watch-json/cut-mid-frame":     "watch ended after 2 of",
		"watch-json/error-500":         "is ERROR 500 InternalError",
		"watch-protobuf/error-500":     "is ERROR 500 InternalError",
		"watch-json/establish-refused": "connection refused",
		"informer/error-500":           "relist:",
		"informer-protobuf/error-500":  "relist:",
		"watch-cbor/error-500":         "is ERROR 500 InternalError",
		"informer-cbor/error-500":      "relist:",
		"informer-list/error-500":      "relist:",
		"informer-list/page-503":       "relist:",
	} {
		if skipped := gateSkipped(results); !skipped[name] && !strings.Contains(failed[name], want) {
			t.Errorf("%s: reason %q, want it to mention %q", name, failed[name], want)
		}
	}
}

// TestRetryEverythingFails proves the scenarios where retrying is wrong catch a transport
// that retries everything: go-retryablehttp (waits shortened to milliseconds) sends a POST
// again after a 503 or a reset, and when its retries run out it hands client-go its own
// error instead of the server's Status. It helps with establishment failures, not with
// anything inside a body.
func TestRetryEverythingFails(t *testing.T) {
	wrap := func(next http.RoundTripper) http.RoundTripper {
		client := retryablehttp.NewClient()
		client.HTTPClient.Transport = next
		client.Logger = nil
		client.RetryWaitMin, client.RetryWaitMax = time.Millisecond, 5*time.Millisecond
		return &retryablehttp.RoundTripper{Client: client}
	}
	failed, results := failures(t, wrap)
	for _, name := range []string{"create/503", "create/reset"} {
		if !strings.Contains(failed[name], "POST was retried") {
			t.Errorf("%s: %q, want the retried POST caught", name, failed[name])
		}
	}
	if reason := failed["list-paged/503-persistent"]; !strings.Contains(reason, "not the server's 503 Status") {
		t.Errorf("list-paged/503-persistent: %q, want the lost Status caught", reason)
	}
	assertFailureSet(t, failed, results, append([]string{
		"watch-json/cut-mid-frame",
		"watch-json/cut-at-boundary",
		"watch-json/cut-twice",
		"watch-json/early-close",
		"watch-json/short-watch",
		"watch-json/error-429",
		"watch-json/error-500",
		"watch-json/resume-gets-410",
		"watch-json/resume-gets-410-then-silence",
		"watch-json/resume-gets-503",
		"watch-json/resume-refused",
		"watch-protobuf/cut-in-length-prefix",
		"watch-protobuf/cut-mid-frame",
		"watch-protobuf/error-500",
		"watch-protobuf/resume-gets-410",
		"watch-list/cut-after-initial-events",
		"watch-list/error-500-after-initial-events",
		"watch-list-protobuf/cut-after-initial-events",
		"watch-rv0/cut-after-initial-events",
		"list-paged/cut-mid-body",
		"list-paged/503-persistent",
		"list-paged-protobuf/cut-mid-body",
		"create/503",
		"create/reset",
		"informer/error-500",
		"informer/short-watch",
		"informer-protobuf/error-500",
		"informer-list/error-500",
		"informer-list/short-watch",
		"informer-list-protobuf/error-500",
		"watch-json/resume-retry-remaining-timeout",
		"watch-json/establish-503-past-deadline",
		"watch-json/error-500-past-window",
	}, append(cborFailures, listResumeFailures...)...))
}
