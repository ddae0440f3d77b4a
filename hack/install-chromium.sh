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

# shellcheck source=hack/apt-install.sh
source "$(dirname "${BASH_SOURCE[0]}")/apt-install.sh"
apt_install chromium "the page tests need it ($chromium is missing)" \
	"install a Chromium build by hand and set CHROMIUM to its path."

if [[ ! -x "$chromium" ]]; then
	echo "the chromium package installed no $chromium" >&2
	exit 1
fi
echo "chromium installed: $("$chromium" --version 2>/dev/null || echo "$chromium")" >&2
