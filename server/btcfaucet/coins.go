package btcfaucet

import (
	"context"
	"fmt"

	"github.com/btcsuite/btcd/wire"

	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
	"github.com/stxfaucet/faucet-operator/server/chain/btcnode"
)

// maxSelectRounds bounds how many selections one payout tries while the
// node reports their coins spent in its mempool.
const maxSelectRounds = 16

// dropSpentElsewhere asks the node whether a mempool transaction spends a
// chain coin of sel it has not vouched for at this tip, marks those that
// are, and reports whether it found one. Change of our own payouts in
// flight is ours to know about. A node that does not answer vouches for
// nothing, and the payout goes as chosen: the send's own answer tells.
func (p *Payer) dropSpentElsewhere(ctx context.Context, sel []bitcoin.Coin) bool {
	tip := p.chain.Tip()
	var ask []btcnode.OutPoint
	for _, c := range sel {
		if _, onChain := p.chain.Coin(c.OutPoint); onChain && p.unspentAt[c.OutPoint] != tip {
			ask = append(ask, btcnode.OutPoint{TxID: c.OutPoint.Hash.String(), Vout: c.OutPoint.Index})
		}
	}
	if len(ask) == 0 {
		return false
	}
	spends, err := p.node.MempoolSpends(ctx, ask)
	if err != nil {
		return false
	}
	found := false
	for _, c := range sel {
		spender, spent := spends[btcnode.OutPoint{TxID: c.OutPoint.Hash.String(), Vout: c.OutPoint.Index}]
		if !spent {
			p.unspentAt[c.OutPoint] = tip
			continue
		}
		p.spentElsewhere[c.OutPoint] = tip
		found = true
		p.log.Info("btc coin spent by a mempool transaction the faucet has no record of; choosing another",
			"coin", c.OutPoint.String(), "spent_by", spender, "value", c.Value)
	}
	return found
}

// spendable lists the coins a new payout may spend: mature coins unspent
// on chain and the change of in-flight payouts, less every coin an
// in-flight payout spends, a mempool transaction spends (at this tip) and
// less change at the chain limit; depth gives each coin's unconfirmed
// ancestors.
func (p *Payer) spendable() ([]bitcoin.Coin, map[wire.OutPoint]int, error) {
	reserved := map[wire.OutPoint]bool{}
	for _, r := range p.inflight {
		for _, c := range r.Coins {
			reserved[c.OutPoint] = true
		}
	}
	depth := map[wire.OutPoint]int{}
	var out []bitcoin.Coin
	tip := p.chain.Tip()
	for op, at := range p.spentElsewhere {
		if at != tip {
			delete(p.spentElsewhere, op) // a block came: ask again
		}
	}
	for op, at := range p.unspentAt {
		if at != tip {
			delete(p.unspentAt, op)
		}
	}
	for _, c := range p.chain.Coins() {
		if _, elsewhere := p.spentElsewhere[c.OutPoint]; !reserved[c.OutPoint] && !elsewhere && c.Mature(tip) {
			out = append(out, c.Coin)
		}
	}
	// The versions of a bumped payout spend the same coins, and which one
	// a block confirms is unknown until it does (a miner may hold the
	// replaced one): a payout spending one version's change would be
	// invalid if the other won. So their change waits for that block.
	bumped := map[string]bool{}
	for _, r := range p.inflight {
		if r.Replaces != "" {
			bumped[r.TxID], bumped[r.Replaces] = true, true
		}
	}
	atLimit := false
	for _, r := range p.sortedInflight() {
		if r.Change == nil || reserved[r.Change.OutPoint] || bumped[r.TxID] || r.OrphanedAt != 0 {
			continue
		}
		if _, mined := p.chain.Coin(r.Change.OutPoint); mined {
			continue // listed above once its payout confirmed
		}
		if r.Depth >= MaxChain {
			atLimit = true
			continue
		}
		depth[r.Change.OutPoint] = r.Depth
		out = append(out, *r.Change)
	}
	if len(out) == 0 && atLimit {
		return nil, nil, fmt.Errorf("btc payer: %w", ErrBusy)
	}
	return out, depth, nil
}

// funds sums what the key holds for future payouts: balance is mature
// coins no payout spends plus the change of unconfirmed payouts (of a
// fee-bumped payout, the newest version's only), immature is coinbase value
// short of maturity; an orphaned payout's change is not counted. Caller holds mu.
func (p *Payer) funds() (balance, immature int64) {
	reserved := map[wire.OutPoint]bool{}
	replaced := map[string]bool{}
	for _, r := range p.inflight {
		for _, c := range r.Coins {
			reserved[c.OutPoint] = true
		}
		if r.Replaces != "" {
			replaced[r.Replaces] = true
		}
	}
	tip := p.chain.Tip()
	for _, c := range p.chain.Coins() {
		switch {
		case reserved[c.OutPoint]:
		case c.Mature(tip):
			balance += c.Value
		default:
			immature += c.Value
		}
	}
	for _, r := range p.inflight {
		if r.Change == nil || reserved[r.Change.OutPoint] || replaced[r.TxID] || r.OrphanedAt != 0 {
			continue
		}
		if _, mined := p.chain.Coin(r.Change.OutPoint); mined {
			continue // counted above
		}
		balance += r.Change.Value
	}
	return balance, immature
}
