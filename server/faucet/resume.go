package faucet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// loadKey reads the key's in-flight transactions from the ledger once per
// ownership, so its next nonce accounts for what an earlier process (or
// replica) left in flight, then resolves the entries in doubt.
func (f *Faucet) loadKey(ctx context.Context, k *keyState) error {
	k.loadMu.Lock()
	defer k.loadMu.Unlock()
	if !k.needsLoad() {
		return nil
	}
	entries, err := f.cfg.State.Ledger.List(ctx, k.addr)
	if err != nil {
		return fmt.Errorf("load ledger for %s: %w", k.addr, err)
	}
	doubt := k.loadPending(entries)
	if len(entries) > 0 {
		f.log.Info("resumed in-flight transactions from the store", "sender", k.addr.String(), "entries", len(entries), "in_doubt", len(doubt))
	}
	if err := f.syncKey(ctx, k); err != nil {
		f.log.Warn("key sync after load failed", "sender", k.addr.String(), "err", err)
	}
	for _, p := range doubt {
		f.resolve(ctx, k, p)
	}
	return nil
}

// resolve settles an entry in state broadcasting: it rebroadcasts the stored
// bytes, which the node answers 200 for whether it already held them or not.
// stacks-core's posttransaction handler checks mempool.has_tx first and
// answers 200 with the txid for a known tx; a tx already mined fails the
// nonce check instead (BadNonce), and the next sync drops the entry.
func (f *Faucet) resolve(ctx context.Context, k *keyState, p *PendingTx) {
	if !k.stillInDoubt(p) {
		return // confirmed, replaced or given up meanwhile
	}
	log := f.log.With("sender", k.addr.String(), "nonce", p.Nonce, "txid", p.TxID.Hex0x())
	_, err := f.cfg.Node.Broadcast(ctx, p.Raw)
	var rej *node.RejectionError
	switch {
	case err == nil:
		cp := *p
		cp.State = TxPending
		cp.Rebroadcasts++
		f.updatePending(ctx, k, &cp)
		log.Info("in-doubt transaction is at the node")
	case errors.As(err, &rej) && rej.Reason == node.ReasonBadNonce:
		// The nonce is taken on chain: mined (ours) or replaced. The next
		// sync confirms and drops it.
		if serr := f.syncKey(ctx, k); serr != nil {
			log.Warn("resync after BadNonce failed", "err", serr)
		}
	case errors.As(err, &rej) && rej.Reason == node.ReasonConflictingNonceInMempool:
		// Another tx holds the nonce in the mempool (a fee-bumped
		// replacement whose record was lost, or another writer): it will
		// confirm the nonce; repair outbids it if it sticks.
		k.replaceIfSame(p, &PendingTx{Sender: k.addr, Nonce: p.Nonce, Foreign: true, SentAt: f.cfg.Now()})
		f.forget(ctx, k, p.Nonce)
		log.Warn("in-doubt transaction's nonce is held by another tx")
	case errors.As(err, &rej) && refusedForNow(rej.Reason):
		// The node cannot take it now (the key's chaining limit, its own
		// failure): still in doubt, and the answer already given stands.
		// The next block asks again.
		log.Warn("in-doubt transaction not taken by the node yet; will retry", "reason", rej.Reason)
	case errors.As(err, &rej):
		// Refused for good: the nonce is a hole the next drip fills.
		k.replaceIfSame(p, nil)
		f.forget(ctx, k, p.Nonce)
		f.fates.dropped(p.TxID)
		f.pool.signalFreed()
		log.Warn("in-doubt transaction refused by the node; its nonce will be reused", "reason", rej.Reason)
	default:
		log.Warn("in-doubt transaction not resolved yet; will retry", "err", err)
	}
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

// forget deletes a ledger row, logging a failure (the row is then resolved
// again at the next load, which is safe).
func (f *Faucet) forget(ctx context.Context, k *keyState, nonce uint64) {
	if err := f.cfg.State.Ledger.Delete(context.WithoutCancel(ctx), k.addr, nonce); err != nil {
		f.log.Warn("ledger delete failed", "sender", k.addr.String(), "nonce", nonce, "err", err)
	}
}

// Acquired implements OwnershipHandler: load the key's ledger and start
// using it.
func (f *Faucet) Acquired(ctx context.Context, addr stacks.Address) {
	k := f.pool.byAddr(addr)
	if k == nil {
		return
	}
	k.acquire()
	f.log.Info("key acquired", "sender", addr.String())
	if err := f.loadKey(ctx, k); err != nil {
		// pick loads it lazily once the store answers again.
		f.log.Warn("loading an acquired key failed", "sender", addr.String(), "err", err)
	}
	f.pool.signalFreed()
}

// Releasing implements OwnershipHandler: stop handing the key to drips and
// wait until no drip or repair holds one of its nonces.
func (f *Faucet) Releasing(ctx context.Context, addr stacks.Address) {
	k := f.pool.byAddr(addr)
	if k == nil {
		return
	}
	k.stopAllocating()
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		if !k.allocating() {
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
	k.unloadIfDisowned()
	f.log.Info("key released", "sender", addr.String())
}

// Lost implements OwnershipHandler: stop using the key at once. A drip
// still under way is fenced by the store.
func (f *Faucet) Lost(addr stacks.Address) {
	k := f.pool.byAddr(addr)
	if k == nil {
		return
	}
	if k.disown() {
		f.log.Warn("key ownership lost", "sender", addr.String())
	}
}

// runOwner keeps the KeyOwner running until ctx ends, restarting it after a
// pause when it fails (a store outage ends its session; every key was Lost).
func (f *Faucet) runOwner(ctx context.Context) {
	// The treasury is a key of its own: one replica at a time sends refills.
	keys := f.pool.all()
	addrs := make([]stacks.Address, len(keys))
	for i, k := range keys {
		addrs[i] = k.addr
	}
	for {
		err := f.cfg.State.Owner.Run(ctx, addrs, f)
		for _, k := range keys {
			f.Lost(k.addr)
		}
		if ctx.Err() != nil {
			return
		}
		f.log.Warn("key ownership session ended; retrying", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}
