package main

import "runtime/debug"

// version is the module version kretry-proxy was built at: the release it was installed from
// (`go install github.com/kretry/kretry/cmd/kretry-proxy@v0.1.0`), or "(devel)" for a build in
// a checkout.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok || info.Main.Version == "" {
		return "(devel)"
	}
	return info.Main.Version
}
