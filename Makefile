# Sovereign — one Makefile for the whole workspace. `make help` lists targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

GO       ?= go
BIN      := $(CURDIR)/bin
PKGS     := ./proto/... ./services/kit/... ./services/browser/... ./services/gateway/... ./services/history/... ./services/signer/... ./services/sovereign/... ./deploy/... ./charts/... ./services/agent/...
CMDS     := ./services/sovereign/cmd/sovereign ./services/gateway/cmd/gateway ./services/browser/cmd/browser ./services/signer/cmd/signer
# Tests start Chromium and NATS: keep parallel packages low on small machines.
# Three at once: the long packages (gateway, browser, e2e) mostly wait on
# Chromium, NATS and their own processes (a third of their wall time is
# CPU), so three keep two cores busy where two left them idle.
TESTFLAGS ?= -count=1 -p 3 -timeout 20m

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

.PHONY: deps
deps: ## install what builds and tests need (Chromium, protoc, Node packages for e2e)
	@./scripts/deps.sh

.PHONY: build
build: ## build the binaries into bin/
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ $(CMDS)

# Container images (deploy/docker/*.Dockerfile, built from the repository
# root). Docker with BuildKit required: `make images VERSION=0.1.0`.
IMAGE_REGISTRY ?= ghcr.io/sovereign-fleet
IMAGES         := gateway browser signer history agent
VERSION        ?= dev
COMMIT         ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)

.PHONY: images
images: ## build the container images (docker; VERSION=…, IMAGE_REGISTRY=…)
	@for svc in $(IMAGES); do \
	  echo "== $(IMAGE_REGISTRY)/sovereign-$$svc:$(VERSION)"; \
	  DOCKER_BUILDKIT=1 docker build -f deploy/docker/$$svc.Dockerfile \
	    --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) \
	    --label org.opencontainers.image.version=$(VERSION) \
	    --label org.opencontainers.image.revision=$(COMMIT) \
	    -t $(IMAGE_REGISTRY)/sovereign-$$svc:$(VERSION) . || exit 1; \
	done

.PHONY: run
run: lighthouse ## run everything on this machine: MCP at http://127.0.0.1:8080/mcp
	@./scripts/deps.sh chromium
	SOVEREIGN_LIGHTHOUSE_DIR=$${SOVEREIGN_LIGHTHOUSE_DIR-$(CURDIR)/services/browser/lighthouse} $(GO) run ./services/sovereign/cmd/sovereign up $(ARGS)

.PHONY: lighthouse
lighthouse: ## install the Lighthouse runner of lighthouse_audit (npm ci in services/browser/lighthouse; skipped, with a note, without Node.js)
	@./scripts/deps.sh lighthouse

.PHONY: test
test: deps ## every test: unit, component, generated-code check and e2e
	$(MAKE) gen-check
	$(MAKE) jaeger
	@# The lint (CPU) runs beside the tests (which mostly wait); its output
	@# follows theirs, and either failing fails make test.
	@lint=$$(mktemp); ( $(MAKE) --no-print-directory lint >$$lint 2>&1; echo $$? >$$lint.rc ) & pid=$$!; \
	  rc=0; $(GO) test $(TESTFLAGS) $(PKGS) ./e2e/... || rc=$$?; \
	  wait $$pid; echo "== make lint"; cat $$lint; lrc=$$(cat $$lint.rc); rm -f $$lint $$lint.rc; \
	  [ "$$lrc" = 0 ] || echo "make lint failed" >&2; [ "$$rc" = 0 ] && [ "$$lrc" = 0 ]
	$(MAKE) e2e-compose

# The gateway's and the browser's tests twice over while two busy loops
# hold both cores: a test that fails here fails on a loaded CI machine.
# `make test-loaded` must pass with 0 failures.
LOADED_PKGS := ./services/gateway/... ./services/browser/...

