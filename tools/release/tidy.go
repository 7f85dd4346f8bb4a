package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/mod/modfile"
)

// tidy runs `go mod tidy` in every workspace module. go mod tidy is not workspace-aware: in a
// module that requires the library at a version not yet released it would look that version
// up and fail. So each module gets, for the run only, replace directives pointing at the
// checkout (which add no go.sum lines), and loses them again however tidy ends.
func tidy(ws *workspace, env []string) error {
	for _, dir := range ws.dirs() {
		if err := tidyModule(ws, ws.modules[dir], env); err != nil {
			return err
		}
	}
	return nil
}

func tidyModule(ws *workspace, m *wsModule, env []string) (err error) {
	reqs := ws.kretryRequires(m)
	for _, r := range reqs {
		rel, err := filepath.Rel(m.dir, ws.byPath[r.Mod.Path].dir)
		if err != nil {
			return err
		}
		if err := m.file.AddReplace(r.Mod.Path, "", filepath.ToSlash(rel), ""); err != nil {
			return err
		}
	}
	if err := ws.writeModFile(m); err != nil {
		return err
	}
	defer func() {
		if rerr := reloadWithoutReplaces(ws, m, reqs); err == nil {
			err = rerr
		}
	}()
	fmt.Printf("release: go mod tidy in %s\n", m.dir)
	return goCmd(filepath.Join(ws.root, m.dir), append(env, "GOWORK=off"), "mod", "tidy")
}

// reloadWithoutReplaces reads m's go.mod as tidy left it and drops the replacements of reqs.
func reloadWithoutReplaces(ws *workspace, m *wsModule, reqs []*modfile.Require) error {
	fresh, err := loadModule(ws.root, m.dir)
	if err != nil {
		return err
	}
	m.file = fresh.file
	for _, r := range reqs {
		if err := m.file.DropReplace(r.Mod.Path, ""); err != nil {
			return err
		}
	}
	return ws.writeModFile(m)
}

// goCmd runs the go command in dir with env, its output on ours.
func goCmd(dir string, env []string, args ...string) error {
	cmd := exec.Command(goTool(), args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s in %s: %w", strings.Join(args, " "), dir, err)
	}
	return nil
}

// goTool is $GO, else "go".
func goTool() string {
	if g := os.Getenv("GO"); g != "" {
		return g
	}
	return "go"
}
