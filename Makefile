# kretry: one entry point per job. `make test` is what CI (.ci/run) runs.
GO       ?= go
PKGS     := ./...
FUZZTIME ?= 30s

.PHONY: rules-test
.PHONY: test unit compat compat-quick compat-apiserver vet fmtcheck bench bench-watch callgrind-read fuzz demo fleet apiserver record e2e e2e-deps release-check bump tidy apidiff soak image fleet-ha

# Modules of their own (to keep their dependencies out of the library's go.mod): every module
# the root go.work uses but the root, which builds them against this checkout; and the release
# and image tools, modules outside the workspace. See RELEASING.md.
SUBMODULES   := $(patsubst $(CURDIR)/%,%,$(filter-out $(CURDIR),$(shell $(GO) list -m -f '{{.Dir}}')))
TOOLMODULES  := tools/release tools/image
RELEASE      := cd tools/release && GOWORK=off $(GO) run .
VERSION      ?= $(shell $(RELEASE) version)

## test: vet, gofmt check, unit tests with -race, a rehearsed release, the e2e suite against a
## real kube-apiserver, then a soak of $(TESTSOAK) (make soak runs one of $(SOAK)).
TESTSOAK ?= 2m
test: vet fmtcheck unit compat-quick release-check e2e
	@$(MAKE) --no-print-directory soak SOAK=$(TESTSOAK)

unit: rules-test
	tools/e2e-deps_test.sh
	$(GO) test -race -count=1 $(PKGS)
	@set -e; for m in $(SUBMODULES); do (cd $$m && $(GO) test -race -count=1 ./...); done
	@set -e; for m in $(TOOLMODULES); do (cd $$m && GOWORK=off $(GO) test -race -count=1 ./...); done

## rules-test: promtool checks the alerting rules and runs their unit tests, written from real
## series by cmd/kretry-proxy's TestAlertRuleSeries, and parses every query of the Grafana
## dashboard, twice: with Debian's promtool 2 (installed once by tools/e2e-deps.sh) and with
## Prometheus 3's (built from the module proxy by tools/promtool/build.sh, cached by go.sum:
## about 8 min cold on 2 cores). amtool (Debian's prometheus-alertmanager) checks the
## Alertmanager routing example.
PROMTOOL3 := .apiserver/bin/promtool3
rules-test:
	@GO=$(GO) tools/e2e-deps.sh prometheus
	@GO=$(GO) tools/promtool/build.sh
	@set -e; for promtool in promtool $(CURDIR)/$(PROMTOOL3); do \
		$$promtool --version 2>&1 | head -n 1; \
		$$promtool check rules deploy/prometheus/kretry-rules.yaml deploy/grafana/kretry-dashboard.queries.yaml; \
		(cd deploy/prometheus && $$promtool test rules kretry-rules.test.yaml); \
	done
	amtool check-config deploy/alertmanager/kretry-alertmanager.yaml
	amtool config routes test --config.file deploy/alertmanager/kretry-alertmanager.yaml --verify.receivers=kubernetes-clients alertname=KretryGivingUp cluster=c job=j

vet:
	$(GO) vet $(PKGS)
	$(GO) vet -tags e2e ./e2e/
	@set -e; for m in $(SUBMODULES); do (cd $$m && $(GO) vet ./...); done
	@set -e; for m in $(TOOLMODULES); do (cd $$m && GOWORK=off $(GO) vet ./...); done

## compat: the library's vet and tests (conformance suite included) at the newest patch of every
## supported client-go minor, v0.33-v0.37, and examples/controller-runtime built and tested with
## every controller-runtime minor, v0.21-v0.25 (docs/compatibility.md). compat-quick (in make
## test): the floor and the ceiling only.
compat:
	GO=$(GO) tools/compat/compat.sh

compat-quick:
	GO=$(GO) tools/compat/compat.sh quick

