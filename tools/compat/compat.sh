#!/usr/bin/env bash
# compat.sh: build and test kretry against every client-go minor it supports, and build and run
# examples/controller-runtime with every controller-runtime minor of the range.
#
# For each client-go version, a copy of this checkout (no .git, no .apiserver) outside the
# workspace (GOWORK=off) gets k8s.io/{api,apimachinery,client-go} pinned with go mod edit and
# go mod tidy; then go vet (and go vet -stdversion) and go test of the library packages and the
# conformance suite, and of the metrics module at that client-go. For each controller-runtime
# version, the example's module in such a
# copy is pointed at the copy's library and metrics modules (replace), pinned to that
# controller-runtime and the client-go minor it is built for, then built, vetted and tested:
# its TestManager runs the manager against the in-process demo server with faults.
#
#   tools/compat/compat.sh            every version below
#   tools/compat/compat.sh quick      the floor and the ceiling only (make test runs this)
#
# Prints one table row per version; exits non-zero if any row failed. Logs go to $COMPAT_LOGS
# (default: a temporary directory, printed at the end).
set -euo pipefail

root="$(cd "$(dirname "$0")/../.." && pwd)"
GO="${GO:-go}"

# The floor (v0.33.0: what the library's go.mod requires, and what controller-runtime v0.21.0
# requires), then the newest patch of each minor (go list -m -versions k8s.io/client-go,
# sigs.k8s.io/controller-runtime); controller-runtime v0.N pins client-go v0.(N+12).
clientgo_all=(v0.33.0 v0.33.13 v0.34.13 v0.35.10 v0.36.6 v0.37.2)
runtime_all=(v0.21.0:v0.33.0 v0.22.5:v0.34.13 v0.23.3:v0.35.10 v0.24.1:v0.36.6 v0.25.3:v0.37.2)

clientgo=("${clientgo_all[@]}")
runtime=("${runtime_all[@]}")
if [[ "${1:-}" == quick ]]; then
	clientgo=("${clientgo_all[0]}" "${clientgo_all[-1]}")
	runtime=("${runtime_all[0]}" "${runtime_all[-1]}")
fi

# Library packages and the conformance suite, without -race (make unit runs them with -race at
# the workspace's versions, the ceiling; the e2e suites, commands and demos are not run here).
libpkgs=(./transport/... ./listretry/... ./watchretry/... ./reflector/... ./conformance/...
	./internal/policy/... ./internal/frame/... ./internal/establish/... ./internal/status/...)

logs="${COMPAT_LOGS:-$(mktemp -d -t kretry-compat-logs-XXXXXX)}"
mkdir -p "$logs"
work="$(mktemp -d -t kretry-compat-XXXXXX)"
trap 'rm -rf "$work"' EXIT
export GOWORK=off GOFLAGS=-mod=mod

# copy makes a fresh copy of the checkout in $work/$1.
copy() {
	mkdir -p "$work/$1"
	tar -C "$root" --exclude=./.git --exclude=./.apiserver -cf - . | tar -C "$work/$1" -xf -
}

# step runs "$@" in the current directory, its output appended to log $log; prints ok/FAIL.
step() {
	if "$@" >>"$log" 2>&1; then echo ok; else echo FAIL; fi
}

failed=0
rows=()
start_all=$SECONDS
for v in "${clientgo[@]}"; do
	began=$SECONDS
	log="$logs/client-go-$v.log"
	: >"$log"
	copy "cg-$v"
	cd "$work/cg-$v"
	tidy=$(step bash -c "$GO mod edit -require=k8s.io/api@$v -require=k8s.io/apimachinery@$v -require=k8s.io/client-go@$v && $GO mod tidy")
	vet=FAIL test=FAIL
	if [[ $tidy == ok ]]; then
		# -stdversion: no standard library symbol newer than the go line (go 1.24 at the floor).
		vet=$(step bash -c "$GO vet ${libpkgs[*]} && $GO vet -stdversion ${libpkgs[*]}")
		test=$(step "$GO" test -count=1 "${libpkgs[@]}")
	fi
	# The metrics module at the same client-go, on this copy of the library.
	metrics=FAIL
	if [[ $tidy == ok ]]; then
		metrics=$(step bash -c "cd metrics && $GO mod edit -replace=github.com/kretry/kretry=.. -require=k8s.io/client-go@$v && $GO mod tidy &&
			$GO vet ./... && $GO vet -stdversion ./... && $GO test -count=1 ./...")
	fi
	golines="$(sed -n 's/^go //p' go.mod)"
	smd="$($GO list -m -f '{{.Path}} {{.Version}}' all 2>/dev/null | sed -n 's|^sigs.k8s.io/structured-merge-diff/\(v[0-9]*\) \(.*\)|\1 \2|p' | head -n1)"
	row="| client-go $v | go $golines, smd $smd | tidy $tidy | vet $vet | test $test | metrics $metrics | $((SECONDS - began)) s |"
	[[ "$tidy$vet$test$metrics" == okokokok ]] || failed=1
	rows+=("$row")
	echo "$row"
	cd "$root"
	rm -rf "$work/cg-$v"
done

for pair in "${runtime[@]}"; do
	cr="${pair%%:*}" v="${pair##*:}"
	began=$SECONDS
	log="$logs/controller-runtime-$cr.log"
	: >"$log"
	copy "cr-$cr"
	cd "$work/cr-$cr/examples/controller-runtime"
	# The example's own go.mod is the ceiling's; this one is what a module on $cr would have:
	# its direct requirements at $cr's versions and no indirect ones (the ceiling's indirect
	# requirements, k8s.io/apiextensions-apiserver v0.37 among them, would lift client-go to v0.37).
	deps="-require=sigs.k8s.io/controller-runtime@$cr -require=k8s.io/api@$v -require=k8s.io/apimachinery@$v -require=k8s.io/client-go@$v"
	tidy=$(step bash -c "sed -i '/\/\/ indirect\$/d' go.mod && $GO mod edit -go=1.24.0 -droprequire=github.com/prometheus/client_golang -droprequire=k8s.io/klog/v2 \
		-replace=github.com/kretry/kretry=../.. -replace=github.com/kretry/kretry/metrics=../../metrics $deps && $GO mod tidy")
	build=FAIL test=FAIL
	if [[ $tidy == ok ]]; then
		build=$(step bash -c "$GO build ./... && $GO vet ./...")
		test=$(step "$GO" test -count=1 ./...)
	fi
	got="$($GO list -m -f '{{.Version}}' k8s.io/client-go 2>/dev/null || true) / $($GO list -m -f '{{.Version}}' sigs.k8s.io/controller-runtime 2>/dev/null || true)"
	[[ "$got" == "$v / $cr" ]] || got="$got (FAIL: not $v / $cr)"
	row="| controller-runtime $cr | client-go / controller-runtime in the build: $got, go $(sed -n 's/^go //p' go.mod) | tidy $tidy | build+vet $build | test $test | metrics in the build | $((SECONDS - began)) s |"
	[[ "$tidy$build$test" == okokok && "$got" == "$v / $cr" ]] || failed=1
	rows+=("$row")
	echo "$row"
	cd "$root"
	rm -rf "$work/cr-$cr"
done

echo
echo "| what | resolved | tidy | vet | test | metrics module | time |"
echo "|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
echo "total $((SECONDS - start_all)) s ($("$GO" version | cut -d' ' -f3)); logs in $logs"
exit $failed
