#!/usr/bin/env bash
# Installs what the kretry-proxy e2e scenario runs besides kube-apiserver and etcd:
#   - kubectl v1.37.2, built from the Go module proxy (tools/kubectl/build.sh, cached by go.sum);
#   - the Python client: Debian's python3-kubernetes, for /usr/bin/python3 (apt-get, once);
#   - the JavaScript client: @kubernetes/client-node as pinned by e2e/clients/node/package-lock.json,
#     installed with `npm ci` into <repo>/.apiserver/e2e-clients/node (again only when the
#     lockfile changed).
# Every step is a no-op when its result is already there. Arguments pick steps (kubectl, python,
# node); none means all.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"

steps=("$@")
if [[ ${#steps[@]} == 0 ]]; then steps=(kubectl python node); fi
want_step() { [[ " ${steps[*]} " == *" $1 "* ]]; }

if want_step kubectl; then
	GO="${GO:-go}" "$here/kubectl/build.sh"
fi

if ! want_step python; then
	:
elif /usr/bin/python3 -c 'import kubernetes' 2>/dev/null; then
	echo "python3-kubernetes: installed ($(/usr/bin/python3 -c 'import kubernetes; print(kubernetes.__version__)'))"
else
	echo "python3-kubernetes: installing the Debian package"
	sudo=()
	if [[ "$(id -u)" != 0 ]]; then sudo=(sudo); fi
	"${sudo[@]}" apt-get update -qq
	DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends python3-kubernetes >/dev/null
	/usr/bin/python3 -c 'import kubernetes; print("python3-kubernetes: installed", kubernetes.__version__)'
fi

want_step node || exit 0
src="$root/e2e/clients/node"
dest="$root/.apiserver/e2e-clients/node"
stamp="$dest/package-lock.json.sha256"
want="$(sha256sum "$src/package-lock.json" | cut -d' ' -f1)"
if [[ -d "$dest/node_modules" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
	echo "client-node: up to date in $dest"
else
	command -v npm >/dev/null || { echo "client-node: npm not found (Node.js 20 and npm are part of the machine)" >&2; exit 1; }
	echo "client-node: npm ci in $dest"
	rm -rf "$dest" && mkdir -p "$dest"
	cp "$src/package.json" "$src/package-lock.json" "$dest/"
	(cd "$dest" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
	echo "$want" >"$stamp"
fi
