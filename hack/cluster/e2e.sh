#!/usr/bin/env bash
# `make e2e-cluster`: bring up the real single-node cluster, import our image,
# run hack/e2ecluster inside the cluster's network namespace, and tear it all
# down whatever happened, failing if anything of it is left on the machine.
#
# Needs (the make target builds them): bin/faucet-image.tar tagged $IMG,
# bin/e2e-tools.tar (the pause and httpget image), the cluster binaries in
# bin/k8s/<version>, $HELM, and hack/e2e-client's npm packages.
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "${repo_root}"
cluster=hack/cluster/cluster.sh
: "${IMG:?the image reference the chart runs (make passes it)}"
: "${HELM:?the helm binary (make passes it)}"
TOOLS_IMAGE=localhost/faucet-e2e/pause:1

finish() {
	local rc=$? t=${SECONDS}
	if ((rc != 0)) && [[ -e /run/netns/faucet-e2e ]]; then
		echo "e2e-cluster: failed; the cluster as it was (component logs in bin/cluster-logs):" >&2
		"${cluster}" exec "${repo_root}/bin/k8s/1.37.0/kubectl" get nodes,pods,deploy,svc,pvc,pv,fsrv -A -o wide >&2 || true
		"${cluster}" exec "${repo_root}/bin/k8s/1.37.0/kubectl" get events -A --sort-by=.lastTimestamp >&2 || true
	fi
	"${cluster}" down || rc=1
	"${cluster}" check-clean || rc=1
	echo "e2e-cluster: teardown took $((SECONDS - t))s; exit ${rc}" >&2
	exit "${rc}"
}

# Compile the test before anything starts, so a build error costs nothing.
go test -c -tags e2ecluster -o bin/e2ecluster.test ./hack/e2ecluster

trap finish EXIT
t=${SECONDS}
PAUSE_ARCHIVE=bin/e2e-tools.tar "${cluster}" up
"${cluster}" import bin/faucet-image.tar
echo "e2e-cluster: cluster up with our image in $((SECONDS - t))s" >&2

t=${SECONDS}
state=$("${cluster}" kubeconfig)
"${cluster}" exec env \
	E2E_REPO="${repo_root}" \
	E2E_KUBECTL="${repo_root}/bin/k8s/1.37.0/kubectl" \
	E2E_HELM="${HELM}" \
	E2E_IMAGE="${IMG}" \
	E2E_TOOLS_IMAGE="${TOOLS_IMAGE}" \
	E2E_STATE="${state%/pki/*}" \
	bin/e2ecluster.test -test.v -test.timeout 25m
echo "e2e-cluster: the user's path took $((SECONDS - t))s" >&2
