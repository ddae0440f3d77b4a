package faucet

import (
	"context"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// Asset names what a drip pays: STX, or the configured SIP-010 token. The
// names are the incumbent's path segments (/extended/v1/faucets/{asset}),
// and they label metrics and history rows.
type Asset string

const (
	AssetSTX  Asset = "stx"
	AssetSBTC Asset = "sbtc"
)

// OrSTX reads the zero Asset (rows and requests from before assets
// existed) as STX.
func (a Asset) OrSTX() Asset {
	if a == "" {
		return AssetSTX
	}
	return a
}

// IsToken is true for the SIP-010 token.
func (a Asset) IsToken() bool { return a.OrSTX() == AssetSBTC }

// cost is what one transaction takes from its sender's account: µSTX (the
// amount of an STX transfer plus the fee) and base units of the token.
type cost struct {
	stx, token uint64
}

// costOf is what a ledger row of asset moving amount with fee costs.
func costOf(asset Asset, amount, fee uint64) cost {
	if asset.IsToken() {
		return cost{stx: fee, token: amount}
	}
	return cost{stx: satAdd(amount, fee)}
}

func (c cost) plus(o cost) cost {
	return cost{stx: satAdd(c.stx, o.stx), token: satAdd(c.token, o.token)}
}

// TokenConfig is the configured token; ok is false when it is off.
func (f *Faucet) TokenConfig() (Token, bool) { return f.cfg.Token, f.cfg.Token.Enabled() }

// sendToken pays the token's drip amount to to in one SIP-010 transfer call,
// placed like every drip. Any key may pay it that holds the amount beyond
// its in-flight token transfers and the fee in STX; it shares that key's
// nonces with STX drips.
func (f *Faucet) sendToken(ctx context.Context, to stacks.Principal) (*Result, error) {
	tok := f.cfg.Token
	chainID := f.chain.id()
	memo := []byte(f.cfg.Amounts.Memo)
	fee := f.price.token(ctx, tok.Asset, to, memo)
	return f.placeDrip(ctx, f.placer.chooseDistributor(f.cfg.Timing.BusyWait), placement{to: to, asset: AssetSBTC, amount: tok.Amount, fee: fee,
		build: func(key *stacks.PrivateKey, nonce uint64) (*stacks.Transaction, error) {
			return stacks.NewSIP010Transfer(stacks.SIP010TransferParams{
				Asset: tok.Asset, Recipient: to, Amount: tok.Amount, Memo: memo, Nonce: nonce, Fee: fee, ChainID: chainID,
			}, key)
		}})
}

// placedResult is the Result of a drip's placed transaction.
func (f *Faucet) placedResult(done *placed, amount uint64) *Result {
	p := done.tx
	if done.lostAnswer != nil {
		f.log.Warn("broadcast outcome unknown; the tx is tracked and rebroadcast until its nonce confirms",
			"sender", p.Sender.String(), "nonce", p.Nonce, "txid", p.TxID.Hex0x(), "asset", string(p.Asset.OrSTX()), "err", done.lostAnswer)
	}
	return &Result{TxID: p.TxID, TxRaw: p.Raw, Amount: amount, Fee: p.Fee, Nonce: p.Nonce, Sender: p.Sender,
		Asset: p.Asset.OrSTX(), InDoubt: done.lostAnswer != nil}
}
