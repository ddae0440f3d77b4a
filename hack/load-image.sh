#!/usr/bin/env bash
# `make load-image`: put the image archive `make image` wrote into the
# cluster that kubectl's current context names, so its nodes run it without
# pulling (the default tag is not published). kind, minikube and k3d load it
# their way; any other cluster whose node is this machine gets it through
# containerd's own client (ctr, or k3s ctr), in the k8s.io namespace the
# kubelet reads. Elsewhere: push it to a registry (docs/kubernetes.md).
#
# Usage: hack/load-image.sh ARCHIVE
set -euo pipefail

archive=${1:?usage: $0 ARCHIVE (make image writes bin/faucet-image.tar)}
[[ -f ${archive} ]] || { echo "load-image: ${archive} does not exist: run make image first" >&2; exit 1; }

ctx=$(kubectl config current-context 2>/dev/null) || {
	echo "load-image: kubectl has no current context: point it at your cluster first" >&2
	exit 1
}
sock=${CONTAINERD_ADDRESS:-/run/containerd/containerd.sock}

case ${ctx} in
kind-*)
	set -x
	kind load image-archive "${archive}" --name "${ctx#kind-}"
	;;
minikube)
	set -x
	minikube image load "${archive}"
	;;
k3d-*)
	set -x
	k3d image import "${archive}" --cluster "${ctx#k3d-}"
	;;
*)
	if command -v k3s >/dev/null && [[ -S /run/k3s/containerd/containerd.sock ]]; then
		set -x
		k3s ctr --namespace k8s.io images import "${archive}"
	elif command -v ctr >/dev/null && [[ -S ${sock} ]]; then
		set -x
		ctr --address "${sock}" --namespace k8s.io images import "${archive}"
	else
		cat >&2 <<-MSG
			load-image: context ${ctx} is not kind, minikube or k3d, and this machine runs no
			containerd of a cluster node (${sock}). Push the image to a registry your
			cluster pulls from instead, e.g. with Docker:
			  docker load -i ${archive}
			  docker tag ghcr.io/stxfaucet/faucet-operator:<version> REGISTRY/faucet-operator:<version>
			  docker push REGISTRY/faucet-operator:<version>
			and run that image (docs/kubernetes.md#the-image).
		MSG
		exit 1
	fi
	;;
esac
