// Command release keeps kretry's modules in lockstep and rehearses a release.
//
// Every module of the repository that is listed in the root go.work and requires another kretry
// module requires it at one version, the next release's: no replace directive stands in a
// go.mod (the go command ignores them in a dependency and refuses them in `go install
// pkg@version`); the go.work at the root builds the checkout against itself.
//
//	go run . bump v0.2.0          # every kretry require and go.work replace at v0.2.0
//	go run . tidy                 # go mod tidy in every workspace module, against the checkout
//	go run . check v0.2.0         # rehearse the release of the working tree at v0.2.0
//	go run . apidiff v0.1.0       # API changes of the released modules since a git ref
//	go run . version              # the lockstep version the go.mod files require
//
// check copies the repository's files (tracked, and untracked ones git does not ignore) to a
// temporary directory, bumps them to the version, writes each released module into a
// file-system module proxy in tag order, tidying each against the modules written before it
// (as the release does against the real proxy), then, outside the repository and with
// GOWORK=off, builds and runs a consumer program that wires the library and the metrics module,
// and `go install`s kretry-proxy at the version and runs its --version. Nothing but the module
// proxy named by `go env GOPROXY` is reached. RELEASING.md says how a real release is cut.
//
// It runs from anywhere inside the repository (it finds the root by go.work) and is a module of
// its own so that golang.org/x/mod stays out of the library's go.mod; run it with GOWORK=off.
package main
