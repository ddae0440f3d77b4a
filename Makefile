# faucet-operator — run `make help` for the targets.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

# The Go toolchain every target builds and tests with: the newest patch the
# module proxy serves (the machine's own Go lags it, and govulncheck finds
# standard-library vulnerabilities in that one). The go command fetches it
# from the proxy once (~76 MB, ~10 s) and caches it.
export GOTOOLCHAIN := go1.27.3
GO       ?= go
# One build configuration for everything but the race detector, the one
# the binaries, the pinned tools and the envtest control plane are built
# with (cgo off, paths trimmed): a cold machine then compiles the module's
# dependency graph once for vet, lint, the tests and the image, not once
# per configuration. The race detector needs cgo: test-unit turns it on.
export CGO_ENABLED := 0
export GOFLAGS := $(strip $(GOFLAGS) -trimpath)
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT   ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS  := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)
BIN      := $(CURDIR)/bin

# Conformance against stacks.js: fresh random vectors every `make test`.
CONFORMANCE_DIR     := hack/conformance
CONFORMANCE_VECTORS ?= 1000
VECTORS_FILE        := $(BIN)/stacksjs-vectors.json

# The devnode's token contract in the real Clarity VM (clarinet-sdk's simnet).
CLARITY_DIR      := hack/clarity
CLARITY_OUTCOMES := $(BIN)/clarity-outcomes.json

# Fuzzing: a short smoke run inside `make test`, longer with `make fuzz`.
FUZZ_SMOKE_TIME ?= 5s
FUZZ_TIME       ?= 60s
FUZZ_TARGETS    := ./server/chain/stacks:FuzzParsePrincipal ./server/chain/stacks:FuzzC32 ./server/chain/stacks:FuzzDecodeTransaction ./server/chain/stacks:FuzzDecodeClarityValue ./server/chain/stacks:FuzzParseAssetID
FUZZ_TARGETS    += ./server/chain/bitcoin:FuzzParseAddress ./server/chain/bitcoin:FuzzParsePrivateKey ./server/chain/bitcoin:FuzzDecodeTx

