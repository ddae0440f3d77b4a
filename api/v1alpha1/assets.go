package v1alpha1

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// AssetList is spec.assets: the assets the faucet drips beside STX.
type AssetList []AssetSpec

// UnmarshalJSON reads the list, and also the object form of earlier
// releases, {sbtc: {assetIdentifier, amount, rateLimits, refillBelow,
// refillAmount}, btc: {…, rateLimits}}, as the list it stands for (sbtc,
// then btc), each entry marked Legacy. The CRD takes only the list in a
// write, but keeps an object stored before the upgrade as it is (its
// spec.assets preserves what its schema does not know), so the API server
// returns it whole and the operator rewrites it as this list.
func (l *AssetList) UnmarshalJSON(b []byte) error {
	if !isJSONObject(b) {
		var list []AssetSpec
		if err := json.Unmarshal(b, &list); err != nil {
			return err
		}
		*l = list
		return nil
	}
	var old legacyAssets
	if err := json.Unmarshal(b, &old); err != nil {
		return fmt.Errorf("spec.assets in the object form of earlier releases: %w", err)
	}
	var list AssetList
	if s := old.SBTC; s != nil {
		list = append(list, AssetSpec{Name: "sbtc", legacy: true, RateLimits: s.RateLimits, Token: &TokenSpec{
			AssetIdentifier: s.AssetIdentifier, Amount: s.Amount, RefillBelow: s.RefillBelow, RefillAmount: s.RefillAmount,
		}})
	}
	if btc := old.BTC; btc != nil {
		spec := btc.BTCSpec
		list = append(list, AssetSpec{Name: "btc", legacy: true, RateLimits: btc.RateLimits, BTC: &spec})
	}
	*l = list
	return nil
}

// isJSONObject reports whether b is a JSON object.
func isJSONObject(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '{'
}

// Legacy reports whether the entry was read from the object form of
// spec.assets of earlier releases.
func (a *AssetSpec) Legacy() bool { return a.legacy }

// legacyAssets is spec.assets as earlier releases had it.
// +kubebuilder:object:generate=false
type legacyAssets struct {
	SBTC *struct {
		AssetIdentifier string           `json:"assetIdentifier"`
		Amount          int64            `json:"amount"`
		RateLimits      *AssetRateLimits `json:"rateLimits"`
		RefillBelow     *int64           `json:"refillBelow"`
		RefillAmount    *int64           `json:"refillAmount"`
	} `json:"sbtc"`
	BTC *struct {
		BTCSpec
		RateLimits *AssetRateLimits `json:"rateLimits"`
	} `json:"btc"`
}

// UnmarshalJSON reads the spec as its fields say, and notes whether
// spec.assets is in the object form of earlier releases (see AssetList),
// which the list cannot tell of an empty object, {}.
func (s *FaucetServerSpec) UnmarshalJSON(b []byte) error {
	type plain FaucetServerSpec // the fields, without this method
	if err := json.Unmarshal(b, (*plain)(s)); err != nil {
		return err
	}
	var raw struct {
		Assets json.RawMessage `json:"assets"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	s.assetsObject = isJSONObject(raw.Assets)
	return nil
}

// LegacyAssets reports whether spec.assets is in the object form of
// earlier releases, read or not (AssetsUnreadable).
func (fs *FaucetServer) LegacyAssets() bool {
	if fs.Spec.assetsObject {
		return true
	}
	for _, a := range fs.Spec.Assets {
		if a.Legacy() {
			return true
		}
	}
	return false
}

// AssetsUnreadable reports whether spec.assets is in the object form of
// earlier releases with nothing in it to read, {}: written so, or the
// content lost where a CRD without this release's preservation pruned it
// and a write stored what was left. Which assets it configured is then
// unknown.
func (fs *FaucetServer) AssetsUnreadable() bool {
	return fs.Spec.assetsObject && len(fs.Spec.Assets) == 0
}

// UnmarshalJSON reads the status as its fields say, but the object form
// of assets of earlier releases ({sbtc: …, btc: …}, which the API server
// now returns as {}) as none, instead of failing the whole object's
// decoding: this release reports assets as a list, and writes it at its
// next read of the balances.
func (s *FundingStatus) UnmarshalJSON(b []byte) error {
	type plain FundingStatus // the fields, without this method
	v := struct {
		*plain
		Assets json.RawMessage `json:"assets,omitempty"` // shadows plain's
	}{plain: (*plain)(s)}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	s.Assets = nil
	if len(v.Assets) == 0 || isJSONObject(v.Assets) {
		return nil
	}
	if err := json.Unmarshal(v.Assets, &s.Assets); err != nil {
		return fmt.Errorf("status.funding.assets: %w", err)
	}
	return nil
}
