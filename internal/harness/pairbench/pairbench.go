package pairbench

import (
	"runtime"
	"testing"
	"time"
)

// Half is one side of a pair: it does the measured work once (for example,
// opens a watch and receives every event). Set-up it needs each time (a
// fresh body, say) goes in Prepare, which is not timed.
type Half struct {
	// Name labels the half's metrics, such as "plain" or "kretry".
	Name string
	// Prepare, if set, runs before each timed run of Do, outside the timer
	// and before the collector runs.
	Prepare func()
	// Do is the measured work.
	Do func()
}

// Run measures baseline and candidate b.N times each, interleaved: every
// iteration runs both, the first of the two alternating, each after a
// runtime.GC and timed on its own. It reports
//
//   - <name>-ns/op for each half: its mean time per run;
//   - <candidate>/<baseline>: the ratio of the two sums;
//   - <name>-allocs/op for each half: heap allocations per run;
//
// per divides the time and allocation figures once more (by events per op,
// say) when it is above 1, under the unit suffix "/event" instead of "/op".
func Run(b *testing.B, baseline, candidate Half, per int) {
	b.Helper()
	halves := [2]*Half{&baseline, &candidate}
	var elapsed [2]time.Duration
	var mallocs [2]uint64
	var before, after runtime.MemStats
	// The benchmark's own timer runs throughout, collections included, so
	// that b.N grows with the wall time a pair takes: the figures that
	// count are the halves' own, reported below.
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := range 2 {
			h := (i + k) % 2 // baseline first on even pairs, candidate first on odd
			half := halves[h]
			if half.Prepare != nil {
				half.Prepare()
			}
			runtime.GC()
			runtime.ReadMemStats(&before)
			start := time.Now()
			half.Do()
			elapsed[h] += time.Since(start)
			runtime.ReadMemStats(&after)
			mallocs[h] += after.Mallocs - before.Mallocs
		}
	}
	unit, div := "/op", float64(b.N)
	if per > 1 {
		unit, div = "/event", float64(b.N)*float64(per)
	}
	for h, half := range halves {
		b.ReportMetric(float64(elapsed[h].Nanoseconds())/div, half.Name+"-ns"+unit)
		b.ReportMetric(float64(mallocs[h])/div, half.Name+"-allocs"+unit)
	}
	if elapsed[0] > 0 {
		b.ReportMetric(float64(elapsed[1])/float64(elapsed[0]), candidate.Name+"/"+baseline.Name)
	}
}
