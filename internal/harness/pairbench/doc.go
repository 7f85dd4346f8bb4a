// Package pairbench measures two ways of doing the same work side by side in
// one benchmark, for kretry's own benchmarks: a baseline (a plain client) and
// a candidate (the same client through kretry), interleaved pair by pair in
// one process so that a busy machine's drift, the garbage collector's state
// and the order of the two weigh on both alike.
//
// Each pair runs the collector before each half (with the benchmark's timer
// stopped), alternates which half goes first, and times each half on its
// own. The benchmark reports both halves' mean time and the median of the
// pairs' ratios (candidate/baseline), so that benchstat's median over -count
// runs is a median of ratios each measured in the same conditions, and a
// pair a busy machine disturbed moves it little.
package pairbench
