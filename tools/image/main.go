package main

import (
	"bytes"
	"debug/buildinfo"
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

// options are the command line.
type options struct {
	repo       string   // the repository's root
	out        string   // the OCI image layout (a directory) to write
	sbom       string   // the SPDX document to write
	repository string   // the image's name, without tag: the layout's ref name is repository:version
	platforms  []string // os/arch, in the index's order
	source     string   // org.opencontainers.image.source
	allowDirty bool     // build the commit although the working tree has uncommitted changes
	goCmd      string
}

// supportedPlatforms are the platforms the image can be built for.
var supportedPlatforms = []string{"linux/amd64", "linux/arm64"}

func parseFlags(args []string) (options, error) {
	var o options
	var platforms string
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.StringVar(&o.repo, "repo", "../..", "the repository's root")
	fs.StringVar(&o.out, "o", "", "the OCI image layout (a directory) to write (required)")
	fs.StringVar(&o.sbom, "sbom", "", "the SPDX 2.3 JSON SBOM to write (default: the layout's path with .spdx.json)")
	fs.StringVar(&o.repository, "repository", "kretry-proxy", "the image's name; its tag is the binary's version")
	fs.StringVar(&platforms, "platforms", strings.Join(supportedPlatforms, ","), "comma-separated os/arch, of "+strings.Join(supportedPlatforms, ", "))
	fs.StringVar(&o.source, "source", "https://github.com/kretry/kretry", "the org.opencontainers.image.source label")
	fs.BoolVar(&o.allowDirty, "allow-dirty", false, "build HEAD although the working tree has uncommitted changes (they are not in the image)")
	fs.StringVar(&o.goCmd, "go", "go", "the go command")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.out == "" || fs.NArg() > 0 {
		return o, errors.New("usage: image -o kretry-proxy.oci [-platforms linux/amd64,linux/arm64] [-allow-dirty]")
	}
	if o.sbom == "" {
		o.sbom = strings.TrimSuffix(o.out, ".oci") + ".spdx.json"
	}
	for _, p := range strings.Split(platforms, ",") {
		if !contains(supportedPlatforms, p) || contains(o.platforms, p) {
			return o, fmt.Errorf("-platforms %q: want one or more of %s, each once", platforms, strings.Join(supportedPlatforms, ", "))
		}
		o.platforms = append(o.platforms, p)
	}
	return o, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// run builds the image of the commit checked out in o.repo: refuses a working tree with
// uncommitted changes (unless -allow-dirty), builds kretry-proxy for each platform in a clean
// clone of the commit (so that the binary's build information carries its version and VCS
// revision), assembles an OCI index of one image a platform, and writes it as an OCI image
// layout with an SPDX SBOM beside it.
func run(args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	root, err := filepath.Abs(o.repo)
	if err != nil {
		return err
	}
	revision, changed, err := gitState(root)
	if err != nil {
		return err
	}
	if len(changed) > 0 {
		if !o.allowDirty {
			return fmt.Errorf("the working tree has uncommitted changes (%s): the image is built from the commit %s and would not hold them; commit them, or pass -allow-dirty (make image ALLOW_DIRTY=1) to build %.12s without them",
				strings.Join(changed, ", "), revision, revision)
		}
		fmt.Fprintf(stderr, "image: warning: uncommitted changes (%s) are NOT in the image: it is built from the commit %.12s\n", strings.Join(changed, ", "), revision)
	}
	clone, err := cloneAt(root, revision)
	if err != nil {
		return err
	}
	defer os.RemoveAll(clone)

	var images []v1.Image
	var specs []imageSpec
	var infos []*debug.BuildInfo
	for _, platform := range o.platforms {
		osName, arch, _ := strings.Cut(platform, "/")
		binary, err := buildProxy(clone, o.goCmd, osName, arch)
		if err != nil {
			return err
		}
		info, err := buildinfo.Read(bytes.NewReader(binary))
		if err != nil {
			return err
		}
		spec, err := specOf(info, revision)
		if err != nil {
			return fmt.Errorf("%s: %w", platform, err)
		}
		spec.source = o.source
		if len(specs) > 0 && spec.version != specs[0].version {
			return fmt.Errorf("%s's binary says version %s, %s's %s", platform, spec.version, o.platforms[0], specs[0].version)
		}
		img, err := assemble(binary, spec)
		if err != nil {
			return err
		}
		images, specs, infos = append(images, img), append(specs, spec), append(infos, info)
	}
	idx, err := assembleIndex(images, specs)
	if err != nil {
		return err
	}
	ref, err := name.NewTag(o.repository + ":" + specs[0].version)
	if err != nil {
		return fmt.Errorf("-repository %q with the version %q: %w", o.repository, specs[0].version, err)
	}
	if err := writeLayout(o.out, idx, ref); err != nil {
		return err
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	doc, packages, err := sbom(infos, specs[0], digest.String())
	if err != nil {
		return err
	}
	if err := os.WriteFile(o.sbom, doc, 0o644); err != nil {
		return err
	}
	return describe(stdout, o, ref, idx, specs[0], infos[0].GoVersion, packages)
}

// specOf reads what the image says of the binary from its build information: the module
// version and the commit it was built from, which must be revision, unmodified.
func specOf(info *debug.BuildInfo, revision string) (imageSpec, error) {
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	switch {
	case settings["vcs.revision"] != revision:
		return imageSpec{}, fmt.Errorf("the binary was built from revision %q, not %s: no VCS information in it", settings["vcs.revision"], revision)
	case settings["vcs.modified"] != "false":
		return imageSpec{}, fmt.Errorf("the build changed the clone of %.12s (vcs.modified=%s): a go.work.sum or go.sum not up to date in the commit?", revision, settings["vcs.modified"])
	case info.Main.Version == "" || info.Main.Version == "(devel)":
		return imageSpec{}, fmt.Errorf("the binary has no module version (%q)", info.Main.Version)
	}
	created, err := time.Parse(time.RFC3339, settings["vcs.time"])
	if err != nil {
		return imageSpec{}, fmt.Errorf("vcs.time %q: %w", settings["vcs.time"], err)
	}
	return imageSpec{os: settings["GOOS"], arch: settings["GOARCH"], version: info.Main.Version, revision: revision, created: created.UTC()}, nil
}

// gitState is HEAD's commit and the tracked files the working tree changed.
func gitState(root string) (string, []string, error) {
	head, err := git(root, "rev-parse", "--verify", "HEAD^{commit}")
	if err != nil {
		return "", nil, err
	}
	// Staged or not, against the commit; untracked files are not in a build from the commit.
	diff, err := git(root, "diff", "--name-only", "HEAD")
	if err != nil {
		return "", nil, err
	}
	var changed []string
	if diff != "" {
		changed = strings.Split(diff, "\n")
	}
	return head, changed, nil
}

// cloneAt clones the repository at root into a new temporary directory, sharing its objects,
// with revision checked out, and returns the directory.
func cloneAt(root, revision string) (string, error) {
	dir, err := os.MkdirTemp("", "kretry-image-")
	if err != nil {
		return "", err
	}
	if _, err := git(root, "clone", "--quiet", "--shared", "--no-checkout", root, dir); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	if _, err := git(dir, "checkout", "--quiet", "--detach", revision); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// buildProxy builds kretry-proxy in the clone (through its go.work) as a static binary whose
// bytes depend on the commit and the toolchain only, stamped with the commit's VCS information
// and the module version Go derives from it, and returns it.
func buildProxy(clone, goCmd, osName, arch string) ([]byte, error) {
	dir, err := os.MkdirTemp("", "kretry-image-bin-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "kretry-proxy")
	cmd := exec.Command(goCmd, "build", "-trimpath", "-buildvcs=true", "-ldflags=-s -w -buildid=", "-o", out, ".")
	cmd.Dir = filepath.Join(clone, "cmd", "kretry-proxy")
	cmd.Env = append(os.Environ(),
		"CGO_ENABLED=0", "GOOS="+osName, "GOARCH="+arch, "GOAMD64=v1", "GOARM64=v8.0",
		"GOFLAGS=", "GOEXPERIMENT=", "GOWORK="+filepath.Join(clone, "go.work"))
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go build kretry-proxy for %s/%s: %w", osName, arch, err)
	}
	binary, err := os.ReadFile(out)
	if err != nil {
		return nil, err
	}
	if err := checkStatic(binary); err != nil {
		return nil, err
	}
	return binary, nil
}

// checkStatic fails unless binary is an ELF executable that needs no dynamic loader: the image
// has none.
func checkStatic(binary []byte) error {
	f, err := elf.NewFile(bytes.NewReader(binary))
	if err != nil {
		return fmt.Errorf("kretry-proxy is not an ELF binary: %w", err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			return errors.New("kretry-proxy is dynamically linked: the image has no libc (build with CGO_ENABLED=0)")
		}
	}
	return nil
}

// writeLayout writes idx as an OCI image layout at path, its one entry named ref, through a
// directory renamed into place, so that a failed build leaves no half layout.
func writeLayout(path string, idx v1.ImageIndex, ref name.Tag) error {
	tmp, err := os.MkdirTemp(filepath.Dir(path), ".kretry-image-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	l, err := layout.Write(tmp, empty.Index)
	if err != nil {
		return err
	}
	if err := l.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref.String()})); err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	if err := os.RemoveAll(path); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// describe prints what a user checks or pins: the index's digest and each image's.
func describe(w io.Writer, o options, ref name.Tag, idx v1.ImageIndex, spec imageSpec, goVersion string, packages int) error {
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	manifest, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s: %s, an OCI image index, built with %s\n", o.out, ref, goVersion)
	fmt.Fprintf(w, "digest:     %s (the index: what crane push prints and what to pin)\n", digest)
	fmt.Fprintf(w, "version:    %s\nrevision:   %s\ncreated:    %s\nsource:     %s\n", spec.version, spec.revision, spec.created.Format(time.RFC3339), spec.source)
	for _, m := range manifest.Manifests {
		img, err := idx.Image(m.Digest)
		if err != nil {
			return err
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			return err
		}
		layers, err := img.Layers()
		if err != nil {
			return err
		}
		var size int64
		for _, l := range layers {
			s, err := l.Size()
			if err != nil {
				return err
			}
			size += s
		}
		fmt.Fprintf(w, "%-11s %s (%d-byte layer), user %s, entrypoint %q\n", m.Platform.String()+":", m.Digest, size, cfg.Config.User, cfg.Config.Entrypoint)
	}
	fmt.Fprintf(w, "sbom:       %s (SPDX 2.3, %d packages)\n", o.sbom, packages)
	return nil
}
