package charttest

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestHelmLifecycle runs the real helm install, upgrade and uninstall against
// an envtest API server (nothing runs the pods: there is no kubelet), to check
// what a dry run cannot: Helm's own handling of the CRD in templates/ and of
// helm.sh/resource-policy: keep, and the switch from cluster-wide to
// namespaced RBAC on upgrade.
func TestHelmLifecycle(t *testing.T) {
	c := startCluster(t)
	ctx := t.Context()
	for _, ns := range []string{releaseNamespace, "faucet-testnet", "faucet-devnet", "monitoring"} {
		if err := c.createNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	helmOn := func(t *testing.T, args ...string) (string, error) {
		t.Helper()
		return helm(t, append(args, "--kubeconfig", c.kubeconfig, "--namespace", releaseNamespace)...)
	}
	full := []string{"-f", "hack/charttest/testdata/values-full.yaml"}

	// Helm maps every object to its API before creating any, so a first
	// install that brings both the CRD and FaucetServers fails as a whole,
	// and leaves nothing behind; values.yaml documents this.
	t.Run("first install with faucetServers fails before creating anything", func(t *testing.T) {
		_, err := helmOn(t, append([]string{"install", releaseName, chartDir}, full...)...)
		if err == nil {
			t.Fatal("install succeeded: update the faucetServers note in values.yaml and NOTES.txt")
		}
		if !strings.Contains(err.Error(), "ensure CRDs are installed first") {
			t.Fatalf("unexpected error: %v", err)
		}
		if c.exists(t, &apiextensionsv1.CustomResourceDefinition{}, "", crdName) {
			t.Fatal("the failed install left the CRD behind")
		}
		if _, err := helmOn(t, "status", releaseName); err == nil {
			t.Fatal("the failed install left a release behind")
		}
	})

	t.Run("install", func(t *testing.T) {
		out, err := helmOn(t, "install", releaseName, chartDir)
		if err != nil {
			t.Fatal(err)
		}
		assertNotes(t, out,
			"kubectl -n faucet-system rollout status deployment/"+fullname,
			"kubectl -n faucet-system create secret generic faucet-keys --from-file=keys=faucet-keys",
			"kubectl -n faucet-system wait --for=condition=Ready fsrv/testnet --timeout=5m",
			"bound to the ClusterRole "+metricsReaderName,
		)
		if !c.exists(t, &apiextensionsv1.CustomResourceDefinition{}, "", crdName) {
			t.Error("no CRD after install")
		}
		if !c.exists(t, &appsv1.Deployment{}, releaseNamespace, fullname) {
			t.Error("no Deployment after install")
		}
		for _, name := range []string{managerRBACName, metricsAuthName, metricsReaderName} {
			if !c.exists(t, &rbacv1.ClusterRole{}, "", name) {
				t.Errorf("no ClusterRole %s after install", name)
			}
		}
	})

	t.Run("upgrade to watchNamespaces, a ServiceMonitor and FaucetServers", func(t *testing.T) {
		out, err := helmOn(t, append([]string{"upgrade", releaseName, chartDir}, full...)...)
		if err != nil {
			t.Fatal(err)
		}
		// The Secrets of the btc entry of the testnet FaucetServer's spec.assets.
		assertNotes(t, out,
			"kubectl -n faucet-testnet create secret generic faucet-btc --from-file=key=btc-key",
			"kubectl -n faucet-testnet create secret generic faucet-btc-rpc --from-literal=credentials='USER:PASSWORD'",
		)
		if c.exists(t, &rbacv1.ClusterRole{}, "", managerRBACName) {
			t.Error("the ClusterRole survived the switch to watchNamespaces")
		}
		for _, ns := range []string{"faucet-testnet", "faucet-devnet"} {
			if !c.exists(t, &rbacv1.Role{}, ns, managerRBACName) {
				t.Errorf("no manager Role in %s", ns)
			}
		}
		for _, key := range []client.ObjectKey{{Namespace: "faucet-testnet", Name: "testnet"}, {Namespace: "faucet-devnet", Name: "devnet"}} {
			if !c.exists(t, faucetServer(), key.Namespace, key.Name) {
				t.Errorf("no FaucetServer %s", key)
			}
		}
		if !c.exists(t, serviceMonitor(), "monitoring", fullname) {
			t.Error("no ServiceMonitor")
		}
		for _, kind := range []string{"PodMonitor", "PrometheusRule"} {
			if !c.exists(t, monitoringObject(kind), "monitoring", fullname+"-faucets") {
				t.Errorf("no %s", kind)
			}
		}
		if !c.exists(t, &corev1.ConfigMap{}, "monitoring", fullname+"-faucets-dashboard") {
			t.Error("no dashboard ConfigMap")
		}
	})

	t.Run("crds.enabled=false keeps the CRD and the FaucetServers", func(t *testing.T) {
		if _, err := helmOn(t, append([]string{"upgrade", releaseName, chartDir, "--set", "crds.enabled=false"}, full...)...); err != nil {
			t.Fatal(err)
		}
		if !c.exists(t, &apiextensionsv1.CustomResourceDefinition{}, "", crdName) {
			t.Fatal("the CRD was deleted despite helm.sh/resource-policy: keep")
		}
		if !c.exists(t, faucetServer(), "faucet-testnet", "testnet") {
			t.Error("FaucetServer testnet is gone")
		}
	})

	t.Run("uninstall keeps the CRD", func(t *testing.T) {
		// Back to a release that owns the CRD, so uninstall is what would delete it.
		if _, err := helmOn(t, "upgrade", releaseName, chartDir); err != nil {
			t.Fatal(err)
		}
		if _, err := helmOn(t, "uninstall", releaseName, "--wait"); err != nil {
			t.Fatal(err)
		}
		if !c.exists(t, &apiextensionsv1.CustomResourceDefinition{}, "", crdName) {
			t.Error("uninstall deleted the CRD despite helm.sh/resource-policy: keep")
		}
		if c.exists(t, &appsv1.Deployment{}, releaseNamespace, fullname) {
			t.Error("uninstall left the Deployment")
		}
	})

	t.Run("install with faucetServers once the CRD exists", func(t *testing.T) {
		out, err := helmOn(t, append([]string{"install", releaseName, chartDir}, full...)...)
		if err != nil {
			t.Fatal(err)
		}
		assertNotes(t, out,
			"watches FaucetServers in: faucet-testnet, faucet-devnet.",
			"kubectl -n faucet-testnet create secret generic faucet-keys --from-file=keys.txt=faucet-keys",
			"kubectl -n faucet-testnet create secret generic faucet-db-app --from-literal=uri='postgresql://USER:PASSWORD@HOST:5432/DB'",
			"kubectl -n faucet-testnet create secret generic faucet-api-tokens --from-file=tokens=api-tokens.txt",
			"kubectl -n faucet-testnet wait --for=condition=Ready fsrv/testnet --timeout=5m",
			"kubectl -n faucet-devnet create secret generic devnet-keys --from-file=keys=faucet-keys",
			"kubectl -n faucet-devnet wait --for=condition=Ready fsrv/devnet --timeout=5m",
		)
		if !c.exists(t, faucetServer(), "faucet-devnet", "devnet") {
			t.Error("no FaucetServer devnet")
		}
	})

	t.Run("upgrade with the in-cluster devnet", func(t *testing.T) {
		out, err := helmOn(t, append([]string{"upgrade", releaseName, chartDir}, append(full,
			"--set", "devnet.enabled=true", "--set", "devnet.namespace=faucet-devnet", "--set", "devnet.name=chains")...)...)
		if err != nil {
			t.Fatal(err)
		}
		assertNotes(t, out,
			"kubectl -n faucet-devnet wait --for=condition=Ready fsrv/chains --timeout=5m",
			"kubectl -n faucet-devnet port-forward svc/chains 3999:3999 &",
		)
		if !c.exists(t, faucetServer(), "faucet-devnet", "chains") {
			t.Error("no FaucetServer chains")
		}
		if !c.exists(t, &appsv1.Deployment{}, "faucet-devnet", "chains-node") {
			t.Error("no devnet Deployment chains-node")
		}
	})
}

// assertNotes checks that helm's output has NOTES.txt with these lines.
func assertNotes(t *testing.T, out string, want ...string) {
	t.Helper()
	_, notes, ok := strings.Cut(out, "\nNOTES:\n")
	if !ok {
		t.Fatalf("no NOTES in helm's output:\n%s", out)
	}
	for _, w := range want {
		if !strings.Contains(notes, w) {
			t.Errorf("NOTES lack %q:\n%s", w, notes)
		}
	}
}

// exists reports whether an object exists, failing the test on other errors.
func (c *cluster) exists(t *testing.T, obj client.Object, namespace, name string) bool {
	t.Helper()
	err := c.client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, obj)
	switch {
	case err == nil:
		return true
	case apierrors.IsNotFound(err):
		return false
	}
	t.Fatalf("getting %s %s/%s: %v", obj.GetObjectKind().GroupVersionKind().Kind, namespace, name, err)
	return false
}

func faucetServer() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("faucet.stxfaucet.dev/v1alpha1")
	u.SetKind("FaucetServer")
	return u
}

func serviceMonitor() *unstructured.Unstructured {
	return monitoringObject("ServiceMonitor")
}

// monitoringObject is an empty Prometheus Operator object of a kind.
func monitoringObject(kind string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("monitoring.coreos.com/v1")
	u.SetKind(kind)
	return u
}
