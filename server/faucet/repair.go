package faucet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// Run keeps the engine in step with the node until ctx ends: it resumes
// in-flight transactions from the ledger, polls the tip, re-syncs every owned
// key when a block arrives and repairs stuck nonces. With a KeyOwner it also
// keeps this replica's share of the keys. It returns an error only when the
// ledger cannot be read for a reason other than the store being down.
func (f *Faucet) Run(ctx context.Context) error {
	var hist sync.WaitGroup
	hist.Go(func() { f.history.run(ctx) })
	defer hist.Wait() // flushed before Run returns, so before the store closes
	if f.cfg.State.Owner != nil {
		var wg sync.WaitGroup
		wg.Go(func() { f.runOwner(ctx) })
		defer wg.Wait()
	} else {
		// Resume now, not at the first drip: in-doubt txs are resolved and
		// repairs continue even if no one asks for STX.
		for _, k := range f.pool.all() {
			if err := f.loadKey(ctx, k); err != nil {
				if !errors.Is(err, ErrStoreUnavailable) && ctx.Err() == nil {
					return err
				}
				f.log.Warn("resuming from the store failed; will retry", "sender", k.addr.String(), "err", err)
			}
		}
	}
	t := time.NewTimer(f.cfg.Timing.PollInterval)
	defer t.Stop()
	var lastHeight uint64
	first, down := true, false
	for {
		started := time.Now()
		h, ok := f.poll(ctx, lastHeight, first)
		switch {
		case ok && (first || down || h != lastHeight):
			// A block or the node back: readiness is logged when it
			// changes, probed or not. Ready reads nothing more from the
			// node here (the chain info is fresh, the keys just synced).
			_ = f.Ready(ctx)
		case !ok && !down:
			f.noteReady(ctx, nodeUnreachable(f.chain.LastErr()))
		}
		down = !ok
		if ok {
			lastHeight, first = h, false
		}
		if !f.waitNextPoll(ctx, t, started) {
			return nil
		}
	}
}

// waitNextPoll waits for the next tip poll: BusyPollInterval while
// anything is in flight or waits for a slot, since a slot frees only when
// the poll sees the block; PollInterval when idle, cut short when a
// transaction goes out. False when ctx ends.
//
// The interval runs from the start of the last poll, so a slow node does
// not stretch the cadence by its own round trips.
func (f *Faucet) waitNextPoll(ctx context.Context, t *time.Timer, started time.Time) bool {
	busy, idle := f.cfg.Timing.BusyPollInterval, f.cfg.Timing.PollInterval
	interval := idle
	if f.busy() {
		interval = busy
	}
	t.Reset(interval - time.Since(started))
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		case <-f.sent:
			if interval != busy {
				interval = busy
				t.Reset(busy - time.Since(started))
			}
		}
	}
}

// busy reports whether a key has a transaction in flight or drips wait
// for a batch.
func (f *Faucet) busy() bool {
	return slices.ContainsFunc(f.pool.all(), (*keyState).hasInFlight) || f.batch.queued() > 0
}

// poll reads the tip once; on a new block (or the first time) it syncs the
// keys this process owns and runs repairs. It reports the height it saw.
func (f *Faucet) poll(ctx context.Context, lastHeight uint64, first bool) (uint64, bool) {
	// Keys with transactions in flight are read alongside the tip, not
	// after it: a block's confirmed nonces free their slots one node round
	// trip after it, not two. The reads after a new tip (below) still come
	// after the treasury's, as refills need.
	var early sync.WaitGroup
	for _, k := range f.pool.keys {
		if !first && k.hasInFlight() {
			early.Go(func() { _ = f.syncKey(ctx, k) }) // a failure shows in the reads below
		}
	}
	ci, err := f.fetchChain(ctx)
	early.Wait()
	if err != nil {
		f.chain.Fail(err)
		if ctx.Err() == nil { // shutting down is no outage
			f.nodeWatch.failed(err)
		}
		return 0, false
	}
	f.chain.Set(ci)
	f.nodeWatch.answered()
	if !first && ci.height == lastHeight {
		return ci.height, true
	}
	if !first && ci.height > lastHeight {
		f.noteBlocks(ci.height - lastHeight)
	}
	if f.chainAllowed(ci.chainID) != nil {
		return ci.height, true
	}
	// The treasury first: a distributor's balance read after it is never
	// older than the treasury's view of its refills (treasury.go).
	refill := f.treasury.syncTreasury(ctx, ci.height)
	// Every sender's account at once: the block's confirmed nonces free
	// their slots one node round trip after the block is seen, however
	// many keys there are. Repairs follow, one key after another.
	synced := make(map[*keyState]bool, len(f.pool.keys))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, k := range f.pool.keys {
		wg.Go(func() {
			if !f.ownedLoaded(ctx, k) {
				return
			}
			if err := f.syncKey(ctx, k); err != nil {
				f.log.Warn("key sync failed", "sender", k.addr.String(), "err", err)
				return
			}
			mu.Lock()
			synced[k] = true
			mu.Unlock()
		})
	}
	wg.Wait()
	for _, k := range f.pool.keys {
		if synced[k] {
			f.repair(ctx, k, ci.height)
		}
	}
	if refill {
		f.treasury.refill(ctx, ci.height, synced)
	}
	return ci.height, true
}

