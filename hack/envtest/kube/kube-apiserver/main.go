// Command kube-apiserver is the upstream Kubernetes API server, built from the
// Go module proxy for use as an envtest control-plane binary. It mirrors
// k8s.io/kubernetes/cmd/kube-apiserver/apiserver.go.
package main

import (
	_ "time/tzdata" // for timeZone support in CronJob

	"k8s.io/kubernetes/cmd/kube-apiserver/app"

	"github.com/stxfaucet/faucet-operator/hack/envtest/kube/internal/kubemain"
)

func main() {
	kubemain.Run(app.NewAPIServerCommand())
}
