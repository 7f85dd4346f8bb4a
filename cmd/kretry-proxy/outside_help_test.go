package main_test

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// TestOutsideHelp: --help and -h print the usage, every flag in it, and exit 0, as a user
// asking for help expects; no error line follows.
func TestOutsideHelp(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the kretry-proxy binary")
	}
	bin := outsideBuild(t)
	for _, arg := range []string{"--help", "-h", "-help"} {
		cmd := exec.Command(bin, arg)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			t.Errorf("%s: exit status %d, want 0", arg, exit.ExitCode())
		} else if err != nil {
			t.Fatal(err)
		}
		out := stdout.String() + stderr.String()
		if strings.Contains(out, "help requested") {
			t.Errorf("%s: the output has an error line:\n%s", arg, lastLine(out))
		}
		for _, flag := range []string{"-accept-hosts", "-allow-upgrades", "-list-buffer-size", "-kubeconfig"} {
			if !strings.Contains(stdout.String(), flag) {
				t.Errorf("%s: stdout does not name %s", arg, flag)
			}
		}
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}
