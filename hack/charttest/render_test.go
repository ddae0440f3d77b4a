package charttest

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

const (
	crdName = "faucetservers.faucet.stxfaucet.dev"

	// The object names of release "faucet" (the fullname is release-chart).
	fullname           = "faucet-faucet-operator"
	managerRBACName    = fullname + "-manager"
	leaderElectionName = fullname + "-leader-election"
	metricsAuthName    = fullname + "-metrics-auth"
	metricsReaderName  = fullname + "-metrics-reader"
)

// TestRenderDefault checks the objects of the default values.
func TestRenderDefault(t *testing.T) {
	objs := render(t)

	t.Run("cluster-wide RBAC with config/rbac/role.yaml's rules", func(t *testing.T) {
		crs := byName(find(objs, "ClusterRole"))
		if got := slices.Sorted(maps.Keys(crs)); !slices.Equal(got, []string{managerRBACName, metricsAuthName, metricsReaderName}) {
			t.Fatalf("ClusterRoles %v, want the manager's and the metrics ones", got)
		}
		assertRules(t, crs[managerRBACName], "config/rbac/role.yaml")
		crbs := byName(find(objs, "ClusterRoleBinding"))
		if got := slices.Sorted(maps.Keys(crbs)); !slices.Equal(got, []string{managerRBACName, metricsAuthName}) {
			t.Fatalf("ClusterRoleBindings %v, want the manager's and metrics-auth (metrics-reader is bound by readerSubjects)", got)
		}
		assertBinding(t, crbs[managerRBACName], "ClusterRole", managerRBACName, fullname)
	})

	t.Run("metrics RBAC as config/rbac's", func(t *testing.T) {
		crs := byName(find(objs, "ClusterRole"))
		assertRules(t, crs[metricsAuthName], "config/rbac/metrics_auth_role.yaml")
		assertRules(t, crs[metricsReaderName], "config/rbac/metrics_reader_role.yaml")
		assertBinding(t, byName(find(objs, "ClusterRoleBinding"))[metricsAuthName], "ClusterRole", metricsAuthName, fullname)
	})

	t.Run("leader election Role in the release namespace only", func(t *testing.T) {
		roles := find(objs, "Role")
		if len(roles) != 1 || roles[0].GetName() != leaderElectionName || roles[0].GetNamespace() != releaseNamespace {
			t.Fatalf("Roles %v, want only %s/%s", names(roles), releaseNamespace, leaderElectionName)
		}
		assertRules(t, roles[0], "config/rbac/leader_election_role.yaml")
		rbs := find(objs, "RoleBinding")
		if len(rbs) != 1 {
			t.Fatalf("RoleBindings %v, want one", names(rbs))
		}
		assertBinding(t, rbs[0], "Role", leaderElectionName, fullname)
	})

	t.Run("the chart owns the leader election Lease", func(t *testing.T) {
		leases := find(objs, "Lease")
		if len(leases) != 1 || leases[0].GetName() != fullname+".faucet.stxfaucet.dev" || leases[0].GetNamespace() != releaseNamespace {
			t.Fatalf("Leases %v, want %s/%s.faucet.stxfaucet.dev, the manager's --leader-election-id", names(leases), releaseNamespace, fullname)
		}
		if _, ok := leases[0].Object["spec"]; ok {
			t.Errorf("the Lease has a spec: its holder is the manager's to write, never the chart's")
		}
	})

	t.Run("CRD is config/crd/bases' with the keep annotation", func(t *testing.T) {
		crds := find(objs, "CustomResourceDefinition")
		if len(crds) != 1 {
			t.Fatalf("CRDs %v, want one", names(crds))
		}
		crd := crds[0]
		want := readYAML(t, "config/crd/bases/faucet.stxfaucet.dev_faucetservers.yaml")
		wantMeta := want["metadata"].(map[string]any)
		if crd.GetName() != wantMeta["name"] {
			t.Errorf("CRD name %q, want %q", crd.GetName(), wantMeta["name"])
		}
		if !reflect.DeepEqual(crd.Object["spec"], want["spec"]) {
			t.Errorf("CRD spec differs from config/crd/bases: run hack/sync-chart.sh")
		}
		if got := crd.GetAnnotations()["helm.sh/resource-policy"]; got != "keep" {
			t.Errorf("CRD helm.sh/resource-policy %q, want keep", got)
		}
		for k, v := range wantMeta["annotations"].(map[string]any) {
			if crd.GetAnnotations()[k] != v {
				t.Errorf("CRD annotation %s=%q, want controller-gen's %q", k, crd.GetAnnotations()[k], v)
			}
		}
	})

	t.Run("manager flags", func(t *testing.T) {
		d := one(t, objs, "Deployment")
		args := containerArgs(t, d)
		image := fmt.Sprintf("ghcr.io/stxfaucet/faucet-operator:%s", chartAppVersion(t))
		for _, want := range []string{
			"manager",
			"--metrics-bind-address=:8443",
			"--metrics-secure=true",
			"--health-probe-bind-address=:8081",
			"--leader-elect=true",
			"--leader-election-id=" + fullname + ".faucet.stxfaucet.dev",
			"--leader-election-namespace=" + releaseNamespace,
			"--leader-election-create-lease=false", // the chart's Lease below
			"--server-image=" + image,              // the manager's own image
		} {
			if !slices.Contains(args, want) {
				t.Errorf("args %q lack %q", args, want)
			}
		}
		if args[0] != "manager" {
			t.Errorf("first arg %q, want the manager subcommand", args[0])
		}
		if hasPrefix(args, "--watch-namespaces") || hasPrefix(args, "--metrics-cert-dir") {
			t.Errorf("args %q watch namespaces or name a metrics certificate by default", args)
		}
		if got := nested(t, d, "spec", "template", "spec", "containers", 0, "image"); got != image {
			t.Errorf("image %v, want %s (the chart's appVersion)", got, image)
		}
	})

	t.Run("restricted security context and probes", func(t *testing.T) {
		d := one(t, objs, "Deployment")
		pod := nested(t, d, "spec", "template", "spec")
		for path, want := range map[string]any{
			"securityContext.runAsNonRoot":                          true,
			"securityContext.seccompProfile.type":                   "RuntimeDefault",
			"containers.0.securityContext.runAsNonRoot":             true,
			"containers.0.securityContext.readOnlyRootFilesystem":   true,
			"containers.0.securityContext.allowPrivilegeEscalation": false,
			"containers.0.securityContext.capabilities.drop.0":      "ALL",
			"containers.0.securityContext.seccompProfile.type":      "RuntimeDefault",
			"containers.0.livenessProbe.httpGet.path":               "/healthz",
			"containers.0.readinessProbe.httpGet.path":              "/readyz",
			"containers.0.livenessProbe.httpGet.port":               "health",
			"containers.0.ports.1.containerPort":                    int64(8081),
			"containers.0.ports.0.name":                             "metrics",
			"containers.0.ports.0.containerPort":                    int64(8443),
			"containers.0.resources.requests.memory":                "64Mi",
		} {
			got := dig(pod, strings.Split(path, ".")...)
			if f, ok := got.(float64); ok {
				got = int64(f)
			}
			if got != want {
				t.Errorf("pod %s = %v, want %v", path, got, want)
			}
		}
	})

	t.Run("metrics Service selects the manager pods", func(t *testing.T) {
		svc := one(t, objs, "Service")
		d := one(t, objs, "Deployment")
		selector := nested(t, svc, "spec", "selector").(map[string]any)
		podLabels := nested(t, d, "spec", "template", "metadata", "labels").(map[string]any)
		for k, v := range selector {
			if podLabels[k] != v {
				t.Errorf("Service selects %s=%v, pod label is %v", k, v, podLabels[k])
			}
		}
		if got := nested(t, svc, "spec", "ports", 0, "targetPort"); got != "metrics" {
			t.Errorf("Service targetPort %v, want metrics", got)
		}
		if got := nested(t, svc, "spec", "ports", 0, "port"); got != float64(8443) && got != int64(8443) {
			t.Errorf("Service port %v, want 8443", got)
		}
	})

	t.Run("one replica: no anti-affinity and no PodDisruptionBudget", func(t *testing.T) {
		if got := dig(one(t, objs, "Deployment").Object, "spec", "template", "spec", "affinity"); got != nil {
			t.Errorf("affinity %v with one replica", got)
		}
		if got := find(objs, "PodDisruptionBudget"); len(got) != 0 {
			t.Errorf("PodDisruptionBudgets %v with one replica", names(got))
		}
	})

	t.Run("no ServiceMonitor, PodMonitor, PrometheusRule, dashboard, NetworkPolicy or FaucetServer by default", func(t *testing.T) {
		for _, kind := range []string{"ServiceMonitor", "PodMonitor", "PrometheusRule", "ConfigMap", "NetworkPolicy", "FaucetServer"} {
			if got := find(objs, kind); len(got) != 0 {
				t.Errorf("%s objects %v by default", kind, names(got))
			}
		}
	})

	t.Run("every object has the release labels and an explicit namespace when namespaced", func(t *testing.T) {
		assertReleaseLabels(t, objs)
	})
}

