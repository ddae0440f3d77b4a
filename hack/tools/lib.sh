# Sourced by hack/tools/*/build.sh, each of which builds a tool pinned in a
# go.mod of its own (so the tool's dependency graph never joins the root
# go.mod) into <repo>/bin. Progress goes to stderr; the only line a
# build.sh prints on stdout is the absolute path of what it built.
#
# The script sets script_dir (its own directory, the tool's module) before
# sourcing this, and target (the binary in bin_dir) before calling
# build_once or go_build.

repo_root=$(cd "${script_dir}/../../.." && pwd)
bin_dir=${repo_root}/bin

log() { echo "build.sh: $*" >&2; }

export GOWORK=off # a standalone module, never part of a workspace
export GOFLAGS="-mod=readonly -buildvcs=false"
export CGO_ENABLED=0

# The pins are read from go.mod so there is exactly one place to bump.
# `go mod edit -json` reads go.mod only: no network, no module loading.
mod_json=$(cd "${script_dir}" && go mod edit -json)
pin() { # pin MODULE -> its required version, empty if go.mod has none
	{ grep -A1 "\"Path\": \"$1\"" <<<"${mod_json}" || true; } | sed -n 's/.*"Version": "\(.*\)".*/\1/p'
}

# build_once prints target and exits when the script's built function says
# target is the pinned version; else it returns holding target's lock. One
# build at a time: `make test` starts helm and promtool in the background
# (hack/background.sh), and a call meanwhile waits for that build, then
# finds it built.
build_once() {
	if built; then
		echo "${target}"
		exit 0
	fi
	mkdir -p "$(dirname "${target}")"
	exec 9>"${target}.lock"
	flock 9
	if built; then
		echo "${target}"
		exit 0
	fi
}

# go_build NAME GO_BUILD_ARGS... builds in the tool's module into target
# through a temporary file (atomic: never a half-written binary), logs how
# long it took and prints target.
go_build() {
	local name=$1 start=${SECONDS}
	shift
	mkdir -p "$(dirname "${target}")"
	tmp="${target}.tmp.$$"
	trap 'rm -f "${tmp}"' EXIT
	(cd "${script_dir}" && go build -trimpath -o "${tmp}" "$@") >&2
	mv -f "${tmp}" "${target}"
	trap - EXIT
	log "${name}: built in $((SECONDS - start))s"
	echo "${target}"
}
