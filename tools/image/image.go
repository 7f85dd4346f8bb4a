package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	// binaryPath is where the binary is in the image, and the entrypoint.
	binaryPath = "/kretry-proxy"
	// nonRootUser is the user and group the proxy runs as: distroless's "nonroot", which the
	// sidecar's securityContext names too.
	nonRootUser = "65532:65532"
)

// imageSpec is what the image is made of besides the binary.
type imageSpec struct {
	os, arch string
	version  string    // the org.opencontainers.image.version label
	created  time.Time // every timestamp in the image
}

// assemble makes the image: from scratch, one layer with the binary at binaryPath.
func assemble(binary []byte, spec imageSpec) (v1.Image, error) {
	layer, err := binaryLayer(binary, spec.created)
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: spec.created.UTC()}
	img, err := mutate.ConfigFile(empty.Image, &v1.ConfigFile{
		Architecture: spec.arch,
		OS:           spec.os,
		Created:      created,
		RootFS:       v1.RootFS{Type: "layers"},
		Config: v1.Config{
			User:       nonRootUser,
			Entrypoint: []string{binaryPath},
			WorkingDir: "/",
			Labels: map[string]string{
				"org.opencontainers.image.title":       "kretry-proxy",
				"org.opencontainers.image.description": "kubectl proxy with kretry underneath: LISTs and WATCHes retried and resumed",
				"org.opencontainers.image.version":     spec.version,
				"org.opencontainers.image.licenses":    "Apache-2.0",
			},
		},
	})
	if err != nil {
		return nil, err
	}
	// Docker's media types (schema 2), the ones the tarball format implies: crane push and
	// docker load rebuild the manifest from the tarball with them, so that the digest printed
	// is the one the registry serves.
	return mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.DockerLayer,
		History:   v1.History{Created: created, CreatedBy: "tools/image: " + binaryPath},
	})
}

// binaryLayer is a gzipped tar of one file, binaryPath, owned by root, mode 0755, modified at
// mtime: nothing in it depends on the machine or the time it was made.
func binaryLayer(binary []byte, mtime time.Time) (v1.Layer, error) {
	var tarred bytes.Buffer
	tw := tar.NewWriter(&tarred)
	if err := tw.WriteHeader(&tar.Header{
		Typeflag: tar.TypeReg,
		Name:     binaryPath[1:],
		Mode:     0o755,
		Size:     int64(len(binary)),
		ModTime:  mtime.UTC(),
		Format:   tar.FormatUSTAR,
	}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(binary); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	var zipped bytes.Buffer
	zw, err := gzip.NewWriterLevel(&zipped, gzip.BestCompression) // a zero header: no name, no time
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(tarred.Bytes()); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("compressing the layer: %w", err)
	}
	// From the compressed bytes: the layer's diff ID is then computed from what they decompress to.
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(zipped.Bytes())), nil
	}, tarball.WithMediaType(types.DockerLayer))
}