// TestRenderFull checks the objects of values-full.yaml.
func TestRenderFull(t *testing.T) {
	objs := render(t, "-f", "hack/charttest/testdata/values-full.yaml")
	watched := []string{"faucet-testnet", "faucet-devnet"}
	const sa = "faucet-manager"

	// TokenReviews, SubjectAccessReviews and /metrics exist only
	// cluster-wide: the metrics RBAC stays cluster-scoped.
	t.Run("no cluster-scoped RBAC but the metrics' with watchNamespaces", func(t *testing.T) {
		crs := byName(find(objs, "ClusterRole"))
		if got := slices.Sorted(maps.Keys(crs)); !slices.Equal(got, []string{metricsAuthName, metricsReaderName}) {
			t.Errorf("ClusterRoles %v with watchNamespaces, want only the metrics ones", got)
		}
		crbs := byName(find(objs, "ClusterRoleBinding"))
		if got := slices.Sorted(maps.Keys(crbs)); !slices.Equal(got, []string{metricsAuthName, metricsReaderName}) {
			t.Fatalf("ClusterRoleBindings %v with watchNamespaces, want only the metrics ones", got)
		}
		assertBinding(t, crbs[metricsAuthName], "ClusterRole", metricsAuthName, sa)
		want := []any{map[string]any{"kind": "ServiceAccount", "name": "kube-prometheus-stack-prometheus", "namespace": "monitoring"}}
		if got := crbs[metricsReaderName].Object["subjects"]; !reflect.DeepEqual(got, want) {
			t.Errorf("metrics-reader subjects %v, want metrics.readerSubjects %v", got, want)
		}
	})

	t.Run("the metrics certificate Secret is mounted and named", func(t *testing.T) {
		d := one(t, objs, "Deployment")
		const dir = "/etc/faucet-operator/metrics-certs"
		if args := containerArgs(t, d); !slices.Contains(args, "--metrics-cert-dir="+dir) {
			t.Errorf("args %q lack --metrics-cert-dir=%s", args, dir)
		}
		pod := nested(t, d, "spec", "template", "spec")
		for path, want := range map[string]any{
			"volumes.0.secret.secretName":           "faucet-operator-metrics-cert",
			"volumes.0.secret.items.0.path":         "tls.crt",
			"volumes.0.secret.items.1.path":         "tls.key",
			"containers.0.volumeMounts.0.mountPath": dir,
			"containers.0.volumeMounts.0.readOnly":  true,
		} {
			if got := dig(pod, strings.Split(path, ".")...); got != want {
				t.Errorf("pod %s = %v, want %v", path, got, want)
			}
		}
	})

	t.Run("the user's affinity replaces the default anti-affinity", func(t *testing.T) {
		affinity := nested(t, one(t, objs, "Deployment"), "spec", "template", "spec", "affinity").(map[string]any)
		if _, ok := affinity["podAntiAffinity"]; ok || affinity["nodeAffinity"] == nil {
			t.Errorf("affinity %v, want values-full.yaml's nodeAffinity only", affinity)
		}
	})

	t.Run("PodDisruptionBudget of the replicas", func(t *testing.T) {
		pdb := one(t, objs, "PodDisruptionBudget")
		if got := nested(t, pdb, "spec", "maxUnavailable"); got != "50%" {
			t.Errorf("maxUnavailable %v, want 50%%", got)
		}
		assertSelectsManager(t, pdb, nested(t, pdb, "spec", "selector", "matchLabels").(map[string]any), one(t, objs, "Deployment"))
	})

	t.Run("NetworkPolicy admits the metrics port from metricsFrom and extraIngress", func(t *testing.T) {
		np := one(t, objs, "NetworkPolicy")
		assertSelectsManager(t, np, nested(t, np, "spec", "podSelector", "matchLabels").(map[string]any), one(t, objs, "Deployment"))
		for path, want := range map[string]any{
			"policyTypes.0":          "Ingress",
			"ingress.0.ports.0.port": "metrics",
			"ingress.1.ports.0.port": "health",
		} {
			if got := dig(nested(t, np, "spec"), strings.Split(path, ".")...); got != want {
				t.Errorf("NetworkPolicy spec.%s = %v, want %v", path, got, want)
			}
		}
		from := nested(t, np, "spec", "ingress", 0, "from", 0, "namespaceSelector", "matchLabels").(map[string]any)
		if from["kubernetes.io/metadata.name"] != "monitoring" {
			t.Errorf("metrics from %v, want the monitoring namespace", from)
		}
		if got := dig(nested(t, np, "spec"), "egress"); got != nil {
			t.Errorf("egress rules %v: the manager's egress is left open", got)
		}
	})

	t.Run("one manager Role and RoleBinding per watched namespace", func(t *testing.T) {
		roles := map[string]*unstructured.Unstructured{}
		for _, r := range find(objs, "Role") {
			if r.GetName() != managerRBACName {
				continue
			}
			if _, dup := roles[r.GetNamespace()]; dup {
				t.Errorf("two manager Roles in %s", r.GetNamespace())
			}
			roles[r.GetNamespace()] = r
		}
		if got := slices.Sorted(maps.Keys(roles)); !slices.Equal(got, slices.Sorted(slices.Values(watched))) {
			t.Fatalf("manager Roles in %v, want one in each of %v", got, watched)
		}
		for _, r := range roles {
			assertRules(t, r, "config/rbac/role.yaml")
		}
		var bound []string
		for _, rb := range find(objs, "RoleBinding") {
			if rb.GetName() == managerRBACName {
				assertBinding(t, rb, "Role", managerRBACName, sa)
				bound = append(bound, rb.GetNamespace())
			}
		}
		if !slices.Equal(slices.Sorted(slices.Values(bound)), slices.Sorted(slices.Values(watched))) {
			t.Errorf("manager RoleBindings in %v, want %v", bound, watched)
		}
	})

	t.Run("leader election Role in the release namespace", func(t *testing.T) {
		var found bool
		for _, r := range find(objs, "Role") {
			if r.GetName() == leaderElectionName {
				found = true
				if r.GetNamespace() != releaseNamespace {
					t.Errorf("leader election Role in %s, want %s", r.GetNamespace(), releaseNamespace)
				}
			}
		}
		if !found {
			t.Errorf("no leader election Role")
		}
	})

	t.Run("manager flags", func(t *testing.T) {
		args := containerArgs(t, one(t, objs, "Deployment"))
		for _, want := range []string{
			"--watch-namespaces=faucet-testnet,faucet-devnet",
			"--server-image=registry.example.com/stx/faucet-server:v0.1.0",
			"--leader-election-id=faucet-operator-lock",
			"--log-level=debug",
			"--log-format=text",
			"--log-format=json", // extraArgs come last, so they win
		} {
			if !slices.Contains(args, want) {
				t.Errorf("args %q lack %q", args, want)
			}
		}
		if args[len(args)-1] != "--log-format=json" {
			t.Errorf("extraArgs are not last: %q", args)
		}
	})

	t.Run("image digest, replicas and scheduling", func(t *testing.T) {
		d := one(t, objs, "Deployment")
		pod := nested(t, d, "spec", "template", "spec")
		for path, want := range map[string]any{
			"containers.0.image":           "registry.example.com/stx/faucet-operator@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
			"containers.0.imagePullPolicy": "Always",
			"serviceAccountName":           sa,
			"priorityClassName":            "system-cluster-critical",
			"imagePullSecrets.0.name":      "regcred",
			"tolerations.0.key":            "node-role.example.com/infra",
			"containers.0.env.1.name":      "FAUCET_LOG_LEVEL",
		} {
			if got := dig(pod, strings.Split(path, ".")...); got != want {
				t.Errorf("pod %s = %v, want %v", path, got, want)
			}
		}
		if got := nested(t, d, "spec", "replicas"); got != float64(2) && got != int64(2) {
			t.Errorf("replicas %v, want 2", got)
		}
		labels := nested(t, d, "spec", "template", "metadata", "labels").(map[string]any)
		if labels["team"] != "stacks" || labels["app.kubernetes.io/name"] != "faucet-operator" {
			t.Errorf("pod labels %v: want podLabels added and the chart's selector labels kept", labels)
		}
	})

	t.Run("FaucetServers", func(t *testing.T) {
		fss := find(objs, "FaucetServer")
		got := names(fss)
		want := []string{"faucet-devnet/devnet", "faucet-testnet/testnet"}
		if !slices.Equal(got, want) {
			t.Fatalf("FaucetServers %v, want %v", got, want)
		}
		for _, fs := range fss {
			if fs.GetAPIVersion() != "faucet.stxfaucet.dev/v1alpha1" {
				t.Errorf("%s apiVersion %s", fs.GetName(), fs.GetAPIVersion())
			}
		}
		testnet := fss[slices.IndexFunc(fss, func(u *unstructured.Unstructured) bool { return u.GetName() == "testnet" })]
		if got := nested(t, testnet, "spec", "chainID"); got != float64(2147483648) {
			t.Errorf("testnet chainID %v (%T), want 2147483648", got, got)
		}
		if testnet.GetLabels()["network"] != "testnet" || testnet.GetLabels()["app.kubernetes.io/instance"] != releaseName {
			t.Errorf("testnet labels %v", testnet.GetLabels())
		}
		// The store passes through as given: the URI stays in its Secret.
		if got := nested(t, testnet, "spec", "store", "postgres", "uriSecretRef", "name"); got != "faucet-db-app" {
			t.Errorf("testnet store %v", nested(t, testnet, "spec", "store"))
		}
		if got := nested(t, testnet, "spec", "replicas"); got != float64(2) && got != int64(2) {
			t.Errorf("testnet replicas %v (%T), want 2", got, got)
		}
		// The abuse controls, page, batching and asset settings pass
		// through as given.
		for path, want := range map[string]any{
			"abuse.proofOfWork.difficulty":          int64(18),
			"abuse.proofOfWork.raiseAbove.window":   "1m",
			"abuse.apiTokens.secretRef.name":        "faucet-api-tokens",
			"abuse.ipAllow.1":                       "2001:db8::/32",
			"abuse.balanceCapUSTX":                  int64(100000000000),
			"page.explorerTxURL":                    "https://explorer.example.com/tx/{txid}?network=testnet",
			"funding.lowThreshold":                  int64(250),
			"batching.maxRecipients":                int64(200),
			"batching.window":                       "500ms",
			"batching.contract":                     "ST1PQHQKV0RJXZFY1DGX8MNSNYVE3VGZJSRTPGZGM.send-many-memo",
			"assets.0.name":                         "sbtc",
			"assets.0.token.assetIdentifier":        "SN3VMHXEN64ZZF71JQ5VESXDWTR301XTTXGF4J8F1.sbtc-token::sbtc-token",
			"assets.0.token.amount":                 int64(100000),
			"assets.0.rateLimits.perIP.window":      "5m",
			"assets.1.name":                         "tusd",
			"assets.1.lowThreshold":                 int64(50),
			"assets.2.name":                         "btc",
			"assets.2.btc.network":                  "signet",
			"assets.2.btc.rpc.url":                  "http://bitcoind.bitcoin.svc:38332",
			"assets.2.btc.keySecretRef.name":        "faucet-btc",
			"assets.2.btc.amounts.xlarge":           int64(60000000),
			"assets.2.btc.fees.maxRate":             int64(100),
			"assets.2.rateLimits.perAddress.window": "24h",
		} {
			got := dig(nested(t, testnet, "spec"), strings.Split(path, ".")...)
			if f, ok := got.(float64); ok {
				got = int64(f)
			}
			if got != want {
				t.Errorf("testnet spec.%s = %v (%T), want %v", path, got, got, want)
			}
		}
		devnet := fss[slices.IndexFunc(fss, func(u *unstructured.Unstructured) bool { return u.GetName() == "devnet" })]
		if got := nested(t, devnet, "spec", "store", "embedded", "size"); got != "2Gi" {
			t.Errorf("devnet store size %v", got)
		}
	})

	t.Run("ServiceMonitor scrapes the metrics Service", func(t *testing.T) {
		sm := one(t, objs, "ServiceMonitor")
		svc := one(t, objs, "Service")
		if sm.GetNamespace() != "monitoring" {
			t.Errorf("ServiceMonitor in %s, want monitoring", sm.GetNamespace())
		}
		if sm.GetLabels()["release"] != "kube-prometheus-stack" {
			t.Errorf("ServiceMonitor labels %v lack release", sm.GetLabels())
		}
		if got := nested(t, sm, "spec", "namespaceSelector", "matchNames", 0); got != svc.GetNamespace() {
			t.Errorf("ServiceMonitor looks in %v, the Service is in %s", got, svc.GetNamespace())
		}
		for k, v := range nested(t, sm, "spec", "selector", "matchLabels").(map[string]any) {
			if svc.GetLabels()[k] != v {
				t.Errorf("ServiceMonitor selects %s=%v, Service label is %q", k, v, svc.GetLabels()[k])
			}
		}
		if got, want := nested(t, sm, "spec", "endpoints", 0, "port"), nested(t, svc, "spec", "ports", 0, "name"); got != want {
			t.Errorf("ServiceMonitor port %v, Service port %v", got, want)
		}
		endpoint := nested(t, sm, "spec", "endpoints", 0).(map[string]any)
		for path, want := range map[string]any{
			"scheme":                         "https",
			"authorization.type":             "Bearer",
			"authorization.credentials.name": "prometheus-scrape-token",
			"tlsConfig.insecureSkipVerify":   false,
			"tlsConfig.serverName":           "faucet-faucet-operator-metrics.faucet-system.svc",
			"tlsConfig.ca.secret.name":       "faucet-operator-metrics-ca",
		} {
			if got := dig(endpoint, strings.Split(path, ".")...); got != want {
				t.Errorf("ServiceMonitor endpoint %s = %v, want %v", path, got, want)
			}
		}
		if _, ok := endpoint["bearerTokenFile"]; ok {
			t.Errorf("ServiceMonitor endpoint %v: bearerTokenFile beside bearerTokenSecret", endpoint)
		}
	})

	t.Run("every object has the release labels and an explicit namespace when namespaced", func(t *testing.T) {
		assertReleaseLabels(t, objs)
	})
}

