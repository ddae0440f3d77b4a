package faucet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"k8s.io/utils/clock"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/journal"
)

// errNotFilled: the filler's one attempt found the nonce held by another tx.
var errNotFilled = errors.New("nonce held by another transaction")

// repairer resolves transactions in doubt and unsticks nonces: it
// rebroadcasts, bumps fees and fills holes, placing what it sends like
// every transaction.
type repairer struct {
	// keys are the distributors, a filler's recipient when there is
	// another one; pool wakes the drips waiting for a slot a refusal frees.
	pool    *keyPool
	journal *journal.Journal
	send    *broadcaster
	placer  txPlacer
	keys    keyKeeper
	price   *pricer
	chain   *chainView
	// pace says how long a block takes: a nonce is stuck after a few.
	pace  *blockClock
	fates *txFates
	memo  stacks.Memo
	// feeMax caps a bump (scaled for send-many calls) and is a filler's
	// fee against another writer's tx.
	feeMax      uint64
	stuckBlocks uint64
	clk         clock.PassiveClock
	log         *slog.Logger
}

// repair acts when a key's confirmed nonce has not moved for StuckBlocks while
// we hold txs above it: first rebroadcast the stored bytes of the missing
// nonce, then replace it with a higher fee; a nonce with no bytes of ours (a
// hole, or another writer's tx) is filled with a minimal transfer.
func (rp *repairer) repair(ctx context.Context, k *keyState, height uint64) {
	// Entries in doubt (a lost broadcast answer, or left by an earlier
	// process) are resolved at every block until the node has answered.
	for _, p := range k.inDoubt() {
		rp.resolve(ctx, k, p)
	}
	plan := k.planRepair(height, rp.stuckBlocks, rp.clk.Now(), rp.pace.stuckWait(rp.stuckBlocks))
	if plan == nil {
		return
	}
	nonce, stuck, chain := plan.nonce, plan.stuck, plan.chain
	log := rp.log.With("sender", k.addr.String(), "nonce", nonce)
	switch {
	case stuck != nil && !stuck.Foreign && stuck.Rebroadcasts == 0:
		// Identical bytes are idempotent: the node answers 200 for txs it
		// has. All at once: the poll loop waits for this, and every key's
		// slots with it.
		var wg sync.WaitGroup
		for i := range chain {
			wg.Go(func() {
				p := &chain[i]
				e := p.entry()
				sent := rp.journal.Resend(ctx, &e, rp.send.resend)
				log.Warn("nonce stuck; rebroadcast stored tx", "tx_nonce", p.Nonce, "txid", p.TxID.Hex0x(), "err", sent.Err)
				p.Rebroadcasts++
				if sent.Verdict == journal.Accepted {
					p.State = TxPending
				}
				rp.updatePending(ctx, k, p)
			})
		}
		wg.Wait()
	case stuck != nil && !stuck.Foreign:
		rp.bumpFee(ctx, k, stuck)
	default:
		rp.fillNonce(ctx, k, nonce, stuck != nil)
	}
}

// bumpFee replaces a stuck tx with the same one at a strictly higher fee.
// The replacement goes through the journal like any transaction: recorded
// before it is broadcast, so a crash between the two leaves the store
// holding what the node may hold (package journal). The replaced entry is
// forgotten once the node took the replacement, and kept behind it while
// that is in doubt.
func (rp *repairer) bumpFee(ctx context.Context, k *keyState, stuck *PendingTx) {
	log := rp.log.With("sender", k.addr.String(), "nonce", stuck.Nonce)
	rep, err := rp.replacement(k, stuck)
	if err != nil {
		log.Error("cannot replace the stuck transaction", "txid", stuck.TxID.Hex0x(), "err", err)
		return
	}
	e := rep.entry()
	sent, err := rp.journal.Replace(ctx, stuck.entry(), &e, rp.send.resend)
	switch {
	case errors.Is(err, journal.ErrNotOwner):
		rp.keys.lose(k) // another replica owns the key: it repairs
		return
	case err != nil:
		log.Warn("fee-bump replacement not recorded; not sent", "err", err)
		return
	case sent.Verdict == journal.NotSent:
		log.Warn("fee-bump replacement not accepted", "fee", rep.Fee, "err", sent.Err)
		return
	}
	rep.State = e.State
	if sent.Verdict == journal.InDoubt {
		rep.prev = stuck
	}
	if !k.replaceTx(stuck.Nonce, stuck.TxID, rep) {
		return // confirmed meanwhile; the next sync forgets both
	}
	rp.fates.replaced(stuck.TxID, rep.TxID)
	if sent.Verdict == journal.Accepted {
		rp.forget(ctx, k, stuck)
	}
	log.Warn("nonce still stuck; replaced with a higher fee", "old_txid", stuck.TxID.Hex0x(), "txid", rep.TxID.Hex0x(),
		"fee", rep.Fee, "in_doubt", sent.Verdict == journal.InDoubt)
}

