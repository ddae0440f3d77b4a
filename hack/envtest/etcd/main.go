// Command etcd is the upstream etcd server, built from the Go module proxy for
// use as an envtest control-plane binary. It mirrors go.etcd.io/etcd/v3's
// main.go.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
