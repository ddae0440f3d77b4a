#!/usr/bin/env bash
# Build the pinned helm CLI from the Go module proxy into <repo>/bin/helm.
#
# Usage: hack/tools/helm/build.sh
#
# helm is pinned in hack/tools/helm/go.mod (a module of its own, so helm's
# large dependency graph never joins the root go.mod). The build sets the
# same ldflags as helm's release Makefile: the version, and the Kubernetes
# version of the client-go helm was built with, which is what `helm lint`
# and `helm template` assume the cluster runs (chartutil's default would
# otherwise be v1.20, and a chart's kubeVersion: ">=1.30.0-0" would fail).
#
# Idempotent: if bin/helm exists and reports the pinned version, nothing is
# built. Progress goes to stderr; the only line on stdout is the absolute
# path of the binary, so a Makefile can use HELM=$(shell hack/tools/helm/build.sh).
set -euo pipefail

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "${script_dir}/../lib.sh"
target=${bin_dir}/helm

helm_version=$(pin helm.sh/helm/v3)
client_go_version=$(pin k8s.io/client-go)
[[ -n "${helm_version}" && -n "${client_go_version}" ]] ||
	{ log "cannot read the helm.sh/helm/v3 and k8s.io/client-go pins from ${script_dir}/go.mod"; exit 1; }

built() {
	[[ -x "${target}" ]] &&
		[[ "$("${target}" version --template '{{.Version}}' 2>/dev/null || true)" == "${helm_version}" ]]
}
build_once

# client-go v0.X.Y is Kubernetes 1.X.
k8s_minor=$(cut -d. -f2 <<<"${client_go_version}")
ldflags="-s -w"
ldflags+=" -X helm.sh/helm/v3/internal/version.version=${helm_version}"
ldflags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
	ldflags+=" -X ${pkg}.k8sVersionMajor=1 -X ${pkg}.k8sVersionMinor=${k8s_minor}"
done

log "helm ${helm_version} (Kubernetes 1.${k8s_minor}): building into ${target} (cold: ~4 min on 2 cores)"
go_build helm -ldflags="${ldflags}" helm.sh/helm/v3/cmd/helm