// TestRenderMinimal checks that every optional part can be turned off.
func TestRenderMinimal(t *testing.T) {
	objs := render(t, "-f", "hack/charttest/testdata/values-minimal.yaml")
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetKind())
	}
	if !slices.Equal(kinds, []string{"Deployment"}) {
		t.Fatalf("objects %v, want only the Deployment", names(objs))
	}
	d := objs[0]
	args := containerArgs(t, d)
	for _, want := range []string{"--metrics-bind-address=0", "--leader-elect=false"} {
		if !slices.Contains(args, want) {
			t.Errorf("args %q lack %q", args, want)
		}
	}
	if hasPrefix(args, "--leader-election-id") {
		t.Errorf("args %q: a leader election id without leader election", args)
	}
	if got := nested(t, d, "spec", "template", "spec", "serviceAccountName"); got != "preprovisioned-faucet-operator" {
		t.Errorf("serviceAccountName %v", got)
	}
	ports := nested(t, d, "spec", "template", "spec", "containers", 0, "ports").([]any)
	if len(ports) != 1 {
		t.Errorf("ports %v, want only health", ports)
	}
}

// TestRenderManagerReplicas: several manager replicas get a preferred
// anti-affinity on the node and a PodDisruptionBudget, both off with
// podDisruptionBudget.enabled=false and an affinity of one's own.
func TestRenderManagerReplicas(t *testing.T) {
	objs := render(t, "--set", "replicaCount=3")
	d := one(t, objs, "Deployment")
	terms := nested(t, d, "spec", "template", "spec", "affinity", "podAntiAffinity", "preferredDuringSchedulingIgnoredDuringExecution").([]any)
	if len(terms) != 1 || dig(terms[0], "podAffinityTerm", "topologyKey") != "kubernetes.io/hostname" {
		t.Fatalf("anti-affinity %v, want one preferred term on kubernetes.io/hostname", terms)
	}
	assertSelectsManager(t, d, dig(terms[0], "podAffinityTerm", "labelSelector", "matchLabels").(map[string]any), d)
	pdb := one(t, objs, "PodDisruptionBudget")
	if got := nested(t, pdb, "spec", "maxUnavailable"); got != float64(1) && got != int64(1) {
		t.Errorf("maxUnavailable %v, want 1", got)
	}
	assertSelectsManager(t, pdb, nested(t, pdb, "spec", "selector", "matchLabels").(map[string]any), d)

	if got := find(render(t, "--set", "replicaCount=3", "--set", "podDisruptionBudget.enabled=false"), "PodDisruptionBudget"); len(got) != 0 {
		t.Errorf("PodDisruptionBudgets %v with podDisruptionBudget.enabled=false", names(got))
	}
}

