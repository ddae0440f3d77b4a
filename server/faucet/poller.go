package faucet

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// poller is the engine's loop: it polls the node's tip and, at each new
// block, syncs the keys, runs repairs and refills. Everything that waits
// for a block (a busy key's slots, stuck nonces) is moved by it.
type poller struct {
	f *Faucet
	// sent wakes an idle poll loop when a transaction goes out, so the
	// block that confirms it is looked for at the busy cadence at once.
	sent chan struct{}
	// nodeWatch logs the node's outages when they start and end.
	nodeWatch nodeWatch
}

// Run keeps the engine in step with the node until ctx ends: it resumes
// in-flight transactions from the journal, polls the tip, re-syncs every owned
// key when a block arrives and repairs stuck nonces. With a shared store
// the keys it may use come and go through Acquired, Releasing and Lost
// (journal.Keep runs the owner). It returns an error only when the journal
// cannot be read for a reason other than the store being down.
func (f *Faucet) Run(ctx context.Context) error {
	var hist sync.WaitGroup
	hist.Go(func() { f.history.run(ctx) })
	defer hist.Wait() // flushed before Run returns, so before the store closes
	if !f.cfg.State.Shared {
		// Resume now, not at the first drip: in-doubt txs are resolved and
		// repairs continue even if no one asks for STX.
		for _, k := range f.pool.all() {
			if err := f.accounts.loadKey(ctx, k); err != nil {
				if !errors.Is(err, ErrStoreUnavailable) && ctx.Err() == nil {
					return err
				}
				f.log.Warn("resuming from the store failed; will retry", "sender", k.addr.String(), "err", err)
			}
		}
	}
	f.poller.loop(ctx)
	return nil
}

// loop polls until ctx ends: at the busy cadence while anything is in
// flight, else at the idle one (waitNextPoll).
func (po *poller) loop(ctx context.Context) {
	f := po.f
	t := time.NewTimer(f.cfg.Timing.PollInterval)
	defer t.Stop()
	var lastHeight uint64
	first, down := true, false
	for {
		started := time.Now()
		h, ok := po.poll(ctx, lastHeight, first)
		switch {
		case ok && (first || down || h != lastHeight):
			// A block or the node back: readiness is logged when it
			// changes, probed or not. Ready reads nothing more from the
			// node here (the chain info is fresh, the keys just synced).
			_ = f.Ready(ctx)
		case !ok && !down:
			f.readiness.noteReady(ctx, nodeUnreachable(f.chain.info.LastErr()))
		}
		down = !ok
		if ok {
			lastHeight, first = h, false
		}
		if !po.waitNextPoll(ctx, t, started) {
			return
		}
	}
}

// Sync reads the tip and every owned key's account now, resuming from the
// journal and repairing as the poll loop does (start-up and tests).
func (f *Faucet) Sync(ctx context.Context) error {
	if _, ok := f.poller.poll(ctx, 0, true); !ok {
		return errors.New("faucet sync: node unavailable")
	}
	return nil
}

// waitNextPoll waits for the next tip poll: BusyPollInterval while
// anything is in flight or waits for a slot, since a slot frees only when
// the poll sees the block; PollInterval when idle, cut short when a
// transaction goes out. False when ctx ends.
//
// The interval runs from the start of the last poll, so a slow node does
// not stretch the cadence by its own round trips.
func (po *poller) waitNextPoll(ctx context.Context, t *time.Timer, started time.Time) bool {
	f := po.f
	busy, idle := f.cfg.Timing.BusyPollInterval, f.cfg.Timing.PollInterval
	interval := idle
	if po.busy() {
		interval = busy
	}
	t.Reset(interval - time.Since(started))
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		case <-po.sent:
			if interval != busy {
				interval = busy
				t.Reset(busy - time.Since(started))
			}
		}
	}
}

// busy reports whether a key has a transaction in flight or drips wait
// for a batch.
func (po *poller) busy() bool {
	f := po.f
	return slices.ContainsFunc(f.pool.all(), (*keyState).hasInFlight) || f.batch.queued() > 0
}

// poll reads the tip once; on a new block (or the first time) it syncs the
// keys this process owns and runs repairs. It reports the height it saw.
func (po *poller) poll(ctx context.Context, lastHeight uint64, first bool) (uint64, bool) {
	f := po.f
	// Keys with transactions in flight are read alongside the tip, not
	// after it: a block's confirmed nonces free their slots one node round
	// trip after it, not two. The reads after a new tip (below) still come
	// after the treasury's, as refills need.
	var early sync.WaitGroup
	for _, k := range f.pool.keys {
		if !first && k.hasInFlight() {
			early.Go(func() { _ = f.accounts.syncKey(ctx, k) }) // a failure shows in the reads below
		}
	}
	ci, err := f.chain.fetch(ctx)
	early.Wait()
	if err != nil {
		f.chain.info.Fail(err)
		if ctx.Err() == nil { // shutting down is no outage
			po.nodeWatch.failed(err)
		}
		return 0, false
	}
	f.chain.info.Set(ci)
	po.nodeWatch.answered()
	if !first && ci.height == lastHeight {
		return ci.height, true
	}
	if !first && ci.height > lastHeight {
		f.clock.noteBlocks(ci.height - lastHeight)
	}
	if f.chain.allowed(ci.chainID) != nil {
		return ci.height, true
	}
	// A token still to be found on the node (or whose metadata is
	// unknown) is looked for at every block until it is.
	f.tokens.resolve(ctx, f.cfg.Node)
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
			if !f.accounts.ownedLoaded(ctx, k) {
				return
			}
			if err := f.accounts.syncKey(ctx, k); err != nil {
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
			f.repairs.repair(ctx, k, ci.height)
		}
	}
	if refill {
		f.treasury.refill(ctx, ci.height, synced)
	}
	return ci.height, true
}
