package main

import (
	"fmt"
	"path/filepath"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
)

// checkVersion accepts a release version: canonical semantic version, v0 or v1 (a v2 would
// change every module path).
func checkVersion(version string) error {
	if !semver.IsValid(version) || semver.Canonical(version) != version {
		return fmt.Errorf("version %q: want a canonical semantic version such as v0.1.0", version)
	}
	if major := semver.Major(version); major != "v0" && major != "v1" {
		return fmt.Errorf("version %q: a %s release changes every module path (/%s); not supported", version, major, major)
	}
	return nil
}

// bump sets every requirement of a workspace module on another, and go.work's replacement of
// each, to version, and writes the files that changed.
func bump(ws *workspace, version string) error {
	if err := checkVersion(version); err != nil {
		return err
	}
	for _, dir := range ws.dirs() {
		m := ws.modules[dir]
		reqs := ws.kretryRequires(m)
		if len(reqs) == 0 {
			continue
		}
		for _, r := range reqs {
			if err := m.file.AddRequire(r.Mod.Path, version); err != nil {
				return fmt.Errorf("%s: %w", dir, err)
			}
		}
		if err := ws.writeModFile(m); err != nil {
			return err
		}
	}
	// go.work replaces each required module at the required version: a requirement on a
	// workspace module at a version no proxy serves yet is otherwise looked up, and fails.
	for _, rep := range append([]*modfile.Replace(nil), ws.work.Replace...) { // a copy: dropping edits the list
		if ws.byPath[rep.Old.Path] != nil {
			if err := ws.work.DropReplace(rep.Old.Path, rep.Old.Version); err != nil {
				return err
			}
		}
	}
	for _, dir := range ws.dirs() {
		for _, r := range ws.kretryRequires(ws.modules[dir]) {
			target := ws.byPath[r.Mod.Path]
			if err := ws.work.AddReplace(r.Mod.Path, version, localPath(target.dir), ""); err != nil {
				return err
			}
		}
	}
	return ws.writeWorkFile()
}

// localPath spells a module directory as a go.mod or go.work replacement wants it.
func localPath(dir string) string {
	if dir == "." {
		return "./"
	}
	return "./" + filepath.ToSlash(dir)
}
