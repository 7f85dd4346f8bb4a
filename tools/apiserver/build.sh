#!/usr/bin/env bash
# Builds kube-apiserver and etcd from one of the nested modules here into a bin directory:
#
#   tools/apiserver/build.sh            tools/apiserver (v1.37.2) into <repo>/.apiserver/bin
#                                       (or $KRETRY_APISERVER_BIN): what make e2e runs against
#   tools/apiserver/build.sh v1.34      tools/apiserver/v1.34 into <repo>/.apiserver/v1.34/bin
#                                       (make compat-apiserver builds v1.34, v1.35 and v1.36)
#
# The Kubernetes version is the module's k8s.io/kubernetes requirement; etcd is the one that
# version's module graph selects. Rebuilds only when a binary is missing or the module's go.sum
# changed since the last build.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
go="${GO:-go}"
mod="$here"
bin="${KRETRY_APISERVER_BIN:-$root/.apiserver/bin}"
if [[ $# -gt 0 ]]; then
	mod="$here/$1"
	bin="$root/.apiserver/$1/bin"
	if [[ ! -f "$mod/go.mod" ]]; then
		echo "apiserver: no module $mod (one of: $(cd "$here" && ls -d v*/ | tr -d / | tr '\n' ' '))" >&2
		exit 2
	fi
fi
version="$(awk '$1 == "k8s.io/kubernetes" { print $2 } $1 == "require" && $2 == "k8s.io/kubernetes" { print $3 }' "$mod/go.mod" | head -n 1)"
if [[ ! "$version" =~ ^v1\.([0-9]+)\.[0-9]+$ ]]; then
	echo "apiserver: $mod/go.mod does not require a k8s.io/kubernetes v1.N.P (found \"$version\")" >&2
	exit 2
fi
minor="${BASH_REMATCH[1]}"
# A module of its own, outside the repository's go.work: its dependency graph stays its own.
export GOWORK=off
stamp="$bin/go.sum.sha256"

want="$(sha256sum "$mod/go.sum" | cut -d' ' -f1)"
if [[ -x "$bin/kube-apiserver" && -x "$bin/etcd" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
	echo "apiserver: $version binaries up to date in $bin"
	exit 0
fi

mkdir -p "$bin"
rm -f "$stamp"
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"

cd "$mod"
start=$(date +%s)
echo "apiserver: building kube-apiserver $version (cold, on 2 cores: 5-7 min for v1.37, 10-15 min for an older minor; ~2.8 GB RSS at link)"
"$go" build -trimpath -ldflags "$ldflags" -o "$bin/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
echo "apiserver: building etcd"
"$go" build -trimpath -ldflags "-s -w" -o "$bin/etcd" go.etcd.io/etcd/server/v3
echo "$want" >"$stamp"
echo "apiserver: $version built in $(( $(date +%s) - start ))s into $bin"
