# molt — build, check, test.
GO          ?= go
BIN         := bin
STATICCHECK := $(shell $(GO) env GOPATH)/bin/staticcheck
STATICCHECK_VERSION := v0.8.2
LDFLAGS     := -s -w
export MOLT_CACHE ?= /var/cache/molt

.PHONY: all build check test test-demo test-lab validate-vagrant bench deps test-all demo clean

all: build

## build: the three binaries into bin/
build:
	@mkdir -p $(BIN)
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/molt-coordinator ./cmd/molt-agent ./cmd/moltctl

## check: gofmt, go vet, staticcheck
check: $(STATICCHECK)
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...

$(STATICCHECK):
	$(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

## test: every Go test with the race detector
test:
	$(GO) test -race -timeout 30m ./...

## test-lab: the lab brings a real Kubernetes cluster up on systemd hosts and down again
test-lab:
	$(GO) test -tags lab -count=1 -timeout 30m ./lab/

## test-demo: the main job runs to its end (on ports of its own)
test-demo: build
	MOLT_DEMO_ADDR=127.0.0.1:17080 MOLT_DEMO_RAFT=127.0.0.1:17081 bash scripts/demo.sh > $(BIN)/demo.log 2>&1 || { cat $(BIN)/demo.log; exit 1; }
	grep -q 'version-skip-minor' $(BIN)/demo.log && grep -q 'version-downgrade' $(BIN)/demo.log && grep -q '== done' $(BIN)/demo.log
	@echo "demo: ok"

## validate-vagrant: the Vagrantfile of the multi-VM lab is valid (vagrant up needs hardware virtualisation)
validate-vagrant:
	cd vagrant && vagrant validate

## bench: the benchmarks whose numbers the docs report
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./phases/ ./raftstore/ ./maintenance/ ./coordinator/

## deps: install what the tests need (apt packages, Go tools, Kubernetes builds); idempotent, cached
deps:
	bash scripts/install-deps.sh

## test-all: the README's test command — deps, build, check, every test
test-all: deps build check test test-demo test-lab validate-vagrant

## demo: molt's main job (see README)
demo: build
	bash scripts/demo.sh

clean:
	rm -rf $(BIN)
