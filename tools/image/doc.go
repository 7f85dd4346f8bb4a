// Command image builds the kretry-proxy container image as ko would, offline and
// reproducibly: an OCI image index for linux/amd64 and linux/arm64, written as an OCI image
// layout, and an SPDX SBOM beside it. The same commit and Go toolchain give the same digests on
// any machine.
//
//	cd tools/image && GOWORK=off go run . -repo ../.. -o ../../kretry-proxy.oci
//
// (`make image` runs that.) It builds the commit checked out, never the working tree: it
// refuses a tree with uncommitted changes to tracked files unless -allow-dirty, and then builds
// the commit without them, saying so. kretry-proxy is built in a clean clone of the commit
// (sharing the repository's objects) through the clone's go.work, with -buildvcs=true, so that
// the binary's own build information carries the commit (vcs.revision, vcs.time) and the module
// version Go derives from it: the release tag's version at a tagged commit
// (cmd/kretry-proxy/vX.Y.Z), a pseudo-version such as v0.0.0-20261205124623-77b5415002e9
// otherwise. That version is the image's tag, its org.opencontainers.image.version label and
// what `kretry-proxy --version` prints; the revision and the commit's time are its
// org.opencontainers.image.revision and .created labels (also the index's annotations), and
// every timestamp in it.
//
// Each platform's image is built from scratch with no base image and no engine, with OCI media
// types: one layer holding /kretry-proxy, a static binary (CGO_ENABLED=0, -trimpath, no build
// ID, GOAMD64=v1 or GOARM64=v8.0), run as user and group 65532 with the binary as its
// entrypoint.
//
// No CA certificates are in it. In a pod kretry-proxy verifies the API server with the
// service account's ca.crt, and with a kubeconfig with the kubeconfig's certificate-authority:
// client-go uses the system's roots only when a kubeconfig names none, for a server whose
// certificate a public CA signed. For that case, mount a bundle and point SSL_CERT_FILE at it
// (Go reads it on Linux).
//
// The layout's index.json holds one entry, the image index, named REPOSITORY:VERSION:
// `crane push kretry-proxy.oci REGISTRY/kretry-proxy:TAG` pushes that index as it is, so the
// digest printed here is the one the registry serves (a test pushes it to an in-process
// registry and reads it back). The SBOM lists the main module, every module linked into the
// binary (their replacements where replaced) and the Go standard library, from the binaries'
// build information.
//
// It is a module of its own outside the workspace (run it with GOWORK=off), so that
// go-containerregistry stays out of every released module's go.mod.
package main
