// Package charttest tests the Helm chart in charts/faucet-operator: helm lint
// --strict, values.schema.json, the rendered objects' semantics, a server-side
// dry run of every rendered object against a real kube-apiserver (envtest),
// a helm install/upgrade/uninstall against it, and the alerts and dashboard.
//
// The monitoring tests render the PrometheusRule and run promtool check
// rules and promtool test rules on it (testdata/alerts/), and check that the
// alerts and the Grafana dashboard only read metrics the faucet exports
// (gathered from server.NewMetrics).
//
// It needs bin/helm (hack/tools/helm/build.sh, or $HELM), bin/promtool
// (hack/tools/promtool/build.sh, or $PROMTOOL) and the envtest binaries
// ($KUBEBUILDER_ASSETS, or bin/k8s/<version> from hack/envtest/build.sh),
// and fails, never skips, without them:
//
//	KUBEBUILDER_ASSETS=$(hack/envtest/build.sh) HELM=$(hack/tools/helm/build.sh) \
//		PROMTOOL=$(hack/tools/promtool/build.sh) go test ./hack/charttest/ -count=1 -v
package charttest
