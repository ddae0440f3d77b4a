package controllers

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
	"github.com/stxfaucet/faucet-operator/hack/eventually"
	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// objectFormCRDFile is the CRD of the last release whose spec.assets was
// an object, as that release generated it.
const objectFormCRDFile = "testdata/faucetservers-crd-0f47cb5.yaml"

// objectFormSpec is a FaucetServer spec as a user of that release wrote
// it: sBTC and BTC with every setting the object form had but refills
// (which need a treasury, see objectFormRefillsSpec).
const objectFormSpec = `
node: {url: "http://stacks-node:20443"}
keySecretRef: {name: faucet-keys}
assets:
  sbtc:
    assetIdentifier: ` + testnetSBTC + `
    amount: 250000
    rateLimits: {perAddress: {requests: 2, window: 1h}, perIP: {requests: 7, window: 10m}}
  btc:
    network: signet
    rpc: {url: "http://bitcoind:18443", credentialsSecretRef: {name: faucet-btc-rpc}}
    keySecretRef: {name: faucet-btc}
    amounts: {default: 20000, large: 2000000, xlarge: 60000000}
    startHeight: 100
    fees: {fallbackRate: 3, minRate: 2, maxRate: 50}
    rateLimits: {perAddress: {requests: 1, window: 24h}}
`

// objectFormRefillsSpec is one with a treasury and sBTC refills.
const objectFormRefillsSpec = `
node: {url: "http://stacks-node:20443"}
keySecretRef: {name: faucet-keys}
treasury: {keySecretRef: {name: faucet-treasury}}
assets:
  sbtc: {assetIdentifier: ` + testnetSBTC + `, amount: 100000, refillBelow: 1000000, refillAmount: 5000000}
`

// objectFormStatus is status.funding as that release's operator wrote it:
// one field per asset.
const objectFormStatus = `
funding:
  totalUSTX: 1000000000
  dripsLeft: 200
  assets:
    sbtc: {assetIdentifier: ` + testnetSBTC + `, balance: 5000000, dripsLeft: 20, keys: [{address: ST1A, balance: 5000000, dripsLeft: 20}]}
    btc: {network: regtest, address: bcrt1qexample, balance: 900000, dripsLeft: 45}
`

