// Command kube-controller-manager is the upstream Kubernetes controller
// manager, built from the Go module proxy for the single-node cluster of
// `make e2e-cluster`. It mirrors
// k8s.io/kubernetes/cmd/kube-controller-manager/controller-manager.go.
package main

import (
	_ "time/tzdata" // for CronJob time zone support

	"k8s.io/kubernetes/cmd/kube-controller-manager/app"

	"github.com/stxfaucet/faucet-operator/hack/envtest/kube/internal/kubemain"
)

func main() {
	kubemain.Run(app.NewControllerManagerCommand())
}
