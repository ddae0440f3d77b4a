package faucet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/settings"
)

// Batching: the node admits at most 25 unconfirmed transactions per sender,
// so one key alone pays about 25 drips per block. Default drips are instead
// paid by calls to a send-many-memo contract, up to 200 recipients in one
// transaction and one nonce. The batcher queues drips and applies
// decideBatch (batchdecision.go), which says when a drip leaves alone and
// when the queue leaves together: adaptively (Nagle's rule, the default) or
// after a fixed window. A full queue (Max drips) leaves at once. A quiet
// faucet answers as fast as without batching; a busy one packs each nonce,
// and spreads its nonces over the block instead of spending them at its
// start. The call itself is sendmany.go's.
const (
	MaxBatch = stacks.SendManyMaxRecipients
	// DefaultBatchMax is `faucet serve`'s cap on recipients per call: the
	// contract's. The engine's zero Batching.Max is off.
	DefaultBatchMax = settings.BatchMax
	// contractPause is how long batching stays off after the node says the
	// send-many contract (or its function) does not exist: meanwhile drips
	// are plain transfers, and the contract is tried again afterwards.
	contractPause = time.Minute
)

// Resolve returns b with its defaults set (the window, the testnet
// send-many-memo contract), or why it cannot work. The engine and the
// serve flags both check batching with it.
func (b Batching) Resolve() (Batching, error) {
	if b.Max < 0 || b.Max > MaxBatch {
		return b, fmt.Errorf("batch max %d out of range (2..%d, or 0 or 1 for off)", b.Max, MaxBatch)
	}
	if b.Window < 0 {
		return b, fmt.Errorf("batch window %s is negative", b.Window)
	}
	if b.Contract == (stacks.ContractID{}) {
		id, err := stacks.ParseContractID(stacks.SendManyMemoTestnet)
		if err != nil {
			return b, err
		}
		b.Contract = id
	}
	if b.Contract.Address.IsMainnet() {
		return b, fmt.Errorf("batch contract %s is on mainnet; the faucet is testnet only", b.Contract)
	}
	return b, nil
}

// batcher queues default drips for the next send-many call.
type batcher struct {
	max int
	// window is the fixed gathering time; 0 is adaptive (see above).
	window time.Duration
	// amount and memo are a default drip's; contract the send-many one;
	// busyWait how long a drip may wait for a slot.
	amount   uint64
	memo     []byte
	contract stacks.ContractID
	busyWait time.Duration

	clk clock.WithDelayedExecution
	// pace says when a block is expected to free slots.
	pace *blockClock
	pool *keyPool
	// prep readies a key for the pick (accounts); single is the choice
	// of a batch of one, lone the adaptive batcher's lone drips' (the
	// slots kept for calls left free).
	prep         keyPreparer
	single, lone chooser
	singles      singleSender
	placer       txPlacer
	price        *pricer
	chain        *chainView
	log          *slog.Logger

	mu    sync.Mutex
	queue []*batchEntry
	// gen numbers the open batch: a window timer flushes only the batch it
	// was started for, not a later one that a full batch's departure began.
	gen   uint64
	timer clock.Timer
	// pausedUntil: the contract was missing; drips go single until then.
	pausedUntil time.Time
	// demand is the arrival rate of batchable drips per second, decayed
	// to demandAt (adaptive mode).
	demand   float64
	demandAt time.Time
	// leaving counts lone drips that chose to leave and have no key yet.
	leaving int
	// lastSlot is when the batcher last took an in-flight slot, for a
	// lone drip or a call (unix ns; adaptive mode).
	lastSlot atomic.Int64

	txs, drips, splits, fallbacks, alone atomic.Uint64
}

// batchEntry is one drip waiting in (or sent with) a batch.
type batchEntry struct {
	to stacks.Principal
	// arrived and deadline (zero: none) bound how long the entry's batch
	// may wait for a slot and take to send: never past any entry's request.
	arrived, deadline time.Time
	// taken is set under batcher.mu when the entry leaves the queue; a
	// cancelled request can withdraw only before that.
	taken bool
	done  chan batchOutcome // buffered: the sender never blocks
}

// singleSender pays one drip in a plain transfer from a key choose picks
// (dripper.transfer).
type singleSender interface {
	transfer(ctx context.Context, choose chooser, to stacks.Principal, amount uint64) (*Result, error)
}

type batchOutcome struct {
	res *Result
	err error
}

// BatchStats counts send-many activity since start.
type BatchStats struct {
	Enabled bool
	// Txs is the number of send-many transactions sent (accepted or in
	// doubt); Drips the drips they paid.
	Txs, Drips uint64
	// Splits counts batches the node refused that were retried as two
	// halves; Fallbacks drips sent as plain transfers because the contract
	// was unusable.
	Splits, Fallbacks uint64
	// Alone counts drips the adaptive batcher sent at once as plain
	// transfers: a slot was free and nothing queued.
	Alone uint64
}