// replacement is stuck re-signed at a higher fee: the same payload and
// post-conditions (a refill's memo, a send-many call's recipients). Never
// rebuilt from the entry's recipient and amount: for a batch those are the
// contract and the total, and a transfer of them would pay the contract.
func (rp *repairer) replacement(k *keyState, stuck *PendingTx) (*PendingTx, error) {
	tx, err := stacks.DecodeTransaction(stuck.Raw)
	if err != nil {
		return nil, fmt.Errorf("the stored transaction does not decode: %w", err)
	}
	feeMax := rp.feeMax
	if tx.ContractCall != nil {
		feeMax = batchFeeMax(rp.feeMax, uint64(len(stuck.Raw)))
	}
	newFee := max(stuck.Fee+stuck.Fee/4, stuck.Fee+1)
	if newFee > feeMax {
		newFee = max(feeMax, stuck.Fee+1)
	}
	tx.Auth.Fee = newFee
	if err := tx.Sign(k.key); err != nil {
		return nil, fmt.Errorf("re-sign for the fee bump: %w", err)
	}
	rep := *stuck
	rep.Raw, rep.TxID, rep.Fee, rep.Replaces = tx.Serialize(), tx.TxID(), newFee, stuck.TxID
	rep.SentAt, rep.State, rep.prev = rp.clk.Now(), TxBroadcasting, nil
	rep.Replacements++
	return &rep, nil
}

// updatePending records a changed entry (its state once the node has it,
// its resend count: never its bytes) in the key's state, then in the
// journal. The journal write comes after the key's lock is released, so a
// slow store stalls no drip of the key. That order is safe because only
// the row of an unchanged transaction is rewritten: a write that lands
// after a sync confirmed the nonce and forgot its rows re-creates a row
// whose nonce is spent on chain (inert: it can never pay again), and it is
// forgotten here. Either the sync confirmed before the check below, and
// this forgets the row, or its own ForgetBelow runs after the write.
// A failed write leaves the row as it was, Broadcasting at worst, which
// only means a resend after a restart (the node answers that it has it).
func (rp *repairer) updatePending(ctx context.Context, k *keyState, p *PendingTx) {
	if !k.setPending(p) {
		return // confirmed, replaced or given up meanwhile
	}
	if err := rp.journal.Update(ctx, p.entry()); err != nil {
		rp.log.Error("journal write failed", "sender", k.addr.String(), "nonce", p.Nonce, "err", err)
		return
	}
	if k.confirmedPast(p.Nonce) {
		rp.forget(ctx, k, p)
	}
}

// fillNonce sends a 1 µSTX transfer at nonce, which planRepair claimed,
// so later txs can be mined. The recipient is another faucet key when there
// is one (nothing leaves the pool), else the boot address. Outbidding
// another writer's tx needs the top fee. It is placed like any transaction
// (recorded before it is sent), on this key and nonce only, once.
func (rp *repairer) fillNonce(ctx context.Context, k *keyState, nonce uint64, foreign bool) {
	to := stacks.Principal{Address: stacks.Address{Version: stacks.AddressVersionTestnetSingleSig}}
	for _, other := range rp.pool.keys {
		if other != k {
			to = stacks.Principal{Address: other.addr}
			break
		}
	}
	fee := rp.price.transfer(ctx, to)
	if foreign {
		fee = rp.feeMax
	}
	chainID := rp.chain.id()
	tried := false
	done, err := rp.placer.place(ctx, placement{
		to: to, amount: 1, fee: fee,
		choose: chooseFunc(func(context.Context, cost, keySet) (*keyState, uint64, *Error) {
			if tried {
				// Another tx holds the nonce (it outbids ours) or the key
				// changed: the next repair looks again.
				return nil, 0, failf(ReasonBusy, errNotFilled, "the nonce gap was not filled")
			}
			tried = true
			return k, nonce, nil
		}),
		build: func(key *stacks.PrivateKey, nonce uint64) (*stacks.Transaction, error) {
			return stacks.NewTokenTransfer(stacks.TransferParams{Recipient: to, Amount: 1, Nonce: nonce, Fee: fee, Memo: rp.memo, ChainID: chainID}, key)
		},
	})
	if err != nil {
		if !errors.Is(err, errNotFilled) {
			rp.log.Warn("nonce gap filler not accepted", "sender", k.addr.String(), "nonce", nonce, "err", err)
		}
		return
	}
	rp.log.Warn("filled nonce gap", "sender", k.addr.String(), "nonce", nonce, "txid", done.tx.TxID.Hex0x())
}

