package btcfaucet

import (
	"context"
	"fmt"

	"github.com/btcsuite/btcd/wire"
)

// orphanRetireDepth is how many blocks past the highest tip the payer had
// seen the node's chain must grow, with a payout's coin on none of it,
// before the payout is retired: a node restoring its chain, or a reorg
// back, brings the coin back well before.
const orphanRetireDepth = SettleDepth

// retireOrphans marks the unconfirmed payouts that spend a coin no chain
// the node has holds, and forgets those whose coin stayed gone for
// orphanRetireDepth blocks past the highest tip seen. Their drips were
// answered and are not paid: said in an error log line, as nothing else
// can pay them.
func (p *Payer) retireOrphans(ctx context.Context, tip int64) error {
	orphan := p.orphans()
	for _, r := range p.sortedInflight() {
		if !orphan[r.TxID] {
			r.OrphanedAt = 0
			continue
		}
		if r.OrphanedAt == 0 {
			r.OrphanedAt = p.maxTip
			p.log.Warn("btc payout's coins are on no chain the node has (a reorg, or a node restarted empty); not sent again, and retired unless they come back",
				"txid", r.TxID, "tip", tip, "retire_at_height", r.OrphanedAt+orphanRetireDepth)
		}
		if tip < r.OrphanedAt+orphanRetireDepth {
			continue
		}
		if err := p.journal.Forget(ctx, p.addr, r.TxID); err != nil {
			return fmt.Errorf("btc payer: retire %s: %w", r.TxID, err)
		}
		delete(p.inflight, r.TxID)
		var paid int64
		for _, o := range r.Outputs {
			paid += o.Amount
		}
		p.log.Error("btc payout retired: the chain can no longer include it, and its drips are not paid",
			"txid", r.TxID, "drips", len(r.Outputs), "sats", paid)
	}
	return nil
}

// orphans are the unconfirmed payouts one of whose coins is neither in the
// chain view nor the change of a payout in flight that is not one itself.
func (p *Payer) orphans() map[string]bool {
	orphan := map[string]bool{}
	for changed := true; changed; {
		changed = false
		change := map[wire.OutPoint]bool{}
		for _, r := range p.inflight {
			if r.Change != nil && !orphan[r.TxID] {
				change[r.Change.OutPoint] = true
			}
		}
		for _, r := range p.inflight {
			if r.MinedAt != 0 || orphan[r.TxID] {
				continue
			}
			for _, c := range r.Coins {
				if _, onChain := p.chain.Coin(c.OutPoint); !onChain && !change[c.OutPoint] {
					orphan[r.TxID], changed = true, true
					break
				}
			}
		}
	}
	return orphan
}
