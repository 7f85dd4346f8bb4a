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
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

// options are the command line.
type options struct {
	repo     string // the repository's root
	out      string // the tarball to write
	tag      string // the name in the tarball, for docker load
	platform string // os/arch
	goCmd    string
}

func run(args []string, stdout io.Writer, getenv func(string) string) error {
	var o options
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.StringVar(&o.repo, "repo", "../..", "the repository's root")
	fs.StringVar(&o.out, "o", "", "the image tarball to write (required)")
	fs.StringVar(&o.tag, "tag", "kretry-proxy:latest", "the image's name in the tarball (what docker load calls it)")
	fs.StringVar(&o.platform, "platform", "linux/amd64", "the image's os/arch (linux/amd64 or linux/arm64)")
	fs.StringVar(&o.goCmd, "go", "go", "the go command")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.out == "" || fs.NArg() > 0 {
		return errors.New("usage: image -o kretry-proxy.tar [-tag kretry-proxy:VERSION] [-platform linux/amd64]")
	}
	spec, err := specFor(o, getenv)
	if err != nil {
		return err
	}
	tag, err := name.NewTag(o.tag)
	if err != nil {
		return fmt.Errorf("-tag: %w", err)
	}
	binary, err := buildProxy(o.repo, o.goCmd, spec)
	if err != nil {
		return err
	}
	img, err := assemble(binary, spec)
	if err != nil {
		return err
	}
	if err := writeTarball(o.out, tag, img); err != nil {
		return err
	}
	built, err := buildinfo.Read(bytes.NewReader(binary))
	if err != nil {
		return err
	}
	return describe(stdout, o.out, tag, img, built.GoVersion)
}

// specFor reads the platform, the version in the tag and SOURCE_DATE_EPOCH.
func specFor(o options, getenv func(string) string) (imageSpec, error) {
	osName, arch, ok := strings.Cut(o.platform, "/")
	if !ok || osName != "linux" || (arch != "amd64" && arch != "arm64") {
		return imageSpec{}, fmt.Errorf("-platform %q: want linux/amd64 or linux/arm64", o.platform)
	}
	spec := imageSpec{os: osName, arch: arch, created: time.Unix(0, 0).UTC()}
	if _, version, ok := strings.Cut(o.tag, ":"); ok && !strings.Contains(version, "/") {
		spec.version = version
	}
	if epoch := getenv("SOURCE_DATE_EPOCH"); epoch != "" {
		seconds, err := strconv.ParseInt(epoch, 10, 64)
		if err != nil || seconds < 0 {
			return imageSpec{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: want seconds since 1970 (e.g. git log -1 --format=%%ct)", epoch)
		}
		spec.created = time.Unix(seconds, 0).UTC()
	}
	return spec, nil
}

// buildProxy builds kretry-proxy from the checkout (through the repository's go.work) as a
// static binary whose bytes depend on the source and the toolchain only, and returns it.
func buildProxy(repo, goCmd string, spec imageSpec) ([]byte, error) {
	root, err := filepath.Abs(repo)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "kretry-image-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "kretry-proxy")
	cmd := exec.Command(goCmd, "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w -buildid=", "-o", out, ".")
	cmd.Dir = filepath.Join(root, "cmd", "kretry-proxy")
	cmd.Env = append(os.Environ(),
		"CGO_ENABLED=0", "GOOS="+spec.os, "GOARCH="+spec.arch, "GOAMD64=v1", "GOARM64=v8.0",
		"GOFLAGS=", "GOEXPERIMENT=", "GOWORK="+filepath.Join(root, "go.work"))
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go build kretry-proxy: %w", err)
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

// writeTarball writes the image as `docker save` does, through a file renamed into place, so
// that a failed build leaves no half tarball.
func writeTarball(path string, tag name.Tag, img v1.Image) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".kretry-image-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tarball.Write(tag, img, tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// describe prints what a user checks or pins: the digest, the config, the layer.
func describe(w io.Writer, path string, tag name.Tag, img v1.Image, goVersion string) error {
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cfgName, err := img.ConfigName()
	if err != nil {
		return err
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	info, err := os.Stat(path)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s: %s (%s/%s), %d bytes, built with %s\n", path, tag.String(), cfg.OS, cfg.Architecture, info.Size(), goVersion)
	fmt.Fprintf(w, "digest:     %s\n", digest)
	fmt.Fprintf(w, "config:     %s\n", cfgName)
	fmt.Fprintf(w, "user:       %s\n", cfg.Config.User)
	fmt.Fprintf(w, "entrypoint: %q\n", cfg.Config.Entrypoint)
	fmt.Fprintf(w, "created:    %s\n", cfg.Created.UTC().Format(time.RFC3339))
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return err
		}
		size, err := l.Size()
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "layer:      %s (%d bytes)\n", d, size)
	}
	return nil
}