// defaultBlockGap stands in for the time between blocks until the poll
// loop has seen two: about a Nakamoto testnet's.
const defaultBlockGap = 5 * time.Second

// noteBlocks folds the time since the last new block, spread over the n
// blocks that came, into the moving average of the block gap.
func (f *Faucet) noteBlocks(n uint64) {
	now := f.cfg.Now().UnixNano()
	if last := f.lastRelease.Load(); last != 0 {
		since := now - last
		f.gap.Store(movingAverage(f.gap.Load(), since/int64(n)))
		f.releaseGap.Store(movingAverage(f.releaseGap.Load(), since))
	}
	f.lastRelease.Store(now)
}

// movingAverage folds sample into avg (0: none yet), at least 1.
func movingAverage(avg, sample int64) int64 {
	if avg > 0 {
		sample = avg + (sample-avg)*3/10
	}
	return max(sample, 1)
}

// untilRelease is how long until in-flight slots are expected to free
// next: a release gap after the last poll that found a block. An overdue
// block is expected within an eighth of a gap.
func (f *Faucet) untilRelease() time.Duration {
	g := f.releaseInterval()
	last := f.lastRelease.Load()
	if last == 0 {
		return g
	}
	return max(time.Duration(last-f.cfg.Now().UnixNano())+g, g/8)
}

// releaseInterval is the expected time between slot releases.
func (f *Faucet) releaseInterval() time.Duration {
	if g := f.releaseGap.Load(); g > 0 {
		return time.Duration(g)
	}
	return defaultBlockGap
}

// stuckWait is the least time a nonce must wait to count as stuck:
// StuckBlocks block gaps, once the gap has been measured (until then the
// block count alone decides).
func (f *Faucet) stuckWait() time.Duration {
	g := f.gap.Load()
	return time.Duration(g) * time.Duration(f.cfg.Timing.StuckBlocks)
}

// ownedLoaded reports whether the key is ours and its ledger is loaded,
// loading it if needed.
func (f *Faucet) ownedLoaded(ctx context.Context, k *keyState) bool {
	if owned, _, _ := k.flags(); !owned {
		return false
	}
	if err := f.loadKey(ctx, k); err != nil {
		f.log.Warn("loading the key's ledger failed", "sender", k.addr.String(), "err", err)
		return false
	}
	return true
}

// Sync reads the tip and every owned key's account now, resuming from the
// ledger and repairing as the poll loop does (start-up and tests).
func (f *Faucet) Sync(ctx context.Context) error {
	if _, ok := f.poll(ctx, 0, true); !ok {
		return errors.New("faucet sync: node unavailable")
	}
	return nil
}

// syncAccounts reads every owned key's account without any repair: safe for
// a readiness probe, which must never broadcast.
func (f *Faucet) syncAccounts(ctx context.Context) {
	for _, k := range f.pool.keys {
		if !f.ownedLoaded(ctx, k) {
			continue
		}
		if err := f.syncKey(ctx, k); err != nil {
			f.log.Warn("key sync failed", "sender", k.addr.String(), "err", err)
		}
	}
}