.PHONY: test-loaded
test-loaded: deps ## the gateway's and browser's tests twice, with two busy loops loading both cores
	@pids=""; for i in 1 2; do nice -n 0 bash -c 'while :; do :; done' & pids="$$pids $$!"; done; \
	  trap 'kill $$pids 2>/dev/null' EXIT; \
	  $(GO) test -count=2 -p 2 -timeout 40m $(LOADED_PKGS)

.PHONY: e2e
e2e: deps jaeger ## only the end-to-end tests (separate processes, real MCP clients, a real Jaeger)
	$(GO) test $(TESTFLAGS) -v ./e2e/...

# The compose project run for real (e2e/compose_test.go): a Docker engine
# (deps.sh docker installs docker.io and starts dockerd when none answers,
# and builds the compose and buildx plugins when missing), the base images
# (pulled, or stood in by docker-offline.sh when the registry does not
# answer), then TestCompose, which removes everything it started; the
# `down -v` after it also runs when the test binary dies. The last step of
# `make test`: a new machine spends ~40 min on it (plugins, stand-ins and
# the first image build), a machine that keeps ~/.cache/sovereign-e2e and
# the engine's store ~4 min.
COMPOSE_E2E := cd deploy && COMPOSE_PROJECT_NAME=sovereign-e2e docker compose --profile postgres --profile sqlite --profile tools

.PHONY: e2e-compose
e2e-compose: ## deploy/compose.yaml for real on a Docker engine (the last step of make test: ~40 min the first time, 4 min cached)
	@./scripts/deps.sh docker
	./scripts/docker-offline.sh images
	@rc=0; SOVEREIGN_E2E_COMPOSE=1 $(GO) test -count=1 -timeout 60m -run '^TestCompose$$' -v ./e2e/ || rc=$$?; \
	  $(COMPOSE_E2E) down -v --remove-orphans >/dev/null 2>&1; exit $$rc

# The chart on a real Kubernetes (e2e/helm_test.go): a one-node cluster
# that scripts/k8s-local.sh builds from k8s.io/kubernetes, Helm and CoreDNS
# on the Go module proxy and runs with Debian's containerd, runc, CNI
# plugins and etcd (deps.sh k8s); the project's images are built by `make
# images` and copied from the Docker engine into the cluster's containerd.
# Not in make test (nor CI): it needs root, and its first run builds for
# ~40 min on two cores (Kubernetes, Helm, CoreDNS; cached in
# ~/.cache/sovereign-e2e, keyed by version), which with make test's own
# first run would not fit CI's 90 min on a new machine. Warm: ~4 min. The
# `down` after the test also runs when the test binary dies.
.PHONY: e2e-helm
e2e-helm: ## the Helm chart installed on a local one-node Kubernetes (not in make test: root, ~40 min the first time, 4 min cached)
	@./scripts/deps.sh docker k8s
	./scripts/docker-offline.sh images
	$(MAKE) images
	./scripts/k8s-local.sh build >/dev/null
	@rc=0; SOVEREIGN_E2E_HELM=1 SOVEREIGN_E2E_HELM_TAG=$(VERSION) $(GO) test -count=1 -timeout 60m -run '^TestHelm$$' -v ./e2e/ || rc=$$?; \
	  ./scripts/k8s-local.sh down; exit $$rc

.PHONY: jaeger
jaeger: ## build the Jaeger the trace e2e test runs (from the Go module proxy; ~6 min on 2 cores the first time, cached in ~/.cache/sovereign-e2e)
	$(GO) run ./e2e/cmd/jaeger

.PHONY: bench
bench: deps ## tool-call latency and throughput vs direct CDP, then audit ingest and query (prints tables)
	$(GO) run ./e2e/cmd/bench $(ARGS)
	$(MAKE) bench-history
	$(MAKE) bench-guard
	$(MAKE) bench-signer
	$(MAKE) bench-scripts

