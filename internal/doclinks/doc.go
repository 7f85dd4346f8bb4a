// Package doclinks holds the repository's Markdown link check, a test with no
// library code: `go test ./internal/doclinks/` (run by `go test ./...`, hence
// by `make test`) reads every Markdown file of the repository (but .git,
// .apiserver, node_modules and testdata) and fails on a relative link or image
// whose file does not exist, and on a #fragment that names no heading of the
// Markdown file it points into, with GitHub's rules for heading anchors.
// Links to other sites are not followed: the check needs no network. Outside a
// git checkout (in the module cache, without the nested modules the pages link
// into) the test skips.
package doclinks
