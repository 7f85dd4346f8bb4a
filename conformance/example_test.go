package conformance_test

import (
	"fmt"
	"net/http"
	"time"

	"github.com/kretry/kretry/conformance"
	"github.com/kretry/kretry/internal/harness/fakeclock"
	"github.com/kretry/kretry/transport"
)

// Compare stock client-go and kretry on a watch cut mid-frame and on an in-stream 410.
func Example() {
	var picked []conformance.Scenario
	for _, sc := range conformance.Scenarios() {
		if sc.Name == "watch-json/cut-mid-frame" || sc.Name == "watch-json/error-410" {
			picked = append(picked, sc)
		}
	}
	// kretry on a virtual clock: its waits take no time.
	kretry := transport.Wrapper(transport.Config{Clock: fakeclock.New(time.Unix(0, 0))})
	for _, tr := range []struct {
		name string
		wrap func(http.RoundTripper) http.RoundTripper
	}{{"stock", nil}, {"kretry", kretry}} {
		for _, res := range conformance.EvaluateWith(tr.wrap, conformance.Options{Scenarios: picked}) {
			fmt.Println(tr.name, res.Scenario.Name, res.Passed)
		}
	}
	// Output:
	// stock watch-json/cut-mid-frame false
	// stock watch-json/error-410 true
	// kretry watch-json/cut-mid-frame true
	// kretry watch-json/error-410 true
}
