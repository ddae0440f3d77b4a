package faucet

import (
	"context"
	"fmt"

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
	chainID := f.chainID()
	memo := []byte(f.cfg.Amounts.Memo)
	fee := f.tokenFee(ctx, to, memo)
	return f.placeDrip(ctx, f.chooseDistributor(f.cfg.Timing.BusyWait), placement{to: to, asset: AssetSBTC, amount: tok.Amount, fee: fee,
		build: func(key *stacks.PrivateKey, nonce uint64) (*stacks.Transaction, error) {
			return stacks.NewSIP010Transfer(stacks.SIP010TransferParams{
				Asset: tok.Asset, Recipient: to, Amount: tok.Amount, Memo: memo, Nonce: nonce, Fee: fee, ChainID: chainID,
			}, key)
		}})
}

// tokenFee prices a token transfer to to like an STX transfer: the node's
// rate × the call's length, clamped, or the fallback.
func (f *Faucet) tokenFee(ctx context.Context, to stacks.Principal, memo []byte) uint64 {
	length := tokenTransferLen(f.cfg.Token.Asset, to, memo)
	fee, ok := f.rateFee(ctx, length)
	if !ok {
		fee = f.cfg.Fees.Fallback
	}
	return max(fee, length)
}

// tokenTransferLen is the length of a signed SIP-010 transfer to to: the
// sender is always a standard principal, so its address does not change it.
func tokenTransferLen(asset stacks.AssetInfo, to stacks.Principal, memo []byte) uint64 {
	sender := stacks.Principal{Address: stacks.Address{Version: stacks.AddressVersionTestnetSingleSig}}
	args, err := stacks.SIP010TransferArgs(sender, to, 1, memo)
	if err != nil {
		args, _ = stacks.SIP010TransferArgs(sender, to, 1, nil)
	}
	tx := &stacks.Transaction{
		PostConditions: []stacks.PostCondition{stacks.PrincipalSendsExactlyFT(sender, asset, 1)},
		ContractCall:   &stacks.ContractCall{Contract: asset.Contract, Function: stacks.SIP010TransferFunction, Args: args},
	}
	return uint64(tx.EncodedLen())
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

// syncToken reads k's token balance after its account read and applies it
// unless a newer read was applied. It reads second on purpose: a block
// mined between the two reads then shows the token balance already lowered
// while the nonce read still counts the transfer as in flight, so the key's
// available tokens are underestimated, never overestimated.
func (f *Faucet) syncToken(ctx context.Context, k *keyState, seq uint64) error {
	if !f.cfg.Token.Enabled() {
		return nil
	}
	bal, err := f.cfg.Node.TokenBalance(ctx, f.cfg.Token.Asset.Contract, stacks.Principal{Address: k.addr})
	if err != nil {
		return fmt.Errorf("read %s balance of %s: %w", f.cfg.Token.Asset, k.addr, err)
	}
	k.applyTokenSync(seq, bal)
	return nil
}
