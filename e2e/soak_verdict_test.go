//go:build e2e

package e2e_test

import "testing"

// TestLeakVerdicts: the soak's leak rule on made-up samples (no cluster needed).
func TestLeakVerdicts(t *testing.T) {
	const warmup = 100e9 // 100 s
	series := func(goroutines func(i int) int) []soakSample {
		var out []soakSample
		for i := range 30 { // 10 s apart: 10 in the warm-up, 20 judged
			out = append(out, soakSample{At: float64(10 * (i + 1)), RSS: 100 << 20, Heap: 30 << 20,
				Goroutines: goroutines(i), FDs: 300, Sockets: 250, ProxyConns: 55})
		}
		return out
	}
	tests := []struct {
		name       string
		goroutines func(i int) int
		leak       bool
	}{
		{"flat", func(int) int { return 1000 }, false},
		{"growth in the warm-up only", func(i int) int { return 500 + 50*min(i, 10) }, false},
		{"one high sample at the end", func(i int) int { return 1000 + 900*b2i(i == 29) }, false},
		{"noise of a few", func(i int) int { return 1000 + i%7 }, false},
		{"one per 10 s", func(i int) int { return 1000 + 10*i }, true},
		{"a step up that stays", func(i int) int { return 1000 + 200*b2i(i > 20) }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, v := range leakVerdicts(series(tt.goroutines), warmup) {
				want := tt.leak && v.Series == "goroutines"
				if v.Leak != want {
					t.Errorf("%s: leak = %v, want %v (%s)", v.Series, v.Leak, want, v)
				}
			}
		})
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
