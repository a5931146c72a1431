# kvring developer targets. `make test` is the README's test command.
GO ?= go
BIN := $(CURDIR)/.bin
STATICCHECK_VERSION := v0.8.2

.PHONY: test test-go test-python race lint fuzz bench bench-store bench-policy bench-cluster bench-python proto verify-proto build ci

# PYTHON is Debian's interpreter, with python3-grpcio, python3-protobuf, python3-pytest and python3-numpy.
PYTHON ?= /usr/bin/python3

test: test-go test-python

test-go:
	$(GO) test -race ./...

# test-python runs the Python client's tests (python/tests) against real nodes built from ./cmd/kvring.
test-python:
	cd python && $(PYTHON) -m pytest

# race is the same as test: the suite always runs under the race detector.
race: test

build:
	$(GO) build -o kvring ./cmd/kvring

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	GOBIN=$(BIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	$(BIN)/staticcheck ./...

# fuzz runs every fuzz target in the module (found with go test -list) for
# FUZZTIME each: make fuzz FUZZTIME=5m.
FUZZTIME ?= 30s
fuzz:
	FUZZTIME=$(FUZZTIME) GO=$(GO) scripts/fuzz.sh

# bench runs every benchmark once with figures; see docs/benchmarks.md.
bench: bench-store bench-policy bench-cluster

bench-store:
	$(GO) test -run '^$$' -bench . -benchtime 2s ./store/ ./internal/crc32c/

bench-policy:
	$(GO) test -run '^$$' -bench 'Policy(Prefix)?Replay' -benchtime 1x -timeout 60m ./loadtest/

bench-cluster:
	$(GO) test -run '^$$' -bench 'Cluster(Put|Get)' -benchtime 32x -count 3 ./cmd/kvring/
	$(GO) test -run '^$$' -bench ClusterLookup -benchtime 3000x -count 3 ./cmd/kvring/

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
