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

// imageSpec is what the image is made of besides the binary: facts of the commit it was built
// from, read from the binary's own build information.
type imageSpec struct {
	os, arch string
	version  string    // the binary's module version: org.opencontainers.image.version
	revision string    // the commit: org.opencontainers.image.revision
	source   string    // the repository: org.opencontainers.image.source
	created  time.Time // the commit's time: every timestamp in the image
}

// labels are the image's OCI labels (its config's Labels), also the index's annotations.
func (s imageSpec) labels() map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       "kretry-proxy",
		"org.opencontainers.image.description": "kubectl proxy with kretry underneath: LISTs and WATCHes retried and resumed",
		"org.opencontainers.image.version":     s.version,
		"org.opencontainers.image.revision":    s.revision,
		"org.opencontainers.image.source":      s.source,
		"org.opencontainers.image.created":     s.created.UTC().Format(time.RFC3339),
		"org.opencontainers.image.licenses":    "Apache-2.0", // kretry's; the SBOM beside the image lists the modules in the binary
	}
}

// assemble makes one platform's image: from scratch, one layer with the binary at binaryPath,
// OCI media types throughout.
func assemble(binary []byte, spec imageSpec) (v1.Image, error) {
	layer, err := binaryLayer(binary, spec.created)
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: spec.created.UTC()}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.ConfigFile(base, &v1.ConfigFile{
		Architecture: spec.arch,
		OS:           spec.os,
		Created:      created,
		RootFS:       v1.RootFS{Type: "layers"},
		Config: v1.Config{
			User:       nonRootUser,
			Entrypoint: []string{binaryPath},
			WorkingDir: "/",
			Labels:     spec.labels(),
		},
	})
	if err != nil {
		return nil, err
	}
	return mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: created, CreatedBy: "tools/image: " + binaryPath},
	})
}

// assembleIndex is the OCI image index of the platforms' images, in the order given, annotated
// with the labels they share.
func assembleIndex(images []v1.Image, specs []imageSpec) (v1.ImageIndex, error) {
	var adds []mutate.IndexAddendum
	for i, img := range images {
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			MediaType: types.OCIManifestSchema1,
			Platform:  &v1.Platform{OS: specs[i].os, Architecture: specs[i].arch},
		}})
	}
	shared := specs[0].labels()
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...)
	annotated, ok := mutate.Annotations(idx, shared).(v1.ImageIndex)
	if !ok {
		return nil, fmt.Errorf("annotating the index: not an index")
	}
	return annotated, nil
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
	}, tarball.WithMediaType(types.OCILayer))
}
