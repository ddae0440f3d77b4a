#!/usr/bin/env bash
# Make sure a Postgres server is installed for the tests (server/store/pgtest
# runs initdb and postgres from /usr/lib/postgresql/*/bin in a temporary
# directory; no service is started here).
#
# Quiet and quick when Postgres is already there. Otherwise, as root, it
# installs Debian's postgresql package; as another user it prints the
# command to run and fails.
set -euo pipefail

have_postgres() {
	local d
	for d in /usr/lib/postgresql/*/bin; do
		if [[ -x "$d/initdb" && -x "$d/postgres" ]]; then
			return 0
		fi
	done
	return 1
}

if have_postgres; then
	exit 0
fi

# shellcheck source=hack/apt-install.sh
source "$(dirname "${BASH_SOURCE[0]}")/apt-install.sh"
apt_install postgresql "the store tests need it (no initdb under /usr/lib/postgresql/*/bin)" \
	"install the Postgres server binaries (initdb, postgres) by hand."

if ! have_postgres; then
	echo "the postgresql package installed no initdb under /usr/lib/postgresql/*/bin" >&2
	exit 1
fi
echo "Postgres installed: $(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)" >&2
