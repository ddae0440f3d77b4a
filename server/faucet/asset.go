package faucet

import "github.com/stxfaucet/faucet-operator/server/settings"

// Asset names what a drip pays: STX, or one of the configured SIP-010
// tokens (Config.Tokens). The names are path segments
// (/extended/v1/faucets/{asset}), and they label metrics and history rows.
type Asset string

// AssetSTX is the chain's own asset; every other name is a token's.
const AssetSTX Asset = settings.AssetSTX

// OrSTX reads the zero Asset (rows and requests from before assets
// existed) as STX.
func (a Asset) OrSTX() Asset {
	if a == "" {
		return AssetSTX
	}
	return a
}

// IsSTX is true for STX (and the zero Asset).
func (a Asset) IsSTX() bool { return a.OrSTX() == AssetSTX }

// cost is what one transaction takes from its sender's account: µSTX (the
// amount of an STX transfer plus the fee) and, for a token transfer, base
// units of that one token.
type cost struct {
	stx    uint64
	token  Asset // "" for none
	amount uint64
}

// costOf is what a journal entry of asset moving amount with fee costs.
func costOf(asset Asset, amount, fee uint64) cost {
	if !asset.IsSTX() {
		return cost{stx: fee, token: asset, amount: amount}
	}
	return cost{stx: satAdd(amount, fee)}
}
