package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

var testSpec = imageSpec{os: "linux", arch: "amd64", version: "v0.1.0", created: time.Unix(1700000000, 0)}

func digestOf(t *testing.T, img v1.Image) v1.Hash {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestAssembleIsReproducible(t *testing.T) {
	binary := []byte("\x7fELF not really")
	first, err := assemble(binary, testSpec)
	if err != nil {
		t.Fatal(err)
	}
	second, err := assemble(binary, testSpec)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := digestOf(t, first), digestOf(t, second); a != b {
		t.Errorf("two images of the same binary: digests %s and %s", a, b)
	}
	later := testSpec
	later.created = testSpec.created.Add(time.Second)
	other, err := assemble(binary, later)
	if err != nil {
		t.Fatal(err)
	}
	if digestOf(t, other) == digestOf(t, first) {
		t.Error("an image with another SOURCE_DATE_EPOCH has the same digest: the time is not in it")
	}
	checkImage(t, first, binary, testSpec)
}

// checkImage checks the config, the media types and that the one layer holds the binary alone.
func checkImage(t *testing.T, img v1.Image, binary []byte, spec imageSpec) {
	t.Helper()
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Config.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532", cfg.Config.User)
	}
	if len(cfg.Config.Entrypoint) != 1 || cfg.Config.Entrypoint[0] != "/kretry-proxy" || len(cfg.Config.Cmd) != 0 {
		t.Errorf("entrypoint %q cmd %q, want [/kretry-proxy] and none", cfg.Config.Entrypoint, cfg.Config.Cmd)
	}
	if cfg.OS != spec.os || cfg.Architecture != spec.arch {
		t.Errorf("platform %s/%s, want %s/%s", cfg.OS, cfg.Architecture, spec.os, spec.arch)
	}
	if !cfg.Created.Equal(spec.created) {
		t.Errorf("created %s, want %s", cfg.Created, spec.created)
	}
	if got := cfg.Config.Labels["org.opencontainers.image.version"]; got != spec.version {
		t.Errorf("version label %q, want %q", got, spec.version)
	}
	if mt, err := img.MediaType(); err != nil || mt != types.DockerManifestSchema2 {
		t.Errorf("manifest media type %s (%v), want %s", mt, err, types.DockerManifestSchema2)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 || len(cfg.RootFS.DiffIDs) != 1 || len(cfg.History) != 1 {
		t.Fatalf("%d layers, %d diff IDs, %d history entries: want one of each", len(layers), len(cfg.RootFS.DiffIDs), len(cfg.History))
	}
	// A runtime checks the config's diff ID against the sha256 of the layer it unpacks.
	compressed, err := layers[0].Compressed()
	if err != nil {
		t.Fatal(err)
	}
	unzipped, err := gzip.NewReader(compressed)
	if err != nil {
		t.Fatalf("the layer is not gzipped: %v", err)
	}
	if diffID, _, err := v1.SHA256(unzipped); err != nil || diffID != cfg.RootFS.DiffIDs[0] {
		t.Errorf("the layer unpacks to %s (%v), the config's diff ID is %s", diffID, err, cfg.RootFS.DiffIDs[0])
	}
	compressed.Close()
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	hdr, err := tr.Next()
	if err != nil {
		t.Fatal(err)
	}
	if hdr.Name != "kretry-proxy" || hdr.Mode != 0o755 || hdr.Uid != 0 || hdr.Gid != 0 || !hdr.ModTime.Equal(spec.created) {
		t.Errorf("layer entry %s mode %o uid %d gid %d mtime %s, want kretry-proxy 755 0 0 %s",
			hdr.Name, hdr.Mode, hdr.Uid, hdr.Gid, hdr.ModTime, spec.created)
	}
	content, err := io.ReadAll(tr)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(content, binary) {
		t.Errorf("the layer's kretry-proxy is %d bytes, not the %d-byte binary", len(content), len(binary))
	}
	if next, err := tr.Next(); err != io.EOF {
		t.Errorf("a second layer entry: %v (%v)", next, err)
	}
}

func TestSpecFor(t *testing.T) {
	env := func(epoch string) func(string) string {
		return func(key string) string {
			if key == "SOURCE_DATE_EPOCH" {
				return epoch
			}
			return ""
		}
	}
	tests := []struct {
		platform, tag, epoch string
		want                 imageSpec
		wantErr              string
	}{
		{platform: "linux/amd64", tag: "kretry-proxy:v0.2.0", want: imageSpec{os: "linux", arch: "amd64", version: "v0.2.0", created: time.Unix(0, 0)}},
		{platform: "linux/arm64", tag: "registry.example.com:5000/kretry-proxy", epoch: "1700000000", want: imageSpec{os: "linux", arch: "arm64", created: time.Unix(1700000000, 0)}},
		{platform: "linux/amd64", tag: "kretry-proxy", epoch: "yesterday", wantErr: "SOURCE_DATE_EPOCH"},
		{platform: "linux/amd64", tag: "kretry-proxy", epoch: "-1", wantErr: "SOURCE_DATE_EPOCH"},
		{platform: "windows/amd64", tag: "kretry-proxy", wantErr: "-platform"},
		{platform: "amd64", tag: "kretry-proxy", wantErr: "-platform"},
	}
	for _, tc := range tests {
		got, err := specFor(options{platform: tc.platform, tag: tc.tag}, env(tc.epoch))
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%+v: error %v, want one naming %s", tc, err, tc.wantErr)
			}
		case err != nil:
			t.Errorf("%+v: %v", tc, err)
		case got.os != tc.want.os || got.arch != tc.want.arch || got.version != tc.want.version || !got.created.Equal(tc.want.created):
			t.Errorf("%+v: %+v, want %+v", tc, got, tc.want)
		}
	}
}

