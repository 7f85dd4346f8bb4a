package main

import (
	"bytes"
	_ "embed"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

//go:embed consumer/main.go.txt
var consumerMain []byte

// check rehearses the release of the working tree at version (see the package doc).
func check(ws *workspace, version string, keep bool) (err error) {
	if err := checkVersion(version); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "kretry-release-check-")
	if err != nil {
		return err
	}
	if keep {
		fmt.Printf("release: rehearsal kept in %s\n", tmp)
	} else {
		defer os.RemoveAll(tmp)
	}
	rootPath := ws.modules["."].path()
	cache, err := goEnv("GOMODCACHE")
	if err != nil {
		return err
	}
	// The rehearsed versions must not outlive the rehearsal in the shared module cache: the next
	// one, of other contents at the same version, would be served the stale copy.
	if err := forgetModules(cache, rootPath); err != nil {
		return err
	}
	defer func() {
		if ferr := forgetModules(cache, rootPath); err == nil {
			err = ferr
		}
	}()

	src := filepath.Join(tmp, "src")
	if err := copyWorkingTree(ws.root, src); err != nil {
		return err
	}
	rehearsal, err := loadWorkspace(src)
	if err != nil {
		return err
	}
	if err := bump(rehearsal, version); err != nil {
		return err
	}
	proxy := fsProxy{dir: filepath.Join(tmp, "proxy")}
	env, err := releaseEnv(proxy, rootPath)
	if err != nil {
		return err
	}
	for _, dir := range released {
		m := rehearsal.modules[dir]
		if len(rehearsal.kretryRequires(m)) > 0 {
			// As the release does once the tags before this one are on the proxy.
			fmt.Printf("release: go mod tidy in %s against the modules released before it\n", dir)
			if err := goCmd(filepath.Join(src, dir), env, "mod", "tidy"); err != nil {
				return err
			}
		}
		if err := proxy.add(m.path(), version, filepath.Join(src, dir)); err != nil {
			return err
		}
		fmt.Printf("release: %s@%s (tag %s) written to %s\n", m.path(), version, tagOf(dir, version), proxy.URL())
	}

	metricsPath := rehearsal.modules["metrics"].path()
	consumer := filepath.Join(tmp, "consumer")
	if err := os.MkdirAll(consumer, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(consumer, "go.mod"), []byte("module example.com/consumer\n\ngo 1.26.0\n"), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(consumer, "main.go"), consumerMain, 0o644); err != nil {
		return err
	}
	fmt.Printf("release: a fresh module outside the repository (%s) gets %s and %s at %s\n", consumer, rootPath, metricsPath, version)
	for _, args := range [][]string{
		{"get", rootPath + "@" + version, metricsPath + "@" + version},
		{"mod", "tidy"},
		{"build", "-o", "consumer", "."},
	} {
		if err := goCmd(consumer, env, args...); err != nil {
			return err
		}
	}
	if err := runAndExpect(filepath.Join(consumer, "consumer"), nil,
		"1 ConfigMap(s) at resourceVersion 7 in 2 requests, kretry_retries_total 1"); err != nil {
		return err
	}

	proxyPath := rehearsal.modules["cmd/kretry-proxy"].path()
	bin := filepath.Join(tmp, "bin")
	fmt.Printf("release: go install %s@%s\n", proxyPath, version)
	if err := goCmd(consumer, append(env, "GOBIN="+bin), "install", proxyPath+"@"+version); err != nil {
		return err
	}
	if err := runAndExpect(filepath.Join(bin, "kretry-proxy"), []string{"--version"}, version); err != nil {
		return err
	}
	fmt.Printf("release: %s rehearsed: every module installs and builds from the module proxy alone\n", version)
	return nil
}

// releaseEnv is the environment of a go command that sees the rehearsed modules through proxy,
// before the usual proxy, with no workspace and no checksum database lookups for kretry's
// modules (the database has never seen them; their go.sum lines come from the zips).
func releaseEnv(proxy fsProxy, rootPath string) ([]string, error) {
	upstream, err := goEnv("GOPROXY")
	if err != nil {
		return nil, err
	}
	noSumDB, err := goEnv("GONOSUMDB")
	if err != nil {
		return nil, err
	}
	if noSumDB != "" {
		noSumDB += ","
	}
	// A module version is immutable to the go command, so it keeps an index of each one's
	// packages in GOCACHE; a rehearsal rewrites the same version with new contents, and an
	// index of an earlier rehearsal would hide the packages added since.
	godebug := "goindex=0"
	if prior := os.Getenv("GODEBUG"); prior != "" {
		godebug = prior + "," + godebug
	}
	return append(os.Environ(),
		"GOWORK=off",
		"GOPROXY="+proxy.URL()+","+upstream,
		"GONOSUMDB="+noSumDB+rootPath,
		"GODEBUG="+godebug,
	), nil
}

// runAndExpect runs a program and fails unless its output holds want.
func runAndExpect(program string, args []string, want string) error {
	var out bytes.Buffer
	cmd := exec.Command(program, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	fmt.Printf("release: %s %s: %s", filepath.Base(program), strings.Join(args, " "), out.String())
	if err != nil {
		return fmt.Errorf("%s: %w", program, err)
	}
	if !strings.Contains(out.String(), want) {
		return fmt.Errorf("%s %s printed %q, want it to contain %q", program, strings.Join(args, " "), out.String(), want)
	}
	return nil
}

// goEnv is one `go env` value.
func goEnv(name string) (string, error) {
	out, err := exec.Command(goTool(), "env", name).Output()
	if err != nil {
		return "", fmt.Errorf("go env %s: %w", name, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// forgetModules removes every version of the modules under rootPath from the module cache:
// <cache>/<root>@<version> for the root module, <cache>/<root>/ for the nested ones beside it,
// and their downloads under <cache>/cache/download/<root>/.
func forgetModules(cache, rootPath string) error {
	root := filepath.Join(cache, filepath.FromSlash(rootPath))
	versions, err := filepath.Glob(root + "@*")
	if err != nil {
		return err
	}
	for _, dir := range append(versions, root, filepath.Join(cache, "cache", "download", filepath.FromSlash(rootPath))) {
		if err := removeReadOnly(dir); err != nil {
			return err
		}
	}
	return nil
}

// removeReadOnly removes a tree the go command wrote read-only.
func removeReadOnly(dir string) error {
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			err = os.Chmod(path, 0o755)
		}
		return err
	})
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	return os.RemoveAll(dir)
}

// copyWorkingTree copies the files git knows of in root (tracked, and untracked but not
// ignored), as they are in the working tree, to dst.
func copyWorkingTree(root, dst string) error {
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		return fmt.Errorf("git ls-files in %s: %w", root, err)
	}
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		from := filepath.Join(root, name)
		info, err := os.Lstat(from)
		if os.IsNotExist(err) {
			continue // deleted in the working tree
		}
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			continue // module zips hold regular files only
		}
		data, err := os.ReadFile(from)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, name)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(to, data, info.Mode().Perm()); err != nil {
			return err
		}
	}
	return nil
}
