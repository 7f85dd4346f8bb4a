package doclinks

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"
)

// TestRepositoryLinks is the check itself: every relative link of every
// Markdown file in the repository reaches a file, and every #fragment into a
// Markdown file names one of its headings.
func TestRepositoryLinks(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	goMod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil || !strings.Contains(string(goMod), "module github.com/kretry/kretry\n") {
		t.Fatalf("%s is not the repository's root (go.mod: %v)", root, err)
	}
	if _, err := os.Stat(filepath.Join(root, ".git")); err != nil {
		// A module zip (the module cache, `go test all` in a consumer) holds the root module
		// without its nested modules, which the documentation links into: only a checkout has them.
		t.Skipf("not a git checkout (%v): the links are checked in the repository only", err)
	}
	problems, err := check(os.DirFS(root))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

func TestCheckFindsBrokenLinks(t *testing.T) {
	fsys := fstest.MapFS{
		"README.md": {Data: []byte(strings.Join([]string{
			"# Title",
			"",
			"[ok](docs/a.md) [ok dir](docs) [ok anchor](docs/a.md#second-part) [ok here](#title)",
			"[missing](docs/nope.md) and ![missing image](docs/nope.png)",
			"[bad anchor](docs/a.md#third) [bad here](#nothing)",
			"[external](https://example.com/x.md#y) [mail](mailto:a@b.c)",
			"[source line](main.go#L3) [root](/docs/a.md#second-part-1)",
			"`[in a code span](gone.md)` and a span across",
			"lines `starts here [x](gone.md)",
			"and ends` here.",
			"",
			"```md",
			"[in a fence](gone.md)",
			"```",
			"",
			"[ref]: docs/gone.md",
			"[escape](../outside.md)",
			"[space](docs/with%20space.md)",
		}, "\n"))},
		"docs/a.md": {Data: []byte(strings.Join([]string{
			"Second part",
			"-----------",
			"",
			"## Second part",
			"",
			"[back](../README.md#title) [up](../README.md#gone)",
		}, "\n"))},
		"docs/with space.md":         {Data: []byte("# x\n")},
		"main.go":                    {Data: []byte("package main\n")},
		"testdata/broken.md":         {Data: []byte("[x](nowhere.md)\n")},
		"e2e/node_modules/pkg/x.md":  {Data: []byte("[x](nowhere.md)\n")},
		"docs/deep/testdata/skip.md": {Data: []byte("[x](nowhere.md)\n")},
	}
	got, err := check(fsys)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"README.md:16: docs/gone.md: no such file or directory",
		"README.md:17: ../outside.md: points outside the repository",
		"README.md:4: docs/nope.md: no such file or directory",
		"README.md:4: docs/nope.png: no such file or directory",
		"README.md:5: #nothing: no heading or anchor #nothing in README.md",
		"README.md:5: docs/a.md#third: no heading or anchor #third in docs/a.md",
		"docs/a.md:6: ../README.md#gone: no heading or anchor #gone in README.md",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestHeadingAnchor(t *testing.T) {
	for _, tc := range []struct{ heading, want string }{
		{"Use it", "use-it"},
		{"kretry-proxy under kubectl, Python and client-node", "kretry-proxy-under-kubectl-python-and-client-node"},
		{"The fleet: a thundering herd, measured (`make fleet`)", "the-fleet-a-thundering-herd-measured-make-fleet"},
		{"What is retried, what is handed to the caller", "what-is-retried-what-is-handed-to-the-caller"},
		{"LIST bodies (`transport`, `listretry`)", "list-bodies-transport-listretry"},
		{"CBOR (`application/cbor-seq`)", "cbor-applicationcbor-seq"},
		{"In place: frames scanned in the caller's Read slice", "in-place-frames-scanned-in-the-callers-read-slice"},
		{"A — B", "a--b"},
		{"C++ & Go 1.26", "c--go-126"},
		{"Größe Über", "größe-über"},
		{"snake_case and _emphasis_ and **bold**", "snake_case-and-emphasis-and-bold"},
		{"`snake_case` in code, `a*b`", "snake_case-in-code-ab"},
		{"[Linked](docs/x.md) text <em>html</em>", "linked-text-html"},
		{"  spaced  out  ", "spaced--out"},
		{`Escaped \_underscore\_`, "escaped-_underscore_"},
	} {
		if got := headingAnchor(tc.heading); got != tc.want {
			t.Errorf("headingAnchor(%q) = %q, want %q", tc.heading, got, tc.want)
		}
	}
}

func TestDuplicateHeadingsAndExplicitAnchors(t *testing.T) {
	doc := parse(strings.Join([]string{
		"# Results",
		"## Results",
		"### Results ###",
		`<a name="kept"></a>`,
		`<div id="box">`,
		"#not-a-heading",
		"    ",
		"Setext title",
		"============",
		"| a | b |",
		"|---|---|",
		"- item",
		"---",
	}, "\n"))
	want := map[string]bool{"results": true, "results-1": true, "results-2": true, "kept": true, "box": true, "setext-title": true}
	if !reflect.DeepEqual(doc.anchors, want) {
		t.Errorf("anchors %v, want %v", doc.anchors, want)
	}
}

func TestLinkDestinations(t *testing.T) {
	doc := parse(strings.Join([]string{
		`[a](x.md "title") [b](<y z.md>) [c](f(1).md) [d] (not-a-link.md) \[e](escaped.md)`,
		`<img src="docs/p.png" alt="p"> <a href="q.md#r">q</a>`,
		"  [ref]: <s.md>",
		"~~~",
		"[f](fenced.md)",
		"~~~",
		"[g](after.md)",
	}, "\n"))
	var got []string
	for _, l := range doc.links {
		got = append(got, l.target)
	}
	want := []string{"x.md", "y z.md", "f(1).md", "docs/p.png", "q.md#r", "s.md", "after.md"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("targets %q, want %q", got, want)
	}
}
