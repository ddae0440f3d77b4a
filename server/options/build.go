package options

import (
	"slices"

	"github.com/stxfaucet/faucet-operator/server/guard"
	"github.com/stxfaucet/faucet-operator/server/settings"
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
// today's testnet identifier (settings.SBTCTestnet), the one a faucet
// without --sbtc-asset falls back to when its node names none in /v2/pox.
func (o *Serve) DevnetSBTCAsset() string {
	if o.Assets.SBTC.Asset != "" {
		return o.Assets.SBTC.Asset
	}
	return settings.SBTCTestnet
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

// RateLimits are every asset's limits: STX's, each token's, BTC's.
func (o *Serve) RateLimits() guard.Limits {
	l := guard.Limits{PerAddress: o.Limits.Address, StackingPerAddress: o.Limits.Stacking, PerIP: o.Limits.IP,
		Budgets: map[string]guard.Budget{settings.AssetSTX: o.Budgets.Of(settings.AssetSTX, o.Amounts.Default)}}
	for _, t := range o.TokenList() {
		l = l.With(t.Name, t.Limits)
		l.Budgets[t.Name] = o.Budgets.Of(t.Name, t.Amount)
	}
	if o.btcOn() {
		l.Budgets[settings.AssetBTC] = o.Budgets.Of(settings.AssetBTC, uint64(max(o.BTC.Amounts.Default, 0)))
	}
	return l.With(settings.AssetBTC, o.BTC.Limits)
}

// LowDrips are the assets' thresholds of "low" that differ from
// --low-drips.
func (o *Serve) LowDrips() map[string]int {
	m := map[string]int{}
	for _, t := range o.TokenList() {
		if t.LowDrips > 0 {
			m[t.Name] = t.LowDrips
		}
	}
	return m
}