// repair acts when a key's confirmed nonce has not moved for StuckBlocks while
// we hold txs above it: first rebroadcast the stored bytes of the missing
// nonce, then replace it with a higher fee; a nonce with no bytes of ours (a
// hole, or another writer's tx) is filled with a minimal transfer.
func (f *Faucet) repair(ctx context.Context, k *keyState, height uint64) {
	// Entries in doubt (a lost broadcast answer, or left by an earlier
	// process) are resolved at every block until the node has answered.
	for _, p := range k.inDoubt() {
		f.resolve(ctx, k, p)
	}
	plan := k.planRepair(height, f.cfg.Timing.StuckBlocks, f.cfg.Now(), f.stuckWait())
	if plan == nil {
		return
	}
	nonce, stuck, chain := plan.nonce, plan.stuck, plan.chain
	log := f.log.With("sender", k.addr.String(), "nonce", nonce)
	switch {
	case stuck != nil && !stuck.Foreign && stuck.Rebroadcasts == 0:
		// Identical bytes are idempotent: the node answers 200 for txs it
		// has. All at once: the poll loop waits for this, and every key's
		// slots with it.
		var wg sync.WaitGroup
		for i := range chain {
			wg.Go(func() {
				p := &chain[i]
				_, err := f.cfg.Node.Broadcast(ctx, p.Raw)
				log.Warn("nonce stuck; rebroadcast stored tx", "tx_nonce", p.Nonce, "txid", p.TxID.Hex0x(), "err", err)
				p.Rebroadcasts++
				f.updatePending(ctx, k, p)
			})
		}
		wg.Wait()
	case stuck != nil && !stuck.Foreign:
		f.bumpFee(ctx, k, stuck)
	default:
		f.fillNonce(ctx, k, nonce, stuck != nil)
	}
}

// bumpFee replaces a stuck tx with the same one at a strictly higher fee.
func (f *Faucet) bumpFee(ctx context.Context, k *keyState, stuck *PendingTx) {
	log := f.log.With("sender", k.addr.String(), "nonce", stuck.Nonce)
	// The same payload and post-conditions (a refill's memo, a send-many
	// call's recipients), re-signed at the new fee. Never rebuilt from the
	// row's recipient and amount: for a batch those are the contract and
	// the total, and a transfer of them would pay the contract.
	tx, err := stacks.DecodeTransaction(stuck.Raw)
	if err != nil {
		log.Error("stored transaction does not decode; cannot replace it", "txid", stuck.TxID.Hex0x(), "err", err)
		return
	}
	feeMax := f.cfg.Fees.Max
	if tx.ContractCall != nil {
		feeMax = batchFeeMax(f.cfg.Fees.Max, uint64(len(stuck.Raw)))
	}
	newFee := max(stuck.Fee+stuck.Fee/4, stuck.Fee+1)
	if newFee > feeMax {
		newFee = max(feeMax, stuck.Fee+1)
	}
	tx.Auth.Fee = newFee
	if err := tx.Sign(k.key); err != nil {
		log.Error("re-sign for fee bump failed", "err", err)
		return
	}
	raw := tx.Serialize()
	if _, err := f.cfg.Node.Broadcast(ctx, raw); err != nil {
		log.Warn("fee-bump replacement not accepted", "fee", newFee, "err", err)
		return
	}
	log.Warn("nonce still stuck; replaced with a higher fee", "old_txid", stuck.TxID.Hex0x(), "txid", tx.TxID().Hex0x(), "fee", newFee)
	f.fates.replaced(stuck.TxID, tx.TxID())
	stuck.Raw, stuck.TxID, stuck.Fee = raw, tx.TxID(), newFee
	stuck.Replacements++
	f.updatePending(ctx, k, stuck)
}

// updatePending stores a changed entry if it is still in flight.
func (f *Faucet) updatePending(ctx context.Context, k *keyState, p *PendingTx) {
	err := k.updatePending(p, func(p PendingTx) error { return f.cfg.State.Ledger.Put(ctx, p) })
	if err != nil {
		f.log.Error("ledger write failed", "sender", k.addr.String(), "nonce", p.Nonce, "err", err)
	}
}

// errNotFilled: the filler's one attempt found the nonce held by another tx.
var errNotFilled = errors.New("nonce held by another transaction")