## compat-apiserver: kube-apiserver and etcd of the last four Kubernetes minors (v1.34-v1.37),
## built from the module proxy once each and cached by go.sum (a cold build of an older minor is
## 10-15 min on 2 cores, v1.37's 5-7 min: the times tools/apiserver/build.sh prints), then the e2e subset that exercises them: random cuts, LIST bodies cut and
## resumed at their exact resourceVersion (JSON, protobuf, paged, an informer's), a compaction's
## 410. Not in make test; the table it prints is in docs/compatibility.md.
compat-apiserver:
	GO=$(GO) tools/compat/apiserver.sh

## release-check: rehearse releasing every module at VERSION (default: the version the go.mod
## files require) through a file-system module proxy, then build a consumer of the library and
## the metrics module and `go install` kretry-proxy from it, outside the repository.
release-check:
	$(RELEASE) check $(VERSION)

## image: kretry-proxy's container image as ko builds one, offline and reproducibly (tools/image):
## an OCI image index for $(PLATFORMS) in the OCI image layout $(IMAGE), and an SPDX SBOM beside
## it (kretry-proxy.spdx.json), built from the commit checked out in a clean clone: its tag and
## labels are the binary's own version and revision. A tree with uncommitted changes is refused
## (ALLOW_DIRTY=1 builds the commit without them). Push: crane push $(IMAGE) REGISTRY/kretry-proxy:TAG.
IMAGE     ?= kretry-proxy.oci
PLATFORMS ?= linux/amd64,linux/arm64
image:
	cd tools/image && GOWORK=off $(GO) run . -repo $(CURDIR) -o $(abspath $(IMAGE)) -platforms $(PLATFORMS) $(if $(ALLOW_DIRTY),-allow-dirty)

## bump: require every kretry module at VERSION in every go.mod and go.work (make bump VERSION=v0.2.0).
bump:
	$(RELEASE) bump $(VERSION)

## tidy: go mod tidy in every module of the workspace (go mod tidy alone is not workspace-aware).
tidy:
	$(RELEASE) tidy

## apidiff: API changes of the released modules since a git ref (make apidiff BASE=v0.1.0).
apidiff:
	@test -n "$(BASE)" || { echo "make apidiff BASE=<git ref>"; exit 2; }
	$(RELEASE) apidiff $(BASE)

fmtcheck:
	@out="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"; \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## bench: every benchmark (bench-watch's among them), 6 runs each, raw results in bench.txt, medians by benchstat.
BENCHSTAT := golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 6 ./internal/frame/ ./watchretry/ ./transport/ ./listretry/ | tee bench.txt
	$(GO) run $(BENCHSTAT) bench.txt

## bench-watch: the per-event figures BENCHMARKS.md leads with: a typed clientset's Watch() over
## loopback HTTP/1.1 and TLS HTTP/2 and client-go's in-memory decode, plain and through kretry
## interleaved pair by pair in one process (kretry/plain per run: the median of its pairs), with a
## fixed number of pairs per run (-benchtime Nx, the same for every run; more where pairs spread
## more) and 5 runs; then kretry's raw pass over a stream with 8 KiB reads. Run it with nothing
## else running.
PAIRS := TypedWatchPair/.*/protobuf/1KiB:100 TypedWatchPair/.*/protobuf/64KiB:60 TypedWatchPair/.*/json/1KiB:20 \
	TypedWatchPair/.*/json/64KiB:3 DecodePair/protobuf/1KiB:40 DecodePair/json/1KiB:40 DecodePair/protobuf/64KiB:20 \
	DecodePair/json/64KiB:3
bench-watch:
	$(GO) test -c -o transport.bench.test ./transport/
	$(GO) test -c -o watchretry.bench.test ./watchretry/
	@set -e; echo "# start: $$(cat /proc/loadavg)" > bench-watch.txt; for pair in $(PAIRS); do \
		name=$${pair%%:*}; n=$${pair##*:}; bin=./watchretry.bench.test; \
		case $$name in TypedWatchPair*) bin=./transport.bench.test;; esac; \
		$$bin -test.run '^$$' -test.bench "$$name" -test.benchtime $${n}x -test.count 5 | tee -a bench-watch.txt; \
	done
	./transport.bench.test -test.run '^$$' -test.bench 'WatchRaw8KiB' -test.count 5 | tee -a bench-watch.txt
	@echo "# end: $$(cat /proc/loadavg)" >> bench-watch.txt
	$(GO) run $(BENCHSTAT) bench-watch.txt

