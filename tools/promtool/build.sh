#!/usr/bin/env bash
# Builds Prometheus 3's promtool from this nested module (github.com/prometheus/prometheus, pinned
# in go.mod as a tool) into <repo>/.apiserver/bin/promtool3 (or $KRETRY_APISERVER_BIN), for
# `make rules-test`, which runs the rules' unit tests with it as well as with Debian's promtool 2.
# Rebuilds only when the binary is missing or go.sum changed since the last build (cold: about
# 8 minutes on 2 cores; the module downloads are ~30 s more on an empty module cache).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin="${KRETRY_APISERVER_BIN:-$root/.apiserver/bin}"
go="${GO:-go}"
# A module of its own, outside the repository's go.work: its dependency graph stays its own.
export GOWORK=off GOFLAGS=-mod=readonly
stamp="$bin/promtool3.go.sum.sha256"

want="$(sha256sum "$here/go.sum" | cut -d' ' -f1)"
if [[ -x "$bin/promtool3" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
	echo "promtool3: up to date in $bin ($("$bin/promtool3" --version 2>&1 | head -n 1))"
	exit 0
fi

cd "$here"
# go list names the module's directory only once it is in the module cache.
"$go" mod download github.com/prometheus/prometheus
mod="$("$go" list -m -f '{{.Dir}}' github.com/prometheus/prometheus)"
version="$(cat "$mod/VERSION")"
mkdir -p "$bin"
rm -f "$stamp"
start=$(date +%s)
echo "promtool3: building promtool $version from github.com/prometheus/prometheus $("$go" list -m -f '{{.Version}}' github.com/prometheus/prometheus) (cold: about 8 min on 2 cores)"
"$go" build -trimpath -ldflags "-s -w -X github.com/prometheus/common/version.Version=$version" \
	-o "$bin/promtool3" github.com/prometheus/prometheus/cmd/promtool
echo "$want" >"$stamp"
echo "promtool3: built in $(( $(date +%s) - start ))s into $bin: $("$bin/promtool3" --version 2>&1 | head -n 1)"
