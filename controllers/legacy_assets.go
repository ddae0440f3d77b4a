package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
	"github.com/stxfaucet/faucet-operator/server/guard"
)

// spec.assets in the object form of earlier releases ({sbtc: …, btc: …}).
// This release's CRD takes only the list in a write but keeps such an
// object as it was stored (its spec.assets preserves what the schema does
// not know), so the API server returns its content whole. The first step
// of a reconcile rewrites it as the list it stands for, once, with a
// Warning event DeprecatedAssets showing the list; until then, and where
// the API server refuses the list (it still serves the CRD of an earlier
// release, or the operator's role lacks patch), the faucet runs with that
// list read in place. An object form with nothing in it, {}, says nothing
// of which assets it configured: the FaucetServer stalls on it, leaving
// its pods alone, until it is rewritten.

// +kubebuilder:rbac:groups=faucet.stxfaucet.dev,resources=faucetservers,verbs=patch

// exampleAssets is the list form of a typical object form, for the
// message of one whose content is lost.
const exampleAssets = `[{name: sbtc, token: {assetIdentifier: SN3VMHXEN64ZZF71JQ5VESXDWTR301XTTXGF4J8F1.sbtc-token::sbtc-token, amount: 100000}}, ` +
	`{name: btc, btc: {network: signet, rpc: {url: "http://bitcoind:38332"}, keySecretRef: {name: faucet-btc}}}]`

// deprecatedAssetsMessage says that fs's object-form spec.assets has
// nothing in it to read and how to write the list.
func deprecatedAssetsMessage(_ *faucetv1alpha1.FaucetServer) string {
	return "spec.assets is an empty object ({}), the object form of earlier releases ({sbtc: …, btc: …}) with nothing in it, " +
		"written so or emptied where a CRD that pruned it was installed, so which assets it configured is unknown. " +
		"Running pods are left alone, with the assets they started with, until spec.assets is rewritten as a list, one entry per asset " +
		"(sbtc's fields under token, btc's under btc, rateLimits beside them), e.g. spec.assets: " + exampleAssets +
		"; or removed, if the faucet drips STX only"
}

// rewrittenAssetsMessage tells that fs's object-form spec.assets was
// rewritten as list, and to write that list where fs is applied from. The
// list comes last: the spec holds it, should the note be cut short.
func rewrittenAssetsMessage(fs *faucetv1alpha1.FaucetServer, list faucetv1alpha1.AssetList) string {
	return "spec.assets was in the object form of earlier releases ({sbtc: …, btc: …}): the operator rewrote it in place as the list " +
		"it stands for, every setting kept, and runs the faucet with it. Write that list where the FaucetServer is applied from " +
		"(manifests, chart values), since the API server refuses the object form in a new write; kubectl get fsrv " + fs.Name +
		" -o jsonpath='{.spec.assets}' shows it: " + assetsListJSON(list)
}

// inPlaceAssetsMessage tells that fs's object-form spec.assets runs as
// the list it stands for, which the API server refused to store (err).
func inPlaceAssetsMessage(list faucetv1alpha1.AssetList, err error) string {
	return "spec.assets is in the object form of earlier releases ({sbtc: …, btc: …}): the operator runs the faucet with the " +
		"list it stands for, but the API server refused to store that list in its place, as it does while it serves the CRD of " +
		"an earlier release or when the operator's role lacks patch on faucetservers: install this release's CRD and RBAC " +
		"(helm upgrade does), or rewrite it as spec.assets: " + assetsListJSON(list) + ". The API server said: " + err.Error()
}

// rewriteLegacyAssets, the first step of a reconcile, writes an
// object-form spec.assets as the list it stands for, so that the object
// is all this release's CRD describes: until then the API server refuses
// every write to it that evaluates a rule over spec.assets (without
// spec.treasury, the operator's status patch too). The patch carries the
// resourceVersion read, so it never writes over an edit it did not see,
// and leaves the rest of the spec alone; fs becomes what it stored.
func (r *FaucetServerReconciler) rewriteLegacyAssets(ctx context.Context, fs *faucetv1alpha1.FaucetServer, _ *observation) (stepResult, error) {
	if !fs.LegacyAssets() || fs.AssetsUnreadable() {
		return stepDone, nil
	}
	list := slices.Clone(fs.Spec.Assets)
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": fs.ResourceVersion},
		"spec":     map[string]any{"assets": list},
	})
	if err != nil {
		return stepDone, fmt.Errorf("failed to encode spec.assets as a list: %w", err)
	}
	err = r.Patch(ctx, fs, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(FieldManager))
	switch {
	case err == nil:
		r.Recorder.Eventf(fs, nil, corev1.EventTypeWarning, faucetv1alpha1.ReasonDeprecatedAssets, "RewriteAssets", "%s",
			truncate(rewrittenAssetsMessage(fs, list), maxEventNote))
		ctrl.LoggerFrom(ctx).Info("rewrote spec.assets of the object form as a list", "assets", len(list))
		return stepDone, nil
	case apierrors.IsInvalid(err) || apierrors.IsForbidden(err):
		// Nothing a retry changes: run with the list read in place.
		if r.deprecationWarnings.first(fs) {
			r.Recorder.Eventf(fs, nil, corev1.EventTypeWarning, faucetv1alpha1.ReasonDeprecatedAssets, "RewriteAssets", "%s",
				truncate(inPlaceAssetsMessage(list, err), maxEventNote))
		}
		return stepDone, nil
	default:
		return stepDone, fmt.Errorf("failed to rewrite spec.assets as a list: %w", err)
	}
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
// spec.assets is an object and which has no spec.treasury, while the
// CRD's rule on refills cannot read it). An operator that restarts warns
// once more.
type generationWarnings struct {
	mu   sync.Mutex
	seen map[types.NamespacedName]warnedGeneration
}

type warnedGeneration struct {
	uid        types.UID
	generation int64
	// unreadable: the warning was of an empty object form, not of one
	// run in place; a change between them is news, with or without a new
	// generation.
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
// generation, while fs's spec.assets is an object form with nothing in it
// (rewriteLegacyAssets reports one it reads).
func (r *FaucetServerReconciler) warnDeprecatedAssets(_ context.Context, fs *faucetv1alpha1.FaucetServer) {
	if !fs.AssetsUnreadable() || !r.deprecationWarnings.first(fs) {
		return
	}
	r.Recorder.Eventf(fs, nil, corev1.EventTypeWarning, faucetv1alpha1.ReasonDeprecatedAssets, "ReadSpec", "%s",
		truncate(deprecatedAssetsMessage(fs), maxEventNote))
}
