package pairbench

import (
	"runtime"
	"slices"
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
//   - <candidate>/<baseline>: the median over the pairs of each pair's
//     ratio, so that a pair a busy machine disturbed (one half preempted,
//     say) moves it little; the ratio of the two sums is in the mean times;
//   - <name>-allocs/op for each half: heap allocations per run;
//
// per divides the time and allocation figures once more (by events per op,
// say) when it is above 1, under the unit suffix "/event" instead of "/op".
func Run(b *testing.B, baseline, candidate Half, per int) {
	b.Helper()
	halves := [2]*Half{&baseline, &candidate}
	var elapsed [2]time.Duration
	ratios := make([]float64, 0, b.N)
	var mallocs [2]uint64
	var before, after runtime.MemStats
	// The benchmark's own timer runs throughout, collections included, so
	// that b.N grows with the wall time a pair takes: the figures that
	// count are the halves' own, reported below.
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var pair [2]time.Duration
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
			pair[h] = time.Since(start)
			elapsed[h] += pair[h]
			runtime.ReadMemStats(&after)
			mallocs[h] += after.Mallocs - before.Mallocs
		}
		if pair[0] > 0 {
			ratios = append(ratios, float64(pair[1])/float64(pair[0]))
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
	if len(ratios) > 0 {
		slices.Sort(ratios)
		median := ratios[len(ratios)/2]
		if len(ratios)%2 == 0 {
			median = (ratios[len(ratios)/2-1] + median) / 2
		}
		b.ReportMetric(median, candidate.Name+"/"+baseline.Name)
	}
}
