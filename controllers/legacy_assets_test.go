package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// objectFormFaucetServer is a FaucetServer whose spec.assets is in the
// object form of earlier releases, sBTC and BTC, as an API server serving
// the CRD of such a release returns it.
const objectFormFaucetServer = `{"apiVersion":"faucet.stxfaucet.dev/v1alpha1","kind":"FaucetServer",
 "metadata":{"name":"faucet","namespace":"testnet","uid":"uid-1","generation":4},
 "spec":{"node":{"url":"http://stacks-node:20443"},"keySecretRef":{"name":"faucet-keys"},
  "assets":{"sbtc":{"assetIdentifier":"ST1F7QA2MDF17S807EPA36TSS8AMEFY4KA9TVGWXT.sbtc-token::sbtc-token","amount":100000,
                    "rateLimits":{"perAddress":{"requests":5,"window":"5m"},"perIP":{"requests":3,"window":"1h"}}},
            "btc":{"network":"signet","rpc":{"url":"http://bitcoind:38332"},"keySecretRef":{"name":"faucet-btc","key":"key"},
                   "rateLimits":{"perAddress":{"requests":1,"window":"24h"}}}}}}`

// nextEvent is the next event f recorded, "" if none.
func nextEvent(f *events.FakeRecorder) string {
	select {
	case e := <-f.Events:
		return e
	default:
		return ""
	}
}

// deprecationEvents are the DeprecatedAssets events f recorded since the
// last call; other events are dropped.
func deprecationEvents(f *events.FakeRecorder) []string {
	var out []string
	for e := nextEvent(f); e != ""; e = nextEvent(f) {
		if strings.Contains(e, faucetv1alpha1.ReasonDeprecatedAssets) {
			out = append(out, e)
		}
	}
	return out
}

// TestObjectFormAssets: a FaucetServer whose spec.assets is in the object
// form is read as the list it stands for, so the faucet keeps its sBTC and
// BTC, and a Warning event DeprecatedAssets shows the list to write, once
// per generation.
func TestObjectFormAssets(t *testing.T) {
	var fs faucetv1alpha1.FaucetServer
	if err := json.Unmarshal([]byte(objectFormFaucetServer), &fs); err != nil {
		t.Fatal(err)
	}
	if !fs.LegacyAssets() || fs.AssetsUnreadable() {
		t.Fatalf("legacy %v, unreadable %v", fs.LegacyAssets(), fs.AssetsUnreadable())
	}
	args := serverArgs(&fs)
	for _, want := range []string{
		"--token=name=sbtc,asset=" + testnetSBTC + ",amount=100000,limit-address=5/5m0s,limit-ip=3/1h0m0s",
		"--btc-rpc-url=http://bitcoind:38332", "--btc-network=signet", "--btc-limit-address=1/24h0m0s",
	} {
		if !slices.Contains(args, want) {
			t.Errorf("args %q lack %q", args, want)
		}
	}
	checkArgsParseBack(t, &fs)

	rec := events.NewFakeRecorder(10)
	r := &FaucetServerReconciler{Recorder: rec}
	ctx := context.Background()
	r.warnDeprecatedAssets(ctx, &fs)
	e := nextEvent(rec)
	const prefix = "Warning DeprecatedAssets spec.assets is in the object form of earlier releases ({sbtc: …, btc: …}): " +
		"the operator reads it as the list it stands for and runs the faucet with it"
	if !strings.HasPrefix(e, prefix) {
		t.Fatalf("event %q\nwant it to start with %q", e, prefix)
	}
	// The list it shows is the list to write: it reads back as the same
	// assets, default limits left out.
	_, list, ok := strings.Cut(e, "Rewrite it as spec.assets: ")
	var written faucetv1alpha1.AssetList
	if err := json.Unmarshal([]byte(list), &written); !ok || err != nil {
		t.Fatalf("event %q: no list after it (%v)", e, err)
	}
	if len(written) != 2 || written[0].Name != "sbtc" || written[0].Token.AssetIdentifier != testnetSBTC ||
		written[0].RateLimits.PerAddress != nil || written[0].RateLimits.PerIP.Requests != 3 ||
		written[1].Name != "btc" || written[1].BTC.Network != "signet" || written[1].RateLimits.PerAddress.Requests != 1 ||
		written[0].Legacy() || strings.Contains(list, "legacy") {
		t.Errorf("list in the event %s", list)
	}

	r.warnDeprecatedAssets(ctx, &fs)
	if e := nextEvent(rec); e != "" {
		t.Errorf("a second event for the same generation: %q", e)
	}
	fs.Generation++
	r.warnDeprecatedAssets(ctx, &fs)
	if e := nextEvent(rec); !strings.HasPrefix(e, "Warning DeprecatedAssets ") {
		t.Errorf("a new generation: event %q", e)
	}
	listForm := fixture(withAssets(sbtcAsset(1, nil)))
	r.warnDeprecatedAssets(ctx, listForm)
	if e := nextEvent(rec); e != "" {
		t.Errorf("the list form: event %q", e)
	}
}

