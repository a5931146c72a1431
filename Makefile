# kvring developer targets. `make test` is the README's test command.
GO ?= go
BIN := $(CURDIR)/.bin
STATICCHECK_VERSION := v0.8.2

.PHONY: check-docs test test-deps test-go test-python test-short test-go-short test-python-short race lint fuzz bench bench-store bench-policy bench-shares bench-cluster bench-python proto verify-proto build ci

# PYTHON is Debian's interpreter, with the Python packages scripts/test-deps.sh lists.
PYTHON ?= /usr/bin/python3

# Timeouts, sized from the suite's wall time on a 2-core machine quiet and
# under load (docs/benchmarks.md, "Test suite wall time"), with margin: they
# bound a hang, they do not judge speed. GO_TEST_TIMEOUT is per package (the
# slowest, cmd/kvring, sets it); PYTHON_TEST_TIMEOUT is the whole Python run.
GO_TEST_TIMEOUT ?= 40m
PYTHON_TEST_TIMEOUT ?= 20m
GO_TEST_SHORT_TIMEOUT ?= 10m
PYTHON_TEST_SHORT_TIMEOUT ?= 5m

# test checks the Debian packages the tests need (test-deps), runs the Go
# suite, then the Python suite even when the Go one failed, reports both and
# fails when either failed.
test: test-deps
	@$(MAKE) --no-print-directory test-go; go=$$?; \
	$(MAKE) --no-print-directory test-python; py=$$?; \
	scripts/test-report.sh "make test" $$go $$py

# test-deps installs the Debian packages the tests need when run as root and
# one is missing; without root it prints the apt-get line and fails, before
# any test (scripts/test-deps.sh holds the list; .ci/run calls it too).
test-deps:
	@PYTHON=$(PYTHON) scripts/test-deps.sh

test-go:
	$(GO) test -race -timeout $(GO_TEST_TIMEOUT) ./...

# test-python runs the Python client's tests (python/tests) against real nodes built from ./cmd/kvring, started
# through internal/launch/cmd/kvnodes.
test-python:
	cd python && timeout -k 30s $(PYTHON_TEST_TIMEOUT) $(PYTHON) -m pytest

# test-short is the inner loop (under 3 minutes): every Go test but the e2e
# ones that run the kvring binary (skipped by -short), and the Python
# client's tests against in-process fakes (not the ones marked `nodes`).
# Both halves run, as in make test.
test-short: test-deps
	@$(MAKE) --no-print-directory test-go-short; go=$$?; \
	$(MAKE) --no-print-directory test-python-short; py=$$?; \
	scripts/test-report.sh "make test-short" $$go $$py

test-go-short:
	$(GO) test -race -short -timeout $(GO_TEST_SHORT_TIMEOUT) ./...

test-python-short:
	cd python && timeout -k 30s $(PYTHON_TEST_SHORT_TIMEOUT) $(PYTHON) -m pytest -m "not nodes"

# race is the same as test: the suite always runs under the race detector.
race: test

