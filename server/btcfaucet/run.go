package btcfaucet

import (
	"context"
	"errors"
	"fmt"

	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
	"github.com/stxfaucet/faucet-operator/server/chain/btcnode"
	"github.com/stxfaucet/faucet-operator/server/journal"
)

// Run checks the node's chain, resumes the key's journal once this replica
// holds the key (always, unless Shared) and then follows the chain every
// PollInterval, raising the fee of stuck payouts, until ctx ends. It
// retries an unreachable node for as long as it takes; it fails only when
// the node is on another network than the key (a configuration error no
// retry cures), or when a reorg is deeper than it can follow.
func (f *Faucet) Run(ctx context.Context) error {
	defer f.cur.Store(nil)
	tick := f.cfg.Clock.NewTicker(f.cfg.PollInterval)
	defer tick.Stop()
	lastBump := f.cfg.Clock.Now()
	for {
		if f.cur.Load() == nil && f.held.Load() {
			switch err := f.start(ctx); {
			case errors.Is(err, errWrongChain):
				return err
			case errors.Is(err, errNotHeld):
			case err != nil:
				f.observe(err)
				f.log.Warn("btc faucet: cannot start yet; retrying", "err", err)
			default:
				f.observe(nil)
				e := f.cur.Load()
				f.log.Info("btc faucet ready", "address", f.Address().String(), "network", f.Network().String(),
					"tip", e.payer.chain.Tip(), "in_flight", e.payer.InFlight())
				lastBump = f.cfg.Clock.Now()
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C():
		case <-f.wake:
		}
		e := f.cur.Load()
		if e == nil {
			continue
		}
		err := e.payer.Sync(ctx)
		if errors.Is(err, ErrReorgTooDeep) {
			return fmt.Errorf("btc faucet: %w; restart to rescan from the start height", err)
		}
		f.noteBehind(err)
		f.observe(err)
		if err != nil {
			continue
		}
		f.refresh(e)
		if now := f.cfg.Clock.Now(); now.Sub(lastBump) >= f.cfg.BumpAfter/10 {
			lastBump = now
			f.bump(ctx, e)
		}
	}
}

var (
	errWrongChain = errors.New("the node is on another network than the faucet's key")
	errNotHeld    = errors.New("the BTC key was given up while resuming")
)

// start checks the chain and resumes the journal in a new payer, once the
// previous hold's payer has finished what it was doing.
func (f *Faucet) start(ctx context.Context) error {
	chain, err := f.cfg.Node.RequireTestChain(ctx)
	if err != nil {
		if errors.Is(err, btcnode.ErrMainChain) {
			return fmt.Errorf("btc faucet: %w: %w", errWrongChain, err)
		}
		return fmt.Errorf("btc faucet: read the node's chain: %w", err)
	}
	if !chainMatches(chain, f.Network()) {
		return fmt.Errorf("btc faucet: %w: the node runs %s, the key is for %s", errWrongChain, chain, f.Network())
	}
	if f.last != nil {
		// A payout under way from the last hold finishes (its fenced write
		// fails, or it was recorded in time to be resumed below) first.
		f.last.payer.waitIdle()
	}
	if f.chain == nil {
		f.chain = newChainFollower(f.cfg.Node, f.cfg.Key.Address().PkScript(), f.cfg.StartHeight, 0)
	}
	payer := newPayer(f.cfg.Key, f.cfg.Node, f.cfg.Journal, f.cfg.Fees, f.chain, f.cfg.Clock)
	payer.SetLogger(f.log)
	batcher, err := NewBatcher(payer, f.cfg.BatchMax, f.cfg.BatchWindow, f.cfg.Clock)
	if err != nil {
		return fmt.Errorf("btc faucet: %w", err)
	}
	if err := payer.Resume(ctx); err != nil {
		return err
	}
	e := &engine{payer: payer, batcher: batcher}
	f.refresh(e)
	f.hold.Lock()
	defer f.hold.Unlock()
	if !f.held.Load() {
		return errNotHeld
	}
	f.cur.Store(e)
	f.last = e
	return nil
}

// Acquired implements journal.Handler: the key is this replica's. Run
// resumes its journal at once; that may take a chain rescan, so it is not
// waited for here, and drips answer "not ready" meanwhile.
func (f *Faucet) Acquired(_ context.Context, _ string) {
	f.hold.Lock()
	f.held.Store(true)
	f.hold.Unlock()
	f.log.Info("btc faucet: took the BTC key")
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// Releasing implements journal.Handler: stop paying, and return once a
// payout under way is done (recorded for the next holder, or not at all).
func (f *Faucet) Releasing(_ context.Context, _ string) {
	if e := f.drop(); e != nil {
		e.payer.waitIdle()
	}
	f.log.Info("btc faucet: gave the BTC key to another replica; this one stands by")
}

// Lost implements journal.Handler: stop paying at once; a payout under way
// is fenced by the store.
func (f *Faucet) Lost(_ string) {
	if e := f.drop(); e != nil {
		f.log.Warn("btc faucet: lost the BTC key; no more BTC payouts from this replica until it is taken again")
	}
}

// drop gives the key up and returns the engine that was paying, if any.
func (f *Faucet) drop() *engine {
	f.hold.Lock()
	defer f.hold.Unlock()
	f.held.Store(false)
	return f.cur.Swap(nil)
}

// bump raises the fee of payouts waiting longer than BumpAfter.
func (f *Faucet) bump(ctx context.Context, e *engine) {
	n, err := e.payer.BumpStuck(ctx, f.cfg.BumpAfter)
	if err != nil {
		f.log.Warn("btc faucet: fee bump failed", "err", err)
	}
	if n > 0 {
		f.log.Info("btc faucet: raised the fee of stuck payouts", "payouts", n)
	}
}

func chainMatches(c btcnode.Chain, n bitcoin.Network) bool {
	switch n {
	case bitcoin.Regtest:
		return c == btcnode.ChainRegtest
	case bitcoin.Signet:
		return c == btcnode.ChainSignet
	case bitcoin.Testnet:
		// testnet4 uses testnet3's address formats.
		return c == btcnode.ChainTestnet3 || c == btcnode.ChainTestnet4
	}
	return false
}

// noteBehind records whether the node's chain is behind the view, and logs
// when that begins and ends rather than at every poll.
func (f *Faucet) noteBehind(err error) {
	behind := errors.Is(err, ErrNodeBehind)
	switch was := f.behind.Swap(behind); {
	case behind && !was:
		f.log.Warn("btc node's chain is behind the faucet's view (restarted empty, or reindexing); BTC drips wait until it catches up", "err", err)
	case !behind && was:
		f.log.Info("btc node's chain caught up; BTC drips resume")
	}
}

// observe records whether the node answered the last loop step.
func (f *Faucet) observe(err error) {
	up := err == nil || !btcnode.IsUnavailable(err) && !journal.NeverSent(err)
	if was := f.nodeUp.Swap(up); f.seen.Swap(true) && was != up {
		if up {
			f.log.Info("btc node reachable again")
		} else {
			f.log.Warn("btc node unreachable", "err", err)
		}
	}
	f.mu.Lock()
	f.lastErr = err
	f.mu.Unlock()
	if err != nil && up && !errors.Is(err, ErrNodeBehind) { // that one is noteBehind's to log
		f.log.Warn("btc faucet: following the chain failed", "err", err)
	}
}