// fillNonce sends a 1 µSTX transfer at nonce, which planRepair claimed,
// so later txs can be mined. The recipient is another faucet key when there
// is one (nothing leaves the pool), else the boot address. Outbidding
// another writer's tx needs the top fee. It is placed like any transaction
// (recorded before it is sent), on this key and nonce only, once.
func (f *Faucet) fillNonce(ctx context.Context, k *keyState, nonce uint64, foreign bool) {
	to := stacks.Principal{Address: stacks.Address{Version: stacks.AddressVersionTestnetSingleSig}}
	for _, other := range f.pool.keys {
		if other != k {
			to = stacks.Principal{Address: other.addr}
			break
		}
	}
	fee := f.fee(ctx, to)
	if foreign {
		fee = f.cfg.Fees.Max
	}
	chainID := f.chainID()
	tried := false
	done, err := f.place(ctx, placement{
		to: to, amount: 1, fee: fee,
		choose: func(context.Context, cost, map[*keyState]bool) (*keyState, uint64, *Error) {
			if tried {
				// Another tx holds the nonce (it outbids ours) or the key
				// changed: the next repair looks again.
				return nil, 0, failf(ReasonBusy, errNotFilled, "the nonce gap was not filled")
			}
			tried = true
			return k, nonce, nil
		},
		build: func(key *stacks.PrivateKey, nonce uint64) (*stacks.Transaction, error) {
			return stacks.NewTokenTransfer(stacks.TransferParams{Recipient: to, Amount: 1, Nonce: nonce, Fee: fee, Memo: f.memo, ChainID: chainID}, key)
		},
	})
	if err != nil {
		if !errors.Is(err, errNotFilled) {
			f.log.Warn("nonce gap filler not accepted", "sender", k.addr.String(), "nonce", nonce, "err", err)
		}
		return
	}
	f.log.Warn("filled nonce gap", "sender", k.addr.String(), "nonce", nonce, "txid", done.tx.TxID.Hex0x())
}

// Keys reports every key's state.
func (f *Faucet) Keys() []KeyStatus { return f.pool.statuses() }

// Ready reports why the faucet cannot serve drips, or nil: the node must be
// reachable and testnet, this replica must own a key, and one of its keys
// must afford a default drip. It reads accounts but never repairs.
func (f *Faucet) Ready(ctx context.Context) error {
	err := f.ready(ctx)
	f.noteReady(ctx, err)
	return err
}

// errNodeUnreachable is Ready's error when the node does not answer.
var errNodeUnreachable = errors.New("node unreachable")

func nodeUnreachable(err error) error {
	if err == nil {
		err = errors.New("no answer yet")
	}
	return fmt.Errorf("%w: %w", errNodeUnreachable, err)
}

// noteReady logs a change of readiness. An answer cut short by the
// caller's own deadline or cancellation says nothing about the faucet.
func (f *Faucet) noteReady(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	reason, changed := f.readiness.changed(err)
	switch {
	case !changed:
	case err != nil:
		f.log.Warn("faucet not ready", "reason", reason, "err", err)
	default:
		fund := f.Funding()
		f.log.Info("faucet ready", "keys", fund.Keys, "drips_left", fund.DripsLeft)
	}
}

func (f *Faucet) ready(ctx context.Context) error {
	ci, err := f.chain.Get(ctx, f.fetchChain)
	if err != nil {
		return nodeUnreachable(err)
	}
	if err := f.chainAllowed(ci.chainID); err != nil {
		return err
	}
	need := satAdd(f.cfg.Amounts.Default, f.cfg.Fees.Min)
	keys := f.Keys()
	if !slices.ContainsFunc(keys, func(s KeyStatus) bool { return s.Owned }) {
		return errors.New("this replica owns no faucet key")
	}
	if !slices.ContainsFunc(keys, func(s KeyStatus) bool { return s.Owned && s.Synced }) {
		// Before the first poll, read the accounts rather than report "unfunded".
		f.syncAccounts(ctx)
		keys = f.Keys()
	}
	for _, s := range keys {
		if s.Owned && s.Synced && !s.Dry && s.Available >= need {
			return nil
		}
	}
	return errors.New("no faucet key is funded for a drip")
}
