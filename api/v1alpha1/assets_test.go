package v1alpha1

import (
	"encoding/json"
	"strings"
	"testing"
)

// The object form of spec.assets of earlier releases reads as the list it
// stands for, each entry marked legacy; the list form reads as it is.
func TestAssetListReadsTheObjectForm(t *testing.T) {
	var spec FaucetServerSpec
	old := `{"assets":{"sbtc":{"assetIdentifier":"SN3VMHXEN64ZZF71JQ5VESXDWTR301XTTXGF4J8F1.sbtc-token::sbtc-token","amount":100000,
	  "rateLimits":{"perAddress":{"requests":2,"window":"1h"}},"refillBelow":5},
	  "btc":{"network":"signet","rpc":{"url":"http://bitcoind:38332"},"keySecretRef":{"name":"btc"},
	  "rateLimits":{"perIP":{"requests":3,"window":"1m"}}}}}`
	if err := json.Unmarshal([]byte(old), &spec); err != nil {
		t.Fatal(err)
	}
	fs := &FaucetServer{Spec: spec}
	if len(spec.Assets) != 2 || !fs.LegacyAssets() {
		t.Fatalf("assets %+v, legacy %v", spec.Assets, fs.LegacyAssets())
	}
	sb, btc := spec.Assets[0], spec.Assets[1]
	if sb.Name != "sbtc" || sb.Token == nil || sb.Token.Amount != 100000 || *sb.Token.RefillBelow != 5 ||
		sb.RateLimits.PerAddress.Requests != 2 || sb.Token.AssetIdentifier != "SN3VMHXEN64ZZF71JQ5VESXDWTR301XTTXGF4J8F1.sbtc-token::sbtc-token" {
		t.Fatalf("sbtc %+v", sb)
	}
	if btc.Name != "btc" || btc.BTC == nil || btc.BTC.Network != "signet" || btc.BTC.KeySecretRef.Name != "btc" ||
		btc.RateLimits.PerIP.Requests != 3 || fs.BTC() != btc.BTC {
		t.Fatalf("btc %+v", btc)
	}

	var list FaucetServerSpec
	if err := json.Unmarshal([]byte(`{"assets":[{"name":"tusd","token":{"assetIdentifier":"ST2CY5V39NHDPWSXMW9QDT3HC3GD6Q6XX4CFRK9AG.tusd-token::tusd","amount":7}}]}`), &list); err != nil {
		t.Fatal(err)
	}
	lf := &FaucetServer{Spec: list}
	if len(list.Assets) != 1 || lf.LegacyAssets() || len(lf.Tokens()) != 1 || lf.BTC() != nil {
		t.Fatalf("list form %+v", list.Assets)
	}
	out, err := json.Marshal(lf.Spec.Assets)
	if err != nil || string(out) != `[{"name":"tusd","token":{"assetIdentifier":"ST2CY5V39NHDPWSXMW9QDT3HC3GD6Q6XX4CFRK9AG.tusd-token::tusd","amount":7}}]` {
		t.Fatalf("marshalled %s, %v", out, err)
	}
	if err := json.Unmarshal([]byte(`{"assets":{"sbtc":"nope"}}`), &spec); err == nil {
		t.Fatal("a broken object form was read")
	}
}

