package server

import (
	"net/http"
	"slices"
	"strings"

	"github.com/stxfaucet/faucet-operator/server/faucet"
)

// The assets the HTTP layer serves are data: STX, the engine's configured
// SIP-010 tokens (in their order) and BTC when its faucet is configured.
// Every one gets POST /extended/v1/faucets/{name} and
// /extended/v3/faucets/{name}; /faucet/v1/info, the page and the metrics
// list them the same way.

// assetBTC names BTC drips in routes, metrics and logs.
const assetBTC faucet.Asset = "btc"

// incumbentAssets are the asset routes the incumbent API always has: they
// answer 403 "… faucet is not available" when this faucet is not
// configured for them, as the incumbent's do, rather than 404. The names
// are how its messages write them.
var incumbentAssets = []struct {
	name  faucet.Asset
	label string
}{{"sbtc", "sBTC"}, {assetBTC, "BTC"}}

// stacksAssets lists the Stacks assets the faucet drips: STX, then its
// tokens.
func (s *server) stacksAssets() []faucet.Asset {
	out := []faucet.Asset{faucet.AssetSTX}
	for _, t := range s.cfg.Faucet.Tokens() {
		out = append(out, t.Name)
	}
	return out
}

// assetNames lists every asset the faucet drips, for answers that name
// them.
func (s *server) assetNames() []string {
	var out []string
	for _, a := range s.stacksAssets() {
		out = append(out, string(a))
	}
	if s.cfg.BTC != nil {
		out = append(out, string(assetBTC))
	}
	return out
}

// token finds a configured token by name.
func (s *server) token(name faucet.Asset) (faucet.TokenInfo, bool) {
	for _, t := range s.cfg.Faucet.Tokens() {
		if t.Name == name {
			return t, true
		}
	}
	return faucet.TokenInfo{}, false
}

// assetOn reports whether the faucet drips asset: STX always, a token when
// it is configured.
func (s *server) assetOn(asset faucet.Asset) bool {
	if asset.IsSTX() {
		return true
	}
	_, on := s.token(asset)
	return on
}

// suspended reports whether the operator suspended asset's drips: all of
// them (--suspend) or this asset's (--suspend-asset).
func (s *server) suspended(asset faucet.Asset) bool {
	return s.cfg.Suspended || slices.Contains(s.cfg.SuspendedAssets, asset)
}

// suspendedMessage says who suspended what, for people.
func (s *server) suspendedMessage(asset faucet.Asset) string {
	if s.cfg.Suspended {
		return "The faucet is suspended by its operator."
	}
	return "The " + s.assetLabel(asset) + " faucet is suspended by its operator."
}

// assetLabel is how people write the asset's name: the incumbent's, else
// a token's symbol as its contract says it, else its name in capitals.
func (s *server) assetLabel(asset faucet.Asset) string {
	if asset.IsSTX() {
		return "STX"
	}
	for _, a := range incumbentAssets {
		if a.name == asset {
			return a.label
		}
	}
	if t, ok := s.token(asset); ok && t.Metadata != nil && t.Metadata.Symbol != "" {
		return t.Metadata.Symbol
	}
	return strings.ToUpper(string(asset))
}

// assetOff is the incumbent's 403 for an asset whose faucet is not
// configured.
func (s *server) assetOff(asset faucet.Asset) *dripFailure {
	msg := s.assetLabel(asset) + " faucet is not available"
	return &dripFailure{status: http.StatusForbidden, reason: string(faucet.ReasonDisabled), message: msg, v3Message: msg}
}

// handleUnknownAsset answers a drip of an asset the faucet does not know:
// 404, naming the ones it drips.
func (s *server) handleUnknownAsset(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		handleNotFound(w, r)
		return
	}
	name := r.PathValue("asset")
	if !safeToken(name, "-_.") || len(name) > 64 {
		name = "that asset"
	}
	writeError(w, http.StatusNotFound, errorBody{
		Error:  "this faucet does not drip " + name + "; it drips " + strings.Join(s.assetNames(), ", "),
		Reason: "unknown_asset",
	})
}