## callgrind-read: instructions per 1 KiB event inside the resuming body's Read, as client-go's framers
## read it (valgrind's callgrind; repeatable on a busy machine, unlike times). 12,000 events per encoding.
callgrind-read:
	$(GO) test -c -o watchretry.callgrind.test ./watchretry/
	for enc in protobuf json; do \
		GODEBUG=asyncpreemptoff=1 GOMAXPROCS=1 valgrind --tool=callgrind --callgrind-out-file=callgrind.read.$$enc \
			--toggle-collect='github.com/kretry/kretry/watchretry.(*stream).Read' ./watchretry.callgrind.test \
			-test.run '^$$' -test.bench "BenchmarkReadPath/$$enc" -test.benchtime 5x 2>&1 | \
			awk -v enc=$$enc '/refs:/ { gsub(",", "", $$4); printf "%s: %.0f instructions per event\n", enc, $$4 / 12000 }'; \
	done

## fuzz: each fuzz target for $(FUZZTIME) (go test -fuzz takes one target at a time). The scanners'
## targets compare with client-go's decoders and with their own exact paths; watchretry's read the
## resuming body with random read sizes over random cuts.
FUZZ_TARGETS := ./internal/frame:FuzzScanJSON ./internal/frame:FuzzScanProtobuf ./internal/frame:FuzzScanCBOR \
	./watchretry:FuzzResumeJSON ./watchretry:FuzzResumeProtobuf ./cmd/kretry-proxy/proxy:FuzzGuard