// BatchStats reports the batcher's counters (zero when batching is off).
func (f *Faucet) BatchStats() BatchStats {
	b := f.batch
	if b == nil {
		return BatchStats{}
	}
	return BatchStats{Enabled: true, Txs: b.txs.Load(), Drips: b.drips.Load(),
		Splits: b.splits.Load(), Fallbacks: b.fallbacks.Load(), Alone: b.alone.Load()}
}

// queued is how many drips wait in the batcher (0 without one).
func (b *batcher) queued() int {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}

// batchable reports whether a drip may join a batch: a default drip to a
// recipient the contract's stx-transfer? will pay. A faucet key as recipient
// would abort the whole batch if that key were the sender, so it goes alone
// (and send picks another key or refuses it).
func (b *batcher) batchable(req Request, amount uint64) bool {
	if b == nil || req.Stacking || amount != b.amount || amount == 0 {
		return false
	}
	if !req.Recipient.IsContract() && b.pool.isDistributor(req.Recipient.Address) {
		return false
	}
	now := b.clk.Now()
	b.mu.Lock()
	paused := now.Before(b.pausedUntil)
	b.mu.Unlock()
	return !paused
}

// submitBatched queues the drip and waits for its batch's outcome. A request
// cancelled while still queued leaves without trace; once its batch is on
// the way, the batch answers for it (it may be paid).
func (b *batcher) submitBatched(ctx context.Context, to stacks.Principal) (*Result, error) {
	now := b.clk.Now()
	if b.window == 0 {
		b.mu.Lock()
		demand := b.arrivedLocked(now)
		alone := len(b.queue) == 0 && decideBatch(b.viewLocked(now, demand)).Action == leaveAlone
		if alone {
			b.leaving++ // counted as taken until its key is chosen
		}
		b.mu.Unlock()
		if alone {
			// Nagle's rule: nothing to gather with and slots to spare, so
			// the drip leaves now, on a slot not kept for calls. Without
			// waiting: if other drips took the last one meanwhile, this
			// one queues as if it had seen none.
			b.lastSlot.Store(now.UnixNano())
			choose, left := b.leavingAlone(b.lone)
			res, err := b.singles.transfer(ctx, choose, to, b.amount)
			left()
			if e, ok := errors.AsType[*Error](err); !ok || e.Reason != ReasonBusy {
				b.alone.Add(1)
				return res, err
			}
		}
	}
	e := &batchEntry{to: to, arrived: now, done: make(chan batchOutcome, 1)}
	e.deadline, _ = ctx.Deadline()
	b.mu.Lock()
	b.queue = append(b.queue, e)
	var full []*batchEntry
	switch {
	case len(b.queue) >= b.max:
		full = b.takeLocked()
	case len(b.queue) == 1 && b.window == 0:
		go b.awaitSlot(b.gen)
	case len(b.queue) == 1:
		gen := b.gen
		b.timer = b.afterFunc(b.window, gen)
	}
	b.mu.Unlock()
	if full != nil {
		b.lastSlot.Store(b.clk.Now().UnixNano())
		go b.dispatchBatch(full)
	}
	select {
	case out := <-e.done:
		return out.res, out.err
	case <-ctx.Done():
	}
	if b.withdraw(e) {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			// Still gathering at the deadline: no slot came free in time.
			return nil, failf(ReasonBusy, ctx.Err(), "the faucet is busy; try again in a minute")
		}
		return nil, failf(ReasonNodeUnavailable, ctx.Err(), "the request was cancelled")
	}
	out := <-e.done
	return out.res, out.err
}

// takeLocked removes the open batch from the queue. Caller holds b.mu.
func (b *batcher) takeLocked() []*batchEntry {
	n := min(len(b.queue), b.max)
	batch := make([]*batchEntry, n)
	copy(batch, b.queue)
	for _, e := range batch {
		e.taken = true
	}
	b.queue = append(b.queue[:0:0], b.queue[n:]...)
	b.gen++
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	return batch
}

// afterFunc flushes batch gen after d. The flush runs on a goroutine of its
// own: a fake clock calls the function while it holds its lock, and the
// flush reads that clock.
func (b *batcher) afterFunc(d time.Duration, gen uint64) clock.Timer {
	return b.clk.AfterFunc(d, func() { go b.flushBatch(gen) })
}

// flushBatch sends the batch whose window has ended, if it is still open
// and decideBatch says so; otherwise it keeps gathering for another window.
func (b *batcher) flushBatch(gen uint64) {
	now := b.clk.Now()
	b.mu.Lock()
	if gen != b.gen || len(b.queue) == 0 {
		b.mu.Unlock()
		return
	}
	if d := decideBatch(b.viewLocked(now, 0)); d.Action == review {
		b.timer = b.afterFunc(d.Wait, gen)
		b.mu.Unlock()
		return
	}
	batch := b.takeLocked()
	b.mu.Unlock()
	b.dispatchBatch(batch)
}

