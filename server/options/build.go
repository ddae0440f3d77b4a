package options

import (
	"log/slog"
	"slices"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/faucet"
	"github.com/stxfaucet/faucet-operator/server/guard"
)

// The devnet's own assets (configuration, like its genesis): sBTC at its
// testnet identifier, announced in /v2/pox, and a second token, tUSD, a
// test stablecoin with 6 decimals, so that a newcomer sees an arbitrary
// token drip out of the box.
const (
	DevnetSBTCAmount      uint64 = 100_000 // 0.001 sBTC
	DevnetTestTokenName          = "tusd"
	DevnetTestTokenAsset         = "ST2CY5V39NHDPWSXMW9QDT3HC3GD6Q6XX4CFRK9AG.tusd-token::tusd"
	DevnetTestTokenAmount uint64 = 10_000_000 // 10 tUSD
	// DevnetTestTokenDecimals, …Display and …Symbol are what its contract
	// answers.
	DevnetTestTokenDecimals = 6
	DevnetTestTokenDisplay  = "Test USD"
	DevnetTestTokenSymbol   = "tUSD"
)

// DevnetSBTCAsset is where the devnet deploys sBTC: --sbtc-asset, else
// the testnet identifier.
func (o *Serve) DevnetSBTCAsset() string {
	if o.Assets.SBTC.Asset != "" {
		return o.Assets.SBTC.Asset
	}
	return stacks.SBTCTestnet
}

// TokenList is every token the faucet drips, in order: sBTC's shorthand,
// the --token ones, and the devnet's test token.
func (o *Serve) TokenList() []Token {
	var out []Token
	a := o.Assets
	if o.Devnet.On && o.Devnet.SBTC && a.SBTC.Amount == 0 {
		a.SBTC.Amount = DevnetSBTCAmount
	}
	if t, ok := a.sbtcToken(); ok {
		out = append(out, t)
	}
	out = append(out, a.Tokens...)
	if o.Devnet.On && o.Devnet.TestToken && !slices.ContainsFunc(out, func(t Token) bool { return t.Name == DevnetTestTokenName }) {
		out = append(out, Token{Name: DevnetTestTokenName, Asset: DevnetTestTokenAsset, Amount: DevnetTestTokenAmount,
			Limits: guard.DefaultAssetLimits()})
	}
	return out
}

// EngineTokens are the engine's tokens.
func (o *Serve) EngineTokens() ([]faucet.Token, error) {
	var out []faucet.Token
	for _, t := range o.TokenList() {
		e, err := t.Engine()
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// RateLimits are every asset's limits: STX's, each token's, BTC's.
func (o *Serve) RateLimits() guard.Limits {
	l := guard.Limits{PerAddress: o.Limits.Address, StackingPerAddress: o.Limits.Stacking, PerIP: o.Limits.IP,
		Budgets: map[string]guard.Budget{string(faucet.AssetSTX): o.Budgets.Of(string(faucet.AssetSTX), o.Amounts.Default)}}
	for _, t := range o.TokenList() {
		l = l.With(t.Name, t.Limits)
		l.Budgets[t.Name] = o.Budgets.Of(t.Name, t.Amount)
	}
	if o.btcOn() {
		l.Budgets["btc"] = o.Budgets.Of("btc", uint64(max(o.BTC.Amounts.Default, 0)))
	}
	return l.With("btc", o.BTC.Limits)
}

// LowDrips are the assets' thresholds of "low" that differ from
// --low-drips.
func (o *Serve) LowDrips() map[faucet.Asset]int {
	m := map[faucet.Asset]int{}
	for _, t := range o.TokenList() {
		if t.LowDrips > 0 {
			m[faucet.Asset(t.Name)] = t.LowDrips
		}
	}
	return m
}

// EngineConfig is the Stacks engine's configuration: keys, node and
// state given, the rest from the flags.
func (o *Serve) EngineConfig(keys []*stacks.PrivateKey, treasury *stacks.PrivateKey, node faucet.NodeClient, state faucet.State, log *slog.Logger) (faucet.Config, error) {
	batching, err := o.Batching.Engine()
	if err != nil {
		return faucet.Config{}, err
	}
	tokens, err := o.EngineTokens()
	if err != nil {
		return faucet.Config{}, err
	}
	return faucet.Config{
		Keys: keys, Node: node, ChainID: uint32(o.Node.ChainID), Logger: log,
		Amounts: o.Amounts.Engine(), Tokens: tokens, Fees: o.Fees.Engine(), Batching: batching,
		Refills: faucet.Refills{Treasury: treasury, Below: o.Keys.RefillBelow, Amount: o.Keys.RefillAmount},
		State:   state, Timing: o.Sending.Engine(),
	}, nil
}
