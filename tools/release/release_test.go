package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

// writeTree writes files (path -> contents) under a new temporary directory.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, data := range files {
		path := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// A workspace shaped like kretry's: the library, a module requiring it, a command requiring
// both, and a module requiring neither.
func testWorkspace(t *testing.T) string {
	return writeTree(t, map[string]string{
		"go.work": "go 1.26.0\n\nuse (\n\t.\n\t./cmd/kretry-proxy\n\t./metrics\n\t./plot\n)\n\n" +
			"replace (\n\tgithub.com/kretry/kretry v0.1.0 => ./\n\tgithub.com/kretry/kretry/metrics v0.1.0 => ./metrics\n)\n",
		"go.mod":         "module github.com/kretry/kretry\n\ngo 1.26.0\n\nrequire k8s.io/client-go v0.37.2\n",
		"metrics/go.mod": "module github.com/kretry/kretry/metrics\n\ngo 1.26.0\n\nrequire (\n\tgithub.com/kretry/kretry v0.1.0\n\tk8s.io/client-go v0.37.2\n)\n",
		"cmd/kretry-proxy/go.mod": "module github.com/kretry/kretry/cmd/kretry-proxy\n\ngo 1.26.0\n\n" +
			"require (\n\tgithub.com/kretry/kretry v0.1.0\n\tgithub.com/kretry/kretry/metrics v0.1.0\n)\n",
		"plot/go.mod": "module github.com/kretry/kretry/plot\n\ngo 1.26.0\n\nrequire gonum.org/v1/plot v0.17.0\n",
	})
}

func TestBumpMovesEveryKretryRequireInLockstep(t *testing.T) {
	root := testWorkspace(t)
	ws, err := loadWorkspace(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := bump(ws, "v0.2.0"); err != nil {
		t.Fatal(err)
	}
	ws, err = loadWorkspace(root)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := ws.lockstepVersion(); err != nil || v != "v0.2.0" {
		t.Fatalf("lockstepVersion after bump = %q, %v; want v0.2.0", v, err)
	}
	for dir, want := range map[string][]string{
		"go.work":                 {"github.com/kretry/kretry v0.2.0 => ./\n", "github.com/kretry/kretry/metrics v0.2.0 => ./metrics\n"},
		"metrics/go.mod":          {"github.com/kretry/kretry v0.2.0\n", "k8s.io/client-go v0.37.2\n"},
		"cmd/kretry-proxy/go.mod": {"github.com/kretry/kretry v0.2.0\n", "github.com/kretry/kretry/metrics v0.2.0\n"},
		"plot/go.mod":             {"gonum.org/v1/plot v0.17.0\n"},
	} {
		data, err := os.ReadFile(filepath.Join(root, dir))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range want {
			if !strings.Contains(string(data), line) {
				t.Errorf("%s after bump:\n%s\nwant it to contain %q", dir, data, line)
			}
		}
		if strings.Contains(string(data), "v0.1.0") {
			t.Errorf("%s still names v0.1.0:\n%s", dir, data)
		}
	}
}

func TestLockstepVersionNamesDisagreements(t *testing.T) {
	root := testWorkspace(t)
	path := filepath.Join(root, "metrics", "go.mod")
	data, _ := os.ReadFile(path)
	if err := os.WriteFile(path, []byte(strings.Replace(string(data), "kretry v0.1.0", "kretry v0.0.9", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	ws, err := loadWorkspace(root)
	if err != nil {
		t.Fatal(err)
	}
	_, err = ws.lockstepVersion()
	if err == nil || !strings.Contains(err.Error(), "v0.0.9 (metrics: github.com/kretry/kretry)") {
		t.Fatalf("lockstepVersion = %v, want an error naming metrics' v0.0.9", err)
	}
}

func TestCheckVersion(t *testing.T) {
	for version, ok := range map[string]bool{
		"v0.1.0": true, "v1.2.3": true, "v0.2.0-rc.1": true,
		"0.1.0": false, "v0.1": false, "v2.0.0": false, "v0.1.0+meta": false, "": false,
	} {
		if err := checkVersion(version); (err == nil) != ok {
			t.Errorf("checkVersion(%q) = %v, want ok=%v", version, err, ok)
		}
	}
}

func TestTagOf(t *testing.T) {
	if got := tagOf(".", "v0.1.0"); got != "v0.1.0" {
		t.Errorf("root tag %q", got)
	}
	if got := tagOf("cmd/kretry-proxy", "v0.1.0"); got != "cmd/kretry-proxy/v0.1.0" {
		t.Errorf("nested tag %q", got)
	}
}

// The proxy holds what the go command asks a GOPROXY for, and the zip leaves nested modules out.
func TestFSProxyWritesAModuleZipWithoutNestedModules(t *testing.T) {
	root := testWorkspace(t)
	if err := os.WriteFile(filepath.Join(root, "lib.go"), []byte("package kretry\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	proxy := fsProxy{dir: t.TempDir()}
	if err := proxy.add("github.com/kretry/kretry", "v0.1.0", root); err != nil {
		t.Fatal(err)
	}
	at := filepath.Join(proxy.dir, "github.com", "kretry", "kretry", "@v")
	for _, name := range []string{"list", "v0.1.0.info", "v0.1.0.mod", "v0.1.0.zip"} {
		if _, err := os.Stat(filepath.Join(at, name)); err != nil {
			t.Error(err)
		}
	}
	files, err := zip.CheckZip(module.Version{Path: "github.com/kretry/kretry", Version: "v0.1.0"}, filepath.Join(at, "v0.1.0.zip"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files.Valid {
		names = append(names, strings.TrimPrefix(f, "github.com/kretry/kretry@v0.1.0/"))
	}
	if got, want := strings.Join(names, " "), "go.mod go.work lib.go"; got != want {
		t.Errorf("zip holds %q, want %q (nested modules left out)", got, want)
	}
}