// TestRenderPlainMetrics checks metrics.secure=false: plain HTTP, no
// metrics RBAC, a ServiceMonitor without a token or TLS.
func TestRenderPlainMetrics(t *testing.T) {
	objs := render(t, "--set", "metrics.secure=false", "--set", "metrics.serviceMonitor.enabled=true")
	if args := containerArgs(t, one(t, objs, "Deployment")); !slices.Contains(args, "--metrics-secure=false") {
		t.Errorf("args %q lack --metrics-secure=false", args)
	}
	for _, kind := range []string{"ClusterRole", "ClusterRoleBinding"} {
		for _, o := range find(objs, kind) {
			if strings.Contains(o.GetName(), "-metrics-") {
				t.Errorf("%s %s without metrics.secure", kind, o.GetName())
			}
		}
	}
	endpoint := nested(t, one(t, objs, "ServiceMonitor"), "spec", "endpoints", 0).(map[string]any)
	if endpoint["scheme"] != "http" || endpoint["bearerTokenFile"] != nil || endpoint["tlsConfig"] != nil || endpoint["authorization"] != nil {
		t.Errorf("ServiceMonitor endpoint %v, want plain http", endpoint)
	}
}

// TestRenderDefaultServiceMonitor checks the ServiceMonitor of the default
// secure metrics: Prometheus's own ServiceAccount token, the self-signed
// certificate unverified, as kubebuilder's config/prometheus.
func TestRenderDefaultServiceMonitor(t *testing.T) {
	endpoint := nested(t, one(t, render(t, "--set", "metrics.serviceMonitor.enabled=true"), "ServiceMonitor"), "spec", "endpoints", 0).(map[string]any)
	want := map[string]any{
		"scheme":          "https",
		"bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token",
		"tlsConfig":       map[string]any{"insecureSkipVerify": true},
	}
	for k, v := range want {
		if !reflect.DeepEqual(endpoint[k], v) {
			t.Errorf("ServiceMonitor endpoint %s = %v, want %v", k, endpoint[k], v)
		}
	}
	if _, ok := endpoint["authorization"]; ok {
		t.Errorf("ServiceMonitor endpoint %v: authorization without bearerTokenSecret", endpoint)
	}
}