// TestCRDUpgradeKeepsObjectFormAssets installs the CRD of the last
// release with the object form of spec.assets, stores FaucetServers
// through it with the status that release's operator wrote, then installs
// this release's CRD over it in place (as kubectl apply or helm upgrade
// does). The API server must still return the asset settings, and the
// operator must run the faucet with every one of them, rewrite spec.assets
// as the list it stands for, warn once, and report Ready.
func TestCRDUpgradeKeepsObjectFormAssets(t *testing.T) {
	c := startBareAPIServer(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	createCRD(ctx, t, c, readCRD(t, objectFormCRDFile))
	createUpgradeSecrets(ctx, t, c)
	for name, spec := range map[string]string{"faucet": objectFormSpec, "faucet-refills": objectFormRefillsSpec} {
		createWithStatus(ctx, t, c, unstructuredFaucetServerIn("default", name, spec), objectFormStatus)
	}

	// The operator upgraded first, the earlier CRD still installed: the
	// API server refuses the list, so the faucet runs with it read in place.
	rec := events.NewFakeRecorder(100)
	r := &FaucetServerReconciler{Client: c, APIReader: c, Recorder: rec, DefaultImage: "img"}
	req := ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "default", Name: "faucet"}}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatalf("reconcile under the earlier CRD: %v", err)
	}
	inPlace := deploymentArgs(ctx, t, c, req.NamespacedName)
	inPlacePod := &appsv1.Deployment{}
	if err := c.Get(ctx, req.NamespacedName, inPlacePod); err != nil {
		t.Fatal(err)
	}
	if e := deprecationEvents(rec); len(e) != 1 || !strings.HasPrefix(e[0], "Warning DeprecatedAssets ") || !strings.Contains(e[0], "refused to store that list") {
		t.Errorf("events under the earlier CRD %q", e)
	}

	upgradeCRDInPlace(ctx, t, c, currentCRD(t))

	// What the API server returns now still holds the settings.
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(faucetv1alpha1.GroupVersion.WithKind("FaucetServer"))
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "faucet"}, got); err != nil {
		t.Fatal(err)
	}
	if amount, _, _ := unstructured.NestedInt64(got.Object, "spec", "assets", "sbtc", "amount"); amount != 250000 {
		t.Fatalf("after the upgrade the API server returns spec.assets %v: the object form's content is gone", got.Object["spec"].(map[string]any)["assets"])
	}

	// The earlier release's status reads as no asset report, not as an
	// error that would keep the operator from reading any FaucetServer.
	fs := &faucetv1alpha1.FaucetServer{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "faucet-refills"}, fs); err != nil ||
		fs.Status.Funding == nil || fs.Status.Funding.TotalUSTX != 1000000000 || fs.Status.Funding.Assets != nil {
		t.Fatalf("reading a FaucetServer with the earlier status: %v", err)
	}

	// A new write in the object form is refused, and junk in the list is.
	for _, tt := range []struct{ assets, want string }{
		{`{sbtc: {assetIdentifier: ` + testnetSBTC + `, amount: 1}}`, `spec.assets in body must be of type array: "object"`},
		{`[{name: stx, token: {assetIdentifier: ` + testnetSBTC + `, amount: 1}}]`, "stx is the faucet's own asset"},
		{`[{name: tusd}]`, "set exactly one of token and btc"},
		{`junk`, `spec.assets in body must be of type array: "string"`},
	} {
		obj := unstructuredFaucetServerIn("default", "new", "node: {url: \"http://stacks-node:20443\"}\nkeySecretRef: {name: faucet-keys}\nassets: "+tt.assets)
		if err := c.Create(ctx, obj, client.DryRunAll); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("creating one with spec.assets %s: %v; want it refused saying %q", tt.assets, err, tt.want)
		}
	}

	args := reconcileToReady(ctx, t, c, r, req)
	if !slices.Equal(args, inPlace) {
		t.Errorf("args %q after the rewrite, %q read in place", args, inPlace)
	}
	// Nothing the pod runs with changed: the rewrite rolls nothing.
	if d := (&appsv1.Deployment{}); c.Get(ctx, req.NamespacedName, d) != nil || d.Generation != inPlacePod.Generation ||
		!equality.Semantic.DeepEqual(d.Spec.Template, inPlacePod.Spec.Template) {
		t.Errorf("the rewrite changed the pod template (generation %d, was %d)", d.Generation, inPlacePod.Generation)
	}
	for _, want := range []string{
		"--token=name=sbtc,asset=" + testnetSBTC + ",amount=250000,limit-address=2/1h0m0s,limit-ip=7/10m0s",
		"--btc-rpc-url=http://bitcoind:18443", "--btc-network=signet",
		"--btc-amount=20000", "--btc-large-amount=2000000", "--btc-xlarge-amount=60000000",
		"--btc-fee-rate=3", "--btc-min-fee-rate=2", "--btc-max-fee-rate=50", "--btc-start-height=100",
		"--btc-limit-address=1/24h0m0s",
	} {
		if !slices.Contains(args, want) {
			t.Errorf("Deployment args %q lack %q", args, want)
		}
	}

	// spec.assets is the list it stands for now, as the API server stores it.
	if err := c.Get(ctx, req.NamespacedName, fs); err != nil {
		t.Fatalf("reading the FaucetServer: %v", err)
	}
	if fs.LegacyAssets() || len(fs.Spec.Assets) != 2 {
		t.Fatalf("spec.assets %+v, legacy %v; want the list of two", fs.Spec.Assets, fs.LegacyAssets())
	}
	sb, btc := fs.Spec.Assets[0], fs.Spec.Assets[1]
	if sb.Name != "sbtc" || sb.Token == nil || sb.Token.AssetIdentifier != testnetSBTC || sb.Token.Amount != 250000 ||
		sb.RateLimits.PerAddress.Requests != 2 || sb.RateLimits.PerIP.Window.Duration != 10*time.Minute {
		t.Errorf("sbtc entry %s", mustJSON(sb))
	}
	if btc.Name != "btc" || btc.BTC == nil || btc.BTC.RPC.URL != "http://bitcoind:18443" || btc.BTC.RPC.CredentialsSecretRef.Name != "faucet-btc-rpc" ||
		*btc.BTC.Amounts.XLarge != 60000000 || *btc.BTC.StartHeight != 100 || *btc.BTC.Fees.MaxRate != 50 ||
		btc.RateLimits.PerAddress.Window.Duration != 24*time.Hour {
		t.Errorf("btc entry %s", mustJSON(btc))
	}
	if e := deprecationEvents(rec); len(e) != 1 || !strings.HasPrefix(e[0], "Warning DeprecatedAssets ") || !strings.Contains(e[0], "rewrote it in place as the list") {
		t.Errorf("events %q; want one DeprecatedAssets warning saying the list was written", e)
	}

	// With a treasury, sBTC's refills carry over too.
	req.Name = "faucet-refills"
	args = reconcileToReady(ctx, t, c, r, req)
	if want := "--token=name=sbtc,asset=" + testnetSBTC + ",amount=100000,limit-address=5/5m0s,limit-ip=30/5m0s,refill-below=1000000,refill-amount=5000000"; !slices.Contains(args, want) {
		t.Errorf("Deployment args %q lack %q", args, want)
	}
	if err := c.Get(ctx, req.NamespacedName, fs); err != nil || len(fs.Spec.Assets) != 1 || fs.Spec.Assets[0].Token == nil ||
		*fs.Spec.Assets[0].Token.RefillBelow != 1000000 || *fs.Spec.Assets[0].Token.RefillAmount != 5000000 {
		t.Errorf("spec.assets %s, %v", mustJSON(fs.Spec.Assets), err)
	}
	if e := deprecationEvents(rec); len(e) != 1 {
		t.Errorf("events %q; want one DeprecatedAssets warning", e)
	}
}

