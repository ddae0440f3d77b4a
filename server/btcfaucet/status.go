package btcfaucet

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/btcnode"
)

// Status is what the faucet knows of its funds and its node.
type Status struct {
	Address string
	Network string
	Ready   bool // holds the key, resumed and following the chain
	Standby bool // another replica holds the key
	NodeUp  bool
	// Behind: the node's chain is behind the faucet's view of it (a node
	// restarted empty); drips are refused until it catches up.
	Behind bool
	Tip    int64
	// Balance is what new payouts can spend: mature coins no payout in
	// flight spends, plus the change of payouts in flight.
	Balance int64
	// Immature is coinbase value still short of 100 confirmations.
	Immature int64
	InFlight int // payouts not yet in a block
}

// Status reports the faucet's funds as its own chain view had them after
// the last block it read or payout it made.
func (f *Faucet) Status() Status {
	e := f.cur.Load()
	st := Status{Address: f.Address().String(), Network: f.Network().String(),
		Ready: e != nil, Standby: e == nil && !f.held.Load(), NodeUp: f.nodeUp.Load(), Behind: f.behind.Load()}
	if e == nil {
		return st
	}
	if snap := f.funds.Load(); snap != nil {
		st.Tip, st.Balance, st.Immature, st.InFlight = snap.Tip, snap.Balance, snap.Immature, snap.InFlight
	}
	return st
}

// refresh stores e's funds for Status.
func (f *Faucet) refresh(e *engine) {
	p := e.payer
	p.mu.Lock()
	var st Status
	st.Tip = p.chain.Tip()
	for _, r := range p.inflight {
		if r.MinedAt == 0 {
			st.InFlight++
		}
	}
	st.Balance, st.Immature = p.funds()
	p.mu.Unlock()
	f.funds.Store(&st)
}

// PayoutStatus is what became of a payout the faucet sent.
type PayoutStatus struct {
	TxID          string
	Outputs       []Output
	Confirmations int64 // 0 while in the mempool
	BlockHash     string
	// Height is the main-chain block holding it, 0 while unconfirmed.
	Height   int64
	InFlight bool // the faucet holds it as unconfirmed
	// SentAt is when the faucet recorded it; zero once it is no longer
	// held (the drip history dates it then).
	SentAt time.Time
}

// Payout looks up a payout by txid: the faucet's in-flight records first,
// then the node (which needs a transaction index for confirmed ones). ok is
// false for a txid that is not a payout of this faucet.
func (f *Faucet) Payout(ctx context.Context, txid string) (PayoutStatus, bool, error) {
	e := f.cur.Load()
	if e == nil {
		return PayoutStatus{}, false, nil
	}
	e.payer.mu.Lock()
	r, inflight := e.payer.inflight[txid]
	var st PayoutStatus
	if inflight {
		// The journal and the chain view answer for a payout still held
		// (the page polls this every few seconds): no node round trip.
		st = PayoutStatus{TxID: txid, Outputs: append([]Output(nil), r.Outputs...), InFlight: true, SentAt: r.SentAt}
		if r.MinedAt != 0 {
			st.Confirmations, st.Height = e.payer.chain.Tip()-r.MinedAt+1, r.MinedAt
		}
	}
	e.payer.mu.Unlock()
	if inflight {
		return st, true, nil
	}
	tx, err := f.cfg.Node.RawTransaction(ctx, txid)
	switch {
	case err == nil:
	case errors.Is(err, btcnode.ErrTxNotFound), errors.Is(err, btcnode.ErrTxIndexDisabled):
		return PayoutStatus{}, false, nil
	default:
		return PayoutStatus{}, false, fmt.Errorf("btc faucet: look up %s: %w", txid, err)
	}
	// Ours only if it spends the faucet's script: the follower saw it, in
	// the block at height.
	height, ours := spendHeight(e.payer.chain, tx)
	script := hex.EncodeToString(f.Address().PkScript())
	if !ours && tx.Confirmations >= e.payer.chain.Depth() {
		// Older than the blocks the follower keeps (at least 1, so never a
		// mempool tx), which forget the coins spent there: ask the node
		// what the first input spent.
		if height, ours, err = f.spentOurCoin(ctx, tx, script); err != nil {
			return PayoutStatus{}, false, err
		}
	}
	if !ours {
		return PayoutStatus{}, false, nil
	}
	st = PayoutStatus{TxID: txid, Height: height}
	for _, o := range tx.Vout {
		if o.ScriptPubKey == script {
			continue // change
		}
		st.Outputs = append(st.Outputs, Output{Address: o.Address, Amount: o.Value})
	}
	st.Confirmations, st.BlockHash = tx.Confirmations, tx.BlockHash
	return st, true, nil
}

// spentOurCoin reports whether tx's first input spends an output paying
// script (a payout spends only the faucet's coins), and the height of
// tx's block, for a payout deeper than the follower remembers.
func (f *Faucet) spentOurCoin(ctx context.Context, tx *btcnode.Tx, script string) (int64, bool, error) {
	if len(tx.Vin) == 0 || tx.Vin[0].IsCoinbase() {
		return 0, false, nil
	}
	in := tx.Vin[0]
	prev, err := f.cfg.Node.RawTransaction(ctx, in.TxID)
	switch {
	case errors.Is(err, btcnode.ErrTxNotFound), errors.Is(err, btcnode.ErrTxIndexDisabled):
		return 0, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("btc faucet: look up %s, spent by %s: %w", in.TxID, tx.TxID, err)
	case int(in.Vout) >= len(prev.Vout) || prev.Vout[in.Vout].ScriptPubKey != script:
		return 0, false, nil
	}
	// The block's height, from any node that knows the block; 0
	// (unknown, the status then gives only the depth) when none answers.
	if height, err := f.cfg.Node.BlockHeight(ctx, tx.BlockHash); err == nil {
		return height, true, nil
	}
	return 0, true, nil
}

// spendHeight reports whether the main chain shows tx spending a coin of the
// faucet, and the height of the block where it does.
func spendHeight(chain *chainFollower, tx *btcnode.Tx) (int64, bool) {
	for _, in := range tx.Vin {
		op, err := outPoint(in.TxID, in.Vout)
		if err != nil {
			continue
		}
		if c, ok := chain.Coin(op); ok && c.SpentBy == tx.TxID {
			return c.SpentHeight, true
		}
	}
	return 0, false
}
