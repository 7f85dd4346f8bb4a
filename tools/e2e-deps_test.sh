#!/usr/bin/env bash
# Runs tools/e2e-deps.sh's Debian steps (python, haproxy, prometheus) as a fresh machine meets them, with
# the packages absent, then again with them present, against stand-ins for apt-get, sudo,
# python3, haproxy, prometheus, promtool and amtool in a temporary directory. The stand-ins for haproxy
# and prometheus write far more than one line for their version, as a real one that a pipe's reader closes early would: a pipe into head under
# pipefail dies of SIGPIPE there. Fails unless both runs succeed, the first installs each
# package once, and the second installs nothing.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin" "$tmp/root"

# apt-get: records its arguments; "install P" puts P's stand-in in place.
cat >"$tmp/bin/apt-get" <<STUB
#!/usr/bin/env bash
echo "\$*" >>"$tmp/apt.log"
for arg in "\$@"; do
	case \$arg in
	python3-kubernetes)
		printf '#!/usr/bin/env bash\ncase "\$*" in *print*) echo 99.0.0;; esac\n' >"$tmp/root/python3"
		chmod +x "$tmp/root/python3";;
	haproxy)
		printf '#!/usr/bin/env bash\necho "HAProxy version 9.9.9"\nseq 1 200000\n' >"$tmp/root/haproxy"
		chmod +x "$tmp/root/haproxy";;
	prometheus)
		printf '#!/usr/bin/env bash\necho "prometheus, version 9.9.9"\nseq 1 200000\n' >"$tmp/root/prometheus"
		printf '#!/usr/bin/env bash\necho "promtool, version 9.9.9"\n' >"$tmp/root/promtool"
		chmod +x "$tmp/root/prometheus" "$tmp/root/promtool";;
	prometheus-alertmanager)
		printf '#!/usr/bin/env bash\necho "amtool, version 9.9.9"\n' >"$tmp/root/amtool"
		chmod +x "$tmp/root/amtool";;
	esac
done
STUB
printf '#!/usr/bin/env bash\nexec "$@"\n' >"$tmp/bin/sudo"
chmod +x "$tmp/bin/apt-get" "$tmp/bin/sudo"

run() {
	PATH="$tmp/bin:$PATH" PYTHON="$tmp/root/python3" HAPROXY="$tmp/root/haproxy" PROMETHEUS="$tmp/root/prometheus" \
		PROMTOOL="$tmp/root/promtool" AMTOOL="$tmp/root/amtool" APT_GET="$tmp/bin/apt-get" "$here/e2e-deps.sh" python haproxy prometheus
}

fail() { echo "e2e-deps_test: $*" >&2; exit 1; }

out="$(run)" || fail "first run (packages absent) failed with exit $?: $out"
installs="$(grep -c ' install ' "$tmp/apt.log" || true)"
[[ "$installs" == 3 ]] || fail "first run: want 3 installs, apt-get saw: $(cat "$tmp/apt.log")"
grep -q 'haproxy: installed HAProxy version 9.9.9' <<<"$out" || fail "first run did not report haproxy's version: $out"
grep -q 'prometheus: installed prometheus, version 9.9.9' <<<"$out" || fail "first run did not report prometheus's version: $out"

: >"$tmp/apt.log"
out="$(run)" || fail "second run (packages present) failed with exit $?: $out"
[[ ! -s "$tmp/apt.log" ]] || fail "second run called apt-get: $(cat "$tmp/apt.log")"
grep -q 'haproxy: installed (HAProxy version 9.9.9)' <<<"$out" || fail "second run did not report haproxy's version: $out"
grep -q 'prometheus: installed (prometheus, version 9.9.9)' <<<"$out" || fail "second run did not report prometheus's version: $out"
grep -q 'python3-kubernetes: installed (99.0.0)' <<<"$out" || fail "second run did not report python3-kubernetes: $out"
echo "e2e-deps_test: ok (absent: installed once each; present: no apt-get)"
