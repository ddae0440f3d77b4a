package btcfaucet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/btcsuite/btcd/wire"

	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
)

// Fee bumping (BIP-125 replace-by-fee). A payout sent at a rate the
// market has since overtaken can sit unconfirmed for hours; BumpStuck
// replaces it with a transaction spending the same coins and paying the
// same outputs, its extra fee taken from the change (bitcoin.BumpFee).
// Every payout signals replaceability: BuildPayout sets nSequence to
// 0xfffffffd on every input (below BIP-125's 0xfffffffe).
//
// Crash safety is the journal's, as for Pay: the replacement is recorded
// (Replaces naming the payout it replaces) before it is sent, and both
// versions stay recorded
// until a block confirms one; Sync then forgets the other, seeing its
// coins spent by another txid. Resume sends both again, oldest first: the
// node keeps the original, then takes the replacement in its place (or
// refuses the original when the replacement is already there). Both
// reserve the same coins, and neither's change is spent by new payouts
// until the block decides (spendable).
//
// Descendants: only the tip of a chain of unconfirmed payouts is bumped,
// a payout whose change no in-flight payout spends. Replacing a parent
// would evict its children from the mempool (their input would vanish), so
// they would have to be rebuilt too; raising the tip's fee already raises
// the package rate miners rank the chain by. CPFP is not attempted.

// BumpStuck replaces every in-flight payout sent at least olderThan ago
// that pays less than the node's current estimate (clamped to Fees) and
// is the tip of its chain. The replacement pays the estimate, and at
// least the replaced fee plus 1 sat/vB of its own size (BIP-125 rule 4);
// a payout whose change cannot cover that, or which would then pay more
// than Fees.Max, is left as it is. Recipients' outputs are never touched.
// It syncs first, so that payouts already confirmed are not bumped. It
// returns how many replacements it recorded and sent (or may have sent:
// an answer lost in transit counts, as in Pay); an error stops it, the
// payouts bumped so far counted.
func (p *Payer) BumpStuck(ctx context.Context, olderThan time.Duration) (bumped int, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.syncLocked(ctx); err != nil {
		return 0, fmt.Errorf("btc payer: bump: %w", err)
	}
	rate := p.feeRate(ctx)
	cutoff := p.clock.Now().Add(-olderThan)
	for _, r := range p.bumpCandidates(cutoff) {
		rep, why, err := p.replacement(r, rate)
		if err != nil {
			return bumped, fmt.Errorf("btc payer: bump %s: %w", r.TxID, err)
		}
		if rep == nil {
			if why != "" {
				p.log.Info("btc payout not bumped", "txid", r.TxID, "reason", why, "fee", r.Fee, "target_rate", rate)
			}
			continue
		}
		switch err := p.send(ctx, rep, r); {
		case errors.Is(err, ErrRefused):
			// Forgotten by the journal; the original stays in flight.
			p.log.Warn("btc payout bump refused by the node", "txid", r.TxID, "replacement", rep.TxID, "err", err)
			continue
		case err != nil:
			// Not recorded, so not sent (a replica that lost the key
			// lands here too), or a test's crash: the original stands.
			return bumped, fmt.Errorf("btc payer: bump %s: %w", r.TxID, err)
		}
		p.log.Info("btc payout bumped", "txid", r.TxID, "replacement", rep.TxID, "fee", r.Fee, "new_fee", rep.Fee, "rate", rate)
		bumped++
	}
	return bumped, nil
}

// bumpCandidates are the payouts BumpStuck may replace: sent (pending) at
// or before cutoff, the newest version of their payout, and chain tips.
func (p *Payer) bumpCandidates(cutoff time.Time) []*PayoutRecord {
	replaced := map[string]bool{}
	spentChange := map[wire.OutPoint]bool{}
	for _, r := range p.inflight {
		if r.Replaces != "" {
			replaced[r.Replaces] = true
		}
		for _, c := range r.Coins {
			spentChange[c.OutPoint] = true
		}
	}
	var out []*PayoutRecord
	for _, r := range p.sortedInflight() {
		switch {
		case r.State != PayoutPending, r.MinedAt != 0, r.SentAt.After(cutoff), replaced[r.TxID]:
		case r.Change != nil && spentChange[r.Change.OutPoint]: // not a tip
		default:
			out = append(out, r)
		}
	}
	return out
}

// replacement builds r's replacement at rate, or says why there is none
// (nil and a reason; "" when r simply pays enough). An error is a record
// that cannot be read back, which should not happen.
func (p *Payer) replacement(r *PayoutRecord, rate int64) (*PayoutRecord, string, error) {
	old, err := bitcoin.DecodeTx(r.Raw, r.Coins)
	if err != nil {
		return nil, "", fmt.Errorf("decode the recorded payout: %w", err)
	}
	// Rates are reckoned on FeeVSize, as Pay pays them: a payout built at
	// the current rate pays it exactly.
	if r.Fee >= rate*old.FeeVSize() {
		return nil, "", nil
	}
	if !signalsRBF(old.MsgTx()) {
		return nil, "it does not signal replaceability", nil
	}
	tx, err := bitcoin.BumpFee(bitcoin.BumpParams{Key: p.key, Tx: old, FeeRate: rate})
	if errors.Is(err, bitcoin.ErrCannotBump) {
		return nil, err.Error(), nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("build the replacement: %w", err)
	}
	// The cap the estimate was held to binds the replacement too, which
	// BIP-125's minimum step, or change too small to keep, may push past.
	if limit := max(p.fees.Max, p.fees.Min); tx.Fee() > limit*tx.FeeVSize() {
		return nil, fmt.Sprintf("the replacement would pay %d sats for %d vB, above the %d sat/vB cap", tx.Fee(), tx.FeeVSize(), limit), nil
	}
	rep := &PayoutRecord{TxID: tx.TxID().String(), Raw: tx.Raw(), Coins: tx.Coins(), Outputs: r.Outputs, Fee: tx.Fee(),
		Depth: r.Depth}
	if i := tx.ChangeIndex(); i >= 0 {
		rep.Change = &bitcoin.Coin{OutPoint: wire.OutPoint{Hash: tx.TxID(), Index: uint32(i)}, Value: tx.Change(),
			PkScript: p.key.Address().PkScript()}
	}
	return rep, "", nil
}

// signalsRBF reports BIP-125 opt-in: an input with nSequence below
// 0xfffffffe.
func signalsRBF(tx *wire.MsgTx) bool {
	for _, in := range tx.TxIn {
		if in.Sequence < wire.MaxTxInSequenceNum-1 {
			return true
		}
	}
	return false
}