// An object form with nothing in it, {}, has nothing to read but is still
// the object form.
func TestAssetListPrunedObjectForm(t *testing.T) {
	for _, tt := range []struct {
		doc                string
		legacy, unreadable bool
		entries            int
	}{
		{`{"assets":{}}`, true, true, 0},
		{`{"assets":{"sbtc":{"assetIdentifier":"SN3VMHXEN64ZZF71JQ5VESXDWTR301XTTXGF4J8F1.sbtc-token::sbtc-token","amount":1}}}`, true, false, 1},
		{`{"assets":[]}`, false, false, 0},
		{`{"assets":null}`, false, false, 0},
		{`{}`, false, false, 0},
		{`{"assets":[{"name":"btc","btc":{"rpc":{"url":"http://b:1"},"keySecretRef":{"name":"k"}}}]}`, false, false, 1},
	} {
		fs := &FaucetServer{Spec: FaucetServerSpec{assetsObject: true}} // a reused object is read afresh
		if err := json.Unmarshal([]byte(tt.doc), &fs.Spec); err != nil {
			t.Fatalf("%s: %v", tt.doc, err)
		}
		if fs.LegacyAssets() != tt.legacy || fs.AssetsUnreadable() != tt.unreadable || len(fs.Spec.Assets) != tt.entries {
			t.Errorf("%s: legacy %v unreadable %v entries %d; want %v %v %d", tt.doc,
				fs.LegacyAssets(), fs.AssetsUnreadable(), len(fs.Spec.Assets), tt.legacy, tt.unreadable, tt.entries)
		}
		if cp := fs.DeepCopy(); cp.LegacyAssets() != tt.legacy || cp.AssetsUnreadable() != tt.unreadable {
			t.Errorf("%s: a deep copy forgets the form", tt.doc)
		}
	}
}

// The object form of status.funding.assets of earlier releases, which the
// API server returns as {}, reads as none instead of failing the whole
// object; the list and the other fields read as they are.
func TestFundingStatusReadsTheObjectForm(t *testing.T) {
	for _, tt := range []struct {
		doc    string
		assets int
	}{
		{`{"totalUSTX":7,"dripsLeft":3,"assets":{}}`, 0},
		{`{"totalUSTX":7,"dripsLeft":3,"assets":{"sbtc":{"assetIdentifier":"x","balance":5}}}`, 0},
		{`{"totalUSTX":7,"dripsLeft":3,"assets":null}`, 0},
		{`{"totalUSTX":7,"dripsLeft":3}`, 0},
		{`{"totalUSTX":7,"dripsLeft":3,"assets":[{"name":"sbtc","balance":5},{"name":"btc"}]}`, 2},
	} {
		st := FundingStatus{Assets: []AssetFunding{{Name: "stale"}}} // a reused object is read afresh
		if err := json.Unmarshal([]byte(tt.doc), &st); err != nil {
			t.Fatalf("%s: %v", tt.doc, err)
		}
		if st.TotalUSTX != 7 || st.DripsLeft != 3 || len(st.Assets) != tt.assets {
			t.Errorf("%s: read %+v", tt.doc, st)
		}
	}
	var fs FaucetServer
	doc := `{"spec":{"assets":[]},"status":{"observedGeneration":2,"funding":{"totalUSTX":7,"assets":{}}}}`
	if err := json.Unmarshal([]byte(doc), &fs); err != nil || fs.Status.ObservedGeneration != 2 || fs.Status.Funding.TotalUSTX != 7 {
		t.Errorf("the whole object: %+v, %v", fs.Status, err)
	}
	var st FundingStatus
	if err := json.Unmarshal([]byte(`{"assets":[{"name":1}]}`), &st); err == nil || !strings.Contains(err.Error(), "status.funding.assets") {
		t.Errorf("a broken list: %v", err)
	}
}

// A token's lowThreshold is its own; BTC's is always the faucet's.
func TestAssetLowThreshold(t *testing.T) {
	seven, three := int64(7), int64(3)
	fs := &FaucetServer{Spec: FaucetServerSpec{Funding: &FundingSpec{LowThreshold: &seven}}}
	if got := fs.AssetLowThreshold(AssetSpec{Name: "tusd", Token: &TokenSpec{}, LowThreshold: &three}); got != 3 {
		t.Errorf("token: %d", got)
	}
	if got := fs.AssetLowThreshold(AssetSpec{Name: "sbtc", Token: &TokenSpec{}}); got != 7 {
		t.Errorf("token without its own: %d", got)
	}
	if got := fs.AssetLowThreshold(AssetSpec{Name: "btc", BTC: &BTCSpec{}, LowThreshold: &three}); got != 7 {
		t.Errorf("btc: %d", got)
	}
}
