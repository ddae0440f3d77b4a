# Sourced by the hack/install-*.sh scripts: apt_install PACKAGE PURPOSE HINT
# installs Debian's PACKAGE as root. As another user, or without apt-get, it
# prints what to do (PURPOSE says what needs it, HINT what to do without
# apt) and exits 1.
apt_install() {
	local pkg=$1 purpose=$2 hint=$3
	local install=(apt-get install -y --no-install-recommends "$pkg")
	if [[ $(id -u) -ne 0 ]]; then
		echo "$pkg is not installed; $purpose." >&2
		echo "Install it as root:  apt-get update -qq && ${install[*]}" >&2
		exit 1
	fi
	if ! command -v apt-get >/dev/null; then
		echo "$pkg is not installed and apt-get is not available: $hint" >&2
		exit 1
	fi
	echo "Installing $pkg (Debian package $pkg)..." >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	# A package's post-install may try to start a service; in a container
	# without systemd it is simply not started.
	"${install[@]}" -qq >/dev/null
}
