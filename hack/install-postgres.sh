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

install=(apt-get install -y --no-install-recommends postgresql)
if [[ $(id -u) -ne 0 ]]; then
	echo "Postgres is not installed (no initdb under /usr/lib/postgresql/*/bin); the store tests need it." >&2
	echo "Install it as root:  apt-get update && ${install[*]}" >&2
	exit 1
fi
if ! command -v apt-get >/dev/null; then
	echo "Postgres is not installed and apt-get is not available: install the Postgres server binaries (initdb, postgres) by hand." >&2
	exit 1
fi

echo "Installing Postgres (Debian package postgresql)..." >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# The package's post-install creates and starts a cluster where it can;
# the tests do not use it, and in a container without systemd it is simply
# not started.
"${install[@]}" -qq >/dev/null

if ! have_postgres; then
	echo "the postgresql package installed no initdb under /usr/lib/postgresql/*/bin" >&2
	exit 1
fi
echo "Postgres installed: $(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)" >&2
