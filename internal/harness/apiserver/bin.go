package apiserver

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// BinDirEnv names the environment variable that overrides where the binaries are looked up.
const BinDirEnv = "KRETRY_APISERVER_BIN"

// E2EEnv names the environment variable that makes missing binaries a failure instead of a skip.
const E2EEnv = "KRETRY_E2E"

// ErrNoBinaries is returned (wrapped) by FindBinDir when kube-apiserver or etcd is missing.
var ErrNoBinaries = errors.New("kube-apiserver/etcd binaries not found (run `make apiserver`)")

// FindBinDir returns $KRETRY_APISERVER_BIN, or the .apiserver/bin of the repository found by
// walking up from the working directory (the directory holding tools/apiserver/build.sh). It
// fails with ErrNoBinaries unless both kube-apiserver and etcd are there.
func FindBinDir() (string, error) {
	dir := os.Getenv(BinDirEnv)
	if dir == "" {
		root, err := repoRoot()
		if err != nil {
			return "", fmt.Errorf("%w: %v", ErrNoBinaries, err)
		}
		dir = filepath.Join(root, ".apiserver", "bin")
	}
	for _, name := range []string{"kube-apiserver", "etcd"} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return "", fmt.Errorf("%w: no executable %s in %s", ErrNoBinaries, name, dir)
		}
	}
	return dir, nil
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "tools", "apiserver", "build.sh")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no tools/apiserver/build.sh above the working directory")
		}
		dir = parent
	}
}
