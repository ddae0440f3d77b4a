package faucet

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// poller is the engine's loop: it polls the node's tip and, at each new
// block, syncs the keys, runs repairs and refills. Everything that waits
// for a block (a busy key's slots, stuck nonces) is moved by it. It holds
// the loop's timing and reaches the other parts through the small
// interfaces below.
type poller struct {
	clk clock.WithTicker
	// idle and busyEvery are the tip poll's cadences (Timing.PollInterval,
	// Timing.BusyPollInterval).
	idle, busyEvery time.Duration
	// tipWait bounds a poll's read of the tip (tipReadWait).
	tipWait time.Duration
	// sent wakes an idle poll loop when a transaction goes out, so the
	// block that confirms it is looked for at the busy cadence at once.
	sent <-chan struct{}

	pool     *keyPool
	chain    *chainView
	pace     *blockClock
	accounts blockAccounts
	repairs  keyRepairer
	// tokens and tokenNode: tokens still to be found on the node are
	// looked for at every block.
	tokens    *tokens
	tokenNode tokenNode
	// treasury and queue are nil without a treasury, or batching.
	treasury blockTreasury
	queue    queueLen
	ready    readinessNoter
	// watch logs the node's outages when they start and end.
	watch nodeWatch
	log   *slog.Logger
}

// blockAccounts is what the poll asks of the accounts at a block.
type blockAccounts interface {
	syncKey(ctx context.Context, k *keyState) error
	ownedLoaded(ctx context.Context, k *keyState) bool
}

// keyRepairer unsticks a key's nonces at a block (repairer).
type keyRepairer interface {
	repair(ctx context.Context, k *keyState, height uint64)
}

// blockTreasury is the treasury's part of a block: its own sync, before
// the distributors', and the refills, after them.
type blockTreasury interface {
	syncTreasury(ctx context.Context, height uint64) bool
	refill(ctx context.Context, height uint64, synced map[*keyState]bool)
}

// queueLen counts the drips waiting in the batcher.
type queueLen interface{ queued() int }

// readinessNoter probes readiness after a poll, so a change is logged
// whether or not anyone asks.
type readinessNoter interface {
	check(ctx context.Context) error
	noteReady(ctx context.Context, err error)
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

// Sync reads the tip and every owned key's account now, resuming from the
// journal and repairing as the poll loop does (start-up and tests).
func (f *Faucet) Sync(ctx context.Context) error {
	if _, ok := f.poller.poll(ctx, 0, true); !ok {
		return errors.New("faucet sync: node unavailable")
	}
	return nil
}

// loop polls until ctx ends: at the busy cadence while anything is in
// flight, else at the idle one (waitNextPoll).
func (po *poller) loop(ctx context.Context) {
	t := po.clk.NewTimer(po.idle)
	defer t.Stop()
	var lastHeight uint64
	first, down := true, false
	for {
		started := po.clk.Now()
		h, ok := po.poll(ctx, lastHeight, first)
		switch {
		case ok && (first || down || h != lastHeight):
			// A block or the node back: readiness is logged when it
			// changes, probed or not. It reads nothing more from the
			// node here (the chain info is fresh, the keys just synced).
			_ = po.ready.check(ctx)
		case !ok && !down:
			po.ready.noteReady(ctx, nodeUnreachable(po.chain.info.LastErr()))
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

// waitNextPoll waits for the next tip poll: busyEvery while anything is
// in flight or waits for a slot, since a slot frees only when the poll
// sees the block; idle otherwise, cut short when a transaction goes out.
// False when ctx ends.
//
// The interval runs from the start of the last poll, so a slow node does
// not stretch the cadence by its own round trips.
func (po *poller) waitNextPoll(ctx context.Context, t clock.Timer, started time.Time) bool {
	interval := po.idle
	if po.busy() {
		interval = po.busyEvery
	}
	t.Reset(interval - po.clk.Since(started))
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C():
			return true
		case <-po.sent:
			if interval != po.busyEvery {
				interval = po.busyEvery
				t.Reset(po.busyEvery - po.clk.Since(started))
			}
		}
	}
}

// busy reports whether a key has a transaction in flight or drips wait
// for a batch.
func (po *poller) busy() bool {
	return slices.ContainsFunc(po.pool.all(), (*keyState).hasInFlight) || po.queue != nil && po.queue.queued() > 0
}

// tipReadWait bounds the poll's read of the tip, below the node client's
// timeout: a node that cannot answer /v2/info in this long is as good as
// gone for a faucet that reads it every second (the node pool takes such a
// node out of rotation after 2 s), and the sooner the engine knows, the
// sooner its drips and its readiness say so instead of waiting on it.
const tipReadWait = 3 * time.Second

// poll reads the tip once; on a new block (or the first time) it syncs the
// keys this process owns and runs repairs. It reports the height it saw.
func (po *poller) poll(ctx context.Context, lastHeight uint64, first bool) (uint64, bool) {
	// Keys with transactions in flight are read alongside the tip, not
	// after it: a block's confirmed nonces free their slots one node round
	// trip after it, not two. The reads after a new tip (below) still come
	// after the treasury's, as refills need.
	rctx, cancel := context.WithTimeout(ctx, po.tipWait)
	var early sync.WaitGroup
	for _, k := range po.pool.keys {
		if !first && k.hasInFlight() {
			early.Go(func() { _ = po.accounts.syncKey(rctx, k) }) // a failure shows in the reads below
		}
	}
	ci, err := po.chain.fetch(rctx)
	early.Wait()
	cancel()
	if err != nil {
		po.chain.info.Fail(err)
		if ctx.Err() == nil { // shutting down is no outage
			po.watch.failed(err)
		}
		return 0, false
	}
	po.chain.info.Set(ci)
	// Here rather than in loop, so Sync (start-up, tests) counts too.
	po.chain.moved.observe(ci.height)
	po.watch.answered()
	if !first && ci.height == lastHeight {
		return ci.height, true
	}
	if !first && ci.height > lastHeight {
		po.pace.noteBlocks(ci.height - lastHeight)
	}
	if po.chain.allowed(ci.chainID) != nil {
		return ci.height, true
	}
	po.tokens.resolve(ctx, po.tokenNode)
	// The treasury first: a distributor's balance read after it is never
	// older than the treasury's view of its refills (treasury.go).
	refill := po.treasury != nil && po.treasury.syncTreasury(ctx, ci.height)
	synced := po.syncAll(ctx)
	// Repairs follow the reads, one key after another.
	for _, k := range po.pool.keys {
		if synced[k] {
			po.repairs.repair(ctx, k, ci.height)
		}
	}
	if refill {
		po.treasury.refill(ctx, ci.height, synced)
	}
	return ci.height, true
}

// syncAll reads every owned distributor's account at once: the block's
// confirmed nonces free their slots one node round trip after the block
// is seen, however many keys there are. It returns the keys it read.
func (po *poller) syncAll(ctx context.Context) map[*keyState]bool {
	synced := make(map[*keyState]bool, len(po.pool.keys))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, k := range po.pool.keys {
		wg.Go(func() {
			if !po.accounts.ownedLoaded(ctx, k) {
				return
			}
			if err := po.accounts.syncKey(ctx, k); err != nil {
				po.log.Warn("key sync failed", "sender", k.addr.String(), "err", err)
				return
			}
			mu.Lock()
			synced[k] = true
			mu.Unlock()
		})
	}
	wg.Wait()
	return synced
}
