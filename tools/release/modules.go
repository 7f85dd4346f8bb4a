package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/mod/modfile"
)

// released are the modules a release tags, in the order their tags are pushed: each one's
// dependencies among them come before it. Tags are "<dir>/<version>", "<version>" for the root.
var released = []string{".", "metrics", "cmd/kretry-proxy"}

// tagOf is the git tag that releases the module in dir at version.
func tagOf(dir, version string) string {
	if dir == "." {
		return version
	}
	return dir + "/" + version
}

// workspace is the repository's go.work and the modules it uses.
type workspace struct {
	root    string               // the directory holding go.work
	work    *modfile.WorkFile    // go.work, parsed
	modules map[string]*wsModule // by directory relative to root ("." for the root module)
	byPath  map[string]*wsModule // by module path
}

// wsModule is one go.mod of the workspace.
type wsModule struct {
	dir  string // relative to the workspace root
	file *modfile.File
}

// path is the module's path.
func (m *wsModule) path() string { return m.file.Module.Mod.Path }

// findRoot walks up from dir to the directory holding go.work.
func findRoot(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.work")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.work in %s or above: run inside the kretry repository", dir)
		}
	}
}

// loadWorkspace reads root/go.work and every go.mod it uses.
func loadWorkspace(root string) (*workspace, error) {
	data, err := os.ReadFile(filepath.Join(root, "go.work"))
	if err != nil {
		return nil, err
	}
	work, err := modfile.ParseWork("go.work", data, nil)
	if err != nil {
		return nil, err
	}
	ws := &workspace{root: root, work: work, modules: map[string]*wsModule{}, byPath: map[string]*wsModule{}}
	for _, use := range work.Use {
		m, err := loadModule(root, filepath.Clean(use.Path))
		if err != nil {
			return nil, err
		}
		ws.modules[m.dir] = m
		ws.byPath[m.path()] = m
	}
	for _, dir := range released {
		if ws.modules[dir] == nil {
			return nil, fmt.Errorf("released module %s is not used by go.work", dir)
		}
	}
	return ws, nil
}

// loadModule reads the go.mod in root/dir.
func loadModule(root, dir string) (*wsModule, error) {
	name := filepath.Join(root, dir, "go.mod")
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	file, err := modfile.Parse(name, data, nil)
	if err != nil {
		return nil, err
	}
	return &wsModule{dir: dir, file: file}, nil
}

// dirs are the workspace's module directories, sorted.
func (ws *workspace) dirs() []string {
	dirs := make([]string, 0, len(ws.modules))
	for dir := range ws.modules {
		dirs = append(dirs, dir)
	}
	sort.Strings(dirs)
	return dirs
}

// kretryRequires are the requirements of m on other workspace modules.
func (ws *workspace) kretryRequires(m *wsModule) []*modfile.Require {
	var reqs []*modfile.Require
	for _, r := range m.file.Require {
		if ws.byPath[r.Mod.Path] != nil {
			reqs = append(reqs, r)
		}
	}
	return reqs
}

// lockstepVersion is the one version every workspace module requires the others at, or an
// error naming the requirements that disagree.
func (ws *workspace) lockstepVersion() (string, error) {
	seen := map[string][]string{}
	for _, dir := range ws.dirs() {
		m := ws.modules[dir]
		for _, r := range ws.kretryRequires(m) {
			seen[r.Mod.Version] = append(seen[r.Mod.Version], dir+": "+r.Mod.Path)
		}
	}
	switch len(seen) {
	case 0:
		return "", fmt.Errorf("no workspace module requires another")
	case 1:
		for v := range seen {
			return v, nil
		}
	}
	var lines []string
	for v, where := range seen {
		lines = append(lines, v+" ("+strings.Join(where, ", ")+")")
	}
	sort.Strings(lines)
	return "", fmt.Errorf("kretry modules are required at more than one version: %s", strings.Join(lines, "; "))
}

// writeModFile formats and writes m's go.mod.
func (ws *workspace) writeModFile(m *wsModule) error {
	m.file.Cleanup()
	data, err := m.file.Format()
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(ws.root, m.dir, "go.mod"), data, 0o644)
}

// writeWorkFile formats and writes go.work.
func (ws *workspace) writeWorkFile() error {
	ws.work.Cleanup()
	return os.WriteFile(filepath.Join(ws.root, "go.work"), modfile.Format(ws.work.Syntax), 0o644)
}
