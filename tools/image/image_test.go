package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/buildinfo"
	"encoding/json"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

var testSpec = imageSpec{os: "linux", arch: "amd64", version: "v0.0.0-20261205124623-77b5415002e9",
	revision: "77b5415002e9cf864ba76e32b8dda7efe1762531", source: "https://github.com/kretry/kretry", created: time.Unix(1700000000, 0).UTC()}

func digestOf(t *testing.T, d interface{ Digest() (v1.Hash, error) }) v1.Hash {
	t.Helper()
	h, err := d.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return h
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
		t.Error("an image of another commit time has the same digest: the time is not in it")
	}
	checkImage(t, first, binary, testSpec)
}

// checkImage checks the config, the labels, the OCI media types and that the one layer holds
// the binary alone.
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
	for key, want := range map[string]string{
		"org.opencontainers.image.version":  spec.version,
		"org.opencontainers.image.revision": spec.revision,
		"org.opencontainers.image.source":   spec.source,
		"org.opencontainers.image.created":  spec.created.Format(time.RFC3339),
	} {
		if got := cfg.Config.Labels[key]; got != want || want == "" {
			t.Errorf("label %s = %q, want %q", key, got, want)
		}
	}
	manifest, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if manifest.MediaType != types.OCIManifestSchema1 || manifest.Config.MediaType != types.OCIConfigJSON {
		t.Errorf("manifest %s, config %s: want OCI's %s and %s", manifest.MediaType, manifest.Config.MediaType, types.OCIManifestSchema1, types.OCIConfigJSON)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 || len(cfg.RootFS.DiffIDs) != 1 || len(cfg.History) != 1 || len(manifest.Layers) != 1 || manifest.Layers[0].MediaType != types.OCILayer {
		t.Fatalf("%d layers (%v), %d diff IDs, %d history entries: want one OCI layer", len(layers), manifest.Layers, len(cfg.RootFS.DiffIDs), len(cfg.History))
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
	hdr, content := layerFile(t, img)
	if hdr.Name != "kretry-proxy" || hdr.Mode != 0o755 || hdr.Uid != 0 || hdr.Gid != 0 || !hdr.ModTime.Equal(spec.created) {
		t.Errorf("layer entry %s mode %o uid %d gid %d mtime %s, want kretry-proxy 755 0 0 %s",
			hdr.Name, hdr.Mode, hdr.Uid, hdr.Gid, hdr.ModTime, spec.created)
	}
	if !bytes.Equal(content, binary) {
		t.Errorf("the layer's kretry-proxy is %d bytes, not the %d-byte binary", len(content), len(binary))
	}
}

// layerFile is the header and content of the image's one file; it fails on a second one.
func layerFile(t *testing.T, img v1.Image) (*tar.Header, []byte) {
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
	hdr, err := tr.Next()
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(tr)
	if err != nil {
		t.Fatal(err)
	}
	if next, err := tr.Next(); err != io.EOF {
		t.Errorf("a second layer entry: %v (%v)", next, err)
	}
	return hdr, b
}

// TestIndex: one OCI index, an entry a platform in order, with its platform, annotated with
// the shared labels.
func TestIndex(t *testing.T) {
	arm := testSpec
	arm.arch = "arm64"
	var images []v1.Image
	for _, spec := range []imageSpec{testSpec, arm} {
		img, err := assemble([]byte("binary for "+spec.arch), spec)
		if err != nil {
			t.Fatal(err)
		}
		images = append(images, img)
	}
	idx, err := assembleIndex(images, []imageSpec{testSpec, arm})
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != types.OCIImageIndex || len(m.Manifests) != 2 {
		t.Fatalf("index %s with %d entries, want an OCI index of 2", m.MediaType, len(m.Manifests))
	}
	for i, arch := range []string{"amd64", "arm64"} {
		d := m.Manifests[i]
		if d.Platform == nil || d.Platform.OS != "linux" || d.Platform.Architecture != arch || d.MediaType != types.OCIManifestSchema1 || d.Digest != digestOf(t, images[i]) {
			t.Errorf("entry %d: %+v, want linux/%s, OCI, the image's digest", i, d, arch)
		}
	}
	if m.Annotations["org.opencontainers.image.revision"] != testSpec.revision {
		t.Errorf("index annotations %v, want the revision", m.Annotations)
	}
}

func TestSpecOf(t *testing.T) {
	const rev = "77b5415002e9cf864ba76e32b8dda7efe1762531"
	info := func(version string, kv ...string) *debug.BuildInfo {
		b := &debug.BuildInfo{Main: debug.Module{Path: "github.com/kretry/kretry/cmd/kretry-proxy", Version: version}}
		for i := 0; i < len(kv); i += 2 {
			b.Settings = append(b.Settings, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return b
	}
	good := []string{"GOOS", "linux", "GOARCH", "arm64", "vcs.revision", rev, "vcs.time", "2026-12-05T12:46:23Z", "vcs.modified", "false"}
	tests := []struct {
		name    string
		info    *debug.BuildInfo
		want    imageSpec
		wantErr string
	}{
		{"a pseudo-version", info("v0.0.0-20261205124623-77b5415002e9", good...),
			imageSpec{os: "linux", arch: "arm64", version: "v0.0.0-20261205124623-77b5415002e9", revision: rev, created: time.Date(2026, 12, 5, 12, 46, 23, 0, time.UTC)}, ""},
		{"a release", info("v0.2.0", good...), imageSpec{os: "linux", arch: "arm64", version: "v0.2.0", revision: rev, created: time.Date(2026, 12, 5, 12, 46, 23, 0, time.UTC)}, ""},
		{"no VCS information", info("(devel)", "GOOS", "linux"), imageSpec{}, "no VCS information"},
		{"another commit", info("v0.2.0", "vcs.revision", "0000000", "vcs.modified", "false"), imageSpec{}, "not " + rev},
		{"a modified clone", info("v0.0.0-20261205124623-77b5415002e9+dirty", "vcs.revision", rev, "vcs.modified", "true"), imageSpec{}, "vcs.modified=true"},
		{"no version", info("(devel)", good...), imageSpec{}, "no module version"},
	}
	for _, tc := range tests {
		got, err := specOf(tc.info, rev)
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: error %v, want one with %q", tc.name, err, tc.wantErr)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case got != tc.want:
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestParseFlags(t *testing.T) {
	tests := []struct {
		args      []string
		platforms string
		sbom      string
		wantErr   bool
	}{
		{[]string{"-o", "x.oci"}, "linux/amd64 linux/arm64", "x.spdx.json", false},
		{[]string{"-o", "x.oci", "-platforms", "linux/arm64"}, "linux/arm64", "x.spdx.json", false},
		{[]string{"-o", "out", "-sbom", "s.json"}, "linux/amd64 linux/arm64", "s.json", false},
		{[]string{"-o", "x.oci", "-platforms", "windows/amd64"}, "", "", true},
		{[]string{"-o", "x.oci", "-platforms", "linux/amd64,linux/amd64"}, "", "", true},
		{[]string{}, "", "", true},
	}
	for _, tc := range tests {
		o, err := parseFlags(tc.args)
		if tc.wantErr {
			if err == nil {
				t.Errorf("%q: no error", tc.args)
			}
			continue
		}
		if err != nil || strings.Join(o.platforms, " ") != tc.platforms || o.sbom != tc.sbom {
			t.Errorf("%q: platforms %q sbom %q (%v), want %q %q", tc.args, o.platforms, o.sbom, err, tc.platforms, tc.sbom)
		}
	}
}

// TestRefusesDirtyTree: a working tree with an uncommitted change to a tracked file is refused
// before anything is built, naming the file and the way out.
func TestRefusesDirtyTree(t *testing.T) {
	repo := t.TempDir()
	for _, args := range [][]string{{"init", "-q"}, {"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "x"}} {
		if out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	if err := os.WriteFile(filepath.Join(repo, "f"), []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	exec.Command("git", "-C", repo, "add", "f").Run()
	for _, args := range [][]string{{"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "f"}} {
		if out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	// A change to a committed file, and one staged: both named; an untracked file is not.
	os.WriteFile(filepath.Join(repo, "f"), []byte("b"), 0o644)
	os.WriteFile(filepath.Join(repo, "g"), []byte("g"), 0o644)
	exec.Command("git", "-C", repo, "add", "g").Run()
	os.WriteFile(filepath.Join(repo, "untracked"), []byte("u"), 0o644)
	err := run([]string{"-repo", repo, "-o", filepath.Join(t.TempDir(), "x.oci")}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "uncommitted changes (f, g)") || !strings.Contains(err.Error(), "-allow-dirty") {
		t.Errorf("a dirty tree: %v, want a refusal naming f and g and -allow-dirty", err)
	}
}

// TestSBOM: one package for the main module, the standard library and each module linked in,
// the replacement where replaced, purls where there is a version; platforms that link different
// modules are refused.
func TestSBOM(t *testing.T) {
	info := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/kretry/kretry/cmd/kretry-proxy"},
		Deps: []*debug.Module{
			{Path: "k8s.io/client-go", Version: "v0.37.2"},
			{Path: "github.com/kretry/kretry", Version: "v0.1.0", Replace: &debug.Module{Path: "../.."}},
			{Path: "example.com/forked", Version: "v1.0.0", Replace: &debug.Module{Path: "example.com/fork", Version: "v1.0.1"}},
		}}
	doc, packages, err := sbom([]*debug.BuildInfo{info, info}, testSpec, "sha256:abc")
	if err != nil {
		t.Fatal(err)
	}
	var parsed spdxDocument
	if err := json.Unmarshal(doc, &parsed); err != nil {
		t.Fatal(err)
	}
	if packages != 5 || len(parsed.Packages) != 5 || len(parsed.Relationships) != 5 {
		t.Fatalf("%d packages, %d relationships: want 5 and 5 (main, stdlib, three modules)", len(parsed.Packages), len(parsed.Relationships))
	}
	var got []string
	for _, p := range parsed.Packages {
		locator := ""
		if len(p.ExternalRefs) > 0 {
			locator = p.ExternalRefs[0].ReferenceLocator
		}
		got = append(got, p.Name+" "+p.VersionInfo+" "+locator)
	}
	want := []string{
		"github.com/kretry/kretry/cmd/kretry-proxy " + testSpec.version + " pkg:golang/github.com/kretry/kretry/cmd/kretry-proxy@" + testSpec.version,
		"stdlib go1.26.8 pkg:golang/stdlib@go1.26.8",
		"k8s.io/client-go v0.37.2 pkg:golang/k8s.io/client-go@v0.37.2",
		"github.com/kretry/kretry (devel) ",
		"example.com/fork v1.0.1 pkg:golang/example.com/fork@v1.0.1",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("packages:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if parsed.SPDXVersion != "SPDX-2.3" || parsed.DocumentNamespace != "https://github.com/kretry/kretry/spdx/kretry-proxy/abc" || parsed.CreationInfo.Created != "2023-11-14T22:13:20Z" {
		t.Errorf("document %s %s %s", parsed.SPDXVersion, parsed.DocumentNamespace, parsed.CreationInfo.Created)
	}
	other := *info
	other.Deps = info.Deps[:1]
	if _, _, err := sbom([]*debug.BuildInfo{info, &other}, testSpec, "sha256:abc"); err == nil {
		t.Error("platforms linking different modules: no error")
	}
}

func TestCheckStaticRefusesWhatIsNotELF(t *testing.T) {
	if err := checkStatic([]byte("#!/bin/sh\n")); err == nil {
		t.Error("a shell script passed as a static binary")
	}
}

// TestBuildTwice builds the image of the real kretry-proxy at HEAD twice, as `make image` does
// (-allow-dirty: a development tree may have changes; the image is of HEAD either way): the
// layouts and SBOMs must be the same bytes, the index hold linux/amd64 and linux/arm64, each
// binary static and saying the version the labels say, built from HEAD; and crane push's way
// of pushing the layout must give the registry the digest printed.
func TestBuildTwice(t *testing.T) {
	if testing.Short() {
		t.Skip("builds kretry-proxy for two platforms")
	}
	dir := t.TempDir()
	head, _, err := gitState("../..")
	if err != nil {
		t.Fatal(err)
	}
	var printed [2]string
	for i := range printed {
		var stdout bytes.Buffer
		out := filepath.Join(dir, string(rune('a'+i))+".oci")
		if err := run([]string{"-repo", "../..", "-o", out, "-allow-dirty"}, &stdout, io.Discard); err != nil {
			t.Fatal(err)
		}
		printed[i] = strings.ReplaceAll(stdout.String(), out, "OUT")
		printed[i] = strings.ReplaceAll(printed[i], strings.TrimSuffix(out, ".oci")+".spdx.json", "SBOM")
		t.Logf("build %d:\n%s", i+1, stdout.String())
	}
	if printed[0] != printed[1] {
		t.Fatalf("two builds printed differently:\n%s\n%s", printed[0], printed[1])
	}
	for _, f := range []string{"index.json", "oci-layout"} {
		a, _ := os.ReadFile(filepath.Join(dir, "a.oci", f))
		b, _ := os.ReadFile(filepath.Join(dir, "b.oci", f))
		if !bytes.Equal(a, b) || len(a) == 0 {
			t.Errorf("%s differs between the two builds", f)
		}
	}
	a, _ := os.ReadFile(filepath.Join(dir, "a.spdx.json"))
	b, _ := os.ReadFile(filepath.Join(dir, "b.spdx.json"))
	if !bytes.Equal(a, b) || len(a) == 0 {
		t.Error("the SBOMs differ between the two builds")
	}

	// What crane push does with a layout of one entry, an index: push that index.
	l, err := layout.ImageIndexFromPath(filepath.Join(dir, "a.oci"))
	if err != nil {
		t.Fatal(err)
	}
	top, err := l.IndexManifest()
	if err != nil || len(top.Manifests) != 1 || !top.Manifests[0].MediaType.IsIndex() {
		t.Fatalf("index.json: %+v (%v), want one entry, an index", top, err)
	}
	idx, err := l.ImageIndex(top.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil || len(m.Manifests) != 2 {
		t.Fatalf("the image index: %v, %d entries, want 2", err, len(m.Manifests))
	}
	for i, arch := range []string{"amd64", "arm64"} {
		img, err := idx.Image(m.Manifests[i].Digest)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		_, binary := layerFile(t, img)
		if err := checkStatic(binary); err != nil {
			t.Error(err)
		}
		info, err := buildinfo.Read(bytes.NewReader(binary))
		if err != nil {
			t.Fatal(err)
		}
		spec, err := specOf(info, head)
		if err != nil {
			t.Fatalf("%s: %v", arch, err)
		}
		spec.source = "https://github.com/kretry/kretry"
		if spec.arch != arch || cfg.Architecture != arch {
			t.Errorf("entry %d: a %s binary in a %s image, want %s", i, spec.arch, cfg.Architecture, arch)
		}
		checkImage(t, img, binary, spec)
	}
	server := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer server.Close()
	ref, err := name.ParseReference(strings.TrimPrefix(server.URL, "http://") + "/kretry-proxy:test")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(ref, idx); err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Head(ref)
	if err != nil {
		t.Fatal(err)
	}
	if want := top.Manifests[0].Digest; desc.Digest != want || !strings.Contains(printed[0], want.String()) {
		t.Errorf("the registry serves %s; the layout's index is %s, and the build printed:\n%s", desc.Digest, want, printed[0])
	}
}