func TestCheckStaticRefusesWhatIsNotELF(t *testing.T) {
	if err := checkStatic([]byte("#!/bin/sh\n")); err == nil {
		t.Error("a shell script passed as a static binary")
	}
}

// TestBuildTwice builds the image of the real kretry-proxy twice, as `make image` does: the
// tarballs must be the same bytes, and the binary in them static.
func TestBuildTwice(t *testing.T) {
	dir := t.TempDir()
	env := func(key string) string {
		if key == "SOURCE_DATE_EPOCH" {
			return "1700000000"
		}
		return ""
	}
	var tarballs [2][]byte
	for i := range tarballs {
		out := filepath.Join(dir, "kretry-proxy"+string(rune('a'+i))+".tar")
		var stdout bytes.Buffer
		if err := run([]string{"-repo", "../..", "-o", out, "-tag", "kretry-proxy:v0.1.0"}, &stdout, env); err != nil {
			t.Fatal(err)
		}
		t.Logf("build %d:\n%s", i+1, stdout.String())
		var err error
		if tarballs[i], err = os.ReadFile(out); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(tarballs[0], tarballs[1]) {
		t.Fatal("two builds of the same checkout wrote different tarballs")
	}
	tag, err := name.NewTag("kretry-proxy:v0.1.0")
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.Image(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(tarballs[0])), nil }, &tag)
	if err != nil {
		t.Fatalf("the tarball does not read back as an image: %v", err)
	}
	// What crane push and docker load see: the manifest rebuilt from the tarball, whose digest
	// must be the one printed.
	printed, err := assemble(layerFile(t, img), imageSpec{os: "linux", arch: "amd64", version: "v0.1.0", created: time.Unix(1700000000, 0)})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := digestOf(t, img), digestOf(t, printed); got != want {
		t.Errorf("the tarball reads back as %s, but %s was built and printed", got, want)
	}
	binary := layerFile(t, img)
	if err := checkStatic(binary); err != nil {
		t.Error(err)
	}
	checkImage(t, img, binary, imageSpec{os: "linux", arch: "amd64", version: "v0.1.0", created: time.Unix(1700000000, 0)})
}

// layerFile is the content of the image's first file.
func layerFile(t *testing.T, img v1.Image) []byte {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) == 0 {
		t.Fatalf("layers: %v (%d)", err, len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	if _, err := tr.Next(); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(tr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
