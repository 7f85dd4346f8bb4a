package main

import (
	"fmt"
	"time"
)

// The verdict under the table is computed from the numbers, never canned: here from a
// made-up run in which kretry's informer relisted once for a 410 and its raw watch saw
// every change.
func Example_verdict() {
	res := &result{changes: 600, clients: []clientResult{
		{name: stockInformer, fetches: 5, fetchBytes: 5 << 20, missed: 61, expired: 1},
		{name: kretryInformer, fetches: 2, fetchBytes: 2 << 20, missed: 6, expired: 1},
		{name: stockRawWatch, fetches: 1, ended: true, endedAt: 1550 * time.Millisecond, missed: 570},
		{name: kretryRawWatch, fetches: 1},
	}}
	fmt.Println(verdict(res))
	// Output:
	// verdict: kretry's informer fetched the full state 2× against the stock one's 5× (2.0 MiB vs 5.0 MiB), once plus once per 410 (1), and missed 6 changes to its 61; kretry's raw watch stayed open and saw all 600 changes, in order; the stock one ended at 1.55s, missing 570.
}
