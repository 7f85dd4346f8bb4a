// Command image builds the kretry-proxy container image, offline and reproducibly: the same
// checkout, Go toolchain and SOURCE_DATE_EPOCH give the same image digest on any machine.
//
//	cd tools/image && GOWORK=off go run . -o ../../kretry-proxy.tar -tag kretry-proxy:v0.1.0
//
// (`make image` runs that.) The image is built from scratch with no base image and no engine:
// one layer holding /kretry-proxy, a static binary (CGO_ENABLED=0, -trimpath, no build ID, no
// VCS stamp, GOAMD64=v1 or GOARM64=v8.0), run as user and group 65532 with the binary as its
// entrypoint. Every timestamp (the layer's file, the config's created, the history) is
// SOURCE_DATE_EPOCH, 0 when unset; the Makefile sets it to the time of the commit checked out.
//
// No CA certificates are in it. In a pod kretry-proxy verifies the API server with the
// service account's ca.crt, and with a kubeconfig with the kubeconfig's certificate-authority:
// client-go uses the system's roots only when a kubeconfig names none, for a server whose
// certificate a public CA signed. For that case, mount a bundle and point SSL_CERT_FILE at it
// (Go reads it on Linux).
//
// The output is a tarball in the format `docker save` writes (manifest.json beside the
// blobs), with Docker's schema 2 media types, which every registry and runtime takes:
// `docker load -i` and `podman load -i` read it, and `crane push kretry-proxy.tar
// REGISTRY/kretry-proxy:TAG` pushes it, with the digest printed (the manifest crane rebuilds
// from a tarball is the one built here: a test checks it).
//
// It is a module of its own outside the workspace (run it with GOWORK=off), so that
// go-containerregistry stays out of every released module's go.mod; kretry-proxy itself is
// built from the checkout through the repository's go.work.
package main