fuzz:
	@set -e; for target in $(FUZZ_TARGETS); do \
		pkg=$${target%%:*}; name=$${target##*:}; \
		echo "fuzz $$name ($$pkg) for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $$pkg; \
	done

## demo: the main job, an in-process API server under faults, stock vs kretry informers and
## raw watchers (about 36s). DEMOFLAGS='--plot demo.png' adds a PNG timeline (gonum/plot,
## built from the nested module cmd/kretry-demo/plot on first use).
demo:
	$(GO) run ./cmd/kretry-demo $(DEMOFLAGS)

## fleet: the thundering herd, measured: 1000 client-go informers, stock and through kretry,
## through a server restart and a load-balancer drop (about 2.5 minutes on 2 cores); the table
## in BENCHMARKS.md and docs/fleet.png come from it. FLEETFLAGS='-scenarios overload' runs the
## 60 s overload (429s) instead: all three do not fit in 3 minutes at N=1000.
FLEETFLAGS ?=
fleet:
	$(GO) run ./cmd/kretry-fleet -clients 1000 -scenarios restart,lbdrop -json docs/fleet.json -plot docs/fleet.png $(FLEETFLAGS)

## fleet-ha: $(FLEETHA_AGENTS) node agents (pod informers by spec.nodeName, protobuf, each its own
## clientset, connection and rate limiter; one in ten a raw watcher of its node's pods instead, that
## never re-watches: KRETRY_FLEETHA_RAW) through $(FLEETHA_APISERVERS) kube-apiservers v1.37.2
## (each count in turn, each apiserver its own serving certificate) behind HAProxy during a
## rolling upgrade, at the fast and the cloud balancer's pace, stock and kretry alternating,
## $(FLEETHA_RUNS) runs each; measured at the apiservers (/metrics, /proc), etcd, the agents'
## connections and the writer's PATCHes. Prints the table, the check (per apiserver count and
## pace, each kretry run's apiserver CPU over the run and in its busiest 5 s, etcd ranges, bytes
## sent, relists, fetches and the writer's PATCH p50/p99 at or under the median of the stock runs
## plus their spread) and kretry's trace of each relist; docs/fleet-ha.json, docs/fleet-ha-trace.json.gz
## (beside it: each kretry relist's attempts on the wire) and docs/fleet-ha.png (the plot) come
## from it, the plot drawn even when the check fails (the target still fails then). Without
## -race: it measures CPU. docs/fleet.md says how long it takes.
FLEETHA_AGENTS     ?= 1000
FLEETHA_RUNS       ?= 3
FLEETHA_PACES      ?= fast,cloud
FLEETHA_APISERVERS ?= 2,3
FLEETHA_JSON       ?= docs/fleet-ha.json
FLEETHA_PLOT       ?= docs/fleet-ha.png
fleet-ha:
	@$(MAKE) --no-print-directory apiserver
	@$(MAKE) --no-print-directory e2e-deps
	@rm -f $(FLEETHA_JSON) $(FLEETHA_JSON:.json=-trace.json) $(FLEETHA_JSON:.json=-trace.json.gz)
	KRETRY_E2E=1 KRETRY_FLEETHA_AGENTS=$(FLEETHA_AGENTS) KRETRY_FLEETHA_RUNS=$(FLEETHA_RUNS) KRETRY_FLEETHA_PACES=$(FLEETHA_PACES) \
		KRETRY_FLEETHA_APISERVERS=$(FLEETHA_APISERVERS) KRETRY_FLEETHA_JSON=$(CURDIR)/$(FLEETHA_JSON) \
		$(GO) test -tags e2e -count=1 -timeout 150m -run '^TestFleetHA$$' -v ./e2e/; \
		rc=$$?; [ -s $(FLEETHA_JSON:.json=-trace.json) ] && gzip -9f $(FLEETHA_JSON:.json=-trace.json); \
		[ -s $(FLEETHA_JSON) ] && cd e2e/plot && $(GO) run . -fleet-ha -in $(CURDIR)/$(FLEETHA_JSON) -out $(CURDIR)/$(FLEETHA_PLOT) -title "node agents through a rolling upgrade"; exit $$rc

apiserver:
	GO=$(GO) tools/apiserver/build.sh

record:
	@$(MAKE) --no-print-directory apiserver
	$(GO) run ./cmd/kretry-record -out conformance/testdata

## e2e-deps: kubectl v1.37.2, python3-kubernetes and client-node for the kretry-proxy scenario,
## HAProxy, and Prometheus (promtool for rules-test, the server for the monitoring scenario).
e2e-deps:
	GO=$(GO) tools/e2e-deps.sh

e2e:
	@$(MAKE) --no-print-directory apiserver
	@$(MAKE) --no-print-directory e2e-deps
	KRETRY_E2E=1 $(GO) test -tags e2e -race -count=1 -timeout 45m ./e2e/...
	cd examples/controller-runtime && KRETRY_E2E=1 $(GO) test -tags e2e -race -count=1 -timeout 15m ./...
	@cat .apiserver/e2e-figures.txt 2>/dev/null || true
	@cat .apiserver/e2e-proxy-figures.txt 2>/dev/null || true
	@cat .apiserver/e2e-controller-runtime-figures.txt 2>/dev/null || true
	@cat .apiserver/e2e-upgrade-figures.txt 2>/dev/null || true
	@cat .apiserver/e2e-prometheus-figures.txt 2>/dev/null || true
	@cat .apiserver/e2e-fleet-ha-figures.txt 2>/dev/null || true

## soak: 55 informers and raw watchers through kretry against a real kube-apiserver behind the
## fault proxy (cuts every 0.3-2.5 s, ERROR 500 events, writers on) for $(SOAK); fails on a leak
## (a trend over the run), a missed, repeated or reordered event, or a cache != server. The
## samples go to .apiserver/soak.json and $(SOAKPLOT). Without -race: it measures memory.
SOAK     ?= 10m
SOAKPLOT ?= .apiserver/soak.png
soak:
	@$(MAKE) --no-print-directory apiserver
	KRETRY_E2E=1 KRETRY_SOAK=$(SOAK) KRETRY_SOAK_PLOT=$(abspath $(SOAKPLOT)) $(GO) test -tags e2e -count=1 -timeout 0 -v -run '^TestSoak$$' ./e2e/
