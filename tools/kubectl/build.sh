#!/usr/bin/env bash
# Builds kubectl v1.37.2 from this nested module into <repo>/.apiserver/bin, beside
# kube-apiserver (the e2e suite runs it against kretry-proxy). Rebuilds only when the binary
# is missing or go.sum changed since the last build.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin="${KRETRY_APISERVER_BIN:-$root/.apiserver/bin}"
go="${GO:-go}"
# A module of its own, outside the repository's go.work: its dependency graph stays its own.
export GOWORK=off
stamp="$bin/kubectl.go.sum.sha256"

want="$(sha256sum "$here/go.sum" | cut -d' ' -f1)"
if [[ -x "$bin/kubectl" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
	echo "kubectl: binary up to date in $bin"
	exit 0
fi

mkdir -p "$bin"
rm -f "$stamp"
# The same version stamp as a release build: kubectl prints it and sends it in its User-Agent.
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=v1.37.2 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37"
ldflags+=" -X k8s.io/client-go/pkg/version.gitVersion=v1.37.2 -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=37"

cd "$here"
start=$(date +%s)
echo "kubectl: building kubectl v1.37.2 (cold: 2-4 min on 2 cores)"
"$go" build -trimpath -ldflags "$ldflags" -o "$bin/kubectl" k8s.io/kubernetes/cmd/kubectl
echo "$want" >"$stamp"
echo "kubectl: built in $(( $(date +%s) - start ))s into $bin"
