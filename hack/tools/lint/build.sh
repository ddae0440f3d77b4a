#!/usr/bin/env bash
# Build the pinned golangci-lint from the Go module proxy into
# <repo>/bin/golangci-lint.
#
# Usage: hack/tools/lint/build.sh
#
# golangci-lint is pinned in hack/tools/lint/go.mod, a module of its own so
# that its large dependency graph never joins the root go.mod. Idempotent:
# if bin/golangci-lint reports the pinned version, nothing is built.
# Progress goes to stderr; the only line on stdout is the absolute path of
# the binary.
set -euo pipefail

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "${script_dir}/../lib.sh"
target=${bin_dir}/golangci-lint

version=$(pin github.com/golangci/golangci-lint/v2)
[[ -n "${version}" ]] || { log "cannot read the golangci-lint pin from ${script_dir}/go.mod"; exit 1; }

# It must be built by the Go that builds the code it checks: an older one
# refuses files for a newer Go.
go_version=$(go env GOVERSION)
if [[ -x "${target}" ]] && "${target}" version --short 2>/dev/null | grep -qx "${version#v}" &&
	"${target}" version 2>/dev/null | grep -q "built with ${go_version} "; then
	echo "${target}"
	exit 0
fi

log "golangci-lint ${version} (${go_version}): building into ${target} (cold: ~3 min on 2 cores)"
# The version is stamped as the project's release builds stamp it, so
# `golangci-lint version` tells which pin a binary came from.
go_build golangci-lint -ldflags "-s -w -X main.version=${version#v}" github.com/golangci/golangci-lint/v2/cmd/golangci-lint
