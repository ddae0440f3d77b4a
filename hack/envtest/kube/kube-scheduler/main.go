// Command kube-scheduler is the upstream Kubernetes scheduler, built from the
// Go module proxy for the single-node cluster of `make e2e-cluster`. It
// mirrors k8s.io/kubernetes/cmd/kube-scheduler/scheduler.go.
package main

import (
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/stxfaucet/faucet-operator/hack/envtest/kube/internal/kubemain"
)

func main() {
	kubemain.Run(app.NewSchedulerCommand())
}
