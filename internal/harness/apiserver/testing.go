package apiserver

import (
	"context"
	"errors"
	"os"
	"testing"
)

// StartT starts a cluster for a test and stops it in t.Cleanup. Missing binaries skip the test,
// or fail it when KRETRY_E2E is set; any other start error fails it.
func StartT(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.BinDir == "" {
		dir, err := FindBinDir()
		if err != nil {
			if errors.Is(err, ErrNoBinaries) && os.Getenv(E2EEnv) == "" {
				t.Skipf("%v; set %s=1 to make this a failure", err, E2EEnv)
			}
			t.Fatal(err)
		}
		opts.BinDir = dir
	}
	c, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("cluster logs (tails):\n%s", c.Logs(3000))
		}
		if err := c.Close(); err != nil {
			t.Errorf("apiserver: close: %v", err)
		}
	})
	return c
}