// TestRenderLongName checks that a full name of 63 characters, the most
// fullnameOverride allows, still gives a metrics Service a valid name.
func TestRenderLongName(t *testing.T) {
	long := strings.Repeat("f", 63)
	svc := one(t, render(t, "--set", "fullnameOverride="+long), "Service")
	if name := svc.GetName(); len(name) > 63 || !strings.HasSuffix(name, "-metrics") {
		t.Errorf("metrics Service name %q (%d characters), want at most 63 ending in -metrics", name, len(name))
	}
}

// TestRenderCRDWithoutKeep checks crds.keep=false.
func TestRenderCRDWithoutKeep(t *testing.T) {
	crd := one(t, render(t, "--set", "crds.keep=false"), "CustomResourceDefinition")
	if _, ok := crd.GetAnnotations()["helm.sh/resource-policy"]; ok {
		t.Errorf("CRD annotations %v: keep with crds.keep=false", crd.GetAnnotations())
	}
}

// byName indexes objects by name.
func byName(objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	out := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		out[o.GetName()] = o
	}
	return out
}

// assertSelectsManager checks that a selector of obj matches the manager
// Deployment's pods.
func assertSelectsManager(t *testing.T, obj *unstructured.Unstructured, selector map[string]any, d *unstructured.Unstructured) {
	t.Helper()
	podLabels := nested(t, d, "spec", "template", "metadata", "labels").(map[string]any)
	if len(selector) == 0 {
		t.Errorf("%s %s selects every pod", obj.GetKind(), obj.GetName())
	}
	for k, v := range selector {
		if podLabels[k] != v {
			t.Errorf("%s %s selects %s=%v, the manager pod's label is %v", obj.GetKind(), obj.GetName(), k, v, podLabels[k])
		}
	}
}

