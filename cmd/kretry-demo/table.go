package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/kretry/kretry/internal/harness/demoserver"
)

// printTable writes the final comparison: one row per measure, one column per informer.
func printTable(out io.Writer, res *result) {
	var rows [][]string
	row := func(label string, cell func(c clientResult) string) {
		cells := []string{label}
		for _, c := range res.clients {
			cells = append(cells, cell(c))
		}
		rows = append(rows, cells)
	}
	row("", func(c clientResult) string { return c.name })
	if !res.real {
		row("faults injected", func(c clientResult) string { return fmt.Sprint(c.faults) })
		row("410 Expired received", func(c clientResult) string { return fmt.Sprint(c.expired) })
	}
	row("LISTs (initial-state fetches)", func(c clientResult) string { return fmt.Sprint(c.fetches) })
	row("requests", func(c clientResult) string { return fmt.Sprint(c.requests) })
	row("bytes received", func(c clientResult) string { return bytesLabel(c.bytes) })
	row("events delivered", func(c clientResult) string { return fmt.Sprint(c.events) })
	row("kretry retries + resumes", func(c clientResult) string {
		if c.name != kretryName {
			return "-"
		}
		return fmt.Sprint(c.retries)
	})
	row("cache == server", func(c clientResult) string {
		if !c.consistent {
			return fmt.Sprintf("no (after %s)", roundDuration(res.settle))
		}
		return fmt.Sprintf("yes (%s)", roundDuration(c.settledIn))
	})
	if !res.real {
		row("time to recover (mean / max)", func(c clientResult) string {
			r := c.recovery
			if r.count == 0 && r.unrecovered == 0 {
				return "-"
			}
			s := fmt.Sprintf("%s / %s", roundDuration(r.mean), roundDuration(r.max))
			if r.unrecovered > 0 {
				s += fmt.Sprintf(" (%d never)", r.unrecovered)
			}
			return s
		})
	}

	widths := make([]int, len(rows[0]))
	for _, cells := range rows {
		for i, cell := range cells {
			widths[i] = max(widths[i], len(cell))
		}
	}
	fmt.Fprintln(out)
	for _, cells := range rows {
		line := fmt.Sprintf("%-*s", widths[0], cells[0])
		for i, cell := range cells[1:] {
			line += fmt.Sprintf("   %*s", widths[i+1], cell)
		}
		fmt.Fprintln(out, line)
	}
	fmt.Fprintln(out)
	for _, c := range res.clients {
		if len(c.faultKinds) > 0 {
			fmt.Fprintf(out, "faults into %s: %s\n", c.name, faultsLabel(c.faultKinds))
		}
	}
	fmt.Fprintln(out, "LISTs: every full-state fetch, LIST requests and watch-lists (sendInitialEvents=true) alike.")
	if !res.real {
		fmt.Fprintln(out, "cache == server: checked after the writer stopped; in brackets, how long the cache took to match.")
		fmt.Fprintln(out, "time to recover: per fault, until the informer had seen the server's state as of the fault.")
	}
}

func faultsLabel(kinds map[demoserver.FaultKind]int64) string {
	var parts []string
	for kind, n := range kinds {
		parts = append(parts, fmt.Sprintf("%s ×%d", kind, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func bytesLabel(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
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
