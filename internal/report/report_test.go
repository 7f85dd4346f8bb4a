package report

import (
	"path/filepath"
	"testing"
)

func TestBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 3<<20 + 1<<19: "3.5 MiB"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestPlotModule(t *testing.T) {
	if _, err := PlotModule(filepath.Join(t.TempDir(), "main.go")); err == nil {
		t.Error("a directory without plot/go.mod was taken for the plot module")
	}
	dir, err := PlotModule("../../cmd/kretry-fleet/main.go")
	if err != nil || filepath.Base(dir) != "plot" {
		t.Errorf("PlotModule(cmd/kretry-fleet) = %q, %v", dir, err)
	}
}
