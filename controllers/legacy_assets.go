package controllers

import (
	"context"
	"encoding/json"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
	"github.com/stxfaucet/faucet-operator/server/guard"
)

// spec.assets in the object form of earlier releases ({sbtc: …, btc: …}).
// The CRD holds a list now, so an API server serving it prunes such an
// object to {} when it reads it: the operator then cannot tell which
// assets it configured, stalls the FaucetServer (DeprecatedAssets) and
// leaves its pods as they are, with the assets they started with. Where
// the object's content does reach the operator (an API server still
// serving an earlier CRD), it runs the faucet with the list it stands for.
// Either way it records a Warning event, once per generation, showing the
// list to write.

// exampleAssets is the list form of a typical object form, for the
// message of one whose content is lost.
const exampleAssets = `[{name: sbtc, token: {assetIdentifier: ST1F7QA2MDF17S807EPA36TSS8AMEFY4KA9TVGWXT.sbtc-token::sbtc-token, amount: 100000}}, ` +
	`{name: btc, btc: {network: signet, rpc: {url: "http://bitcoind:38332"}, keySecretRef: {name: faucet-btc}}}]`

// deprecatedAssetsMessage says how to rewrite fs's object-form spec.assets
// as a list: the list it stands for when it could be read, else an
// example.
func deprecatedAssetsMessage(fs *faucetv1alpha1.FaucetServer) string {
	if fs.AssetsUnreadable() {
		return "spec.assets is in the object form of earlier releases ({sbtc: …, btc: …}), and this release's CRD holds a list: " +
			"the API server returns the object as {}, its content dropped, so which assets it configured is unknown. " +
			"Running pods are left alone, with the assets they started with, until spec.assets is rewritten as a list, one entry per asset " +
			"(sbtc's fields under token, btc's under btc, rateLimits beside them), e.g. spec.assets: " + exampleAssets +
			"; or removed, if the faucet drips STX only"
	}
	return "spec.assets is in the object form of earlier releases ({sbtc: …, btc: …}): the operator reads it as the list it stands for " +
		"and runs the faucet with it, but this release's CRD holds only the list, and once it is installed the API server drops " +
		"the object's content. Rewrite it as spec.assets: " + assetsListJSON(fs.Spec.Assets)
}

// assetsListJSON is assets as the JSON (and YAML) list to write, rate
// limits left out where they are the defaults.
func assetsListJSON(assets faucetv1alpha1.AssetList) string {
	out := make([]faucetv1alpha1.AssetSpec, len(assets))
	for i, a := range assets {
		a.RateLimits = withoutDefaultLimits(a.RateLimits)
		out[i] = a
	}
	b, err := json.Marshal(out)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	return string(b)
}

// withoutDefaultLimits is rl without the limits that are the defaults;
// nil when none is left.
func withoutDefaultLimits(rl *faucetv1alpha1.AssetRateLimits) *faucetv1alpha1.AssetRateLimits {
	if rl == nil {
		return nil
	}
	def := guard.DefaultAssetLimits()
	isDefault := func(l *faucetv1alpha1.RateLimit, d guard.Limit) bool {
		return l == nil || (int(l.Requests) == d.Requests && l.Window.Duration == d.Window)
	}
	out := *rl
	if isDefault(out.PerAddress, def.PerAddress) {
		out.PerAddress = nil
	}
	if isDefault(out.PerIP, def.PerIP) {
		out.PerIP = nil
	}
	if out.PerAddress == nil && out.PerIP == nil {
		return nil
	}
	return &out
}

// generationWarnings remembers the generation of each FaucetServer a
// warning was recorded for, so it is recorded once per generation: not on
// every reconcile, nor on every retry of one whose status cannot be
// written (the API server refuses any write to an object whose stored
// spec.assets is an object and which has no spec.treasury: the CRD's rule
// on refills cannot read it). An operator that restarts warns once more.
type generationWarnings struct {
	mu   sync.Mutex
	seen map[types.NamespacedName]warnedGeneration
}

type warnedGeneration struct {
	uid        types.UID
	generation int64
	// unreadable: the warning said the content was lost. A CRD upgrade
	// empties the object without a new generation, and that is news.
	unreadable bool
}

// first reports whether fs's current generation was not warned about
// yet, and records that it now is.
func (w *generationWarnings) first(fs *faucetv1alpha1.FaucetServer) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	key := client.ObjectKeyFromObject(fs)
	now := warnedGeneration{uid: fs.UID, generation: fs.Generation, unreadable: fs.AssetsUnreadable()}
	if w.seen[key] == now {
		return false
	}
	if w.seen == nil {
		w.seen = map[types.NamespacedName]warnedGeneration{}
	}
	w.seen[key] = now
	return true
}

// forget drops key: its FaucetServer is gone.
func (w *generationWarnings) forget(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.seen, key)
}

// warnDeprecatedAssets records a Warning event DeprecatedAssets, once per
// generation, while fs's spec.assets is in the object form.
func (r *FaucetServerReconciler) warnDeprecatedAssets(_ context.Context, fs *faucetv1alpha1.FaucetServer) {
	if !fs.LegacyAssets() || !r.deprecationWarnings.first(fs) {
		return
	}
	r.Recorder.Eventf(fs, nil, corev1.EventTypeWarning, faucetv1alpha1.ReasonDeprecatedAssets, "ReadSpec", "%s",
		truncate(deprecatedAssetsMessage(fs), maxEventNote))
}