.PHONY: bench-history
bench-history: deps ## audit ingest (records/s) and query latency at 100k and 1M records, SQLite and PostgreSQL
	set -o pipefail; SOVEREIGN_BENCH=1 $(GO) test -count=1 -timeout 60m -run '^TestAuditBench$$' -v ./services/history/ | grep -v -e '^=== RUN' -e '^--- PASS' -e '^PASS$$' -e '^ok '

.PHONY: bench-signer
bench-signer: deps ## the signer over the bus (local key, nsigner, NIP-46 bunker) and window.nostr.signEvent from a page in Chromium
	$(GO) test -count=1 -run '^$$' -bench 'BenchmarkSigner' -benchtime 300x ./services/signer/
	$(GO) test -count=1 -run '^$$' -bench 'BenchmarkNostrSign' -benchtime 20x ./services/browser/

.PHONY: bench-scripts
bench-scripts: deps ## cost of one script tool call (a fresh goja interpreter, the script's top level and the tool)
	$(GO) test -count=1 -run '^$$' -bench 'BenchmarkCall' -benchtime 500x -benchmem ./services/gateway/internal/scripts/

.PHONY: bench-guard
bench-guard: deps ## cost of the guard: a page of 31 requests with and without URL policy enforcement; secret scrubbing of 1 MB
	$(GO) test -count=1 -run '^$$' -bench 'BenchmarkPolicyCost' -benchtime 30x ./services/browser/
	$(GO) test -count=1 -run '^$$' -bench 'Scrub|Substitute' -benchmem ./services/kit/secrets/

.PHONY: gen
gen: ## regenerate protobuf Go code and docs/tools.md
	./proto/gen.sh
	$(GO) run ./services/gateway/cmd/gendocs > docs/tools.md

.PHONY: gen-check
gen-check: ## fail when `make gen` would change a generated file
	@tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; \
	  mkdir -p $$tmp/docs && cp -r proto $$tmp/ && cp docs/tools.md $$tmp/docs/; \
	  $(MAKE) -s gen >/dev/null; \
	  if ! diff -r -q -x go.sum $$tmp/proto proto >/dev/null || ! diff -q $$tmp/docs/tools.md docs/tools.md >/dev/null; then \
	    diff -r -x go.sum $$tmp/proto proto | head -20; diff $$tmp/docs/tools.md docs/tools.md | head -20; \
	    echo "generated files were stale: 'make gen' has rewritten them; commit the result"; exit 1; \
	  fi; echo "generated files are up to date"

STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: lint
lint: lint-js ## gofmt, go vet, staticcheck, and ESLint on the browser's in-page JavaScript
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS) ./e2e/...
	@# SA1019 off: tests of the 2025 protocol call its deprecated RPCs on purpose.
	$(GO) run $(STATICCHECK) -checks 'inherit,-SA1019' $(PKGS) ./e2e/...

# The JavaScript that the browser worker runs in pages (scripts/jslint has
# ESLint, pinned, and its config). Without Node.js the target says so in
# one line and skips, except in CI (CI set), where it fails.
JSLINT_FILES := services/browser/internal/page/*.js services/browser/internal/nostrjs/nostr.js

.PHONY: lint-js
lint-js: ## ESLint on the browser worker's in-page JavaScript (needs Node.js >= 18.18 and npm)
	@if ! command -v node >/dev/null || ! command -v npm >/dev/null; then \
	  msg="lint-js: ESLint needs Node.js >= 18.18 and npm (Debian: apt-get install nodejs npm)"; \
	  if [ -n "$${CI:-}" ] && [ "$${CI}" != false ]; then echo "$$msg" >&2; exit 1; fi; \
	  echo "$$msg; skipped" >&2; exit 0; \
	fi; \
	./scripts/deps.sh jslint && \
	scripts/jslint/node_modules/.bin/eslint --config scripts/jslint/eslint.config.js $(JSLINT_FILES)

.PHONY: clean
clean: ## remove build output and the local data dir
	rm -rf $(BIN) .sovereign
