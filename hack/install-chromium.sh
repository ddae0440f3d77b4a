#!/usr/bin/env bash
# Make sure Debian's chromium is installed for the page tests (hack/pagetest
# drives it through playwright-core; no browser is downloaded from a CDN).
#
# Quiet and quick when /usr/bin/chromium is already there (or CHROMIUM names
# another executable). Otherwise, as root, it installs Debian's chromium
# package; as another user it prints the command to run and fails.
set -euo pipefail

chromium=${CHROMIUM:-/usr/bin/chromium}
if [[ -x "$chromium" ]]; then
	exit 0
fi

install=(apt-get install -y --no-install-recommends chromium)
if [[ $(id -u) -ne 0 ]]; then
	echo "chromium is not installed ($chromium is missing); the page tests need it." >&2
	echo "Install it as root:  apt-get update -qq && ${install[*]}" >&2
	exit 1
fi
if ! command -v apt-get >/dev/null; then
	echo "chromium is not installed and apt-get is not available: install a Chromium build by hand and set CHROMIUM to its path." >&2
	exit 1
fi

echo "Installing chromium (Debian package chromium)..." >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
"${install[@]}" -qq >/dev/null

if [[ ! -x "$chromium" ]]; then
	echo "the chromium package installed no $chromium" >&2
	exit 1
fi
echo "chromium installed: $("$chromium" --version 2>/dev/null || echo "$chromium")" >&2
