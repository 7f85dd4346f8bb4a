package report

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// Bytes formats n bytes for a table: "3.4 MiB", "12.0 KiB", "512 B".
func Bytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// PlotModule returns the plot module's directory, plot/ beside source (a
// command's own source file, as runtime.Caller reports it), or an error
// saying that drawing needs a kretry checkout.
func PlotModule(source string) (string, error) {
	dir := filepath.Join(filepath.Dir(source), "plot")
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return "", fmt.Errorf("drawing needs the plot module in %s: run the command from a kretry checkout (go run ./cmd/...)", dir)
	}
	return dir, nil
}

// Plot runs the plot module in dir with `go run`, to draw the run data in
// the file in as a PNG at out under title; its output goes to stderr.
func Plot(ctx context.Context, dir, in, out, title string, stderr io.Writer) error {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("drawing runs the plot module with the go tool: %w", err)
	}
	if in, err = filepath.Abs(in); err != nil {
		return err
	}
	if out, err = filepath.Abs(out); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, goTool, "run", ".", "-in", in, "-out", out, "-title", title)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("plot module (go run in %s): %w", dir, err)
	}
	return nil
}
