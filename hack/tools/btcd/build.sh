#!/usr/bin/env bash
# Build the pinned btcd (a Bitcoin full node in Go) and its btcctl CLI from
# the Go module proxy into <repo>/bin/btcd and <repo>/bin/btcctl.
#
# Usage: hack/tools/btcd/build.sh
#
# The BTC faucet's tests run against a real node: btcd in regtest mode
# (server/chain/btcnode/btcdtest starts it). btcctl is for humans poking at
# such a node by hand; no test needs it.
#
# btcd is pinned in hack/tools/btcd/go.mod (a module of its own, so btcd's
# dependency graph never joins the root go.mod).
#
# Idempotent: if bin/btcd and bin/btcctl exist and report the pinned
# version, nothing is built. Progress goes to stderr; the only line on
# stdout is the absolute path of btcd, so a Makefile can use
# BTCD=$(hack/tools/btcd/build.sh).
set -euo pipefail

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "${script_dir}/../lib.sh"
target=${bin_dir}/btcd

version=$(pin github.com/btcsuite/btcd)
[[ -n "${version}" ]] || { log "cannot read the github.com/btcsuite/btcd pin from ${script_dir}/go.mod"; exit 1; }

# The module a binary was built from, read from its build info: btcctl's
# --version is stale upstream (v0.26.2's btcctl says 0.23.1-beta).
current() { # current NAME -> true if bin/NAME was built from the pinned btcd
	[[ -x "${bin_dir}/$1" ]] &&
		go version -m "${bin_dir}/$1" 2>/dev/null |
		grep -qE "^[[:space:]]+mod[[:space:]]+github.com/btcsuite/btcd[[:space:]]+${version}[[:space:]]"
}
if current btcd && current btcctl; then
	echo "${target}"
	exit 0
fi

mkdir -p "${bin_dir}"
tmp=$(mktemp -d "${bin_dir}/.btcd-build.XXXXXX")
trap 'rm -rf "${tmp}"' EXIT
log "btcd ${version}: building btcd and btcctl into ${bin_dir} (cold: ~1 min on 2 cores)"
start=${SECONDS}
(cd "${script_dir}" && go build -trimpath -ldflags="-s -w" -o "${tmp}/" \
	github.com/btcsuite/btcd github.com/btcsuite/btcd/cmd/btcctl) >&2
# atomic: never a half-written binary; btcd last, as it is what callers test for
mv -f "${tmp}/btcctl" "${bin_dir}/btcctl"
mv -f "${tmp}/btcd" "${target}"
log "btcd: built in $((SECONDS - start))s"
echo "${target}"