// find returns the objects of a kind.
func find(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// one returns the only object of a kind.
func one(t *testing.T, objs []*unstructured.Unstructured, kind string) *unstructured.Unstructured {
	t.Helper()
	found := find(objs, kind)
	if len(found) != 1 {
		t.Fatalf("%s objects %v, want exactly one", kind, names(found))
	}
	return found[0]
}

// names are [namespace/]name, sorted.
func names(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		n := o.GetName()
		if o.GetNamespace() != "" {
			n = o.GetNamespace() + "/" + n
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// dig walks maps by key and slices by index ("0"); nil when absent.
func dig(v any, path ...string) any {
	for _, p := range path {
		switch c := v.(type) {
		case map[string]any:
			v = c[p]
		case []any:
			var i int
			if _, err := fmt.Sscan(p, &i); err != nil || i < 0 || i >= len(c) {
				return nil
			}
			v = c[i]
		default:
			return nil
		}
	}
	return v
}

// nested is dig on an object with string or int path elements, failing the
// test when the path is absent.
func nested(t *testing.T, o *unstructured.Unstructured, path ...any) any {
	t.Helper()
	var p []string
	for _, e := range path {
		p = append(p, fmt.Sprint(e))
	}
	v := dig(o.Object, p...)
	if v == nil {
		t.Fatalf("%s %s has no %s", o.GetKind(), o.GetName(), strings.Join(p, "."))
	}
	return v
}

func containerArgs(t *testing.T, d *unstructured.Unstructured) []string {
	t.Helper()
	var args []string
	for _, a := range nested(t, d, "spec", "template", "spec", "containers", 0, "args").([]any) {
		args = append(args, a.(string))
	}
	return args
}

func hasPrefix(args []string, prefix string) bool {
	return slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, prefix) })
}