// reconcileToReady reconciles req, plays the Deployment controller (its
// one pod available) and reconciles again; Ready must then be True, and
// the second pass must change no pod argument. It returns the faucet
// container's arguments.
func reconcileToReady(ctx context.Context, t *testing.T, c client.Client, r *FaucetServerReconciler, req ctrl.Request) []string {
	t.Helper()
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatalf("%s: reconcile after the upgrade: %v", req.Name, err)
	}
	before := deploymentArgs(ctx, t, c, req.NamespacedName)
	markAvailable(ctx, t, c, req.NamespacedName)
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatalf("%s: reconcile once available: %v", req.Name, err)
	}
	fs := &faucetv1alpha1.FaucetServer{}
	if err := c.Get(ctx, req.NamespacedName, fs); err != nil {
		t.Fatal(err)
	}
	if ready := meta.FindStatusCondition(fs.Status.Conditions, faucetv1alpha1.ConditionReady); ready == nil || ready.Status != metav1.ConditionTrue {
		t.Errorf("%s: Ready %+v", req.Name, ready)
	}
	if after := deploymentArgs(ctx, t, c, req.NamespacedName); !slices.Equal(after, before) {
		t.Errorf("%s: the second pass changed the pod's args: %q, was %q", req.Name, after, before)
	}
	return before
}

// deploymentArgs are the arguments of the faucet container of the
// Deployment key.
func deploymentArgs(ctx context.Context, t *testing.T, c client.Client, key client.ObjectKey) []string {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, key, d); err != nil {
		t.Fatal(err)
	}
	return d.Spec.Template.Spec.Containers[0].Args
}

// createWithStatus creates obj, retrying while its CRD is not served yet,
// then writes statusYAML as its status.
func createWithStatus(ctx context.Context, t *testing.T, c client.Client, obj *unstructured.Unstructured, statusYAML string) {
	t.Helper()
	var err error
	if eventually.WaitEvery(t, 30*time.Second, 100*time.Millisecond, func() bool {
		err = c.Create(ctx, obj)
		return err == nil
	}) != nil {
		t.Fatalf("creating %s under the earlier CRD: %v", obj.GetName(), err)
	}
	var status map[string]any
	if err := yaml.Unmarshal([]byte(statusYAML), &status); err != nil {
		t.Fatal(err)
	}
	obj.Object["status"] = status
	if err := c.Status().Update(ctx, obj); err != nil {
		t.Fatalf("writing the earlier release's status of %s: %v", obj.GetName(), err)
	}
}

