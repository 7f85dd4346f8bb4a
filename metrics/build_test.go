package metrics

import (
	"runtime/debug"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kretry/kretry/transport"
)

// TestLibraryVersion: the library's version as the binary's build
// information has it, whoever the main module is.
func TestLibraryVersion(t *testing.T) {
	dep := func(version string, replace *debug.Module) []*debug.Module {
		return []*debug.Module{{Path: "k8s.io/client-go", Version: "v0.33.0"}, {Path: libraryPath, Version: version, Replace: replace}}
	}
	tests := []struct {
		name string
		info debug.BuildInfo
		want string
	}{
		{"a release", debug.BuildInfo{Main: debug.Module{Path: "example.com/app"}, Deps: dep("v0.2.0", nil)}, "v0.2.0"},
		{"a checkout beside the app (replace by a directory)", debug.BuildInfo{Main: debug.Module{Path: "example.com/app"}, Deps: dep("v0.1.0", &debug.Module{Path: "../kretry"})}, "(devel)"},
		{"a fork at a version", debug.BuildInfo{Main: debug.Module{Path: "example.com/app"}, Deps: dep("v0.1.0", &debug.Module{Path: "example.com/fork", Version: "v0.1.1"})}, "v0.1.1"},
		{"the library's own tests", debug.BuildInfo{Main: debug.Module{Path: libraryPath, Version: "(devel)"}}, "(devel)"},
		{"a workspace module", debug.BuildInfo{Main: debug.Module{Path: "example.com/app"}, Deps: dep("", nil)}, "(devel)"},
		{"kretry not among the dependencies (a workspace's test binary)", debug.BuildInfo{Main: debug.Module{Path: "example.com/app"}}, "(devel)"},
	}
	for _, tc := range tests {
		if got := libraryVersion(&tc.info); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestBuildInfoAndEnabled: New serves kretry_build_info at 1 with the
// version, and kretry_enabled follows KRETRY_DISABLE at each scrape, with
// the Options' constant labels on both.
func TestBuildInfoAndEnabled(t *testing.T) {
	registry := prometheus.NewRegistry()
	if _, err := NewWithOptions(registry, Options{ConstLabels: prometheus.Labels{"cluster": "prod-eu-1"}}); err != nil {
		t.Fatal(err)
	}
	want := func(enabled string) string {
		return `
# HELP kretry_build_info Always 1; version is the github.com/kretry/kretry module version in this binary ((devel) for a checkout).
# TYPE kretry_build_info gauge
kretry_build_info{cluster="prod-eu-1",version="` + LibraryVersion() + `"} 1
# HELP kretry_enabled 1 when kretry's transport is on, 0 when KRETRY_DISABLE turns it off (read at each scrape, as a transport built then would read it).
# TYPE kretry_enabled gauge
kretry_enabled{cluster="prod-eu-1"} ` + enabled + "\n"
	}
	for _, tc := range []struct{ value, enabled string }{{"", "1"}, {"1", "0"}, {"yes", "1"}, {"false", "1"}} {
		t.Setenv(transport.DisableEnv, tc.value)
		if err := testutil.GatherAndCompare(registry, strings.NewReader(want(tc.enabled)), "kretry_build_info", "kretry_enabled"); err != nil {
			t.Errorf("KRETRY_DISABLE=%q: %v", tc.value, err)
		}
	}
}
