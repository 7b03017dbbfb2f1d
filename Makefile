# molt — build, check, test.
SHELL       := /bin/bash
GO          ?= go
BIN         := bin
STATICCHECK := $(shell $(GO) env GOPATH)/bin/staticcheck
STATICCHECK_VERSION := v0.8.2
LDFLAGS     := -s -w
# MOLT_CACHE: what the lab makes itself (tools, images, rootfs).
# MOLT_BUILD_CACHE: the Kubernetes and etcd builds (build/k8s), the slow part.
export MOLT_CACHE ?= /var/cache/molt
export MOLT_BUILD_CACHE ?= $(MOLT_CACHE)

.PHONY: all build release check test test-mixed test-web fuzz test-demo test-plan-demo test-lab test-lab-all test-e2e test-linearizability validate-vagrant prebuild-test bench perf perf-kwok chaos deps test-all demo demo-auto plan-demo clean

all: build

## build: the three binaries into bin/. Without -trimpath: a package compiled with it is
## cached apart from one compiled without, and go vet, staticcheck (go list -export) and
## the tests' own builds compile without it, so with it a cold machine compiled molt's
## dependencies twice. The binaries say the commit they were built from (--version); the
## version stays the development one (internal/version), a release sets it (make release)
build:
	@mkdir -p $(BIN)
	$(GO) build -ldflags '$(LDFLAGS) -X $(VERSION_PKG).Commit=$(COMMIT)' -o $(BIN)/ ./cmd/molt-coordinator ./cmd/molt-agent ./cmd/moltctl ./cmd/molt-lab

## release: molt's release artifacts in $(DIST) (default bin/release; emptied first): a tarball per binary
## (NAME-VERSION-linux-ARCH.tar.gz; the daemons' with their unit, environment file and
## install.sh), molt-agent_VERSION_ARCH.deb and molt-coordinator_VERSION_ARCH.deb, and
## SHA256SUMS over them (docs/release.md). VERSION defaults to the VERSION file, COMMIT to
## HEAD; the binaries carry both (internal/version), static and -trimpath'd, and every
## file's time inside is the commit's (SOURCE_DATE_EPOCH), so the same commit packs to the
## same bytes. The packing is build/release, a module of its own (nfpm stays out of go.mod).
## RELEASE_BUILDFLAGS= (empty) builds without -trimpath, sharing the tests' compiled packages
VERSION ?= $(shell cat VERSION)
# A tree with uncommitted changes says so: COMMIT gets "-dirty", as the VCS stamp of a plain build does
COMMIT  ?= $(shell c=$$(git rev-parse HEAD 2>/dev/null) && { git diff --quiet HEAD || c=$$c-dirty; echo $$c; })
DIST    ?= $(BIN)/release
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
RELEASE_BUILDFLAGS ?= -trimpath
VERSION_PKG := github.com/moltproject/molt/internal/version
release:
	@[ -n "$(VERSION)" ] && [ -n "$(COMMIT)" ] || { echo "release: VERSION and COMMIT are needed"; exit 2; }
	rm -rf $(DIST) && mkdir -p $(DIST)/bin
	CGO_ENABLED=0 $(GO) build $(RELEASE_BUILDFLAGS) -ldflags '$(LDFLAGS) -X $(VERSION_PKG).Version=$(VERSION) -X $(VERSION_PKG).Commit=$(COMMIT)' \
	  -o $(DIST)/bin/ ./cmd/molt-coordinator ./cmd/molt-agent ./cmd/moltctl
	cd build/release && SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(GO) run . -version $(VERSION) -repo $(CURDIR) \
	  -bin $(abspath $(DIST))/bin -out $(abspath $(DIST))
	cd $(DIST) && sha256sum --check --quiet SHA256SUMS

