package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/kretry/kretry/internal/demoserver"
	"github.com/kretry/kretry/internal/report"
)

// printTable writes the final comparison: one row per measure, one column per client,
// what a user cares about first; then the per-kind fault counts and a verdict computed
// from the numbers.
func printTable(out io.Writer, res *result) {
	var rows [][]string
	row := func(label string, cell func(c clientResult) string) {
		cells := []string{label}
		for _, c := range res.clients {
			cells = append(cells, cell(c))
		}
		rows = append(rows, cells)
	}
	gap := func() { rows = append(rows, nil) }
	known := func(f func(c clientResult) string) func(c clientResult) string {
		if res.real {
			return func(clientResult) string { return "-" }
		}
		return f
	}

	row("", func(c clientResult) string { return c.name })
	row("initial-state fetches", func(c clientResult) string { return fmt.Sprint(c.fetches) })
	row("  bytes they cost", func(c clientResult) string { return report.Bytes(c.fetchBytes) })
	row("watches that ended", func(c clientResult) string {
		if c.raw {
			if c.ended {
				return fmt.Sprintf("yes, at %s", roundDuration(c.endedAt))
			}
			return "no"
		}
		return fmt.Sprint(c.watchEnds)
	})
	row(fmt.Sprintf("changes missed (of %d)", res.changes), known(func(c clientResult) string { return fmt.Sprint(c.missed) }))
	row("time to recover (mean / max)", known(func(c clientResult) string { return recoveryLabel(c.recovery) }))
	row("cache == server", func(c clientResult) string {
		switch {
		case c.consistent:
			return fmt.Sprintf("yes (%s)", roundDuration(c.settledIn))
		case c.raw && c.ended:
			return "no: ended"
		}
		return fmt.Sprintf("no (after %s)", roundDuration(res.settle))
	})
	gap()
	if !res.real {
		row("410 Expired received", func(c clientResult) string { return fmt.Sprint(c.expired) })
	}
	row("requests on the wire", func(c clientResult) string { return fmt.Sprint(c.requests) })
	if !res.real {
		row("  answered 429 or 503", func(c clientResult) string { return fmt.Sprint(c.rejected) })
	}
	row("bytes received", func(c clientResult) string { return report.Bytes(c.bytes) })
	row("kretry retries + resumes", func(c clientResult) string {
		if !c.kretry {
			return "-"
		}
		return fmt.Sprint(c.retries)
	})
	if !res.real {
		row("faults injected", func(c clientResult) string { return fmt.Sprint(c.faults) })
	}

	widths := make([]int, len(rows[0]))
	for _, cells := range rows {
		for i, cell := range cells {
			widths[i] = max(widths[i], len([]rune(cell)))
		}
	}
	fmt.Fprintln(out)
	for _, cells := range rows {
		if cells == nil {
			fmt.Fprintln(out)
			continue
		}
		line := fmt.Sprintf("%-*s", widths[0], cells[0])
		for i, cell := range cells[1:] {
			line += fmt.Sprintf("   %*s", widths[i+1], cell)
		}
		fmt.Fprintln(out, line)
	}
	fmt.Fprintln(out)
	if !res.real {
		fmt.Fprintf(out, "seed %d, %s of faults; faults by kind:\n", res.seed, roundDuration(res.duration))
		for _, c := range res.clients {
			fmt.Fprintf(out, "  %-17s %s\n", c.name+":", faultsLabel(c.faultKinds))
		}
	}
	fmt.Fprintln(out, "initial-state fetches: LISTs and watch-lists (sendInitialEvents=true) the server answered 200: each sends the whole collection.")
	fmt.Fprintln(out, "watches that ended: streams that ended under the caller (client-go, or the raw watcher's channel) or brought an ERROR event.")
	if !res.real {
		fmt.Fprintln(out, "changes missed: writes during the run the client's handlers or channel never got as an event (a relist folds them into one).")
		fmt.Fprintln(out, "time to recover: per fault, until the client saw a change made after it (or the final state); never: not by the end.")
		fmt.Fprintln(out, "compaction (410): the one fault where a relist is the right answer; only the informers get one.")
	}
	fmt.Fprintln(out)
	fmt.Fprintln(out, verdict(res))
}

// verdict sums the table up in one line, from the numbers.
func verdict(res *result) string {
	stock, kretry := res.client(stockInformer), res.client(kretryInformer)
	stockRaw, kretryRaw := res.client(stockRawWatch), res.client(kretryRawWatch)
	var b strings.Builder
	b.WriteString("verdict: ")
	switch {
	case kretry.fetches < stock.fetches:
		fmt.Fprintf(&b, "kretry's informer fetched the full state %d× against the stock one's %d× (%s vs %s)",
			kretry.fetches, stock.fetches, report.Bytes(kretry.fetchBytes), report.Bytes(stock.fetchBytes))
	case kretry.fetches == stock.fetches:
		fmt.Fprintf(&b, "both informers fetched the full state %d×", kretry.fetches)
	default:
		fmt.Fprintf(&b, "kretry's informer fetched the full state more often than the stock one (%d× vs %d×)", kretry.fetches, stock.fetches)
	}
	if !res.real {
		if kretry.fetches == 1+kretry.expired {
			fmt.Fprintf(&b, ", once plus once per 410 (%d)", kretry.expired)
		} else {
			fmt.Fprintf(&b, ", not once plus once per 410 (%d received)", kretry.expired)
		}
		fmt.Fprintf(&b, ", and missed %d changes to its %d", kretry.missed, stock.missed)
	}
	b.WriteString("; ")
	switch {
	case kretryRaw.ended:
		fmt.Fprintf(&b, "kretry's raw watch ended at %s", roundDuration(kretryRaw.endedAt))
	case res.real:
		b.WriteString("kretry's raw watch stayed open")
	case kretryRaw.missed == 0 && kretryRaw.outOfOrder == 0 && kretryRaw.errorEvents == 0:
		fmt.Fprintf(&b, "kretry's raw watch stayed open and saw all %d changes, in order", res.changes)
	default:
		fmt.Fprintf(&b, "kretry's raw watch stayed open but missed %d changes (%d out of order, %d ERROR events)",
			kretryRaw.missed, kretryRaw.outOfOrder, kretryRaw.errorEvents)
	}
	switch {
	case stockRaw.ended && res.real:
		fmt.Fprintf(&b, "; the stock one ended at %s.", roundDuration(stockRaw.endedAt))
	case stockRaw.ended:
		fmt.Fprintf(&b, "; the stock one ended at %s, missing %d.", roundDuration(stockRaw.endedAt), stockRaw.missed)
	default:
		b.WriteString("; the stock one stayed open too.")
	}
	return b.String()
}

func recoveryLabel(r recoveryStats) string {
	switch {
	case r.count == 0 && r.unrecovered == 0:
		return "-"
	case r.count == 0:
		return fmt.Sprintf("never (%d)", r.unrecovered)
	}
	s := fmt.Sprintf("%s / %s", roundDuration(r.mean), roundDuration(r.max))
	if r.unrecovered > 0 {
		s += fmt.Sprintf(" (%d never)", r.unrecovered)
	}
	return s
}

func faultsLabel(kinds map[demoserver.FaultKind]int64) string {
	if len(kinds) == 0 {
		return "none"
	}
	var parts []string
	for kind, n := range kinds {
		parts = append(parts, fmt.Sprintf("%s ×%d", kind, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func roundDuration(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond)
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}
