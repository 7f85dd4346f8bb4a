#!/usr/bin/env bash
# Installs what the kretry-proxy e2e scenario runs besides kube-apiserver and etcd:
#   - kubectl v1.37.2, built from the Go module proxy (tools/kubectl/build.sh, cached by go.sum);
#   - the Python client: Debian's python3-kubernetes, for /usr/bin/python3 (apt-get, once);
#   - the load balancer of the rolling-upgrade scenario: Debian's haproxy (apt-get, once);
#   - the monitoring scenario's Prometheus server and promtool (the alerting rules' unit tests),
#     and amtool (the Alertmanager example's check): Debian's prometheus and
#     prometheus-alertmanager (apt-get, once);
#   - the JavaScript client: @kubernetes/client-node as pinned by e2e/clients/node/package-lock.json,
#     installed with `npm ci` into <repo>/.apiserver/e2e-clients/node (again only when the
#     lockfile changed).
# Every step is a no-op when its result is already there. Arguments pick steps (kubectl, python,
# haproxy, prometheus, node); none means all. tools/e2e-deps_test.sh runs the python, haproxy and
# prometheus steps with their packages absent and then present (PYTHON, HAPROXY, PROMETHEUS,
# PROMTOOL, AMTOOL and APT_GET point it at stand-ins).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"

steps=("$@")
if [[ ${#steps[@]} == 0 ]]; then steps=(kubectl python haproxy prometheus node); fi
want_step() { [[ " ${steps[*]} " == *" $1 "* ]]; }

if want_step kubectl; then
	GO="${GO:-go}" "$here/kubectl/build.sh"
fi

# apt_install installs Debian packages, updating the package lists once per run; it waits for
# another apt or dpkg run holding the lock instead of failing.
python="${PYTHON:-/usr/bin/python3}"
haproxy="${HAPROXY:-$(command -v haproxy || echo /usr/sbin/haproxy)}"
prometheus="${PROMETHEUS:-/usr/bin/prometheus}"
promtool="${PROMTOOL:-/usr/bin/promtool}"
amtool="${AMTOOL:-/usr/bin/amtool}"
apt_get="${APT_GET:-apt-get}"
apt_updated=""
apt_install() {
	local sudo=()
	if [[ "$(id -u)" != 0 ]]; then sudo=(sudo); fi
	if [[ -z "$apt_updated" ]]; then
		"${sudo[@]}" "$apt_get" -o DPkg::Lock::Timeout=300 update -qq
		apt_updated=1
	fi
	DEBIAN_FRONTEND=noninteractive "${sudo[@]}" "$apt_get" -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends "$@" >/dev/null
}

# first_line prints the first line of a command's output. It reads all of it: piping into head
# under pipefail fails when cmd writes on after head has gone (SIGPIPE, exit 141).
first_line() {
	local out
	out="$("$@" 2>&1)"
	printf '%s\n' "${out%%$'\n'*}"
}

if ! want_step python; then
	:
elif "$python" -c 'import kubernetes' 2>/dev/null; then
	echo "python3-kubernetes: installed ($("$python" -c 'import kubernetes; print(kubernetes.__version__)'))"
else
	echo "python3-kubernetes: installing the Debian package"
	apt_install python3-kubernetes
	"$python" -c 'import kubernetes; print("python3-kubernetes: installed", kubernetes.__version__)'
fi

# The harness runs haproxy itself, as the test's child on loopback with a generated config; the
# package's own service is not used.
if ! want_step haproxy; then
	:
elif [[ -x "$haproxy" ]]; then
	echo "haproxy: installed ($(first_line "$haproxy" -v))"
else
	echo "haproxy: installing the Debian package"
	apt_install haproxy
	echo "haproxy: installed $(first_line "$haproxy" -v)"
fi

# As haproxy: the harness runs prometheus itself on loopback; the package's service is not used.
if ! want_step prometheus; then
	:
elif [[ -x "$prometheus" && -x "$promtool" && -x "$amtool" ]]; then
	echo "prometheus: installed ($(first_line "$prometheus" --version))"
else
	echo "prometheus: installing the Debian packages prometheus and prometheus-alertmanager"
	apt_install prometheus prometheus-alertmanager
	echo "prometheus: installed $(first_line "$prometheus" --version)"
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
