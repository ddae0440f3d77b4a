package faucet

import (
	"context"
	"log/slog"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// dripper turns a drip into a placement: it prices and signs an STX or
// token transfer for a distributor and places it. A single drip, a lone
// drip of the batcher and a batch of one all come through transfer.
type dripper struct {
	placer txPlacer
	price  *pricer
	chain  *chainView
	// keys are the distributors: a drip never pays one of them from
	// itself.
	keys []*keyState
	memo stacks.Memo
	// tokenMemo is the memo of token transfers (Amounts.Memo).
	tokenMemo []byte
	// single is the key choice of a drip on its own: any distributor,
	// waiting up to BusyWait for a slot.
	single chooser
	log    *slog.Logger
}

// txPlacer places a transaction (placer.place).
type txPlacer interface {
	place(ctx context.Context, pl placement) (*placed, *Error)
}

// transfer pays amount to to in one STX transfer from a key choose picks.
func (d *dripper) transfer(ctx context.Context, choose chooser, to stacks.Principal, amount uint64) (*Result, error) {
	chainID, memo := d.chain.id(), d.memo
	fee := d.price.transfer(ctx, to)
	return d.placeDrip(ctx, choose, placement{to: to, asset: AssetSTX, amount: amount, fee: fee,
		build: func(key *stacks.PrivateKey, nonce uint64) (*stacks.Transaction, error) {
			return stacks.NewTokenTransfer(stacks.TransferParams{
				Recipient: to, Amount: amount, Nonce: nonce, Fee: fee, Memo: memo, ChainID: chainID,
			}, key)
		}})
}

// token pays amount (0: tok's drip) to to in one SIP-010 transfer call,
// placed like every drip. Any key may pay it that holds the amount beyond
// its in-flight transfers of the token and the fee in STX; it shares that
// key's nonces with STX drips.
func (d *dripper) token(ctx context.Context, tok *tokenState, to stacks.Principal, amount uint64) (*Result, error) {
	asset, err := tok.usable()
	if err != nil {
		return nil, err
	}
	if amount == 0 {
		amount = tok.cfg.Amount
	}
	chainID, memo := d.chain.id(), d.tokenMemo
	fee := d.price.token(ctx, asset, to, memo)
	return d.placeDrip(ctx, d.single, placement{to: to, asset: tok.cfg.Name, amount: amount, fee: fee,
		build: func(key *stacks.PrivateKey, nonce uint64) (*stacks.Transaction, error) {
			return stacks.NewSIP010Transfer(stacks.SIP010TransferParams{
				Asset: asset, Recipient: to, Amount: amount, Memo: memo, Nonce: nonce, Fee: fee, ChainID: chainID,
			}, key)
		}})
}

// placeDrip places one drip on a distributor choose picks (the
// least-loaded one that can pay it). A key cannot pay itself (the node
// refuses an STX transfer to its sender, the token contract one to its
// sender), so such a key is skipped.
func (d *dripper) placeDrip(ctx context.Context, choose chooser, pl placement) (*Result, error) {
	pl.choose = choose
	if !pl.to.IsContract() {
		for _, k := range d.keys {
			if pl.to.Address == k.addr {
				pl.excluded.add(k)
				pl.lastErr = failf(ReasonRejected, nil, "the recipient is one of the faucet's own addresses")
			}
		}
	}
	done, err := d.placer.place(ctx, pl)
	if err != nil {
		return nil, err
	}
	p := done.tx
	if done.lostAnswer != nil {
		d.log.Warn("broadcast outcome unknown; the tx is tracked and rebroadcast until its nonce confirms",
			"sender", p.Sender.String(), "nonce", p.Nonce, "txid", p.TxID.Hex0x(), "asset", string(p.Asset.OrSTX()), "err", done.lostAnswer)
	}
	return &Result{TxID: p.TxID, TxRaw: p.Raw, Amount: pl.amount, Fee: p.Fee, Nonce: p.Nonce, Sender: p.Sender,
		Asset: p.Asset.OrSTX(), InDoubt: done.lostAnswer != nil}, nil
}
