#!/usr/bin/env bash
# apiserver.sh: the e2e subset against kube-apiserver and etcd of the last four Kubernetes minors.
#
# Each minor's binaries are built from the module proxy by tools/apiserver/build.sh (v1.37 is the
# one make e2e uses, in .apiserver/bin; the others go to .apiserver/<minor>/bin), once: a build is
# redone only when its module's go.sum changes. Then, against each, the e2e tests that exercise
# what an apiserver's own behaviour decides:
#   TestRandomCuts                 connections cut at random under an informer and a writer
#   TestListBodyCuts               an informer's LIST cut mid-body three times
#   TestListResumeLarge            a LIST of 2,000 cut mid-body, JSON and protobuf, resumed at
#                                  its exact resourceVersion on the other apiserver
#   TestListResumePaged            a paged LIST (500 a page, continue tokens) cut mid-page
#   TestListResumeInformer         an informer's 2,000-item LIST cut mid-body, both content types
#   TestExpiredEverywhereIsOne410  etcd compacted past a watch's resume point: one 410, one relist
#
#   tools/compat/apiserver.sh                 v1.34 v1.35 v1.36 v1.37
#   tools/compat/apiserver.sh v1.35 v1.37     those only
#
# Prints one table row per minor; exits non-zero if any row failed. Logs go to $COMPAT_LOGS
# (default: a temporary directory, printed at the end).
set -euo pipefail

root="$(cd "$(dirname "$0")/../.." && pwd)"
GO="${GO:-go}"
minors=("$@")
[[ ${#minors[@]} -gt 0 ]] || minors=(v1.34 v1.35 v1.36 v1.37)
tests=(TestRandomCuts TestListBodyCuts TestListResumeLarge TestListResumePaged TestListResumeInformer TestExpiredEverywhereIsOne410)
run="^($(IFS='|'; echo "${tests[*]}"))\$"

logs="${COMPAT_LOGS:-$(mktemp -d -t kretry-compat-apiserver-XXXXXX)}"
mkdir -p "$logs"
failed=0
rows=()
start_all=$SECONDS
for m in "${minors[@]}"; do
	began=$SECONDS
	log="$logs/apiserver-$m.log"
	if [[ $m == v1.37 ]]; then
		bin="${KRETRY_APISERVER_BIN:-$root/.apiserver/bin}"
		build=("$root/tools/apiserver/build.sh")
	else
		bin="$root/.apiserver/$m/bin"
		build=("$root/tools/apiserver/build.sh" "$m")
	fi
	if ! GO="$GO" "${build[@]}" >"$log" 2>&1; then
		rows+=("| $m | build FAIL (see $log) |")
		echo "${rows[-1]}"
		failed=1
		continue
	fi
	built=$((SECONDS - began))
	server="$("$bin/kube-apiserver" --version 2>/dev/null | awk '{print $2}')"
	etcd="$("$bin/etcd" --version 2>/dev/null | awk '/etcd Version/ {print $3}')"
	figures="$root/.apiserver/compat-$m"
	mkdir -p "$figures"
	began=$SECONDS
	(cd "$root/e2e" && KRETRY_E2E=1 KRETRY_APISERVER_BIN="$bin" KRETRY_FIGURES_DIR="$figures" \
		"$GO" test -tags e2e -count=1 -timeout 30m -v -run "$run" . >>"$log" 2>&1) || true
	cells=""
	for t in "${tests[@]}"; do
		if grep -q "^--- PASS: $t " "$log"; then
			cells+=" pass |"
		elif grep -q "^--- FAIL: $t " "$log"; then
			cells+=" FAIL |"
			failed=1
		else
			cells+=" did not run |"
			failed=1
		fi
	done
	rows+=("| $server | etcd $etcd |$cells build ${built} s, tests $((SECONDS - began)) s |")
	echo "${rows[-1]}"
done

echo
header="| kube-apiserver | etcd |" rule="|---|---|"
for t in "${tests[@]}"; do header+=" ${t#Test} |" rule+="---|"; done
echo "$header time |"
echo "$rule---|"
printf '%s\n' "${rows[@]}"
echo "total $((SECONDS - start_all)) s ($("$GO" version | cut -d' ' -f3), $(nproc) cores); logs in $logs"
exit $failed
