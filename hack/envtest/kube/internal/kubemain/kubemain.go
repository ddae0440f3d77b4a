// Package kubemain is what every upstream Kubernetes component's main
// (cmd/kube-apiserver, kube-controller-manager, kube-proxy,
// kube-scheduler, kubelet) does besides building its command: the blank
// imports registering the JSON log format behind --logging-format=json
// and the client-go and version metrics on /metrics, and running the
// command through component-base's cli. Without the registrations these
// binaries would refuse flags and lack metrics that upstream's have, so
// each main here imports this package to mirror upstream.
package kubemain

import (
	"os"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format registration
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go prometheus plugins
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric registration
)

// Run runs command as upstream's main does and exits with its code.
func Run(command *cobra.Command) {
	os.Exit(cli.Run(command))
}
