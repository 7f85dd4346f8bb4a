package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

const usage = `usage: release bump VERSION | tidy | check [-keep] VERSION | apidiff BASE | version`

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("%s", usage)
	}
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	root, err := findRoot(wd)
	if err != nil {
		return err
	}
	ws, err := loadWorkspace(root)
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("release "+args[0], flag.ContinueOnError)
	keep := fs.Bool("keep", false, "check: keep the rehearsal's directory")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	switch {
	case args[0] == "bump" && fs.NArg() == 1:
		return bump(ws, fs.Arg(0))
	case args[0] == "tidy" && fs.NArg() == 0:
		return tidy(ws, os.Environ())
	case args[0] == "check" && fs.NArg() == 1:
		return check(ws, fs.Arg(0), *keep)
	case args[0] == "apidiff" && fs.NArg() == 1:
		return apidiff(ws, fs.Arg(0))
	case args[0] == "version" && fs.NArg() == 0:
		version, err := ws.lockstepVersion()
		if err != nil {
			return err
		}
		fmt.Println(version)
		return nil
	}
	return fmt.Errorf("%s", usage)
}
