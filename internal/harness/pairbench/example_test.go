package pairbench_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/kretry/kretry/internal/harness/pairbench"
)

// Two ways to build the same string, measured side by side; in a benchmark
// the body of the func given to testing.Benchmark is the benchmark itself.
func Example() {
	words := strings.Fields("the quick brown fox jumps over the lazy dog")
	result := testing.Benchmark(func(b *testing.B) {
		pairbench.Run(b,
			pairbench.Half{Name: "plus", Do: func() {
				s := ""
				for _, w := range words {
					s += w
				}
			}},
			pairbench.Half{Name: "join", Do: func() { _ = strings.Join(words, "") }},
			len(words))
	})
	var metrics []string
	for name := range result.Extra {
		metrics = append(metrics, name)
	}
	sort.Strings(metrics)
	fmt.Println(strings.Join(metrics, "\n"))
	// Output:
	// join-allocs/event
	// join-ns/event
	// join/plus
	// plus-allocs/event
	// plus-ns/event
}
