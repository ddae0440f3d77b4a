// Package charttest tests the Helm chart in charts/faucet-operator: helm lint
// --strict, values.schema.json, the rendered objects' semantics, a server-side
// dry run of every rendered object against a real kube-apiserver (envtest),
// and a helm install/upgrade/uninstall against it.
//
// It needs bin/helm (hack/tools/helm/build.sh, or $HELM) and the envtest
// binaries ($KUBEBUILDER_ASSETS, or bin/k8s/<version> from
// hack/envtest/build.sh), and fails, never skips, without them:
//
//	KUBEBUILDER_ASSETS=$(hack/envtest/build.sh) HELM=$(hack/tools/helm/build.sh) \
//		go test ./hack/charttest/ -count=1 -v
package charttest
