package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/kretry/kretry/internal/harness/apiserver"
	"github.com/kretry/kretry/internal/harness/fixture"
)

func main() {
	out := flag.String("out", "conformance/testdata", "directory the fixtures are written to")
	only := flag.String("only", "", "comma-separated scenario names to record (default: all)")
	verbose := flag.Bool("v", false, "print every recorded exchange")
	flag.Parse()
	if err := run(*out, *only, *verbose); err != nil {
		fmt.Fprintln(os.Stderr, "kretry-record:", err)
		os.Exit(1)
	}
}

func run(out, only string, verbose bool) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var selected []scenario
	for _, s := range scenarios {
		if only == "" || slices.Contains(strings.Split(only, ","), s.name) {
			selected = append(selected, s)
		}
	}
	if len(selected) == 0 {
		return fmt.Errorf("no scenario matches %q", only)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}

	start := time.Now()
	cluster, err := apiserver.Start(ctx, apiserver.Options{Servers: []apiserver.ServerOptions{
		{},
		{ExtraFlags: apiserver.RequestLimitFlags},
		{ExtraFlags: []string{"--watch-cache-sizes=configmaps#0"}},
		{ExtraFlags: apiserver.CBORFlags},
	}})
	if err != nil {
		return err
	}
	defer cluster.Close()
	fmt.Printf("cluster ready in %v (etcd + 4 kube-apiservers)\n", time.Since(start).Round(time.Millisecond))
	if err := allowCBOR(); err != nil {
		return err
	}

	env := &env{cluster: cluster}
	var index strings.Builder
	index.WriteString(indexHeader)
	for _, s := range selected {
		began := time.Now()
		f, err := s.record(ctx, env)
		if err != nil {
			fmt.Fprintf(os.Stderr, "--- logs ---\n%s\n", cluster.Logs(2000))
			return fmt.Errorf("scenario %s: %w", s.name, err)
		}
		f.Name = s.name
		f.Description = s.description
		f.RecordedFrom = fixture.RecordedFrom
		path := filepath.Join(out, s.name+".json")
		if err := f.Save(path); err != nil {
			return err
		}
		fmt.Printf("%-32s %2d exchanges  %6.1fs  %s\n", s.name, len(f.Exchanges), time.Since(began).Seconds(), path)
		fmt.Fprintf(&index, "| `%s.json` | %s |\n", s.name, summarize(f))
		if verbose {
			for _, ex := range f.Exchanges {
				fmt.Printf("    %s %s -> %d %s, %d chunks, %d bytes\n", ex.Request.Method, ex.Request.URL,
					ex.Response.Status, ex.Response.ContentType(), len(ex.Response.Chunks), len(ex.Response.Body()))
			}
		}
	}
	if len(selected) == len(scenarios) {
		index.WriteString("\n" + scenarioDescriptions())
		return os.WriteFile(filepath.Join(out, "README.md"), []byte(index.String()), 0o644)
	}
	return nil
}

const indexHeader = `# Recorded fixtures

Recorded from a real kube-apiserver v1.37.2 on etcd v3.7.0 by ` + "`make record`" + ` (cmd/kretry-record),
which rewrites every file here, this one included. Format: internal/harness/fixture (doc.go).

| file | exchanges (status, response Content-Type, body chunks) |
|---|---|
`

// summarize lists each exchange of f in one line.
func summarize(f *fixture.File) string {
	var parts []string
	for _, ex := range f.Exchanges {
		parts = append(parts, fmt.Sprintf("%d %s, %d chunks", ex.Response.Status, ex.Response.ContentType(), len(ex.Response.Chunks)))
	}
	return strings.Join(parts, "; ")
}

func scenarioDescriptions() string {
	var b strings.Builder
	b.WriteString("## Scenarios\n\n")
	for _, s := range scenarios {
		fmt.Fprintf(&b, "- `%s`: %s\n", s.name, s.description)
	}
	return b.String()
}
