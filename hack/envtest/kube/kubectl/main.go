// Command kubectl is the upstream Kubernetes CLI, built from the Go module
// proxy so scripts can talk to an envtest control plane. It mirrors
// k8s.io/kubernetes/cmd/kubectl/kubectl.go.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"

	// Register client auth plugins (exec, oidc, ...).
	_ "k8s.io/client-go/plugin/pkg/client/auth"
)

func main() {
	// Set verbosity before command construction so klog honours -v during
	// plugin handling and kuberc parsing, as upstream does.
	logs.GlogSetter(cmd.GetLogVerbosity(os.Args)) //nolint:errcheck
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		util.CheckErr(err)
	}
}
