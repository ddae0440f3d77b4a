package server

import (
	"cmp"
	"context"
	"net/http"
	"strings"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/faucet"
	"github.com/stxfaucet/faucet-operator/server/settings"
)

// SIP-010 tokens: any fungible token on Stacks, configured by name and
// contract, paid by the engine as a contract call with a post-condition.

func init() {
	registerKind(1, func(cfg *Config) []*asset {
		var out []*asset
		for _, t := range cfg.Faucet.Tokens() {
			k := tokenKind{stacksPayer{engine: cfg.Faucet, name: t.Name, senders: &addressText{}}}
			out = append(out, &asset{name: t.Name, chain: chainStacks, exhaustedV1: http.StatusServiceUnavailable, assetKind: k})
		}
		return out
	})
}

type tokenKind struct{ stacksPayer }

// info is the token as the engine knows it now (its contract and metadata
// are read from the node).
func (k tokenKind) info() (faucet.TokenInfo, bool) {
	for _, t := range k.engine.Tokens() {
		if t.Name == k.name {
			return t, true
		}
	}
	return faucet.TokenInfo{}, false
}

// label is the token's symbol as its contract says it, else the
// incumbent's name for it, else its name in capitals.
func (k tokenKind) label() string {
	if t, ok := k.info(); ok && t.Metadata != nil && t.Metadata.Symbol != "" {
		return t.Metadata.Symbol
	}
	if l, ok := settings.IncumbentLabels[string(k.name)]; ok {
		return l
	}
	return strings.ToUpper(string(k.name))
}

func (k tokenKind) decimals() int {
	if t, ok := k.info(); ok && t.Metadata != nil {
		return int(t.Metadata.Decimals)
	}
	return -1
}

func (k tokenKind) recipient(text string) (recipient, *refusal) {
	return stacksRecipientOf(k.label(), text)
}

func (tokenKind) admits(a *asset, o dripOptions) *refusal { return refuseOptions(a, o, false, false) }

func (k tokenKind) quote(context.Context, dripOptions) (uint64, error) {
	t, _ := k.info()
	return t.Amount, nil
}

func (k tokenKind) funds() (uint64, float64, bool) {
	return stacksFunds(k.engine, func() (faucet.Funding, bool) { return k.engine.TokenFunding(k.name) })
}

func (k tokenKind) dispensed(m *Metrics, _ dripOptions, amount uint64) {
	m.dispensedToken.WithLabelValues(string(k.name)).Add(float64(amount))
}

// describe: a token's state is the Stacks faucet's (its node) unless it
// cannot be dripped (its contract is unknown), and then its funding's.
func (k tokenKind) describe(_ context.Context, env *infoEnv, a *asset, out *infoAsset) {
	tok, _ := k.info()
	al := env.limits.Of(string(k.name))
	out.Name, out.Amount, out.AssetSource = k.label(), tok.Amount, "configured"
	out.Limits = infoLimits{Address: limitInfo(al.PerAddress), IP: limitInfo(al.PerIP)}
	out.State, out.StateMessage = env.state, env.message
	if tok.FromPoX {
		out.AssetSource = cmp.Or(tok.Source, settings.SourcePoX)
	}
	if !tok.Asset.IsZero() {
		id := tok.Asset.String()
		out.AssetIdentifier = &id
	}
	if d := k.decimals(); d >= 0 {
		out.Decimals = &d
	}
	switch {
	case tok.Err != nil:
		out.State, out.StateMessage = stateUnavailable, "The "+out.Name+" faucet is not available: "+tok.Err.Error()
	case env.state == stateReady || env.state == stateLow || env.state == stateEmpty:
		if tf, _ := k.engine.TokenFunding(k.name); tf.Keys > 0 {
			out.Funding = fundingInfo(tf)
			out.State, out.StateMessage = fundingState(tf, env.lowDrips(k.name), out.Name)
		} else if tok.Metadata == nil && tok.MetadataErr != nil && !node.IsUnavailable(tok.MetadataErr) && out.AssetIdentifier != nil {
			// The node answers but not for this contract: most often it
			// is not deployed there (a network without sBTC).
			out.State, out.StateMessage = stateUnavailable, "The "+out.Name+" faucet is not available: the node cannot read its contract "+
				*out.AssetIdentifier+" (is it deployed on this network?)."
		} else {
			// A drip now could not be paid: no key's balance is read yet.
			out.State, out.StateMessage = stateUnavailable, "The "+out.Name+" faucet is starting: its keys' balances are not read yet."
		}
	}
}
