package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
)

// objectFormFaucetServer is a FaucetServer whose spec.assets is in the
// object form of earlier releases, sBTC and BTC, as an API server serving
// the CRD of such a release returns it.
const objectFormFaucetServer = `{"apiVersion":"faucet.stxfaucet.dev/v1alpha1","kind":"FaucetServer",
 "metadata":{"name":"faucet","namespace":"testnet","uid":"uid-1","generation":4},
 "spec":{"node":{"url":"http://stacks-node:20443"},"keySecretRef":{"name":"faucet-keys"},
  "assets":{"sbtc":{"assetIdentifier":"SN3VMHXEN64ZZF71JQ5VESXDWTR301XTTXGF4J8F1.sbtc-token::sbtc-token","amount":100000,
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
// BTC, and the Warning events DeprecatedAssets show the list to write,
// whether the operator stored it in place of the object or could not.
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

	// The list each message shows is the list to write: it reads back as
	// the same assets, default limits left out.
	for _, msg := range []string{
		rewrittenAssetsMessage(&fs, fs.Spec.Assets),
		inPlaceAssetsMessage(fs.Spec.Assets, errors.New(`spec.assets in body must be of type object: "array"`)),
	} {
		_, list, ok := strings.Cut(msg, "[")
		list, said, _ := strings.Cut("["+list, ". The API server said: ")
		var written faucetv1alpha1.AssetList
		if err := json.Unmarshal([]byte(list), &written); !ok || err != nil {
			t.Fatalf("message %q: no list in it (%v)", msg, err)
		}
		if len(written) != 2 || written[0].Name != "sbtc" || written[0].Token.AssetIdentifier != testnetSBTC ||
			written[0].RateLimits.PerAddress != nil || written[0].RateLimits.PerIP.Requests != 3 ||
			written[1].Name != "btc" || written[1].BTC.Network != "signet" || written[1].RateLimits.PerAddress.Requests != 1 ||
			written[0].Legacy() || strings.Contains(list, "legacy") {
			t.Errorf("list in the message %s", list)
		}
		if strings.HasPrefix(msg, "spec.assets is in") && !strings.Contains(said, "must be of type object") {
			t.Errorf("message %q does not say why the list was refused", msg)
		}
	}
	if msg := rewrittenAssetsMessage(&fs, fs.Spec.Assets); !strings.Contains(msg, "rewrote it in place as the list") ||
		!strings.Contains(msg, "kubectl get fsrv faucet -o jsonpath='{.spec.assets}'") {
		t.Errorf("message %q", msg)
	}

	// One the operator reads has its events from the rewrite, not from
	// the status patch.
	rec := events.NewFakeRecorder(10)
	r := &FaucetServerReconciler{Recorder: rec}
	r.warnDeprecatedAssets(context.Background(), &fs)
	if e := nextEvent(rec); e != "" {
		t.Errorf("event %q", e)
	}
}

// TestUnreadableAssetsStall: an object-form spec.assets with nothing in
// it, {}, stalls the FaucetServer, leaving its pods alone, and tells how to
// write the list, in a Warning event once per generation.
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
	for _, want := range []string{"spec.assets is an empty object ({})", "which assets it configured is unknown", "Running pods are left alone", "e.g. spec.assets: [{name: sbtc, token: {"} {
		if !strings.Contains(stalled.Message, want) {
			t.Errorf("message %q lacks %q", stalled.Message, want)
		}
	}
	rec := events.NewFakeRecorder(10)
	r := &FaucetServerReconciler{Recorder: rec}
	ctx := context.Background()
	r.warnDeprecatedAssets(ctx, &fs)
	if e := nextEvent(rec); !strings.Contains(e, "Warning DeprecatedAssets") || !strings.Contains(e, "an empty object") || len(e) > maxEventNote+100 {
		t.Errorf("event %q", e)
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
	r.warnDeprecatedAssets(ctx, fixture(withAssets(sbtcAsset(1, nil))))
	if e := nextEvent(rec); e != "" {
		t.Errorf("the list form: event %q", e)
	}
}