func chartAppVersion(t *testing.T) string {
	t.Helper()
	v, _ := readYAML(t, "charts/faucet-operator/Chart.yaml")["appVersion"].(string)
	if v == "" {
		t.Fatal("Chart.yaml has no appVersion")
	}
	return v
}

// assertRules checks that a (Cluster)Role has exactly the rules of a config/
// file, so the chart cannot drift from what controller-gen generates.
func assertRules(t *testing.T, role *unstructured.Unstructured, configFile string) {
	t.Helper()
	want := readYAML(t, configFile)["rules"]
	if got := role.Object["rules"]; !reflect.DeepEqual(got, want) {
		t.Errorf("%s %s rules differ from %s (run hack/sync-chart.sh):\n got %v\nwant %v",
			role.GetKind(), names([]*unstructured.Unstructured{role}), configFile, got, want)
	}
}

// assertBinding checks a (Cluster)RoleBinding's role and its one subject, the
// manager's ServiceAccount in the release namespace.
func assertBinding(t *testing.T, b *unstructured.Unstructured, roleKind, roleName, serviceAccount string) {
	t.Helper()
	if got := b.Object["roleRef"]; !reflect.DeepEqual(got, map[string]any{
		"apiGroup": "rbac.authorization.k8s.io", "kind": roleKind, "name": roleName,
	}) {
		t.Errorf("%s %s roleRef %v, want %s %s", b.GetKind(), b.GetName(), got, roleKind, roleName)
	}
	if got := b.Object["subjects"]; !reflect.DeepEqual(got, []any{map[string]any{
		"kind": "ServiceAccount", "name": serviceAccount, "namespace": releaseNamespace,
	}}) {
		t.Errorf("%s %s subjects %v, want ServiceAccount %s/%s", b.GetKind(), b.GetName(), got, releaseNamespace, serviceAccount)
	}
}

// clusterScoped are the kinds the chart renders without a namespace.
var clusterScoped = []string{"CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding"}

// assertReleaseLabels checks the chart's labels on every object, and that
// every namespaced object names its namespace (so `helm template | kubectl
// apply` puts it in the right place, not in kubectl's current namespace).
func assertReleaseLabels(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		l := o.GetLabels()
		if l["app.kubernetes.io/instance"] != releaseName || l["app.kubernetes.io/managed-by"] != "Helm" ||
			l["app.kubernetes.io/name"] != "faucet-operator" || !strings.HasPrefix(l["helm.sh/chart"], "faucet-operator-") {
			t.Errorf("%s %s labels %v", o.GetKind(), o.GetName(), l)
		}
		if slices.Contains(clusterScoped, o.GetKind()) != (o.GetNamespace() == "") {
			t.Errorf("%s %s namespace %q", o.GetKind(), o.GetName(), o.GetNamespace())
		}
	}
}