// startBareAPIServer starts an envtest API server with no CRD installed,
// stopped at t's cleanup, and returns a direct client to it.
func startBareAPIServer(t *testing.T) client.Client {
	t.Helper()
	assets := envtestAssets()
	if assets == "" {
		t.Fatal("envtest binaries not found: set KUBEBUILDER_ASSETS, or build them with hack/envtest/build.sh (make envtest)")
	}
	env := &envtest.Environment{BinaryAssetsDirectory: assets}
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, faucetv1alpha1.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// readCRD reads a CRD manifest (its first document).
func readCRD(t *testing.T, path string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(raw, crd); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return crd
}

// currentCRD is this release's CRD.
func currentCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	return readCRD(t, filepath.Join("..", "config", "crd", "bases", "faucet.stxfaucet.dev_faucetservers.yaml"))
}

func createCRD(ctx context.Context, t *testing.T, c client.Client, crd *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	if err := c.Create(ctx, crd); err != nil {
		t.Fatalf("creating the CRD: %v", err)
	}
}

// upgradeCRDInPlace replaces the installed CRD's spec with crd's, as
// kubectl apply or helm upgrade does, and waits until the API server
// serves it: until it accepts, in a dry run, a FaucetServer whose
// spec.assets is a list, which the earlier CRD refuses.
func upgradeCRDInPlace(ctx context.Context, t *testing.T, c client.Client, crd *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	cur := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: crd.Name}, cur); err != nil {
		t.Fatal(err)
	}
	cur.Spec = crd.Spec
	if err := c.Update(ctx, cur); err != nil {
		t.Fatalf("installing the CRD over the earlier one: %v", err)
	}
	probe := unstructuredFaucetServerIn("default", "probe", `
node: {url: "http://stacks-node:20443"}
keySecretRef: {name: faucet-keys}
assets: [{name: tusd, token: {assetIdentifier: `+testnetTUSD+`, amount: 1}}]
`)
	var err error
	if eventually.WaitEvery(t, 30*time.Second, 100*time.Millisecond, func() bool {
		err = c.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		return err == nil
	}) != nil {
		t.Fatalf("the API server still serves the earlier CRD: %v", err)
	}
}

// unstructuredFaucetServerIn is a FaucetServer ns/name with the spec in
// specYAML, as a manifest has it: nothing typed drops or converts a field.
func unstructuredFaucetServerIn(ns, name, specYAML string) *unstructured.Unstructured {
	var spec map[string]any
	if err := yaml.Unmarshal([]byte(specYAML), &spec); err != nil {
		panic(fmt.Sprintf("spec YAML: %v", err))
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(faucetv1alpha1.GroupVersion.WithKind("FaucetServer"))
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// createUpgradeSecrets creates the Secrets objectFormSpec names, each
// holding what the operator checks: an STX key, a treasury key, a signet
// BTC key and RPC credentials.
func createUpgradeSecrets(ctx context.Context, t *testing.T, c client.Client) {
	t.Helper()
	stx, err := stacks.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	treasury, err := stacks.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	btc, err := bitcoin.GeneratePrivateKey(bitcoin.Signet)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]map[string][]byte{
		"faucet-keys":     {"keys": []byte(stx.Hex())},
		"faucet-btc":      {"key": []byte(btc.WIF())},
		"faucet-btc-rpc":  {"credentials": []byte("faucet:not-a-real-password")},
		"faucet-treasury": {"keys": []byte(treasury.Hex())},
	} {
		if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Data: data}); err != nil {
			t.Fatal(err)
		}
	}
}

// markAvailable plays the Deployment controller: the Deployment's current
// generation rolled out, its one pod available.
func markAvailable(ctx context.Context, t *testing.T, c client.Client, key client.ObjectKey) {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, key, d); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	d.Status = appsv1.DeploymentStatus{
		ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable", LastUpdateTime: now, LastTransitionTime: now},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable", LastUpdateTime: now, LastTransitionTime: now},
		},
	}
	if err := c.Status().Update(ctx, d); err != nil {
		t.Fatalf("marking the Deployment available: %v", err)
	}
}
