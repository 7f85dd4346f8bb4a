package main

import (
	"runtime"
	"testing"

	"github.com/kretry/kretry/transport"
)

// TestStartLine: the first line says the version, the VCS revision (and whether the tree was
// modified) and whether kretry is on, and why.
func TestStartLine(t *testing.T) {
	on := transport.State{On: true, Why: "KRETRY_DISABLE is not set"}
	off := transport.State{On: false, Value: "1", Why: "KRETRY_DISABLE=1"}
	unread := transport.State{On: true, Value: "yes", Unrecognised: true, Why: `KRETRY_DISABLE="yes" is not true or false: ignored`}
	rev := map[string]string{"vcs.revision": "0a9d1061e0", "vcs.modified": "false"}
	dirty := map[string]string{"vcs.revision": "0a9d1061e0", "vcs.modified": "true"}
	goVersion := runtime.Version()
	tests := []struct {
		state transport.State
		build map[string]string
		want  string
	}{
		{on, rev, "kretry-proxy (devel), revision 0a9d1061e0, " + goVersion + ": kretry on (KRETRY_DISABLE is not set)"},
		{off, dirty, "kretry-proxy (devel), revision 0a9d1061e0 (modified), " + goVersion + ": kretry off: requests pass through untouched (KRETRY_DISABLE=1)"},
		{unread, nil, "kretry-proxy (devel), revision unknown, " + goVersion + `: kretry on (KRETRY_DISABLE="yes" is not true or false: ignored)`},
	}
	for _, tc := range tests {
		if got := startLine(tc.state, tc.build); got != tc.want {
			t.Errorf("startLine(%+v, %v):\n got %s\nwant %s", tc.state, tc.build, got, tc.want)
		}
	}
}
