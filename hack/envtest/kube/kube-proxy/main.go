// Command kube-proxy is the upstream Kubernetes service proxy, built from the
// Go module proxy for the single-node cluster of `make e2e-cluster`. It
// mirrors k8s.io/kubernetes/cmd/kube-proxy/proxy.go.
package main

import (
	"k8s.io/kubernetes/cmd/kube-proxy/app"

	"github.com/stxfaucet/faucet-operator/hack/envtest/kube/internal/kubemain"
)

func main() {
	kubemain.Run(app.NewProxyCommand())
}
