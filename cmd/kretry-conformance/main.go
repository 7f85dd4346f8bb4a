package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"k8s.io/klog/v2"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/kretry/kretry/conformance"
	"github.com/kretry/kretry/transport"
)

// contender is a transport wrapper under a name; a nil wrap is stock client-go.
type contender struct {
	name string
	wrap func(http.RoundTripper) http.RoundTripper
}

// retryableHTTP is go-retryablehttp's RoundTripper around client-go's transport with the
// defaults of retryablehttp.NewClient (4 retries, waits from 1s to 30s, Retry-After honoured
// for 429 and 503, every method retried), except that its logger, which writes every attempt
// to stderr, is off.
func retryableHTTP(next http.RoundTripper) http.RoundTripper {
	client := retryablehttp.NewClient()
	client.HTTPClient.Transport = next
	client.Logger = nil
	return &retryablehttp.RoundTripper{Client: client}
}

func main() {
	run := flag.String("run", "", "run only the scenarios whose name matches this regular expression")
	timeout := flag.Duration("timeout", time.Minute, "bound on each scenario")
	verbose := flag.Bool("v", false, "after the table, print each failure in full with the requests the server saw")
	width := flag.Int("width", 44, "width of a verdict cell; longer reasons are cut")
	flag.Parse()

	silenceKlog()

	scenarios := conformance.Scenarios()
	if *run != "" {
		re, err := regexp.Compile(*run)
		if err != nil {
			fmt.Fprintln(os.Stderr, "kretry-conformance:", err)
			os.Exit(2)
		}
		var picked []conformance.Scenario
		for _, sc := range scenarios {
			if re.MatchString(sc.Name) {
				picked = append(picked, sc)
			}
		}
		scenarios = picked
	}
	if len(scenarios) == 0 {
		fmt.Fprintln(os.Stderr, "kretry-conformance: no scenario matches", *run)
		os.Exit(2)
	}

	contestants := []contender{
		{"stock client-go", nil},
		{"go-retryablehttp", retryableHTTP},
		{"kretry", transport.Wrapper(transport.Config{})},
	}
	start := time.Now()
	results := make([][]conformance.Result, len(contestants))
	var wg sync.WaitGroup
	for i, c := range contestants {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = conformance.EvaluateWith(c.wrap, conformance.Options{
				Scenarios: scenarios, Timeout: *timeout, Parallel: len(scenarios),
			})
		}()
	}
	wg.Wait()

	fmt.Printf("kretry conformance: %d scenarios replayed from kube-apiserver v1.37.2 recordings, %s\n\n",
		len(scenarios), time.Since(start).Round(time.Second))
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	header := []string{"SCENARIO"}
	for _, c := range contestants {
		header = append(header, strings.ToUpper(c.name))
	}
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for i, sc := range scenarios {
		row := []string{sc.Name}
		for j := range contestants {
			row = append(row, cut(results[j][i].Verdict(), *width))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	tw.Flush()

	fmt.Println()
	var summary []string
	kretryFailed := false
	for j, c := range contestants {
		passed, skipped := 0, 0
		for _, res := range results[j] {
			switch {
			case res.Skipped:
				skipped++
			case res.Passed:
				passed++
			case c.name == "kretry":
				kretryFailed = true
			}
		}
		s := fmt.Sprintf("%s %d/%d", c.name, passed, len(scenarios)-skipped)
		if skipped > 0 {
			s += fmt.Sprintf(" (%d skipped)", skipped)
		}
		summary = append(summary, s)
	}
	fmt.Println("passed: " + strings.Join(summary, ", "))

	if *verbose {
		for j, c := range contestants {
			for _, res := range results[j] {
				if res.Passed {
					continue
				}
				fmt.Printf("\n%s, %s: %s\n  why: %s\n  took %s; the server saw:\n", c.name, res.Scenario.Name,
					res.Verdict(), res.Scenario.Why, res.Elapsed.Round(time.Millisecond))
				for _, line := range res.Requests {
					fmt.Println("    " + line)
				}
			}
		}
	}
	if kretryFailed {
		os.Exit(1)
	}
}

// silenceKlog sends klog nowhere: client-go logs every broken watch, and by default klog
// writes errors to stderr whatever its output; the table is the command's output.
func silenceKlog() {
	flags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(flags)
	_ = flags.Set("logtostderr", "false")
	_ = flags.Set("alsologtostderr", "false")
	_ = flags.Set("stderrthreshold", "FATAL")
	klog.SetOutput(io.Discard)
}

// cut shortens s to width runes.
func cut(s string, width int) string {
	r := []rune(s)
	if width <= 1 || len(r) <= width {
		return s
	}
	return string(r[:width-1]) + "…"
}
