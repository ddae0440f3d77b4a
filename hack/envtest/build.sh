#!/usr/bin/env bash
# Build the envtest control-plane binaries (kube-apiserver, etcd, kubectl)
# from the Go module proxy. See hack/envtest/README.md.
#
# Usage: hack/envtest/build.sh [--cluster] [OUTDIR]
#   OUTDIR defaults to <repo>/bin/k8s/$K8S_VERSION.
#   --cluster also builds what a node needs (kubelet, kube-proxy,
#   kube-controller-manager, kube-scheduler) for hack/cluster/cluster.sh.
#
# Idempotent: if every binary is already present (and was built for the
# versions below), nothing is built. Progress goes to stderr; the only line
# on stdout is the absolute output directory, so a Makefile can use
#   KUBEBUILDER_ASSETS=$(shell hack/envtest/build.sh)
set -euo pipefail

# Must match the pins in kube/go.mod and etcd/go.mod (checked below).
K8S_VERSION=1.37.0
ETCD_VERSION=3.7.3

cluster=false
if [[ ${1:-} == --cluster ]]; then
	cluster=true
	shift
fi
script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo_root=$(cd "${script_dir}/../.." && pwd)
outdir=${1:-${repo_root}/bin/k8s/${K8S_VERSION}}
mkdir -p "${outdir}"
outdir=$(cd "${outdir}" && pwd) # absolute: go test runs in the package dir

stamp_file="${outdir}/.envtest-build"
stamp="k8s=${K8S_VERSION} etcd=${ETCD_VERSION}"

# binary name -> "module dir:package"
binaries=(
	"kube-apiserver:kube:./kube-apiserver"
	"kubectl:kube:./kubectl"
	"etcd:etcd:."
)
if [[ ${cluster} == true ]]; then
	binaries+=(
		"kubelet:kube:./kubelet"
		"kube-proxy:kube:./kube-proxy"
		"kube-controller-manager:kube:./kube-controller-manager"
		"kube-scheduler:kube:./kube-scheduler"
	)
fi

log() { echo "build.sh: $*" >&2; }

all_present() {
	[[ -f "${stamp_file}" && "$(cat "${stamp_file}")" == "${stamp}" ]] || return 1
	local entry
	for entry in "${binaries[@]}"; do
		[[ -x "${outdir}/${entry%%:*}" ]] || return 1
	done
}

if all_present; then
	echo "${outdir}"
	exit 0
fi

# One build at a time per directory: `make test` starts the cluster's
# binaries in the background (hack/background.sh), and a later call waits
# for that build instead of starting its own, then finds them present.
exec 9>"${outdir}/.lock"
if ! flock -n 9; then
	log "another build into ${outdir} is running; waiting for it"
	flock 9
fi
if all_present; then
	echo "${outdir}"
	exit 0
fi

# Fail loudly if the version variables drifted from the go.mod pins.
grep -Eq "^(require)?[[:space:]]*k8s.io/kubernetes v${K8S_VERSION}\$" "${script_dir}/kube/go.mod" ||
	{ log "K8S_VERSION=${K8S_VERSION} does not match kube/go.mod"; exit 1; }
grep -Eq "^(require)?[[:space:]]*go.etcd.io/etcd/server/v3 v${ETCD_VERSION}\$" "${script_dir}/etcd/go.mod" ||
	{ log "ETCD_VERSION=${ETCD_VERSION} does not match etcd/go.mod"; exit 1; }

# A stamp from other versions means every binary is stale. A matching one
# stays while the missing binaries are built: the present ones are whole
# (each is moved in once linked), and a call that needs only them must not
# wait for this build.
if [[ -f "${stamp_file}" && "$(cat "${stamp_file}")" != "${stamp}" ]]; then
	log "versions changed ($(cat "${stamp_file}") -> ${stamp}); rebuilding all"
	for entry in "${binaries[@]}"; do rm -f "${outdir}/${entry%%:*}"; done
	rm -f "${stamp_file}"
fi

# Version info that upstream's hack/lib/version.sh injects; without it the
# binaries report v0.0.0-master. buildDate keeps its fixed default so the
# output is reproducible.
kube_ldflags="-s -w"
for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
	kube_ldflags+=" -X ${pkg}.gitVersion=v${K8S_VERSION}"
	kube_ldflags+=" -X ${pkg}.gitMajor=${K8S_VERSION%%.*}"
	minor=${K8S_VERSION#*.}
	kube_ldflags+=" -X ${pkg}.gitMinor=${minor%%.*}"
	kube_ldflags+=" -X ${pkg}.gitTreeState=clean"
done

export CGO_ENABLED=0
export GOWORK=off # the modules here are standalone, never part of a workspace
export GOFLAGS="-mod=readonly -buildvcs=false"

# One `go build` per module for everything missing: the go command then
# compiles the packages the binaries share once, in parallel.
for moddir_name in kube etcd; do
	pkgs=()
	names=()
	for entry in "${binaries[@]}"; do
		name=${entry%%:*}
		rest=${entry#*:}
		[[ ${rest%%:*} == "${moddir_name}" ]] || continue
		if [[ -x "${outdir}/${name}" ]]; then
			log "${name}: present"
			continue
		fi
		pkgs+=("${rest#*:}")
		names+=("${name}")
	done
	((${#pkgs[@]} > 0)) || continue
	moddir=${script_dir}/${moddir_name}
	ldflags="-s -w"
	[[ ${moddir_name} == kube ]] && ldflags=${kube_ldflags}
	tmp=$(mktemp -d "${outdir}/.build.XXXXXX")
	trap 'rm -rf "${tmp}"' EXIT
	log "${names[*]}: building into ${outdir} (cold: ~6.5 min for kube-apiserver alone on 2 cores)"
	start=${SECONDS}
	if ((${#pkgs[@]} == 1)); then
		(cd "${moddir}" && go build -trimpath -ldflags="${ldflags}" -o "${tmp}/${names[0]}" "${pkgs[0]}") >&2
	else
		(cd "${moddir}" && go build -trimpath -ldflags="${ldflags}" -o "${tmp}/" "${pkgs[@]}") >&2
	fi
	for name in "${names[@]}"; do
		mv -f "${tmp}/${name}" "${outdir}/${name}" # atomic: never a half-written binary
	done
	rm -rf "${tmp}"
	trap - EXIT
	log "${names[*]}: built in $((SECONDS - start))s"
done

echo "${stamp}" >"${stamp_file}"
echo "${outdir}"
