package faucet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/utils/clock"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/journal"
)

// accounts keeps each key's view of its account in step with the node
// (syncs) and the journal (loads, ownership).
type accounts struct {
	node    accountNode
	pool    *keyPool
	journal *journal.Journal
	// chain's tip dates a sync; tokens are the ones whose balances a sync
	// reads.
	chain  *chainView
	tokens *tokens
	// doubt settles the entries in doubt a load finds (repairer.resolve).
	// Set once by New, before the engine is used: the repairer syncs
	// through these accounts, so one of the two is wired second.
	doubt doubtResolver
	// dryRecover is what a dry key must be able to pay again to come back
	// (a default drip at the top fee); reserve is kept back on every key.
	dryRecover, reserve uint64
	// clk dates syncs and paces the wait of a key being released.
	clk clock.WithTicker
	log *slog.Logger
}

// accountNode is what the accounts (and the treasury, for keys it does not
// own) read from the node.
type accountNode interface {
	Account(ctx context.Context, principal string) (*node.Account, error)
	// TokenBalance is a SIP-010 token's confirmed balance of owner.
	TokenBalance(ctx context.Context, token stacks.ContractID, owner stacks.Principal) (uint64, error)
}

// doubtResolver settles an entry whose broadcast outcome is unknown.
type doubtResolver interface {
	resolve(ctx context.Context, k *keyState, p *PendingTx)
}

// syncKey reads the key's account from the node and applies it. Reads run
// concurrently (poll, BadNonce, pick, readiness); one that started before a
// read already applied is stale and is dropped, so a key never moves back.
func (ac *accounts) syncKey(ctx context.Context, k *keyState) error {
	seq := k.startSync()
	acct, err := ac.node.Account(ctx, k.addr.String())
	if err != nil {
		return fmt.Errorf("sync %s: %w", k.addr, err)
	}
	out := k.applySync(seq, acct.Balance, acct.Nonce, ac.chain.tip(), ac.dryRecover, ac.reserve, ac.clk.Now())
	if out.freed {
		ac.pool.signalFreed()
	}
	if out.applied {
		ac.syncTokens(ctx, k, seq)
	}
	if !out.owned || len(out.confirmed) == 0 {
		return nil // a new owner prunes its ledger; our writes would be fenced
	}
	return ac.journal.ForgetBelow(ctx, k.addr.String(), acct.Nonce)
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
	for _, tok := range ac.tokens.usable() {
		asset, _ := tok.usable()
		name := tok.cfg.Name
		bal, err := ac.node.TokenBalance(ctx, asset.Contract, stacks.Principal{Address: k.addr})
		if err == nil {
			k.applyTokenSync(name, seq, bal)
		}
		switch k.noteTokenRead(name, err) {
		case readStartedFailing:
			ac.log.Warn("token balance read failed; this token's drips from this key use its last known balance until it works again",
				"sender", k.addr.String(), "asset", string(name), "err", fmt.Errorf("read %s balance of %s: %w", asset, k.addr, err))
		case readRecovered:
			ac.log.Info("token balance read works again", "sender", k.addr.String(), "asset", string(name))
		}
	}
}

// prepareKey loads an owned key's ledger and syncs it if it never was, so
// that the pick sees it; a key another replica took over is dropped. A
// key that is ready (the drips' usual case) costs one lock.
func (ac *accounts) prepareKey(ctx context.Context, k *keyState) *Error {
	owned, loaded, synced := k.flags()
	if !owned || loaded && synced {
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
			ac.log.Warn("key sync failed", "sender", k.addr.String(), "err", err)
		}
	}
	return nil
}

// ownedLoaded reports whether the key is ours and its ledger is loaded,
// loading it if needed.
func (ac *accounts) ownedLoaded(ctx context.Context, k *keyState) bool {
	if owned, _, _ := k.flags(); !owned {
		return false
	}
	if err := ac.loadKey(ctx, k); err != nil {
		ac.log.Warn("loading the key's ledger failed", "sender", k.addr.String(), "err", err)
		return false
	}
	return true
}

