//go:build e2ecluster

package e2ecluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stxfaucet/faucet-operator/hack/doctour"
)

// TestReadmeKubernetesTour runs README.md's Kubernetes tour as written, on
// the real cluster, with kubectl on PATH as a reader has it: the image
// built and loaded, the operator installed with kustomize, the in-cluster
// devnet, a faucet of the reader's own keys, and the clean-up, each answer
// checked against the one the README shows. It runs after the user's path,
// which leaves the cluster empty, and leaves it empty too.
func TestReadmeKubernetesTour(t *testing.T) {
	e := loadEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	readme, err := os.ReadFile(filepath.Join(e.repo, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	tour, err := doctour.Tour(readme, "kubernetes")
	if err != nil {
		t.Fatal(err)
	}
	values, err := doctour.FreshValues()
	if err != nil {
		t.Fatal(err)
	}
	r := &doctour.Runner{
		Dir: e.repo,
		Env: append(os.Environ(),
			"PATH="+filepath.Dir(e.kubectl)+string(os.PathListSeparator)+os.Getenv("PATH"),
			// The cluster's containerd, which `make load-image` loads into
			// (hack/cluster/cluster.sh runs it on a socket of its own).
			"CONTAINERD_ADDRESS=/run/faucet-e2e/containerd.sock"),
		Logf:   t.Logf,
		Values: values,
	}
	defer func() {
		if err := r.Stop(); err != nil {
			t.Error(err)
		}
	}()
	// The tour's two FaucetServers claim faucet-data with no class: kind
	// provisions it; this cluster has no provisioner, so volumes wait for
	// the claims as an administrator would leave them.
	for _, n := range []string{"faucet-devnet", "faucet-testnet"} {
		tourVolume(t, ctx, e, n)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return // the tour cleaned up after itself
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		for _, args := range [][]string{
			{"delete", "namespace", "faucet-testnet", "faucet-devnet", "--ignore-not-found", "--wait", "--timeout", "2m"},
			{"delete", "-k", filepath.Join(e.repo, "config", "default"), "--ignore-not-found", "--wait", "--timeout", "2m"},
		} {
			if out, err := exec.CommandContext(ctx, e.kubectl, append([]string{"--kubeconfig", e.kubeconfig}, args...)...).CombinedOutput(); err != nil {
				t.Logf("clean-up: kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		}
	})
	for _, s := range tour {
		out, err := r.Run(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		if len(out) > 0 {
			t.Logf("  %s", strings.Join(doctour.Lines(out), "\n  "))
		}
	}

	// The tour ends with its clean-up: nothing of it is left.
	c := newClient(t, e.kubeconfig)
	poll(t, ctx, "the tour's namespaces gone", 3*time.Minute, func() error {
		for _, n := range []string{"faucet-devnet", "faucet-testnet", "faucet-operator-system"} {
			err := c.Get(ctx, client.ObjectKey{Name: n}, &corev1.Namespace{})
			switch {
			case err == nil:
				return fmt.Errorf("namespace %s is still there", n)
			case !apierrors.IsNotFound(err):
				return fmt.Errorf("namespace %s: %w", n, err)
			}
		}
		return nil
	})
}

// tourVolume makes a PersistentVolume pre-bound to the claim faucet-data
// of FaucetServer faucet in namespace, and removes it when the test ends.
func tourVolume(t *testing.T, ctx context.Context, e env, namespace string) {
	t.Helper()
	name := "tour-" + namespace
	dir := filepath.Join(e.state, "volumes", name)
	staticVolume(t, ctx, e, name, namespace, "faucet-data", dir)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		e.run(t, ctx, e.kubectl, "delete", "pv", name, "--ignore-not-found", "--wait", "--timeout", "1m")
		if err := os.RemoveAll(dir); err != nil {
			t.Error(err)
		}
	})
}
