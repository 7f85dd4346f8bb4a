package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// apidiff compares the exported API of every released module in the working tree with the
// same module at the git ref base, with golang.org/x/exp/cmd/apidiff (this module's tool
// dependency). It prints every change and fails if one is incompatible.
func apidiff(ws *workspace, base string) (err error) {
	tmp, err := os.MkdirTemp("", "kretry-apidiff-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	tool := filepath.Join(tmp, "apidiff")
	if err := goCmd(filepath.Join(ws.root, "tools", "release"), append(os.Environ(), "GOWORK=off"),
		"build", "-o", tool, "golang.org/x/exp/cmd/apidiff"); err != nil {
		return err
	}
	baseTree := filepath.Join(tmp, "base")
	if err := exportRef(ws.root, base, baseTree); err != nil {
		return err
	}
	var incompatible []string
	for _, dir := range released {
		path := ws.modules[dir].path()
		before, after := filepath.Join(tmp, "before.api"), filepath.Join(tmp, "after.api")
		if _, err := os.Stat(filepath.Join(baseTree, dir, "go.mod")); os.IsNotExist(err) {
			fmt.Printf("apidiff: %s is new since %s\n", path, base)
			continue
		}
		if err := writeAPI(tool, baseTree, dir, path, before); err != nil {
			return fmt.Errorf("%s at %s: %w", path, base, err)
		}
		if err := writeAPI(tool, ws.root, dir, path, after); err != nil {
			return fmt.Errorf("%s in the working tree: %w", path, err)
		}
		report, err := exec.Command(tool, "-m", before, after).CombinedOutput()
		if err != nil {
			return fmt.Errorf("apidiff %s: %w: %s", path, err, report)
		}
		fmt.Printf("apidiff: %s since %s:\n%s", path, base, indent(report))
		if bytes.Contains(report, []byte("Incompatible changes:")) {
			incompatible = append(incompatible, path)
		}
	}
	if len(incompatible) > 0 {
		return fmt.Errorf("incompatible API changes since %s in %s: a v0 release bumps its minor version for them, a v1 release cannot have them",
			base, strings.Join(incompatible, ", "))
	}
	return nil
}

// writeAPI writes the export data of the module in tree/dir to file. A nested module builds
// as it did at that ref: with the tree's go.work where it has one, else from its own go.mod
// (which then carried replace directives). The root module builds from its go.mod alone: in
// the workspace its package pattern would take in the nested modules' packages too.
func writeAPI(tool, tree, dir, path, file string) error {
	work := "off"
	if _, err := os.Stat(filepath.Join(tree, "go.work")); err == nil && dir != "." {
		work = filepath.Join(tree, "go.work")
	}
	cmd := exec.Command(tool, "-m", "-w", file, path)
	cmd.Dir = filepath.Join(tree, dir)
	cmd.Env = append(os.Environ(), "GOWORK="+work)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	return nil
}

// exportRef writes the tree of the git ref in the repository at root to dst.
func exportRef(root, ref, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	archive := exec.Command("git", "-C", root, "archive", "--format=tar", ref)
	extract := exec.Command("tar", "-x", "-C", dst)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return err
	}
	extract.Stdin = pipe
	var stderr bytes.Buffer
	archive.Stderr = &stderr
	if err := extract.Start(); err != nil {
		return err
	}
	if err := archive.Run(); err != nil {
		return fmt.Errorf("git archive %s: %w: %s", ref, err, stderr.String())
	}
	return extract.Wait()
}

// indent prefixes every line of report with a tab.
func indent(report []byte) string {
	if len(bytes.TrimSpace(report)) == 0 {
		return "\t(no changes)\n"
	}
	lines := strings.Split(strings.TrimRight(string(report), "\n"), "\n")
	return "\t" + strings.Join(lines, "\n\t") + "\n"
}