// TestUnreadableAssetsStall: what an API server serving this CRD returns
// of an object-form spec.assets, {}, stalls the FaucetServer, leaving its
// pods alone, and tells how to write the list.
func TestUnreadableAssetsStall(t *testing.T) {
	var fs faucetv1alpha1.FaucetServer
	doc := strings.Replace(objectFormFaucetServer, `"assets":{"sbtc"`, `"assets":{},"x":{"sbtc"`, 1)
	if err := json.Unmarshal([]byte(doc), &fs); err != nil {
		t.Fatal(err)
	}
	if !fs.AssetsUnreadable() || len(fs.Spec.Assets) != 0 {
		t.Fatalf("unreadable %v, assets %+v", fs.AssetsUnreadable(), fs.Spec.Assets)
	}
	obs := observation{keys: secretState{addresses: []string{"ST1A"}}, unreadableAssets: deprecatedAssetsMessage(&fs), deployment: deployment(available)}
	st := computeStatus(&fs, obs, t0)
	ready := meta.FindStatusCondition(st.Conditions, faucetv1alpha1.ConditionReady)
	stalled := meta.FindStatusCondition(st.Conditions, faucetv1alpha1.ConditionStalled)
	if ready == nil || ready.Status != metav1.ConditionFalse || stalled == nil || stalled.Reason != faucetv1alpha1.ReasonDeprecatedAssets {
		t.Fatalf("Ready %+v Stalled %+v", ready, stalled)
	}
	for _, want := range []string{"the API server returns the object as {}", "Running pods are left alone", "e.g. spec.assets: [{name: sbtc, token: {"} {
		if !strings.Contains(stalled.Message, want) {
			t.Errorf("message %q lacks %q", stalled.Message, want)
		}
	}
	rec := events.NewFakeRecorder(10)
	r := &FaucetServerReconciler{Recorder: rec}
	r.warnDeprecatedAssets(context.Background(), &fs)
	if e := nextEvent(rec); !strings.Contains(e, "Warning DeprecatedAssets") || !strings.Contains(e, "its content dropped") || len(e) > maxEventNote+100 {
		t.Errorf("event %q", e)
	}
}

// TestObjectFormAssetsAcrossTheCRDUpgrade runs what happens to a
// FaucetServer written in the object form when this release's CRD
// replaces the earlier one, against a real API server: before, the
// operator reads the object and runs the faucet with it; after, the API
// server returns spec.assets as {} (its pruning drops every key the list
// schema does not know) and refuses any write to the object, status
// included, until spec.assets is a list (the CRD's rule on refills cannot
// read it); the operator then leaves the Deployment alone and warns; once
// the list is written, all is as before.
func TestObjectFormAssetsAcrossTheCRDUpgrade(t *testing.T) {
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
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	current := currentCRD(t)
	earlier := objectFormCRD(t, current)
	if err := c.Create(ctx, earlier); err != nil {
		t.Fatal(err)
	}
	setUpObjectFormFaucetServer(ctx, t, c)

	rec := events.NewFakeRecorder(100)
	r := &FaucetServerReconciler{Client: c, APIReader: c, Recorder: rec, DefaultImage: "img"}
	req := ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "default", Name: "faucet"}}
	reconcile := func() error {
		t.Helper()
		_, err := r.Reconcile(ctx, req)
		return err
	}
	args := func() []string {
		t.Helper()
		d := &appsv1.Deployment{}
		if err := c.Get(ctx, req.NamespacedName, d); err != nil {
			t.Fatal(err)
		}
		return d.Spec.Template.Spec.Containers[0].Args
	}
	sbtcFlag := "--token=name=sbtc,asset=" + testnetSBTC + ",amount=100000,limit-address=5/5m0s,limit-ip=30/5m0s"

	// The earlier CRD: the object is read, the faucet runs with it.
	if err := reconcile(); err != nil {
		t.Fatalf("reconcile under the earlier CRD: %v", err)
	}
	before := args()
	if !slices.Contains(before, sbtcFlag) || !slices.Contains(before, "--btc-rpc-url=http://bitcoind:18443") {
		t.Fatalf("args %q", before)
	}
	if e := deprecationEvents(rec); len(e) != 1 || !strings.HasPrefix(e[0], "Warning DeprecatedAssets") || !strings.Contains(e[0], "runs the faucet with it") {
		t.Errorf("events %q", e)
	}

	// This release's CRD: the object's content is gone from what the API
	// server serves.
	upgradeCRD(ctx, t, c, current)
	fs := &faucetv1alpha1.FaucetServer{}
	if err := c.Get(ctx, req.NamespacedName, fs); err != nil || !fs.AssetsUnreadable() {
		t.Fatalf("after the upgrade: unreadable %v, %v", fs.AssetsUnreadable(), err)
	}
	err = reconcile()
	if err == nil || !strings.Contains(err.Error(), "failed to patch status") || !strings.Contains(err.Error(), "expected an array") {
		t.Errorf("reconcile after the upgrade: %v; want the API server refusing the status", err)
	}
	if got := args(); !slices.Equal(got, before) {
		t.Errorf("the Deployment changed: %q, was %q", got, before)
	}
	if e := deprecationEvents(rec); len(e) != 1 || !strings.HasPrefix(e[0], "Warning DeprecatedAssets") || !strings.Contains(e[0], "its content dropped") {
		t.Errorf("events %q", e)
	}
	if err := reconcile(); err == nil {
		t.Error("the retry wrote the status")
	}
	if e := deprecationEvents(rec); len(e) != 0 {
		t.Errorf("a second event for the same generation: %q", e)
	}

	// The list written: all as before.
	fs.Spec.Assets = faucetv1alpha1.AssetList{sbtcAsset(100_000, nil), btcAsset(btcSpec(false))}
	fs.Spec.Assets[1].BTC.RPC.URL = "http://bitcoind:18443"
	if err := c.Update(ctx, fs); err != nil {
		t.Fatalf("writing the list: %v", err)
	}
	if err := reconcile(); err != nil {
		t.Fatalf("reconcile of the list: %v", err)
	}
	if got := args(); !slices.Equal(got, before) {
		t.Errorf("args %q, want those of the object form %q", got, before)
	}
	if e := deprecationEvents(rec); len(e) != 0 {
		t.Errorf("events %q", e)
	}
	if err := c.Get(ctx, req.NamespacedName, fs); err != nil || fs.LegacyAssets() ||
		meta.FindStatusCondition(fs.Status.Conditions, faucetv1alpha1.ConditionStalled) != nil {
		t.Errorf("status %+v, %v", fs.Status, err)
	}
}

