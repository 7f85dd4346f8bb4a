//go:build e2e

package e2e_test

import "testing"

// TestFigures runs last (file order) and logs the table of every run above; the table is also
// written to .apiserver/e2e-figures.txt.
func TestFigures(t *testing.T) {
	figuresMu.Lock()
	n := len(figures)
	figuresMu.Unlock()
	if n == 0 {
		t.Skip("no scenario ran")
	}
	writeFiguresFile()
	t.Log("\n" + figuresTable())
}