// arrivedLocked counts one arriving drip in the demand rate and returns
// the rate. The rate decays over one release interval, so it is the
// demand of about the last block. Caller holds b.mu.
func (b *batcher) arrivedLocked(now time.Time) float64 {
	tau := b.pace.releaseInterval().Seconds()
	b.demand = b.demandAtLocked(now) + 1/tau
	b.demandAt = now
	return b.demand
}

// demandAtLocked is the demand rate decayed to now. Caller holds b.mu.
func (b *batcher) demandAtLocked(now time.Time) float64 {
	if b.demandAt.IsZero() {
		return 0
	}
	return b.demand * math.Exp(-now.Sub(b.demandAt).Seconds()/b.pace.releaseInterval().Seconds())
}

// viewLocked is what decideBatch needs to know now, demand being the
// arrival rate. Caller holds b.mu.
func (b *batcher) viewLocked(now time.Time, demand float64) slotView {
	free, kept := b.pool.freeSlots()
	v := slotView{Window: b.window, Queued: len(b.queue), Free: free, Kept: kept, Leaving: b.leaving,
		Demand: demand, UntilRelease: b.pace.untilRelease(), BusyWait: b.busyWait,
		SinceSlot: time.Duration(now.UnixNano() - b.lastSlot.Load())}
	if len(b.queue) > 0 {
		// The queue's head is its longest-waiting drip.
		v.Waited = now.Sub(b.queue[0].arrived)
	}
	return v
}

// leavingAlone wraps a lone drip's key choice: once a key is chosen (or
// none), the drip's slot shows in the pool and no longer in b.leaving.
// left does the same for a drip that ends without choosing; it is a no-op
// after a choice.
func (b *batcher) leavingAlone(choose chooser) (_ chooser, left func()) {
	left = sync.OnceFunc(func() {
		b.mu.Lock()
		b.leaving--
		b.mu.Unlock()
	})
	return chooseFunc(func(ctx context.Context, spend cost, excluded keySet) (*keyState, uint64, *Error) {
		k, nonce, err := choose.choose(ctx, spend, excluded)
		left()
		return k, nonce, err
	}), left
}

// awaitSlot sends the adaptive batch gen when decideBatch says so, looking
// again when it asks to or when a block (or a refusal) frees slots. So a
// steady stream fills each call without spending every slot before the
// block comes, and a lone latecomer waits little.
func (b *batcher) awaitSlot(gen uint64) {
	timer := b.clk.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		freed := b.pool.freedSignal()
		now := b.clk.Now()
		b.mu.Lock()
		if gen != b.gen || len(b.queue) == 0 {
			b.mu.Unlock()
			return // sent full, or every drip withdrew
		}
		d := decideBatch(b.viewLocked(now, b.demandAtLocked(now)))
		b.mu.Unlock()
		if d.Action != review {
			break
		}
		timer.Reset(d.Wait)
		select {
		case <-freed: // a block (or a refusal) freed slots: look again
		case <-timer.C():
		}
	}
	b.mu.Lock()
	if gen != b.gen || len(b.queue) == 0 {
		b.mu.Unlock()
		return
	}
	batch := b.takeLocked()
	if len(b.queue) > 0 {
		go b.awaitSlot(b.gen)
	}
	b.mu.Unlock()
	b.lastSlot.Store(b.clk.Now().UnixNano())
	b.dispatchBatch(batch)
}

// dispatchBatch sends a batch that has left the queue, under a context that
// ends at the earliest deadline of its requests: a client must get its
// answer (cancelling a broadcast midway leaves the batch in doubt, which is
// answered and repaired as such).
func (b *batcher) dispatchBatch(entries []*batchEntry) {
	var deadline time.Time
	for _, e := range entries {
		if !e.deadline.IsZero() && (deadline.IsZero() || e.deadline.Before(deadline)) {
			deadline = e.deadline
		}
	}
	ctx, cancel := context.Background(), context.CancelFunc(func() {})
	if !deadline.IsZero() {
		ctx, cancel = context.WithDeadline(ctx, deadline)
	}
	defer cancel()
	b.sendBatch(ctx, entries)
}

// slotWait is how much longer a batch may wait for an in-flight slot: what
// is left of BusyWait since its first drip arrived (time in the queue
// counts). Entries keep their queue order, so the first arrived first.
func (b *batcher) slotWait(entries []*batchEntry) time.Duration {
	return max(b.busyWait-b.clk.Since(entries[0].arrived), 0)
}

// withdraw removes a queued entry; false when its batch has left already.
func (b *batcher) withdraw(e *batchEntry) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e.taken {
		return false
	}
	for i, q := range b.queue {
		if q == e {
			b.queue = append(b.queue[:i], b.queue[i+1:]...)
			break
		}
	}
	if len(b.queue) == 0 && b.timer != nil {
		b.timer.Stop()
		b.timer = nil
		b.gen++
	}
	return true
}
