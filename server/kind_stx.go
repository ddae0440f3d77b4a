package server

import (
	"context"
	"net/http"

	"github.com/stxfaucet/faucet-operator/server/faucet"
)

// STX: the Stacks chain's own coin, paid by the engine as a transfer (or
// in a send-many call), 500 STX by default or, with stacking, PoX's
// minimum plus padding.

func init() {
	registerKind(0, func(cfg *Config) []*asset {
		k := stxKind{stacksPayer{engine: cfg.Faucet, name: faucet.AssetSTX, senders: &addressText{}}}
		return []*asset{{name: faucet.AssetSTX, chain: chainStacks, exhaustedV1: http.StatusInternalServerError, assetKind: k}}
	})
}

type stxKind struct{ stacksPayer }

func (stxKind) label() string { return "STX" }
func (stxKind) decimals() int { return stxDecimals }

func (k stxKind) recipient(text string) (recipient, *refusal) {
	return stacksRecipientOf(k.label(), text)
}

func (stxKind) admits(a *asset, o dripOptions) *refusal { return refuseOptions(a, o, true, false) }

func (k stxKind) quote(ctx context.Context, o dripOptions) (uint64, error) {
	if o.stacking {
		return k.engine.StackingAmount(ctx)
	}
	return k.engine.DefaultAmount(), nil
}

func (k stxKind) funds() (uint64, float64, bool) {
	return stacksFunds(k.engine, func() (faucet.Funding, bool) { return k.engine.Funding(), true })
}

func (stxKind) dispensed(m *Metrics, o dripOptions, amount uint64) {
	tier := "default"
	if o.stacking {
		tier = "stacking"
	}
	m.dispensed.WithLabelValues(tier).Add(float64(amount))
}

// describe: STX's state is the Stacks faucet's (its node, its funds).
func (k stxKind) describe(_ context.Context, env *infoEnv, a *asset, out *infoAsset) {
	out.Name, out.Decimals, out.Amount = k.label(), &stxDecimals, k.engine.DefaultAmount()
	out.Limits = infoLimits{Address: limitInfo(env.limits.PerAddress), Stacking: limitInfo(env.limits.StackingPerAddress), IP: limitInfo(env.limits.PerIP)}
	out.State, out.StateMessage = env.state, env.message
	if env.fund.Keys > 0 {
		out.Funding = fundingInfo(env.fund)
	}
}