# build stamps the binary with the commit from git (the Go toolchain does not
# in a git worktree, nor under GOFLAGS=-buildvcs=false); VERSION, when set,
# replaces the version of the tree (internal/buildinfo.Release):
# make build VERSION=v0.4.0.
VERSION ?=
GIT_COMMIT = $(shell git rev-parse HEAD 2>/dev/null)
GIT_TIME = $(shell TZ=UTC git show -s --date=iso-strict-local --format=%cd HEAD 2>/dev/null)
GIT_MODIFIED = $(shell test -z "$$(git status --porcelain 2>/dev/null)" && echo false || echo true)
LDFLAGS = -X main.version=$(VERSION) -X main.commit=$(GIT_COMMIT) -X main.commitTime=$(GIT_TIME) -X main.modified=$(GIT_MODIFIED)
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o kvring ./cmd/kvring

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	GOBIN=$(BIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	$(BIN)/staticcheck ./...
	GO=$(GO) scripts/check-doc-identifiers.sh
	$(GO) run ./scripts/funclen -max 80 .

# check-docs: every Go identifier the docs name in backticks exists (part of lint).
check-docs:
	GO=$(GO) scripts/check-doc-identifiers.sh

# fuzz runs every fuzz target in the module (found with go test -list) for
# FUZZTIME each: make fuzz FUZZTIME=5m.
FUZZTIME ?= 30s
fuzz:
	FUZZTIME=$(FUZZTIME) GO=$(GO) scripts/fuzz.sh

# bench runs every benchmark once with figures; see docs/benchmarks.md.
bench: bench-store bench-policy bench-shares bench-cluster

bench-store:
	$(GO) test -run '^$$' -bench . -benchtime 2s ./store/ ./internal/crc32c/

bench-policy:
	$(GO) test -run '^$$' -bench 'Policy(Prefix)?Replay' -benchtime 1x -timeout 60m ./loadtest/

# Namespace shares: a steady namespace's hit ratio beside a burst, with and without shares; the LRU policy's
# cost with shares off and on, in one run.
bench-shares:
	$(GO) test -run '^$$' -bench NamespaceShares -benchtime 1x -timeout 30m ./loadtest/
	$(GO) test -run '^$$' -bench LRUEviction -benchtime 20x -count 5 ./store/

bench-cluster:
	$(GO) test -run '^$$' -bench 'Cluster(Put|Get)' -benchtime 32x -count 3 ./cmd/kvring/
	$(GO) test -run '^$$' -bench ClusterLookup -benchtime 3000x -count 3 ./cmd/kvring/

# bench-neighbour replays a trace as a victim engine alone, then while an attacker runs each attack on a
# node's shared budgets in turn (docs/benchmarks.md, "Noisy neighbours").
.PHONY: bench-neighbour
bench-neighbour:
	$(GO) build -o .bin/kvring ./cmd/kvring
	$(GO) run ./loadtest/neighbour --kvring .bin/kvring

# bench-python compares the Python client with the Go SDK on one cluster (docs/benchmarks.md).
bench-python:
	$(PYTHON) python/bench/bench.py

proto:
	scripts/proto/gen.sh

verify-proto:
	scripts/proto/verify.sh

ci:
	.ci/run

# bench-compare runs the same bench workload against a 3-node kvring cluster
# and a redis-server with equal memory budgets; see loadtest/compare.sh.
.PHONY: bench-compare
bench-compare:
	loadtest/compare.sh

# 64 nodes on loopback through a rolling restart under `kvring bench`, then the
# same without restarts: nodes asked per lookup, hit ratio, failures, gossip
# bytes, convergence after each restart; see loadtest/churn.sh (NODES, RESTARTS).
.PHONY: bench-churn
bench-churn:
	loadtest/churn.sh

# image builds the container image (deploy/Dockerfile) with docker, podman or
# buildah, whichever is installed: make image IMAGE=kvring:dev. IMAGE_FROM=prebuilt
# compiles on this machine and pulls no base image; see deploy/build-image.sh.
.PHONY: image
image:
	deploy/build-image.sh

# python-wheel builds the Python client's wheel into dist/ with Debian's
# setuptools and wheel (python3-setuptools, python3-wheel), without a network:
# --no-build-isolation uses them instead of fetching setuptools from PyPI, and
# --no-deps leaves grpcio and protobuf to the system (python3-grpcio,
# python3-protobuf). Install it with `pip install dist/kvring-*.whl` in a venv
# made with --system-site-packages; see python/README.md.
.PHONY: python-wheel
python-wheel:
	$(PYTHON) -m pip wheel --no-build-isolation --no-deps --wheel-dir dist ./python
	rm -rf python/build

# netfault runs a kvring cluster in network namespaces under a seeded schedule
# of partitions, loss, bandwidth caps, pauses and kills, and checks that
# nothing acknowledged is lost (loadtest/netfault; needs root, iproute2,
# nftables, tc). docs/reliability.md lists the runs and their seeds:
# make netfault NETFAULT_ARGS="-nodes 3 -duration 2m -seed 31"
# netfault-ci is the CI-sized run, as the Go test that make test runs.
NETFAULT_ARGS ?= -nodes 5 -replication 2 -duration 10m -seed 1
.PHONY: netfault netfault-ci
netfault:
	$(GO) build -o $(BIN)/kvring ./cmd/kvring
	$(GO) build -o $(BIN)/netfault ./loadtest/netfault
	$(BIN)/netfault -kvring $(BIN)/kvring $(NETFAULT_ARGS)

netfault-ci:
	$(GO) test -race -count 1 -v -run 'TestACISizedFaultSchedule' ./loadtest/netfault/
