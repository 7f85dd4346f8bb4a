package main

import (
	"bytes"
	"context"
	"io"
	"testing"
)

// A build in a checkout has no module version; `go install ...@v0.1.0` builds have it, and the
// release check (tools/release) asserts that one prints it.
func TestVersionFlag(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"--version"}, &out, io.Discard, nil); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "kretry-proxy (devel)\n"; got != want {
		t.Errorf("--version printed %q, want %q", got, want)
	}
}
