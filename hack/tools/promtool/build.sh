#!/usr/bin/env bash
# Build the pinned promtool from the Go module proxy into <repo>/bin/promtool.
#
# Usage: hack/tools/promtool/build.sh
#
# promtool is pinned in hack/tools/promtool/go.mod (a module of its own, so
# Prometheus's dependency graph never joins the root go.mod). Prometheus tags
# its Go module v0.3XX.Y for release v3.XX.Y; the build stamps that release
# version, so `promtool --version` reports it.
#
# The build sets the remove_all_sd tag, which Prometheus's README documents:
# promtool then links only the file, http and kubernetes service discoveries
# instead of all of them (AWS, Azure, GCE, Nomad, ...). The chart tests only
# use `promtool check rules` and `promtool test rules`, which need none; the
# build gets much smaller and faster, and it does not need
# github.com/hashicorp/nomad/api, whose pseudo-version the Go module proxy
# does not serve (which is also why go.mod is tidied with `go mod tidy -e`).
#
# Idempotent: if bin/promtool exists and reports the pinned version, nothing
# is built. Progress goes to stderr; the only line on stdout is the absolute
# path of the binary, so a Makefile can use PROMTOOL=$(hack/tools/promtool/build.sh).
set -euo pipefail

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "${script_dir}/../lib.sh"
target=${bin_dir}/promtool

module_version=$(pin github.com/prometheus/prometheus)
# v0.316.0 -> 3.16.0
if [[ ! "${module_version}" =~ ^v0\.3([0-9][0-9])\.([0-9]+)$ ]]; then
	log "cannot map the github.com/prometheus/prometheus pin '${module_version}' in ${script_dir}/go.mod to a Prometheus v3 release (want v0.3XX.Y)"
	exit 1
fi
prom_version="3.$((10#${BASH_REMATCH[1]})).${BASH_REMATCH[2]}"

built() {
	[[ -x "${target}" ]] &&
		[[ "$("${target}" --version 2>/dev/null | head -n1 || true)" == "promtool, version ${prom_version} "* ]]
}
build_once

ldflags="-s -w"
ldflags+=" -X github.com/prometheus/common/version.Version=${prom_version}"
ldflags+=" -X github.com/prometheus/common/version.Branch=module-${module_version}"

log "promtool ${prom_version} (github.com/prometheus/prometheus ${module_version}): building into ${target} (cold: ~3 min on 2 cores)"
go_build promtool -tags remove_all_sd -ldflags="${ldflags}" github.com/prometheus/prometheus/cmd/promtool
