package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

// fsProxy is a module proxy in a directory, served by the go command itself through
// GOPROXY=file://<dir> (the GOPROXY protocol: <module>/@v/list, <version>.info, .mod, .zip).
type fsProxy struct{ dir string }

// URL is the proxy's GOPROXY entry.
func (p fsProxy) URL() string { return "file://" + filepath.ToSlash(p.dir) }

// add writes the module in srcDir (its go.mod at the top; nested modules left out, as a module
// zip has them) at version.
func (p fsProxy) add(modPath, version, srcDir string) error {
	escaped, err := module.EscapePath(modPath)
	if err != nil {
		return err
	}
	at := filepath.Join(p.dir, filepath.FromSlash(escaped), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		return err
	}
	var zipped bytes.Buffer
	if err := zip.CreateFromDir(&zipped, module.Version{Path: modPath, Version: version}, srcDir); err != nil {
		return fmt.Errorf("zip %s@%s: %w", modPath, version, err)
	}
	goMod, err := os.ReadFile(filepath.Join(srcDir, "go.mod"))
	if err != nil {
		return err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, time.Now().UTC().Truncate(time.Second)})
	if err != nil {
		return err
	}
	for name, data := range map[string][]byte{
		version + ".zip":  zipped.Bytes(),
		version + ".mod":  goMod,
		version + ".info": info,
		"list":            []byte(version + "\n"),
	} {
		if err := os.WriteFile(filepath.Join(at, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
