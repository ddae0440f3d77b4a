package faucet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/journal"
)

// syncKey reads the key's account from the node and applies it. Reads run
// concurrently (poll, BadNonce, pick, readiness); one that started before a
// read already applied is stale and is dropped, so a key never moves back.
func (ac *accounts) syncKey(ctx context.Context, k *keyState) error {
	f := ac.f
	seq := k.startSync()
	acct, err := f.cfg.Node.Account(ctx, k.addr.String())
	if err != nil {
		return fmt.Errorf("sync %s: %w", k.addr, err)
	}
	// A dry key comes back once it can pay a default drip again.
	out := k.applySync(seq, acct.Balance, acct.Nonce, f.chain.tip(),
		satAdd(f.cfg.Amounts.Default, f.cfg.Fees.Max), f.cfg.Fees.Reserve, f.cfg.Now())
	if out.freed {
		f.pool.signalFreed()
	}
	if out.applied {
		ac.syncTokens(ctx, k, seq)
	}
	if !out.owned || len(out.confirmed) == 0 {
		return nil // a new owner prunes its ledger; our writes would be fenced
	}
	return f.journal.ForgetBelow(ctx, k.addr.String(), acct.Nonce)
}

// syncTokens reads k's balance of every usable token after its account
// read (number seq) and applies each unless a newer read was applied. It
// reads second on purpose: a block mined between the two reads then shows
// the token balance already lowered while the nonce read still counts the
// transfer as in flight, so the key's available tokens are underestimated,
// never overestimated. STX drips go on when a token read fails; that
// token's drips see the last balance, less what confirmed since (see
// applySync). A failure is logged when it starts and when it ends, not at
// every block.
func (ac *accounts) syncTokens(ctx context.Context, k *keyState, seq uint64) {
	f := ac.f
	for _, tok := range f.tokens.usable() {
		asset, _ := tok.usable()
		name := tok.cfg.Name
		bal, err := f.cfg.Node.TokenBalance(ctx, asset.Contract, stacks.Principal{Address: k.addr})
		if err == nil {
			k.applyTokenSync(name, seq, bal)
		}
		switch k.noteTokenRead(name, err) {
		case readStartedFailing:
			f.log.Warn("token balance read failed; this token's drips from this key use its last known balance until it works again",
				"sender", k.addr.String(), "asset", string(name), "err", fmt.Errorf("read %s balance of %s: %w", asset, k.addr, err))
		case readRecovered:
			f.log.Info("token balance read works again", "sender", k.addr.String(), "asset", string(name))
		}
	}
}

// prepareKey loads an owned key's ledger and syncs it if it never was, so
// that the pick sees it; a key another replica took over is dropped.
func (ac *accounts) prepareKey(ctx context.Context, k *keyState) *Error {
	f := ac.f
	owned, _, synced := k.flags()
	if !owned {
		return nil
	}
	if err := ac.loadKey(ctx, k); err != nil {
		if errors.Is(err, journal.ErrNotOwner) {
			ac.lose(k)
			return nil
		}
		return storeFailure(err, "load the key's journal")
	}
	if !synced {
		if err := ac.syncKey(ctx, k); err != nil {
			f.log.Warn("key sync failed", "sender", k.addr.String(), "err", err)
		}
	}
	return nil
}

// ownedLoaded reports whether the key is ours and its ledger is loaded,
// loading it if needed.
func (ac *accounts) ownedLoaded(ctx context.Context, k *keyState) bool {
	f := ac.f
	if owned, _, _ := k.flags(); !owned {
		return false
	}
	if err := ac.loadKey(ctx, k); err != nil {
		f.log.Warn("loading the key's ledger failed", "sender", k.addr.String(), "err", err)
		return false
	}
	return true
}

// syncAccounts reads every owned key's account without any repair: safe for
// a readiness probe, which must never broadcast.
func (ac *accounts) syncAccounts(ctx context.Context) {
	f := ac.f
	for _, k := range f.pool.keys {
		if !ac.ownedLoaded(ctx, k) {
			continue
		}
		if err := ac.syncKey(ctx, k); err != nil {
			f.log.Warn("key sync failed", "sender", k.addr.String(), "err", err)
		}
	}
}

// loadKey reads the key's in-flight transactions from the journal once per
// ownership, so its next nonce accounts for what an earlier process (or
// replica) left in flight, then resolves the entries in doubt.
func (ac *accounts) loadKey(ctx context.Context, k *keyState) error {
	f := ac.f
	k.loadMu.Lock()
	defer k.loadMu.Unlock()
	if !k.needsLoad() {
		return nil
	}
	entries, err := f.journal.Load(ctx, k.addr.String())
	if err != nil {
		return err
	}
	txs, err := pendingOfAll(entries)
	if err != nil {
		return fmt.Errorf("load the journal of %s: %w", k.addr, err)
	}
	doubt := k.loadPending(txs)
	if len(txs) > 0 {
		f.log.Info("resumed in-flight transactions from the store", "sender", k.addr.String(), "entries", len(txs), "in_doubt", len(doubt))
	}
	if err := ac.syncKey(ctx, k); err != nil {
		f.log.Warn("key sync after load failed", "sender", k.addr.String(), "err", err)
	}
	for _, p := range doubt {
		f.repairs.resolve(ctx, k, p)
	}
	return nil
}

func (ac *accounts) lose(k *keyState) {
	f := ac.f
	if k.disown() {
		f.log.Warn("key ownership lost", "sender", k.addr.String())
	}
}

// Acquired implements journal.Handler: load the key's journal and start
// using it.
func (f *Faucet) Acquired(ctx context.Context, key string) {
	k := f.pool.byKey(key)
	if k == nil {
		return
	}
	k.acquire()
	f.log.Info("key acquired", "sender", key)
	if err := f.accounts.loadKey(ctx, k); err != nil {
		// pick loads it lazily once the store answers again.
		f.log.Warn("loading an acquired key failed", "sender", key, "err", err)
	}
	f.pool.signalFreed()
}

// Releasing implements journal.Handler: stop handing the key to drips and
// wait until no drip or repair holds one of its nonces.
func (f *Faucet) Releasing(ctx context.Context, key string) {
	k := f.pool.byKey(key)
	if k == nil {
		return
	}
	k.stopAllocating()
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for k.allocating() {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
	k.unloadIfDisowned()
	f.log.Info("key released", "sender", key)
}

// Lost implements journal.Handler: stop using the key at once. A drip
// still under way is fenced by the store.
func (f *Faucet) Lost(key string) {
	if k := f.pool.byKey(key); k != nil {
		f.accounts.lose(k)
	}
}