// currentCRD is this release's CRD.
func currentCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "config", "crd", "bases", "faucet.stxfaucet.dev_faucetservers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(raw, crd); err != nil {
		t.Fatal(err)
	}
	return crd
}

// objectFormCRD is crd as an earlier release had it as far as spec.assets
// goes: an object (its fields left open here), without the rule that
// reads the list.
func objectFormCRD(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	earlier := crd.DeepCopy()
	root := earlier.Spec.Versions[0].Schema.OpenAPIV3Schema
	spec := root.Properties["spec"]
	spec.Properties["assets"] = apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}
	spec.XValidations = slices.DeleteFunc(spec.XValidations, func(r apiextensionsv1.ValidationRule) bool {
		return strings.Contains(r.Rule, "self.assets")
	})
	root.Properties["spec"] = spec
	return earlier
}

// setUpObjectFormFaucetServer creates the Secrets and a FaucetServer with
// sBTC and BTC in the object form, no treasury.
func setUpObjectFormFaucetServer(ctx context.Context, t *testing.T, c client.Client) {
	t.Helper()
	stx, err := stacks.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	btc, err := bitcoin.GeneratePrivateKey(bitcoin.Regtest)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]map[string][]byte{
		"faucet-keys": {"keys": []byte(stx.Hex())}, "faucet-btc": {"key": []byte(btc.WIF())},
	} {
		if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	obj := &unstructured.Unstructured{}
	err = yaml.Unmarshal([]byte(`apiVersion: faucet.stxfaucet.dev/v1alpha1
kind: FaucetServer
metadata: {name: faucet, namespace: default}
spec:
  node: {url: "http://stacks-node:20443"}
  keySecretRef: {name: faucet-keys}
  assets:
    sbtc: {assetIdentifier: `+testnetSBTC+`, amount: 100000}
    btc: {rpc: {url: "http://bitcoind:18443"}, keySecretRef: {name: faucet-btc}}
`), &obj.Object)
	if err != nil {
		t.Fatal(err)
	}
	// The CRD is served a moment after it is created.
	deadline := time.Now().Add(30 * time.Second)
	for err = c.Create(ctx, obj); err != nil && time.Now().Before(deadline); err = c.Create(ctx, obj) {
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// upgradeCRD replaces the CRD with crd's spec and waits until the API
// server serves it: until it returns the FaucetServer's object-form
// spec.assets as {}.
func upgradeCRD(ctx context.Context, t *testing.T, c client.Client, crd *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	cur := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: crd.Name}, cur); err != nil {
		t.Fatal(err)
	}
	cur.Spec = crd.Spec
	if err := c.Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("faucet.stxfaucet.dev/v1alpha1")
		u.SetKind("FaucetServer")
		err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "faucet"}, u)
		assets, _, _ := unstructured.NestedMap(u.Object, "spec", "assets")
		if err == nil && assets != nil && len(assets) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(errors.Join(errors.New("the API server still serves the earlier CRD"), err))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
