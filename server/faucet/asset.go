package faucet

import (
	"context"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// Asset names what a drip pays: STX, or one of the configured SIP-010
// tokens (Config.Tokens). The names are path segments
// (/extended/v1/faucets/{asset}), and they label metrics and history rows.
type Asset string

// AssetSTX is the chain's own asset; every other name is a token's.
const AssetSTX Asset = "stx"

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

// sendToken pays amount (0: tok's drip) to to in one SIP-010 transfer call,
// placed like every drip. Any key may pay it that holds the amount beyond
// its in-flight transfers of the token and the fee in STX; it shares that
// key's nonces with STX drips.
func (f *Faucet) sendToken(ctx context.Context, tok *tokenState, to stacks.Principal, amount uint64) (*Result, error) {
	asset, err := tok.usable()
	if err != nil {
		return nil, err
	}
	if amount == 0 {
		amount = tok.cfg.Amount
	}
	chainID := f.chain.id()
	memo := []byte(f.cfg.Amounts.Memo)
	fee := f.price.token(ctx, asset, to, memo)
	return f.placeDrip(ctx, f.placer.chooseDistributor(f.cfg.Timing.BusyWait), placement{to: to, asset: tok.cfg.Name, amount: amount, fee: fee,
		build: func(key *stacks.PrivateKey, nonce uint64) (*stacks.Transaction, error) {
			return stacks.NewSIP010Transfer(stacks.SIP010TransferParams{
				Asset: asset, Recipient: to, Amount: amount, Memo: memo, Nonce: nonce, Fee: fee, ChainID: chainID,
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
