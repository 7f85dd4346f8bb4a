package conformance

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kretry/kretry/internal/harness/fixture"
)

// DefaultTimeout bounds one scenario run when Options.Timeout is zero. A transport that
// waits for real (client-go's own Retry-After sleeps, go-retryablehttp's backoff) needs a
// few seconds; one that hangs fails at the deadline.
const DefaultTimeout = 15 * time.Second

// bodyCloseGrace is how long the client side has, once the caller is done and its context
// has ended, to close every response body it got. A variable for the suite's own tests.
var bodyCloseGrace = 2 * time.Second

// Options tunes a suite run; the zero Options runs every scenario on the recorded fixtures.
type Options struct {
	// Fixtures holds the recorded files, <name>.json; nil means the fixtures recorded into
	// the package (conformance/testdata).
	Fixtures fs.FS
	// Scenarios to run; nil means Scenarios().
	Scenarios []Scenario
	// Timeout bounds each scenario; zero means DefaultTimeout.
	Timeout time.Duration
	// Parallel runs up to that many scenarios at once (Evaluate), or marks the subtests
	// parallel (Run, when > 1). Leave it at 0 or 1 when the transport under test shares a
	// virtual clock across scenarios: their waits would add up on it.
	Parallel int
	// Elapse makes time pass on the clock of a transport that runs on a virtual one, where a
	// scenario has time pass (Fault.Elapse: a server that does not answer, a body that
	// streams for long); nil: nothing, the transport runs on the wall clock and the replay
	// makes it wait for real where it must (a silent server stays silent).
	Elapse func(time.Duration)
}

// Result is the verdict on one scenario for one transport.
type Result struct {
	Scenario Scenario
	// Passed: the transport did what a correct one does. Skipped: the scenario could not
	// run (Reason says why, e.g. a fixture that is not recorded).
	Passed, Skipped bool
	// Reason says in a few words why the scenario failed or was skipped.
	Reason string
	// Requests is what the server saw and answered, one line each.
	Requests []string
	// Elapsed is the wall time the scenario took.
	Elapsed time.Duration
}

// Verdict is "pass", "FAIL: <reason>" or "skip: <reason>".
func (r Result) Verdict() string {
	switch {
	case r.Skipped:
		return "skip: " + r.Reason
	case r.Passed:
		return "pass"
	}
	return "FAIL: " + r.Reason
}

// Run runs every scenario as a subtest of t with the transport wrap (nil: stock client-go),
// and fails each subtest whose scenario the transport does not pass.
func Run(t *testing.T, wrap func(http.RoundTripper) http.RoundTripper) {
	t.Helper()
	RunWith(t, wrap, Options{})
}

// RunWith is Run with options.
func RunWith(t *testing.T, wrap func(http.RoundTripper) http.RoundTripper, opts Options) {
	t.Helper()
	fixtures, err := loadFixtures(opts.Fixtures)
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range opts.scenarios() {
		t.Run(sc.Name, func(t *testing.T) {
			if opts.Parallel > 1 {
				t.Parallel()
			}
			res := evaluate(sc, wrap, fixtures, opts)
			switch {
			case res.Skipped:
				t.Skip(res.Reason)
			case !res.Passed:
				t.Errorf("%s\n  why: %s\n  faults: %s\n  server saw:\n    %s", res.Reason, sc.Why,
					sc.describeFaults(), strings.Join(res.Requests, "\n    "))
			}
		})
	}
}

// Evaluate runs every scenario with the transport wrap (nil: stock client-go) and returns
// the verdicts in scenario order. It needs no testing.T: cmd/kretry-conformance prints them.
func Evaluate(wrap func(http.RoundTripper) http.RoundTripper) []Result {
	return EvaluateWith(wrap, Options{})
}

// EvaluateWith is Evaluate with options.
func EvaluateWith(wrap func(http.RoundTripper) http.RoundTripper, opts Options) []Result {
	scenarios := opts.scenarios()
	results := make([]Result, len(scenarios))
	fixtures, err := loadFixtures(opts.Fixtures)
	if err != nil {
		for i, sc := range scenarios {
			results[i] = Result{Scenario: sc, Skipped: true, Reason: err.Error()}
		}
		return results
	}
	workers := max(opts.Parallel, 1)
	sem := make(chan struct{}, workers)
	var wg sync.WaitGroup
	for i, sc := range scenarios {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			results[i] = evaluate(sc, wrap, fixtures, opts)
		}()
	}
	wg.Wait()
	return results
}

func (o Options) scenarios() []Scenario {
	if o.Scenarios != nil {
		return o.Scenarios
	}
	return Scenarios()
}

func (o Options) timeout() time.Duration {
	if o.Timeout > 0 {
		return o.Timeout
	}
	return DefaultTimeout
}

// evaluate runs one scenario.
func evaluate(sc Scenario, wrap func(http.RoundTripper) http.RoundTripper, fixtures map[string]*fixture.File, opts Options) Result {
	timeout := opts.timeout()
	start := time.Now()
	res := Result{Scenario: sc}
	r, err := newReplay(sc, fixtures)
	if err == nil {
		r.elapse = opts.Elapse
		err = r.informerStartsHere()
	}
	if err != nil {
		var skip errSkip
		res.Skipped = errors.As(err, &skip)
		res.Reason = err.Error()
		return res
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cs, err := r.clientset(wrap)
	if err != nil {
		res.Reason = err.Error()
		return res
	}
	obs := r.call(ctx, cs)
	cancel()
	res.Reason = r.verdict(obs)
	if res.Reason == "" {
		// With the caller done and its context ended, every body must get closed: one
		// that is not holds a connection forever.
		if open := r.unclosedBody(bodyCloseGrace); open != "" {
			res.Reason = fmt.Sprintf("the response body of %s was never closed", open)
		}
	}
	res.Passed = res.Reason == ""
	r.mu.Lock()
	res.Requests = append([]string(nil), r.log...)
	r.mu.Unlock()
	res.Elapsed = time.Since(start)
	return res
}

// loadFixtures reads every <name>.json of fsys (nil: the package's testdata directory).
func loadFixtures(fsys fs.FS) (map[string]*fixture.File, error) {
	if fsys == nil {
		fsys = defaultFixtures()
	}
	names, err := fs.Glob(fsys, "*.json")
	if err != nil {
		return nil, err
	}
	files := map[string]*fixture.File{}
	for _, name := range names {
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		var f fixture.File
		if err := json.Unmarshal(data, &f); err != nil {
			return nil, fmt.Errorf("fixture %s: %w", name, err)
		}
		if err := f.Validate(); err != nil {
			return nil, err
		}
		files[strings.TrimSuffix(path.Base(name), ".json")] = &f
	}
	return files, nil
}

// recordedFixtures are the fixtures recorded from kube-apiserver v1.37.2 by
// cmd/kretry-record, built into the package so that Run works from any module.
//
//go:embed testdata/*.json
var recordedFixtures embed.FS

// defaultFixtures is the embedded testdata directory.
func defaultFixtures() fs.FS {
	sub, err := fs.Sub(recordedFixtures, "testdata")
	if err != nil {
		panic(err) // a constant path into an embedded directory
	}
	return sub
}
