#!/usr/bin/env bash
# Check the module's dependencies and the Go standard library it is built
# with against the Go vulnerability database, offline.
#
# Usage: hack/tools/vuln/check.sh [packages]   (default ./...)
#
# govulncheck and the database are pinned in hack/tools/vuln/go.mod (a
# module of its own): the database is the golang.org/x/vulndb module's
# OSV files, served by the Go module proxy like any module, indexed into
# bin/vulndb by the vulndb's own indexdb. No network beyond the module
# proxy is needed; a bump of the golang.org/x/vulndb pin is a bump of the
# database. Exit status: govulncheck's (3 when code calls a vulnerable
# function).
set -euo pipefail

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo_root=$(cd "${script_dir}/../../.." && pwd)
bin=${repo_root}/bin

log() { echo "vuln/check.sh: $*" >&2; }

export GOWORK=off # a standalone module, never part of a workspace
export GOFLAGS="-mod=readonly -buildvcs=false"

# `go list -m` reports no directory for a module not yet in the module
# cache (a fresh machine): download the pins first.
(cd "${script_dir}" && go mod download golang.org/x/vulndb golang.org/x/vuln)
vulndb_dir=$(cd "${script_dir}" && go list -m -f '{{.Dir}}' golang.org/x/vulndb)
if [[ -z ${vulndb_dir} || ! -d ${vulndb_dir}/data/osv ]]; then
	log "the vulnerability database golang.org/x/vulndb is not in the module cache (${vulndb_dir:-no directory})"
	exit 1
fi
vulndb_version=$(cd "${script_dir}" && go list -m -f '{{.Version}}' golang.org/x/vulndb)
vuln_version=$(cd "${script_dir}" && go list -m -f '{{.Version}}' golang.org/x/vuln)

stamp=${bin}/vulndb/.pins
# govulncheck must be built by the Go that builds the code it checks.
want="govulncheck ${vuln_version} vulndb ${vulndb_version} $(go env GOVERSION)"
if [[ ! -x ${bin}/govulncheck || ! -x ${bin}/indexdb || ! -f ${stamp} || "$(cat "${stamp}")" != "${want}" ]]; then
	log "building govulncheck ${vuln_version} and the database ${vulndb_version} (cold: ~1 min on 2 cores)"
	(cd "${script_dir}" && CGO_ENABLED=0 go build -trimpath -o "${bin}/govulncheck" golang.org/x/vuln/cmd/govulncheck) >&2
	(cd "${script_dir}" && CGO_ENABLED=0 go build -trimpath -o "${bin}/indexdb" golang.org/x/vulndb/cmd/indexdb) >&2
	rm -rf "${bin}/vulndb"
	"${bin}/indexdb" -vulns "${vulndb_dir}/data/osv" -out "${bin}/vulndb"
	echo "${want}" >"${stamp}"
fi

cd "${repo_root}"
export GOFLAGS="-buildvcs=false"
log "govulncheck against golang.org/x/vulndb ${vulndb_version}, $(go env GOVERSION)"
exec "${bin}/govulncheck" -db "file://${bin}/vulndb" "${@:-./...}"
