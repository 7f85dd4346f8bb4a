#!/usr/bin/env bash
# Builds kube-apiserver and etcd from this nested module into <repo>/.apiserver/bin.
# Rebuilds only when a binary is missing or go.sum changed since the last build.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin="${KRETRY_APISERVER_BIN:-$root/.apiserver/bin}"
go="${GO:-go}"
# A module of its own, outside the repository's go.work: its dependency graph stays its own.
export GOWORK=off
stamp="$bin/go.sum.sha256"

want="$(sha256sum "$here/go.sum" | cut -d' ' -f1)"
if [[ -x "$bin/kube-apiserver" && -x "$bin/etcd" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
	echo "apiserver: binaries up to date in $bin"
	exit 0
fi

mkdir -p "$bin"
rm -f "$stamp"
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=v1.37.2 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37"

cd "$here"
start=$(date +%s)
echo "apiserver: building kube-apiserver (cold: 5-7 min, ~2.8 GB RSS at link)"
"$go" build -trimpath -ldflags "$ldflags" -o "$bin/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
echo "apiserver: building etcd"
"$go" build -trimpath -ldflags "-s -w" -o "$bin/etcd" go.etcd.io/etcd/server/v3
echo "$want" >"$stamp"
echo "apiserver: built in $(( $(date +%s) - start ))s into $bin"
