package metrics

import (
	"maps"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kretry/kretry/transport"
)

// libraryPath is the module whose version kretry_build_info reports.
const libraryPath = "github.com/kretry/kretry"

// buildCollectors are kretry_build_info{version} (always 1) and
// kretry_enabled (1 when a transport built now is kretry's, 0 when
// transport.DisableEnv turns it off), so that a dashboard tells a process
// with kretry off from one where nothing failed.
func buildCollectors(constLabels prometheus.Labels) (prometheus.Gauge, prometheus.GaugeFunc) {
	labels := maps.Clone(constLabels)
	if labels == nil {
		labels = prometheus.Labels{}
	}
	labels["version"] = LibraryVersion()
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "kretry_build_info",
		ConstLabels: labels,
		Help:        "Always 1; version is the github.com/kretry/kretry module version in this binary ((devel) for a checkout).",
	})
	info.Set(1)
	enabled := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "kretry_enabled",
		ConstLabels: constLabels,
		Help:        "1 when kretry's transport is on, 0 when KRETRY_DISABLE turns it off (read at each scrape, as a transport built then would read it).",
	}, func() float64 {
		if transport.CurrentState().On {
			return 1
		}
		return 0
	})
	return info, enabled
}

// LibraryVersion is the version of the module github.com/kretry/kretry in
// the running binary, from its build information: a release's version
// ("v0.1.0"), "(devel)" when it is built from a checkout (the main module, a
// workspace module or a replacement by a directory), or "unknown" when the
// binary has no build information.
func LibraryVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	return libraryVersion(info)
}

// libraryVersion is LibraryVersion for info.
func libraryVersion(info *debug.BuildInfo) string {
	orDevel := func(version string) string {
		if version == "" {
			return "(devel)"
		}
		return version
	}
	if info.Main.Path == libraryPath {
		return orDevel(info.Main.Version)
	}
	for _, dep := range info.Deps {
		if dep.Path != libraryPath {
			continue
		}
		if dep.Replace != nil {
			return orDevel(dep.Replace.Version) // a directory has no version
		}
		return orDevel(dep.Version)
	}
	// Not among the dependencies, though this code is built with it: a workspace module (a
	// test binary of a go.work lists none).
	return "(devel)"
}