// refusedForNow reports whether a node refusal says nothing about the
// transaction itself, so the same bytes may be taken later.
func refusedForNow(reason string) bool {
	switch reason {
	case node.ReasonTooMuchChaining, node.ReasonServerFailureNoSuchChainTip,
		node.ReasonServerFailureDatabase, node.ReasonServerFailureOther:
		return true
	}
	return false
}

// resolve settles an entry in state broadcasting: it rebroadcasts the stored
// bytes, which the node answers 200 for whether it already held them or not.
// stacks-core's posttransaction handler checks mempool.has_tx first and
// answers 200 with the txid for a known tx; a tx already mined fails the
// nonce check instead (BadNonce), and the next sync drops the entry.
//
// A fee bump's replacement that a crash left unsettled has the entry it
// replaces behind it (p.prev): taken, the replacement stands and the other
// is forgotten; refused, the replaced entry stands again.
func (rp *repairer) resolve(ctx context.Context, k *keyState, p *PendingTx) {
	if !k.stillInDoubt(p) {
		return // confirmed, replaced or given up meanwhile
	}
	log := rp.log.With("sender", k.addr.String(), "nonce", p.Nonce, "txid", p.TxID.Hex0x())
	e := p.entry()
	sent := rp.journal.Resend(ctx, &e, rp.send.resend)
	err := sent.Err
	var rej *node.RejectionError
	switch {
	case sent.Verdict == journal.Accepted:
		cp := *p
		cp.State = TxPending
		cp.Rebroadcasts++
		cp.prev = nil
		rp.updatePending(ctx, k, &cp)
		if p.prev != nil {
			rp.fates.replaced(p.prev.TxID, p.TxID)
			rp.forget(ctx, k, p.prev)
		}
		log.Info("in-doubt transaction is at the node")
	case errors.As(err, &rej) && rej.Reason == node.ReasonBadNonce:
		// The nonce is taken on chain: mined (ours) or replaced. The next
		// sync confirms and drops it.
		if serr := rp.keys.syncKey(ctx, k); serr != nil {
			log.Warn("resync after BadNonce failed", "err", serr)
		}
	case errors.As(err, &rej) && rej.Reason == node.ReasonConflictingNonceInMempool:
		// Another tx holds the nonce in the mempool: the one this
		// replaced, or a replacement whose record was lost, or another
		// writer's. It will confirm the nonce; repair outbids it if it
		// sticks.
		by := p.prev
		if by == nil {
			by = &PendingTx{Sender: k.addr, Nonce: p.Nonce, Foreign: true, SentAt: rp.clk.Now()}
		}
		k.replaceIfSame(p, by)
		rp.forget(ctx, k, p)
		log.Warn("in-doubt transaction's nonce is held by another tx")
	case errors.As(err, &rej) && refusedForNow(rej.Reason):
		// The node cannot take it now (the key's chaining limit, its own
		// failure): still in doubt, and the answer already given stands.
		// The next block asks again.
		log.Warn("in-doubt transaction not taken by the node yet; will retry", "reason", rej.Reason)
	case errors.As(err, &rej):
		// Refused for good: the nonce is a hole the next drip fills, or
		// the replaced transaction's again.
		k.replaceIfSame(p, p.prev)
		rp.forget(ctx, k, p)
		if p.prev == nil {
			rp.fates.dropped(p.TxID)
			rp.pool.signalFreed()
		}
		log.Warn("in-doubt transaction refused by the node; its nonce will be reused", "reason", rej.Reason)
	default:
		log.Warn("in-doubt transaction not resolved yet; will retry", "err", err)
	}
}

// forget deletes p's journal entry, logging a failure (the entry is then
// resolved again at the next load, which is safe).
func (rp *repairer) forget(ctx context.Context, k *keyState, p *PendingTx) {
	if err := rp.journal.Forget(ctx, k.addr.String(), p.TxID.String()); err != nil {
		rp.log.Warn("journal forget failed", "sender", k.addr.String(), "nonce", p.Nonce, "err", err)
	}
}
