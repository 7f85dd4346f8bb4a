package doclinks

import (
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"regexp"
	"sort"
	"strings"
)

// skippedDirs are never searched for Markdown: git's own files, the built
// kube-apiserver binaries, npm's packages, and test inputs (which may hold
// broken links on purpose).
var skippedDirs = map[string]bool{".git": true, ".apiserver": true, "node_modules": true, "testdata": true}

var external = regexp.MustCompile(`^(?:[A-Za-z][A-Za-z0-9+.-]*:|//)`)

// check reads every Markdown file of fsys and returns one line per broken
// link ("file:line: target: what is wrong"), sorted.
func check(fsys fs.FS) ([]string, error) {
	docs := map[string]document{} // Markdown files by root-relative path
	err := fs.WalkDir(fsys, ".", func(name string, entry fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if entry.IsDir() {
			if name != "." && skippedDirs[entry.Name()] {
				return fs.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(strings.ToLower(name), ".md") {
			src, err := fs.ReadFile(fsys, name)
			if err != nil {
				return err
			}
			docs[name] = parse(string(src))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}

	var problems []string
	for name, doc := range docs {
		for _, l := range doc.links {
			if msg := checkLink(fsys, docs, name, l.target); msg != "" {
				problems = append(problems, fmt.Sprintf("%s:%d: %s: %s", name, l.line, l.target, msg))
			}
		}
	}
	sort.Strings(problems)
	return problems, nil
}

// checkLink says what is wrong with one link of the Markdown file from, or "".
func checkLink(fsys fs.FS, docs map[string]document, from, target string) string {
	if external.MatchString(target) {
		return "" // another site: not followed
	}
	file, fragment, _ := strings.Cut(target, "#")
	file, err := url.PathUnescape(file)
	if err != nil {
		return "not a valid path: " + err.Error()
	}
	if fragment, err = url.PathUnescape(fragment); err != nil {
		return "not a valid fragment: " + err.Error()
	}

	resolved := from
	switch {
	case file == "":
	case strings.HasPrefix(file, "/"):
		resolved = path.Clean(strings.TrimPrefix(file, "/")) // GitHub resolves these from the repository's root
	default:
		resolved = path.Join(path.Dir(from), file)
	}
	if resolved == ".." || strings.HasPrefix(resolved, "../") {
		return "points outside the repository"
	}
	if _, err := fs.Stat(fsys, resolved); err != nil {
		return "no such file or directory"
	}
	if fragment == "" {
		return ""
	}
	doc, ok := docs[resolved]
	if !ok {
		return "" // a fragment into another kind of file (#L10 of a source file): not checked
	}
	if !doc.anchors[fragment] {
		return "no heading or anchor #" + fragment + " in " + resolved
	}
	return ""
}