## check: gofmt, go vet, staticcheck over every file: with the lab, e2e, vagrant,
## linearizability, faults, mixed and kwok tags on (and gatebypass, hidenewest: the test builds of
## package mixed), since no file is built only without one (the
## check fails if one is added: it would need a pass of its own). faults builds the
## daemons' fault hooks that the watchdog test wedges loops with (cmd/*/faults.go)
CHECK_TAGS := lab,e2e,vagrant,linearizability,faults,mixed,gatebypass,hidenewest,kwok
check: $(STATICCHECK)
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@neg=$$(grep -l '^//go:build.*!' $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go') || true); \
	  if [ -n "$$neg" ]; then echo "check: files built only without a tag need a check pass without it:"; echo "$$neg"; exit 1; fi
	$(GO) vet -tags $(CHECK_TAGS) ./...
	$(STATICCHECK) -tags $(CHECK_TAGS) ./...
	cd build/release && $(GO) vet ./... && $(STATICCHECK) ./...

$(STATICCHECK):
	$(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

## test: every Go test with the race detector, then the release packing's (build/release,
## a module of its own; single-threaded, so without the race detector)
test:
	$(GO) test -race -timeout 30m ./...
	cd build/release && $(GO) test ./...

## test-mixed: coordinator members of two molt releases side by side (package mixed, tag mixed;
## docs/upgrade-molt.md): three molt-coordinator processes of the previous release
## (build/previous-release: a commit of this repository's history, built by the test and cached in
## $(MOLT_BUILD_CACHE)/molt-release/COMMIT) upgraded one by one to this build while writes flow and
## a cluster upgrade runs on simulated agents against a real kube-apiserver; and a member given an
## entry it cannot read (gatebypass, hidenewest builds) that halts, then catches up. Needs the
## repository's history and the kube-apiserver of make deps; about 3 minutes warm
test-mixed:
	$(GO) test -tags mixed -count=1 -v -timeout 20m ./mixed/

## test-web: the web view alone: its unit tests and the browser tests in headless Chromium
## (part of test; screenshots of every page in bin/web/)
test-web:
	$(GO) test -race -count=1 ./web/... ./coordinator/httpapi/

## fuzz: each fuzz target for FUZZTIME (default 30s); not part of test, whose
## plain go test runs the checked-in seeds (testdata/fuzz/) only
FUZZTIME ?= 30s
FUZZ_TARGETS := FuzzAPI:./coordinator/ FuzzParseVersion:./phases/ FuzzCheckUpgrade:./phases/ \
	FuzzPolicyJSON:./maintenance/ FuzzRecurrence:./maintenance/ FuzzDecode:./raftstore/
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
	  name=$${t%%:*}; pkg=$${t#*:}; echo "== $$name ($$pkg, $(FUZZTIME))"; \
	  $(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $$pkg; \
	done

## test-lab: the lab brings a real Kubernetes cluster up on systemd hosts and down again.
## Not the full topology nor the small one at the upgrade releases: the demo (at 1.33.13) and
## the e2e test (at 1.34.3) bring the full lab up and check the same at every release they reach
## (test-lab-all runs those two as well, to find a lab fault without an upgrade). Nor the molt
## step of a lab upgrade (TestMoltStepInLabUpgrade: the small lab up with a coordinator, agents of
## build/previous-agent-release replaced; about 2 min 15 s, which CI's time budget has no room for), nor
## TestObservedVersionsInLab (registration against observed versions, a kubelet replaced by hand as
## drift, its alert and its block of an automatic upgrade; about 1 min 30 s)
LAB_TESTS_ALSO_IN_E2E := TestFullLabUpServeDown|TestSmallLabUpAtUpgradeVersions
LAB_TESTS_OUTSIDE_CI := TestMoltStepInLabUpgrade
test-lab:
	$(GO) test -tags lab -count=1 -timeout 30m -skip '^($(LAB_TESTS_ALSO_IN_E2E)|$(LAB_TESTS_OUTSIDE_CI))$$' ./lab/

## test-lab-all: every lab test
test-lab-all:
	$(GO) test -tags lab -count=1 -timeout 45m ./lab/

## test-e2e: real upgrades of the lab cluster from 1.34.3 with faults (leader and agent killed; a patch
## under a seeded chaos schedule with the invariant checks: the chaos smoke, docs/chaos.md; its MIG
## pool rolled back), refusals, the automatic patch, a broken release. The minor is the demo's, which
## verifies it with the same checks (e2e/verify.go)
test-e2e:
	$(GO) test -tags e2e -count=1 -v -timeout 75m ./e2e/ 2>&1 | tee $(BIN)/e2e.log | grep -E '^(=== RUN|--- |PASS|FAIL|ok)|MEASURED|Error' ; \
	  rc=$${PIPESTATUS[0]}; [ $$rc -eq 0 ] || { echo '--- last 120 lines of $(BIN)/e2e.log'; tail -n 120 $(BIN)/e2e.log; }; exit $$rc

## test-linearizability: three coordinator processes in network namespaces of their own
## (10.78.0.0/24, not the lab's) killed, frozen and partitioned (nftables) on a seeded schedule
## while clients write and read releases; the history is checked with porcupine (about a minute;
## MOLT_LIN_SEED=N repeats a run's faults, MOLT_LIN_DURATION=60s runs longer)
test-linearizability: build
	MOLT_COORDINATOR_BIN=$(CURDIR)/$(BIN)/molt-coordinator $(GO) test -tags linearizability -count=1 -v -timeout 10m ./linearizability/

## test-demo: the README's main command (make demo) as a newcomer runs it:
## from a lab cache without the lab's tools, images and rootfs, reusing only
## the Kubernetes and etcd builds, so a step that relies on another command's
## leftovers fails here. A temporary cache when $(MOLT_CACHE) has them; on a
## fresh machine $(MOLT_CACHE) itself, whose parts the later lab tests reuse
test-demo:
	@mkdir -p $(BIN); \
	  if [ -e "$(MOLT_CACHE)/lab" ] || [ -e "$(MOLT_CACHE)/rootfs" ]; then d=$$(mktemp -d /var/tmp/molt-demo-cache.XXXXXX); tmp=$$d; \
	  else d=$(MOLT_CACHE); tmp=; fi; \
	  echo "test-demo: MOLT_CACHE=$$d (no lab tools, images or rootfs in it) MOLT_BUILD_CACHE=$(MOLT_BUILD_CACHE)"; \
	  MOLT_CACHE=$$d MOLT_BUILD_CACHE=$(MOLT_BUILD_CACHE) $(MAKE) --no-print-directory demo 2>&1 | tee $(BIN)/demo.log; rc=$${PIPESTATUS[0]}; \
	  [ -z "$$tmp" ] || rm -rf --one-file-system "$$tmp"; \
	  [ $$rc -eq 0 ] && grep -q 'status.version = ' $(BIN)/demo.log && grep -q '==> verified against the cluster' $(BIN)/demo.log || { echo "test-demo: failed (rc $$rc)"; exit 1; }

## test-plan-demo: the planning walk-through runs to its end (on ports of its own)
test-plan-demo: build
	MOLT_DEMO_ADDR=127.0.0.1:17080 MOLT_DEMO_RAFT=127.0.0.1:17081 bash scripts/plan-demo.sh > $(BIN)/plan-demo.log 2>&1 || { cat $(BIN)/plan-demo.log; exit 1; }
	grep -q 'version-skip-minor' $(BIN)/plan-demo.log && grep -q 'version-downgrade' $(BIN)/plan-demo.log && grep -q '== done' $(BIN)/plan-demo.log
	@echo "plan demo: ok"

## validate-vagrant: the Vagrantfile of the multi-VM lab is valid, and each provisioning script it
## names does its job in systemd-nspawn hosts (vagrant up needs hardware virtualisation; see docs/lab.md)
validate-vagrant:
	cd vagrant && vagrant validate
	$(GO) test -tags vagrant -count=1 -timeout 20m ./vagrant/

## bench: the benchmarks whose numbers the docs report
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./phases/ ./raftstore/ ./maintenance/ ./coordinator/ ./web/browsertest/

## perf: the performance table of docs/performance.md, every row measured in one go on this
## machine (about 20 minutes; needs etcd from deps); printed and written to bin/perf.md
perf: build
	BIN=$(BIN) bash scripts/perf.sh

## perf-kwok: row K1 of docs/performance.md: molt cordons, drains and uncordons a pool of
## KWOK_POOL nodes (default 1000) at concurrency 20 against a real kube-apiserver holding
## KWOK_NODES kwok nodes (default 15000); builds kwok first (build/k8s/kwok.sh). A measurement,
## not a CI stage; on a shared machine: flock -o /work/lab.lock make perf-kwok
perf-kwok:
	bash build/k8s/kwok.sh
	MOLT_KWOK_NODES=$${KWOK_NODES:-15000} MOLT_KWOK_POOL=$${KWOK_POOL:-1000} MOLT_KWOK_OUT=$(BIN)/perf-kwok.md \
		$(GO) test -tags kwok -count=1 -timeout 90m -run '^TestKwokPoolDrain$$' -v ./kube/

## chaos: N chaos runs (default 3), each a lab of its own upgraded v1.33.13 → v1.34.3 while a
## schedule drawn from SEED+i (SEED=0: from the clock) kills, freezes and partitions members, kills
## agents, cuts a host off, takes the API server's LB away and serves a wrong checksum; the
## invariants are checked after each run. A table per run, then the summary line (docs/chaos.md;
## about 8 minutes a run). On a shared machine: flock /work/lab.lock make chaos N=3
N    ?= 3
SEED ?= 0
CHAOS_FLAGS ?=
chaos: build
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/molt-chaos
	$(BIN)/molt-chaos --runs $(N) --seed $(SEED) --bin $(BIN) $(CHAOS_FLAGS) 2>&1 | tee $(BIN)/chaos.log; exit $${PIPESTATUS[0]}

## deps: install what the tests need (apt packages, Go tools, Kubernetes builds); idempotent, cached
deps:
	bash scripts/install-deps.sh

## test-all: the README's test command — deps, build, check, every test — as the stages of
## scripts/test-all.sh, each a make target: deps, build, check (check and prebuild-test), demo
## (test-demo), unit (test), mixed (test-mixed), linearizability, plan-demo, lab, e2e, vagrant (validate-vagrant).
## While the demo's lab upgrade mostly waits on its hosts, check and the race build of every
## test binary (prebuild-test) run beside it at the lowest CPU priority (scripts/lowprio.sh: a
## session and autogroup of their own at nice 19, since with kernel autogroup nice alone ranks
## only inside a session and each lab host is a session of its own), so the lab
## keeps the cores it asks for and the test stage finds its packages compiled; their output
## follows the demo's. The first failing stage stops the run. At the end, also after a failure,
## a table of the stages' wall times (check marked as beside the demo), also in bin/ci-stages.md
test-all:
	@MAKE='$(MAKE)' BIN='$(BIN)' bash scripts/test-all.sh

## prebuild-test: compile and link every package's race-enabled test binary without
## running it (-exec true; -count=1 so no result is cached as a pass)
prebuild-test:
	$(GO) test -race -count=1 -exec /bin/true ./... >/dev/null
	cd build/release && $(GO) test -count=1 -exec /bin/true ./... >/dev/null

## demo: molt's main job (see README): a real upgrade of the lab cluster, live
demo: deps build
	$(BIN)/molt-lab demo --bin $(BIN)

## demo-auto: the same lab, upgraded by nobody: an automatic patch 1.34.3 → 1.34.4 that starts by itself when the maintenance window opens
demo-auto: deps build
	$(BIN)/molt-lab demo --auto --bin $(BIN)

## plan-demo: the version rules, a dry-run plan and maintenance answers on one member, no lab
plan-demo: build
	bash scripts/plan-demo.sh

clean:
	rm -rf $(BIN)
