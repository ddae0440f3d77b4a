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
repo_root=$(cd "${script_dir}/../../.." && pwd)
target=${repo_root}/bin/promtool

log() { echo "build.sh: $*" >&2; }

export GOWORK=off # a standalone module, never part of a workspace
export GOFLAGS="-mod=readonly -buildvcs=false"
export CGO_ENABLED=0

# The pin, read from go.mod so there is exactly one place to bump.
# `go mod edit -json` reads go.mod only: no network, no module loading.
mod_json=$(cd "${script_dir}" && go mod edit -json)
module_version=$(grep -A1 '"Path": "github.com/prometheus/prometheus"' <<<"${mod_json}" |
	sed -n 's/.*"Version": "\(.*\)".*/\1/p')
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
if built; then
	echo "${target}"
	exit 0
fi
# One build at a time: `make test` starts this one in the background
# (hack/background.sh); a call meanwhile waits for it, then finds it built.
mkdir -p "$(dirname "${target}")"
exec 9>"${target}.lock"
flock 9
if built; then
	echo "${target}"
	exit 0
fi

ldflags="-s -w"
ldflags+=" -X github.com/prometheus/common/version.Version=${prom_version}"
ldflags+=" -X github.com/prometheus/common/version.Branch=module-${module_version}"

mkdir -p "$(dirname "${target}")"
tmp="${target}.tmp.$$"
trap 'rm -f "${tmp}"' EXIT
log "promtool ${prom_version} (github.com/prometheus/prometheus ${module_version}): building into ${target} (cold: ~3 min on 2 cores)"
start=${SECONDS}
(cd "${script_dir}" && go build -trimpath -tags remove_all_sd -ldflags="${ldflags}" -o "${tmp}" github.com/prometheus/prometheus/cmd/promtool) >&2
mv -f "${tmp}" "${target}" # atomic: never a half-written binary
trap - EXIT
log "promtool: built in $((SECONDS - start))s"
echo "${target}"