# Operator code generation: controller-gen is pinned in hack/tools/go.mod.
# The envtest control plane is built from source by hack/envtest/build.sh,
# which prints its directory (bin/k8s/<version>) as its last line.
CONTROLLER_GEN := $(BIN)/controller-gen
ENVTEST_BUILD  := hack/envtest/build.sh
CRD_RBAC_GEN    = $(CONTROLLER_GEN) rbac:roleName=manager-role crd paths=./api/... paths=./controllers/...
OBJECT_GEN      = $(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...
GINKGO_FLAGS   ?=

# End-to-end: the official JavaScript client drives the faucet.
E2E_CLIENT_DIR := hack/e2e-client
HELM_BUILD     := hack/tools/helm/build.sh
PROMTOOL_BUILD := hack/tools/promtool/build.sh
BTCD_BUILD     := hack/tools/btcd/build.sh

# One version for the chart, its appVersion and the image tag: Chart.yaml's
# appVersion. The chart's default image is $(IMAGE_REPO):<appVersion>, so
# `make image` tags exactly what `helm install` runs by default.
APP_VERSION       := $(shell sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$$/\1/p' charts/faucet-operator/Chart.yaml)
IMAGE_REPO        ?= ghcr.io/stxfaucet/faucet-operator
IMG               ?= $(IMAGE_REPO):$(APP_VERSION)
IMAGE_ARCHIVE     := $(BIN)/faucet-image.tar
REVISION          ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
CREATED           := $(shell date -u -d @$(SOURCE_DATE_EPOCH) +%Y-%m-%dT%H:%M:%SZ)
SOURCE_URL        := https://github.com/stxfaucet/faucet-operator
CA_CERTS          ?= /etc/ssl/certs/ca-certificates.crt

# Page tests: Debian's chromium drives the web page through playwright-core.
PAGETEST_DIR := hack/pagetest
# MCP test: the official TypeScript MCP client against a devnet faucet's /mcp.
MCPTEST_DIR := hack/mcptest

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: run
run: build-serve btcd ## Run the faucet on :3999 against an embedded simulated Stacks node and a btcd regtest node (devnet).
	$(BIN)/faucet-serve serve --devnet --log-format text $(RUN_ARGS)

.PHONY: docs
docs: ## Regenerate docs/serve-flags.md and docs/manager-flags.md from the flag sets of faucet serve and faucet manager.
	UPDATE_DOCS=1 $(GO) test -count=1 -run $(DOCS_TESTS) ./cmd/faucet

.PHONY: fmt
fmt: ## Format the Go code.
	gofmt -w $$(git ls-files -co --exclude-standard '*.go')

.PHONY: vet
vet: ## Run go vet.
	$(GO) vet ./...

.PHONY: test
test: verify background-builds test-unit test-conformance test-clarity test-fuzz-smoke test-chart envtest-sample e2e test-page test-mcp test-docs test-image release e2e-cluster ## Run every check CI runs.

.PHONY: test-unit
test-unit: envtest postgres btcd ## Unit, integration and controller (envtest) tests, race detector on; the chart has test-chart.
	KUBEBUILDER_ASSETS="$$($(ENVTEST_BUILD))" FAUCET_BTCD="$$($(BTCD_BUILD))" CGO_ENABLED=1 $(GO) test -race -count=1 $$($(GO) list ./... | grep -v /hack/charttest)

.PHONY: test-conformance
test-conformance: $(CONFORMANCE_DIR)/node_modules/.installed ## Check the signer against fresh stacks.js vectors.
	@mkdir -p $(BIN)
	node $(CONFORMANCE_DIR)/gen-vectors.mjs --count $(CONFORMANCE_VECTORS) --out $(VECTORS_FILE)
	STACKS_VECTORS=$(VECTORS_FILE) $(GO) test -count=1 -run '^TestConformance$$' -v ./server/chain/stacks/ | grep -E '^(=== RUN|--- |\s+conformance_test|PASS|FAIL|ok)'

$(CONFORMANCE_DIR)/node_modules/.installed: $(CONFORMANCE_DIR)/package-lock.json
	npm ci --prefix $(CONFORMANCE_DIR) --no-audit --no-fund
	@touch $@

.PHONY: test-clarity
test-clarity: $(CLARITY_DIR)/node_modules/.installed ## Run the devnode's token contract in the real Clarity VM and check the devnode gives the same outcomes.
	@mkdir -p $(BIN)
	node $(CLARITY_DIR)/outcomes.mjs --out $(CLARITY_OUTCOMES)
	CLARITY_OUTCOMES=$(CLARITY_OUTCOMES) $(GO) test -count=1 -run '^TestClarityOutcomes$$' -v ./server/chain/devnode/ | grep -E '^(=== RUN|--- |\s+clarity_test|PASS|FAIL|ok)'

$(CLARITY_DIR)/node_modules/.installed: $(CLARITY_DIR)/package-lock.json
	npm ci --prefix $(CLARITY_DIR) --no-audit --no-fund
	@touch $@

.PHONY: test-fuzz-smoke
test-fuzz-smoke: ## Run each fuzz target briefly.
	@out=$$(mktemp); trap 'rm -f "$$out"' EXIT; \
	for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t##*:}; \
		echo "fuzz $$fn ($(FUZZ_SMOKE_TIME))"; \
		if $(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZ_SMOKE_TIME) $$pkg >"$$out" 2>&1; then \
			tail -n 1 "$$out"; \
		else \
			cat "$$out"; echo "fuzz $$fn failed; a crashing input is kept in $$pkg/testdata/fuzz/$$fn"; exit 1; \
		fi; \
	done

.PHONY: fuzz
fuzz: ## Run each fuzz target for FUZZ_TIME (default 60s).
	@$(MAKE) --no-print-directory test-fuzz-smoke FUZZ_SMOKE_TIME=$(FUZZ_TIME)

.PHONY: bench
bench: postgres envtest ## Run the benchmarks (the chart's package has none and needs helm: left out).
	KUBEBUILDER_ASSETS="$$($(ENVTEST_BUILD))" $(GO) test -run '^$$' -bench . -benchmem $$($(GO) list ./... | grep -v /hack/charttest)

.PHONY: postgres
postgres: ## Install Postgres for the store tests if missing (apt-get, as root); quiet when present.
	@hack/install-postgres.sh

##@ Verification

.PHONY: verify
verify: verify-fmt vet lint vulncheck verify-mod verify-generated verify-chart verify-docs verify-serveonly verify-size ## Fail on unformatted code, vet or lint findings, known vulnerabilities, untidy go.mod, stale generated files, chart copies or docs, a serve-only build that pulls in Kubernetes, or code over the size limits.

.PHONY: verify-fmt
verify-fmt:
	@out=$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

.PHONY: verify-serveonly
verify-serveonly: ## Fail if the serve-only build (make run) stops building or pulls in Kubernetes client code (k8s.io/utils/clock, the process's one clock, is no client code).
	@k8s=$$($(GO) list -deps -tags serveonly ./cmd/faucet | grep -E '^(k8s\.io|sigs\.k8s\.io)/' | grep -vE '^k8s\.io/utils/clock$$' || true); \
	if [ -n "$$k8s" ]; then echo "make run's serve-only build imports Kubernetes packages:"; echo "$$k8s" | head; exit 1; fi
	CGO_ENABLED=0 $(GO) build -tags serveonly -o /dev/null ./cmd/faucet

.PHONY: verify-size
verify-size: ## Fail on a Go file over 600 lines, a function over 100 or a type over 40 methods (outside api/, hack/ and tests).
	$(GO) run ./hack/sizecheck .

.PHONY: verify-mod
verify-mod:
	$(GO) mod tidy -diff
	@for m in hack/tools/lint hack/tools/vuln; do (cd $$m && GOWORK=off $(GO) mod tidy -diff) || exit 1; done

# The flag references docs/serve-flags.md and docs/manager-flags.md are
# rendered from the commands' own flag sets by cmd/faucet/flagdoc_test.go.
DOCS_TESTS := '^Test(Serve|Manager)FlagReference$$'

.PHONY: verify-docs
verify-docs: ## Fail if the generated flag references in docs/ are stale (make docs), or a relative link in a Markdown file is broken.
	$(GO) test -count=1 -run $(DOCS_TESTS) ./cmd/faucet
	$(GO) run ./hack/doclinks $$(git ls-files -co --exclude-standard '*.md')

.PHONY: lint
lint: ## Run the pinned golangci-lint with .golangci.yml (built into bin/ when missing, ~3 min cold).
	"$$(hack/tools/lint/build.sh)" run ./...

.PHONY: vulncheck
vulncheck: ## govulncheck against the pinned Go vulnerability database, offline (hack/tools/vuln).
	hack/tools/vuln/check.sh ./...

##@ Build

.PHONY: build
build: ## Build bin/faucet.
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/faucet ./cmd/faucet

.PHONY: build-serve
build-serve: ## Build bin/faucet-serve: the faucet without the operator (-tags serveonly), for make run; a third of bin/faucet's packages.
	CGO_ENABLED=0 $(GO) build -trimpath -tags serveonly -ldflags '$(LDFLAGS)' -o $(BIN)/faucet-serve ./cmd/faucet

##@ Operator

.PHONY: tools
tools: $(CONTROLLER_GEN) ## Build the pinned code generators into bin/.

$(CONTROLLER_GEN): hack/tools/go.mod hack/tools/go.sum
	cd hack/tools && GOWORK=off $(GO) build -o $(CONTROLLER_GEN) sigs.k8s.io/controller-tools/cmd/controller-gen

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate the CRD (config/crd/bases) and the manager ClusterRole (config/rbac/role.yaml).
	$(CRD_RBAC_GEN) output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	hack/sync-chart.sh

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate the API's DeepCopy methods.
	$(OBJECT_GEN)

.PHONY: verify-generated
verify-generated: $(CONTROLLER_GEN) ## Fail if the generated code or manifests are stale (generates into a temp dir and diffs).
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	$(CRD_RBAC_GEN) output:crd:artifacts:config=$$tmp/crd output:rbac:artifacts:config=$$tmp/rbac; \
	$(OBJECT_GEN) output:object:dir=$$tmp/object; \
	stale=0; \
	diff -ru $$tmp/crd config/crd/bases || stale=1; \
	diff -u $$tmp/rbac/role.yaml config/rbac/role.yaml || stale=1; \
	diff -u $$tmp/object/zz_generated.deepcopy.go api/v1alpha1/zz_generated.deepcopy.go || stale=1; \
	if [ $$stale = 1 ]; then echo "generated files are stale: run 'make manifests generate'"; exit 1; fi

.PHONY: envtest
envtest: ## Build the envtest control plane (kube-apiserver, etcd, kubectl) into bin/k8s/ once (~8 min cold).
	@$(ENVTEST_BUILD) >/dev/null

.PHONY: test-envtest
test-envtest: envtest ## Run only the controller suite (Ginkgo on envtest); GINKGO_FLAGS=-ginkgo.v lists each spec.
	KUBEBUILDER_ASSETS="$$($(ENVTEST_BUILD))" CGO_ENABLED=1 $(GO) test -race -count=1 -v ./controllers/... $(GINKGO_FLAGS)

.PHONY: envtest-sample
envtest-sample: build envtest ## kubectl-apply config/default and config/samples to an envtest API server with the manager running.
	KUBEBUILDER_ASSETS="$$($(ENVTEST_BUILD))" $(GO) run ./hack/envtest-sample --faucet $(BIN)/faucet

##@ Helm chart

.PHONY: helm
helm: ## Build the pinned helm (hack/tools/helm/go.mod) into bin/helm (~4 min cold).
	@$(HELM_BUILD) >/dev/null

.PHONY: promtool
promtool: ## Build the pinned promtool (hack/tools/promtool/go.mod) into bin/promtool (~3 min cold).
	@$(PROMTOOL_BUILD) >/dev/null

.PHONY: btcd
btcd: ## Build the pinned btcd and btcctl (hack/tools/btcd/go.mod) into bin/ for the BTC node tests (~1 min cold).
	@$(BTCD_BUILD) >/dev/null

.PHONY: chart-sync
chart-sync: ## Copy the CRD and RBAC rules from config/ into charts/faucet-operator/files, and the chart's appVersion into the image tags of config/.
	hack/sync-chart.sh

.PHONY: verify-chart
verify-chart: ## Fail if the chart's copies of config/, or the image tags in config/, are stale.
	hack/sync-chart.sh --check

.PHONY: test-chart
test-chart: envtest helm promtool ## helm lint --strict, schema and render checks, promtool rule tests, server-side dry-run and a helm lifecycle on envtest.
	KUBEBUILDER_ASSETS="$$($(ENVTEST_BUILD))" HELM="$$($(HELM_BUILD))" PROMTOOL="$$($(PROMTOOL_BUILD))" $(GO) test -count=1 -v ./hack/charttest/

##@ End to end

.PHONY: e2e
e2e: build envtest $(E2E_CLIENT_DIR)/node_modules/.installed ## Hermetic end-to-end: envtest + manager + devnode, the pod run as a local process, drips via @stacks/blockchain-api-client.
	KUBEBUILDER_ASSETS="$$($(ENVTEST_BUILD))" $(GO) test -tags e2e -count=1 -v ./hack/e2e/

$(E2E_CLIENT_DIR)/node_modules/.installed: $(E2E_CLIENT_DIR)/package-lock.json
	npm ci --prefix $(E2E_CLIENT_DIR) --no-audit --no-fund
	@touch $@

# The real cluster: kubelet, control plane and kube-proxy built from the Go
# module proxy (the envtest version), Debian's containerd, runc and CNI
# plugins, in a network namespace of its own. See hack/cluster/README.md.
CLUSTER := hack/cluster/cluster.sh
E2E_TOOLS_ARCHIVE := $(BIN)/e2e-tools.tar

.PHONY: e2e-cluster
e2e-cluster: image e2e-tools-image helm cluster-binaries clusterdns postgres btcd $(E2E_CLIENT_DIR)/node_modules/.installed ## helm install on a real single-node cluster, drips through the Service, pod kill, key rotation, upgrade, uninstall; leaves the machine clean.
	HELM="$$($(HELM_BUILD))" IMG=$(IMG) hack/cluster/e2e.sh

.PHONY: clusterdns
clusterdns: ## Build the real cluster's DNS server (hack/clusterdns: Service names from the API server) into bin/.
	$(GO) build -o $(BIN)/clusterdns ./hack/clusterdns

.PHONY: cluster-binaries
cluster-binaries: ## Build kubelet, kube-proxy, kube-controller-manager and kube-scheduler with the envtest binaries (~12 min cold), or wait for the background build.
	@$(ENVTEST_BUILD) --cluster >/dev/null
	@if [ -f $(BIN)/background-builds.log ]; then grep -h 'built in' $(BIN)/background-builds.log || true; fi

.PHONY: background-builds
background-builds: envtest ## Start building helm, promtool and the cluster's binaries in the background at the lowest priority (stopped if make exits first); their targets then wait for it. make test does this before its unit tests, which leave CPU idle while they wait on simulated blocks.
	@hack/background.sh $$PPID $(BIN)/background-builds.log -- bash -c '$(HELM_BUILD) >/dev/null && $(PROMTOOL_BUILD) >/dev/null && $(ENVTEST_BUILD) --cluster >/dev/null'

.PHONY: e2e-tools-image
e2e-tools-image: ## The cluster's sandbox (pause) image, with httpget for scraping from a pod and the tests' OpenID provider.
	@mkdir -p $(BIN)/e2e-tools
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 $(GO) build -trimpath -buildvcs=false -o $(BIN)/e2e-tools/ ./hack/cluster/pause ./hack/cluster/httpget ./hack/oidcprovider/cmd/oidc-provider
	cd hack/image && GOWORK=off $(GO) build -trimpath -o $(BIN)/image-builder .
	$(BIN)/image-builder --out $(E2E_TOOLS_ARCHIVE) --tag localhost/faucet-e2e/pause:1 --nonroot 65532 --entrypoint /pause \
		--file /pause=$(BIN)/e2e-tools/pause:0755 --file /httpget=$(BIN)/e2e-tools/httpget:0755 \
		--file /oidc-provider=$(BIN)/e2e-tools/oidc-provider:0755 >/dev/null

.PHONY: cluster-up
cluster-up: image e2e-tools-image cluster-binaries clusterdns ## Start the real cluster with our image and leave it running (make cluster-down stops it).
	PAUSE_ARCHIVE=$(E2E_TOOLS_ARCHIVE) $(CLUSTER) up
	$(CLUSTER) import $(IMAGE_ARCHIVE)
	@echo "kubectl: $(CLUSTER) exec $(BIN)/k8s/1.37.0/kubectl get nodes"

.PHONY: cluster-down
cluster-down: ## Stop the real cluster and remove every trace of it.
	$(CLUSTER) down
	$(CLUSTER) check-clean

.PHONY: chromium
chromium: ## Install Debian's chromium for the page tests if missing (apt-get, as root); quiet when present.
	@hack/install-chromium.sh

.PHONY: test-page
test-page: build oidc-provider btcd chromium $(PAGETEST_DIR)/node_modules/.installed ## Drive the web page in chromium against the devnode (screenshots in bin/).
	node $(PAGETEST_DIR)/run.mjs --faucet $(BIN)/faucet --oidc-provider $(BIN)/oidc-provider --out $(BIN)

.PHONY: oidc-provider
oidc-provider: ## Build the tests' OpenID provider (hack/oidcprovider, zitadel/oidc's OP) into bin/oidc-provider.
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/oidc-provider ./hack/oidcprovider/cmd/oidc-provider

$(PAGETEST_DIR)/node_modules/.installed: $(PAGETEST_DIR)/package-lock.json
	npm ci --prefix $(PAGETEST_DIR) --no-audit --no-fund
	@touch $@

.PHONY: test-mcp
test-mcp: build $(MCPTEST_DIR)/node_modules/.installed ## Talk to a devnet faucet's /mcp with the official TypeScript MCP client.
	node $(MCPTEST_DIR)/run.mjs --faucet $(BIN)/faucet

$(MCPTEST_DIR)/node_modules/.installed: $(MCPTEST_DIR)/package-lock.json
	npm ci --prefix $(MCPTEST_DIR) --no-audit --no-fund
	@touch $@

.PHONY: test-docs
test-docs: build-serve btcd ## Run README.md's `make run` and its local tour as written, checking each answer against the one shown (e2e-cluster runs its Kubernetes tour).
	$(GO) test -tags doctour -count=1 -run TestReadmeLocalTour ./hack/doctour

##@ Image and release

# The image, built without a daemon by hack/image (go-containerregistry): the
# one static binary, CA certificates, /etc/passwd naming the numeric user
# 65532, OCI labels. Reproducible: the same commit gives the same digest.
.PHONY: image
image: ## Write the image as a docker archive (bin/faucet-image.tar) tagged $(IMG); prints its digest.
	@mkdir -p $(BIN)/linux_amd64
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 $(GO) build -trimpath -buildvcs=false -ldflags '$(LDFLAGS)' -o $(BIN)/linux_amd64/faucet ./cmd/faucet
	@# btcd (pinned in hack/tools/btcd/go.mod) beside /faucet, where `faucet devnet --btc-listen` finds it.
	cd hack/tools/btcd && GOWORK=off GOFLAGS=-mod=readonly CGO_ENABLED=0 GOOS=linux GOARCH=amd64 $(GO) build -trimpath -buildvcs=false -ldflags '-s -w' -o $(BIN)/linux_amd64/btcd github.com/btcsuite/btcd
	cd hack/image && GOWORK=off $(GO) build -trimpath -o $(BIN)/image-builder .
	$(BIN)/image-builder --out $(IMAGE_ARCHIVE) --tag $(IMG) \
		--file /faucet=$(BIN)/linux_amd64/faucet:0755 \
		--file /btcd=$(BIN)/linux_amd64/btcd:0755 \
		--file /etc/ssl/certs/ca-certificates.crt=$(CA_CERTS):0644 \
		--nonroot 65532 --entrypoint /faucet --cmd manager \
		--expose 3999/tcp --expose 8443/tcp --expose 8081/tcp \
		--created $(SOURCE_DATE_EPOCH) \
		--label org.opencontainers.image.title=faucet-operator \
		--label org.opencontainers.image.description='Stacks testnet STX faucet and its Kubernetes operator; with btcd for the in-cluster devnet' \
		--label org.opencontainers.image.source=$(SOURCE_URL) \
		--label org.opencontainers.image.url=$(SOURCE_URL) \
		--label org.opencontainers.image.licenses=Apache-2.0 \
		--label org.opencontainers.image.version=$(APP_VERSION) \
		--label org.opencontainers.image.revision=$(REVISION) \
		--label org.opencontainers.image.created=$(CREATED) | tee $(IMAGE_ARCHIVE).digest

.PHONY: test-image
test-image: image ## Build the image twice and fail unless both archives are identical; check its layout.
	@cp $(IMAGE_ARCHIVE) $(IMAGE_ARCHIVE).first
	@$(MAKE) --no-print-directory image >/dev/null
	@cmp $(IMAGE_ARCHIVE).first $(IMAGE_ARCHIVE) || { echo "image is not reproducible: two builds of one commit differ"; exit 1; }
	@rm -f $(IMAGE_ARCHIVE).first
	@echo "reproducible: two builds, sha256 $$(sha256sum $(IMAGE_ARCHIVE) | cut -c1-64), image $$(sed -n 's/^digest //p' $(IMAGE_ARCHIVE).digest)"
	cd hack/image && GOWORK=off IMAGE_ARCHIVE=$(IMAGE_ARCHIVE) IMAGE_REF=$(IMG) $(GO) test -count=1 ./...

.PHONY: load-image
load-image: ## Load bin/faucet-image.tar into the cluster of kubectl's current context: kind, minikube, k3d, or a node on this machine (containerd); else it says how to push it.
	hack/load-image.sh $(IMAGE_ARCHIVE)

.PHONY: docker-build
docker-build: ## Build the same image with a Docker daemon (this repo's CI has none): make docker-build IMG=registry/faucet-operator:tag
	docker build --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) --build-arg APP_VERSION=$(APP_VERSION) \
		--build-arg REVISION=$(REVISION) --build-arg SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) -t $(IMG) .

# A release as a platform team consumes it, in bin/release (not published):
# the packaged chart, the image archive, SHA-256 checksums. Version and
# appVersion both come from APP_VERSION (Chart.yaml's appVersion).
RELEASE_DIR := $(BIN)/release

.PHONY: release
release: helm image ## Package the chart and the image with checksums into bin/release.
	@grep -Eq '^  repository: $(IMAGE_REPO)$$' charts/faucet-operator/values.yaml || \
		{ echo "the chart's image.repository is not $(IMAGE_REPO), the repository make image tags"; exit 1; }
	@rm -rf $(RELEASE_DIR) && mkdir -p $(RELEASE_DIR)
	"$$($(HELM_BUILD))" package charts/faucet-operator --version $(APP_VERSION) --app-version $(APP_VERSION) --destination $(RELEASE_DIR)
	cp $(IMAGE_ARCHIVE) $(RELEASE_DIR)/faucet-operator-$(APP_VERSION)-image-linux-amd64.tar
	cd $(RELEASE_DIR) && sha256sum *.tgz *.tar > SHA256SUMS && cat SHA256SUMS
