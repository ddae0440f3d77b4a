// Command kubelet is the upstream Kubernetes node agent, built from the Go
// module proxy for the single-node cluster of `make e2e-cluster`. It mirrors
// k8s.io/kubernetes/cmd/kubelet/kubelet.go.
package main

import (
	"context"

	"k8s.io/kubernetes/cmd/kubelet/app"

	"github.com/stxfaucet/faucet-operator/hack/envtest/kube/internal/kubemain"
)

func main() {
	kubemain.Run(app.NewKubeletCommand(context.Background()))
}
