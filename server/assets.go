package server

import (
	"net/http"
	"strings"

	"github.com/stxfaucet/faucet-operator/server/faucet"
	"github.com/stxfaucet/faucet-operator/server/settings"
	"github.com/stxfaucet/faucet-operator/server/switches"
)

// The assets the HTTP layer serves are data: STX, the engine's configured
// SIP-010 tokens (in their order) and BTC when its faucet is configured.
// Every one gets POST /extended/v1/faucets/{name} and
// /extended/v3/faucets/{name}; /faucet/v1/info, the page and the metrics
// list them the same way.

// catalogue is what the faucet offers: its assets, how people name them,
// and the operator's switches on them. The server embeds it.
type catalogue struct {
	assets   []*asset      // in order: STX, the tokens, BTC
	switches *switches.Set // nil: every asset on
}

// assetBTC names BTC drips in routes, metrics and logs.
const assetBTC = faucet.Asset(settings.AssetBTC)

// lookup finds a configured asset by name.
func (c *catalogue) lookup(name faucet.Asset) (*asset, bool) {
	name = name.OrSTX()
	for _, a := range c.assets {
		if a.name == name {
			return a, true
		}
	}
	return nil, false
}

// assetNames lists every asset the faucet drips, for answers that name
// them.
func (c *catalogue) assetNames() []string {
	out := make([]string, len(c.assets))
	for i, a := range c.assets {
		out[i] = string(a.name)
	}
	return out
}

// onNames lists the assets the faucet drips now: configured and not
// turned off.
func (c *catalogue) onNames() []string {
	var out []string
	for _, a := range c.assets {
		if !c.turnedOff(a.name) {
			out = append(out, string(a.name))
		}
	}
	return out
}

// configured reports whether the faucet is set up to drip asset.
func (c *catalogue) configured(asset faucet.Asset) bool {
	_, ok := c.lookup(asset)
	return ok
}

// assetOn reports whether the faucet drips asset now: configured and not
// turned off.
func (c *catalogue) assetOn(asset faucet.Asset) bool {
	return c.configured(asset) && !c.turnedOff(asset)
}

// turnedOff reports whether the operator turned asset off (--disable-asset,
// spec.disabledAssets).
func (c *catalogue) turnedOff(asset faucet.Asset) bool {
	return c.switches.Load().Off(string(asset.OrSTX()))
}

// suspended reports whether the operator suspended asset's drips: all of
// them (--suspend) or this asset's (--suspend-asset).
func (c *catalogue) suspended(asset faucet.Asset) bool {
	return c.switches.Load().Suspended(string(asset.OrSTX()))
}

// suspendedMessage says who suspended what, for people.
func (c *catalogue) suspendedMessage(asset faucet.Asset) string {
	if c.switches.Load().Suspend {
		return "The faucet is suspended by its operator."
	}
	return "The " + c.assetLabel(asset) + " faucet is suspended by its operator."
}

// knownAsset reports whether asset has drip routes here: the assets the
// faucet is configured for, and the incumbent's.
func (c *catalogue) knownAsset(asset faucet.Asset) bool {
	_, incumbent := settings.IncumbentLabels[string(asset)]
	return c.configured(asset) || incumbent
}

// switchedState is asset's state with the operator's switches applied:
// off, else suspended, else state as it is.
func (c *catalogue) switchedState(asset faucet.Asset, state, message string) (string, string) {
	switch {
	case c.turnedOff(asset):
		return stateOff, "The " + c.assetLabel(asset) + " faucet is turned off by its operator: its drips answer 403."
	case c.suspended(asset):
		return stateSuspended, c.suspendedMessage(asset)
	}
	return state, message
}

// assetLabel is how people write the asset's name: its kind's label when
// it is configured, else the incumbent's, else its name in capitals.
func (c *catalogue) assetLabel(asset faucet.Asset) string {
	if a, ok := c.lookup(asset); ok {
		return a.label()
	}
	if l, ok := settings.IncumbentLabels[string(asset)]; ok {
		return l
	}
	return strings.ToUpper(string(asset))
}

// btcNotConfigured is the incumbent's text for BTC drips when no Bitcoin
// node is configured (and BTC is not turned off), word for word.
const btcNotConfigured = "BTC Faucet is not configured."

// assetOff is the incumbent's 403 for an asset this faucet does not drip
// now: "… faucet is not available" when it is turned off or (a token) not
// configured, "BTC Faucet is not configured." for BTC without a node.
func (c *catalogue) assetOff(asset faucet.Asset) *dripFailure {
	msg, reason, detail := c.assetLabel(asset)+" faucet is not available", string(faucet.ReasonDisabled), ""
	switch {
	case c.turnedOff(asset):
		detail = "the " + c.assetLabel(asset) + " faucet is turned off by its operator"
	case asset == assetBTC:
		// Not configured (a configured asset that is not turned off is on).
		msg, reason = btcNotConfigured, reasonNotConfigured
	}
	return &dripFailure{status: http.StatusForbidden, reason: reason, message: msg, detail: detail, v3Message: msg}
}

// refuseOff answers a request for an asset that is not on: 403, counted.
// It reports whether it answered; v3 picks the body shape.
func (s *server) refuseOff(w http.ResponseWriter, asset faucet.Asset, v3 bool) bool {
	if s.assetOn(asset) {
		return false
	}
	f := s.assetOff(asset)
	s.metrics.observeDrip(asset, f.reason)
	if v3 {
		f.writeV3(w)
	} else {
		f.writeV1(w, s.cfg.Clock.Now())
	}
	return true
}

// handleUnknownAsset answers a drip of an asset the faucet does not know:
// 404, naming the ones it drips.
func (s *server) handleUnknownAsset(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		handleNotFound(w, r)
		return
	}
	writeError(w, http.StatusNotFound, errorBody{
		Error:  "this faucet does not drip " + shortName(r.PathValue("asset")) + "; it drips " + strings.Join(s.assetNames(), ", "),
		Reason: "unknown_asset",
	})
}