// syncAccounts reads every owned key's account without any repair: safe for
// a readiness probe, which must never broadcast.
func (ac *accounts) syncAccounts(ctx context.Context) {
	for _, k := range ac.pool.keys {
		if !ac.ownedLoaded(ctx, k) {
			continue
		}
		if err := ac.syncKey(ctx, k); err != nil {
			ac.log.Warn("key sync failed", "sender", k.addr.String(), "err", err)
		}
	}
}

// loadKey reads the key's in-flight transactions from the journal once per
// ownership, so its next nonce accounts for what an earlier process (or
// replica) left in flight, then resolves the entries in doubt. loadMu
// makes one caller the loader; the resolving (node round trips, journal
// writes) comes after it is released, so a caller waiting for the load
// does not wait for the node too: the entries in doubt hold their nonces
// meanwhile, and no drip can take one.
func (ac *accounts) loadKey(ctx context.Context, k *keyState) error {
	doubt, err := ac.loadOnce(ctx, k)
	if err != nil {
		return err
	}
	for _, p := range doubt {
		ac.doubt.resolve(ctx, k, p)
	}
	return nil
}

// loadOnce is loadKey's load: the journal's entries of k become its
// pending ones, and the key is synced; it returns the entries in doubt.
func (ac *accounts) loadOnce(ctx context.Context, k *keyState) ([]*PendingTx, error) {
	k.loadMu.Lock()
	defer k.loadMu.Unlock()
	if !k.needsLoad() {
		return nil, nil
	}
	entries, err := ac.journal.Load(ctx, k.addr.String())
	if err != nil {
		return nil, err
	}
	txs, err := pendingOfAll(entries)
	if err != nil {
		return nil, fmt.Errorf("load the journal of %s: %w", k.addr, err)
	}
	doubt := k.loadPending(txs)
	if len(txs) > 0 {
		ac.log.Info("resumed in-flight transactions from the store", "sender", k.addr.String(), "entries", len(txs), "in_doubt", len(doubt))
	}
	if err := ac.syncKey(ctx, k); err != nil {
		ac.log.Warn("key sync after load failed", "sender", k.addr.String(), "err", err)
	}
	return doubt, nil
}

func (ac *accounts) lose(k *keyState) {
	if k.disown() {
		ac.log.Warn("key ownership lost", "sender", k.addr.String())
	}
}

// acquired makes the key ours and loads its journal.
func (ac *accounts) acquired(ctx context.Context, key string) {
	k := ac.pool.byKey(key)
	if k == nil {
		return
	}
	k.acquire()
	ac.log.Info("key acquired", "sender", key)
	if err := ac.loadKey(ctx, k); err != nil {
		// pick loads it lazily once the store answers again.
		ac.log.Warn("loading an acquired key failed", "sender", key, "err", err)
	}
	ac.pool.signalFreed()
}

// releasePoll is how often a key being released looks whether the last
// drip holding one of its nonces has finished.
const releasePoll = 5 * time.Millisecond

// releasing stops handing the key out and waits until no drip or repair
// holds one of its nonces.
func (ac *accounts) releasing(ctx context.Context, key string) {
	k := ac.pool.byKey(key)
	if k == nil {
		return
	}
	k.stopAllocating()
	t := ac.clk.NewTicker(releasePoll)
	defer t.Stop()
	for k.allocating() {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
	k.unloadIfDisowned()
	ac.log.Info("key released", "sender", key)
}

// Acquired implements journal.Handler: load the key's journal and start
// using it.
func (f *Faucet) Acquired(ctx context.Context, key string) { f.accounts.acquired(ctx, key) }

// Releasing implements journal.Handler: stop handing the key to drips and
// wait until no drip or repair holds one of its nonces.
func (f *Faucet) Releasing(ctx context.Context, key string) { f.accounts.releasing(ctx, key) }

// Lost implements journal.Handler: stop using the key at once. A drip
// still under way is fenced by the store.
func (f *Faucet) Lost(key string) {
	if k := f.pool.byKey(key); k != nil {
		f.accounts.lose(k)
	}
}
