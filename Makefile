# faucet-operator — run `make help` for the targets.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

GO       ?= go
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT   ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS  := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)
BIN      := $(CURDIR)/bin

# Conformance against stacks.js: fresh random vectors every `make test`.
CONFORMANCE_DIR     := hack/conformance
CONFORMANCE_VECTORS ?= 1000
VECTORS_FILE        := $(BIN)/stacksjs-vectors.json

# Fuzzing: a short smoke run inside `make test`, longer with `make fuzz`.
FUZZ_SMOKE_TIME ?= 5s
FUZZ_TIME       ?= 60s
FUZZ_TARGETS    := ./server/stacks:FuzzParsePrincipal ./server/stacks:FuzzC32 ./server/stacks:FuzzDecodeTransaction

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: run
run: build ## Run the faucet on :3999 against an embedded simulated Stacks node (devnet).
	$(BIN)/faucet serve --devnet --log-format text $(RUN_ARGS)

.PHONY: fmt
fmt: ## Format the Go code.
	gofmt -w $$(git ls-files -co --exclude-standard '*.go')

.PHONY: vet
vet: ## Run go vet.
	$(GO) vet ./...

.PHONY: test
test: vet verify-fmt test-unit test-conformance test-fuzz-smoke ## Run every check CI runs.

.PHONY: test-unit
test-unit: ## Unit and integration tests (race detector on).
	$(GO) test -race -count=1 ./...

.PHONY: test-conformance
test-conformance: $(CONFORMANCE_DIR)/node_modules/.installed ## Check the signer against fresh stacks.js vectors.
	@mkdir -p $(BIN)
	node $(CONFORMANCE_DIR)/gen-vectors.mjs --count $(CONFORMANCE_VECTORS) --out $(VECTORS_FILE)
	STACKS_VECTORS=$(VECTORS_FILE) $(GO) test -count=1 -run '^TestConformance$$' -v ./server/stacks/ | grep -E '^(=== RUN|--- |\s+conformance_test|PASS|FAIL|ok)'

$(CONFORMANCE_DIR)/node_modules/.installed: $(CONFORMANCE_DIR)/package-lock.json
	npm ci --prefix $(CONFORMANCE_DIR) --no-audit --no-fund
	@touch $@

.PHONY: test-fuzz-smoke
test-fuzz-smoke: ## Run each fuzz target briefly.
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t##*:}; \
		echo "fuzz $$fn ($(FUZZ_SMOKE_TIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZ_SMOKE_TIME) $$pkg | tail -n 1; \
	done

.PHONY: fuzz
fuzz: ## Run each fuzz target for FUZZ_TIME (default 60s).
	@$(MAKE) --no-print-directory test-fuzz-smoke FUZZ_SMOKE_TIME=$(FUZZ_TIME)

.PHONY: bench
bench: ## Run the benchmarks.
	$(GO) test -run '^$$' -bench . -benchmem ./...

##@ Verification

.PHONY: verify
verify: verify-fmt vet verify-mod ## Fail on unformatted code, vet findings or untidy go.mod.

.PHONY: verify-fmt
verify-fmt:
	@out=$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

.PHONY: verify-mod
verify-mod:
	$(GO) mod tidy -diff

##@ Build

.PHONY: build
build: ## Build bin/faucet.
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/faucet ./cmd/faucet
