package faucet

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// Batching: the node admits at most 25 unconfirmed transactions per sender,
// so one key alone pays about 25 drips per block. Default drips are instead
// paid by calls to a send-many-memo contract, up to 200 recipients in one
// transaction and one nonce, gathered one of two ways:
//
//   - adaptive (no window, the default), Nagle's rule: a drip leaves at
//     once, alone, while nothing is queued and slots are plentiful: more
//     are free, beyond the last fifth of each key's kept for calls, than
//     the current demand would take before the next block frees more.
//     Otherwise drips queue, and the queue leaves as one call paced
//     over the time left until that block (with k slots free, a (k+1)-th
//     of it after the batcher last took a slot), at once when a block
//     makes slots plentiful again, when it holds Max drips, or when its
//     first drip has waited BusyWait. The kept slots mean a burst still
//     finds a nonce for each Max drips. A quiet faucet answers as fast as
//     without batching; a busy one packs each nonce, and spreads its
//     nonces over the block instead of spending them at its start.
//   - a fixed window: the first drip of a batch waits Window for others.
const (
	MaxBatch = stacks.SendManyMaxRecipients
	// DefaultBatchMax is `faucet serve`'s cap on recipients per call: the
	// contract's. The engine's zero Batching.Max is off.
	DefaultBatchMax = MaxBatch
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
	f   *Faucet // the engine whose pipeline it places batches on
	max int
	// window is the fixed gathering time; 0 is adaptive (see above).
	window time.Duration

	mu    sync.Mutex
	queue []*batchEntry
	// gen numbers the open batch: a window timer flushes only the batch it
	// was started for, not a later one that a full batch's departure began.
	gen   uint64
	timer *time.Timer
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
	if b == nil || req.Stacking || amount != b.f.cfg.Amounts.Default || amount == 0 {
		return false
	}
	if !req.Recipient.IsContract() && b.f.pool.isDistributor(req.Recipient.Address) {
		return false
	}
	b.mu.Lock()
	paused := b.f.cfg.Now().Before(b.pausedUntil)
	b.mu.Unlock()
	return !paused
}

// submitBatched queues the drip and waits for its batch's outcome. A request
// cancelled while still queued leaves without trace; once its batch is on
// the way, the batch answers for it (it may be paid).
func (b *batcher) submitBatched(ctx context.Context, to stacks.Principal) (*Result, error) {
	now := b.f.cfg.Now()
	if b.window == 0 {
		b.mu.Lock()
		demand := b.arrivedLocked(now)
		alone := false
		if len(b.queue) == 0 {
			alone, _ = b.roomAloneLocked(demand)
		}
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
			choose, left := b.leavingAlone(b.f.chooseKeeping(0, b.f.pool.keptSlots()))
			res, err := b.f.sendVia(ctx, choose, to, b.f.cfg.Amounts.Default)
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
		b.timer = time.AfterFunc(b.window, func() { b.flushBatch(gen) })
	}
	b.mu.Unlock()
	if full != nil {
		b.lastSlot.Store(b.f.cfg.Now().UnixNano())
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

// flushBatch sends the batch whose window has ended, if it is still open.
// While no key has a free in-flight slot the batch stays open, window after
// window (up to BusyWait), and keeps gathering: a nonce is the scarce
// thing, so it should carry as many drips as possible once one frees up.
func (b *batcher) flushBatch(gen uint64) {
	free := b.f.pool.freeSlot()
	b.mu.Lock()
	if gen != b.gen || len(b.queue) == 0 {
		b.mu.Unlock()
		return
	}
	// The queue's head is its longest-waiting drip.
	if !free && b.f.cfg.Now().Sub(b.queue[0].arrived) < b.f.cfg.Timing.BusyWait {
		b.timer = time.AfterFunc(b.window, func() { b.flushBatch(gen) })
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
	tau := b.f.releaseInterval().Seconds()
	b.demand = b.demandAtLocked(now) + 1/tau
	b.demandAt = now
	return b.demand
}

// demandAtLocked is the demand rate decayed to now. Caller holds b.mu.
func (b *batcher) demandAtLocked(now time.Time) float64 {
	if b.demandAt.IsZero() {
		return 0
	}
	return b.demand * math.Exp(-now.Sub(b.demandAt).Seconds()/b.f.releaseInterval().Seconds())
}

// roomAloneLocked reports whether a drip may leave alone now: more slots
// are free beyond those kept for calls (and those lone drips are about to
// take) than the demand would take before the next block frees more.
// Otherwise slots are scarce, and drips gather. It also returns the free
// slots it saw. Caller holds b.mu.
func (b *batcher) roomAloneLocked(demand float64) (room bool, free int) {
	free, kept := b.f.pool.freeSlots()
	spare := free - kept - b.leaving
	return spare > 0 && float64(spare) > demand*b.f.untilRelease().Seconds(), free
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
	return func(ctx context.Context, spend cost, excluded map[*keyState]bool) (*keyState, uint64, *Error) {
		k, nonce, err := choose(ctx, spend, excluded)
		left()
		return k, nonce, err
	}, left
}

// awaitSlot sends the adaptive batch gen as soon as it may take a slot.
// It leaves at once when slots are no longer scarce, or when the batch is
// full; otherwise the free slots are paced over the time left until the
// next block is expected to free more: with k free, the batch leaves once
// a (k+1)-th of that time has passed since the batcher last took a slot.
// So a steady stream fills each call without spending every slot before
// the block comes, and a lone latecomer waits little. With no slot free
// it waits for a block (a freed slot), up to BusyWait from its first
// drip, then leaves anyway, to be answered busy.
func (b *batcher) awaitSlot(gen uint64) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		freed := b.f.pool.freedSignal()
		now := b.f.cfg.Now()
		b.mu.Lock()
		if gen != b.gen || len(b.queue) == 0 {
			b.mu.Unlock()
			return // sent full, or every drip withdrew
		}
		waited := now.Sub(b.queue[0].arrived)
		room, free := b.roomAloneLocked(b.demandAtLocked(now))
		b.mu.Unlock()
		if room {
			break
		}
		wait := b.f.cfg.Timing.BusyWait - waited
		if free > 0 {
			pace := b.f.untilRelease() / time.Duration(free+1)
			wait = min(wait, time.Duration(b.lastSlot.Load()+int64(pace)-now.UnixNano()))
		}
		if wait <= 0 {
			break
		}
		timer.Reset(wait)
		select {
		case <-freed: // a block (or a refusal) freed slots: look again
		case <-timer.C:
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
	b.lastSlot.Store(b.f.cfg.Now().UnixNano())
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
	return max(b.f.cfg.Timing.BusyWait-b.f.cfg.Now().Sub(entries[0].arrived), 0)
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

// sendBatch pays every entry and answers each exactly once. A batch of one
// is a plain transfer (smaller, cheaper). A batch the node refuses for a
// reason that may lie in one recipient is split in two and each half tried
// again, so one bad recipient cannot sink the others.
func (b *batcher) sendBatch(ctx context.Context, entries []*batchEntry) {
	if len(entries) == 1 {
		res, err := b.f.send(ctx, entries[0].to, b.f.cfg.Amounts.Default)
		entries[0].done <- batchOutcome{res, err}
		return
	}
	res, next, splitAt, err := b.sendMany(ctx, entries)
	switch next {
	case batchDone:
		res.rawHex = &rawHex{}
		for i, e := range entries {
			e.done <- batchOutcome{res: res.share(i, len(entries))}
		}
	case batchFail:
		for _, e := range entries {
			e.done <- batchOutcome{err: err}
		}
	case batchSplit:
		b.splits.Add(1)
		b.f.log.Warn("send-many batch not sent; retrying in two parts", "recipients", len(entries), "err", err)
		// One part after the other: the refused part's nonce is handed
		// back before the next part allocates, so no hole is left below
		// an accepted nonce. An unaffordable batch splits at what a key
		// can pay; a refused one in halves.
		at := splitAt
		if at <= 0 || at >= len(entries) {
			at = len(entries) / 2
		}
		b.sendBatch(ctx, entries[:at])
		b.sendBatch(ctx, entries[at:])
	case batchSingles:
		b.fallbacks.Add(uint64(len(entries)))
		var wg sync.WaitGroup
		for _, e := range entries {
			wg.Go(func() {
				res, err := b.f.send(ctx, e.to, b.f.cfg.Amounts.Default)
				e.done <- batchOutcome{res, err}
			})
		}
		wg.Wait()
	}
}

// BatchSize is the number of recipients when the tx is a send-many call
// (read from its bytes), else 0.
func (p PendingTx) BatchSize() int { return len(p.sendManyList()) }

// sendManyList is the recipient list of a send-many call, nil for any
// other transaction.
func (p PendingTx) sendManyList() stacks.List {
	tx, err := stacks.DecodeTransaction(p.Raw)
	if err != nil || tx.ContractCall == nil || len(tx.ContractCall.Args) != 1 {
		return nil
	}
	list, _ := tx.ContractCall.Args[0].(stacks.List)
	return list
}

// Pays reports whether the tx pays amount to recipient: a transfer with
// that recipient and amount, or a send-many call with that entry among its
// recipients.
func (p PendingTx) Pays(recipient string, amount uint64) bool {
	if p.Recipient.String() == recipient && p.Amount == amount {
		return true
	}
	for _, v := range p.sendManyList() {
		t, ok := v.(stacks.Tuple)
		if !ok || len(t) != 3 {
			continue
		}
		to, okTo := t[1].Value.(stacks.Principal)
		ustx, okAmt := t[2].Value.(stacks.UInt)
		if v, fits := ustx.Uint64(); okTo && okAmt && fits && to.String() == recipient && v == amount {
			return true
		}
	}
	return false
}

// share is entry i's view of a batch result: the shared transaction, its
// own amount and its share of the fee (the remainder goes to the first
// entry, so the shares add up to the fee).
func (r *Result) share(i, n int) *Result {
	c := *r
	c.Batch = n
	c.Fee = r.Fee / uint64(n)
	if i == 0 {
		c.Fee += r.Fee % uint64(n)
	}
	return &c
}

// What sendBatch does after one send-many attempt.
type batchNext int

const (
	batchDone    batchNext = iota // sent (or in doubt): answer every entry with the result
	batchFail                     // answer every entry with the error
	batchSplit                    // retry as two halves
	batchSingles                  // the contract is unusable: plain transfers
)

// sendMany pays DefaultAmount to each entry in one send-many call, placed
// like any transaction; what to do when it is refused depends on why.
func (b *batcher) sendMany(ctx context.Context, entries []*batchEntry) (res *Result, next batchNext, splitAt int, err error) {
	chainID := b.f.chainID()
	amount := b.f.cfg.Amounts.Default
	recipients := make([]stacks.SendManyEntry, len(entries))
	for i, e := range entries {
		recipients[i] = stacks.SendManyEntry{To: e.to, Amount: amount, Memo: []byte(b.f.cfg.Amounts.Memo)}
	}
	total, err := stacks.SendManyTotal(recipients)
	if err != nil {
		return nil, batchSplit, 0, failf(ReasonRejected, err, "the batch total overflows")
	}
	fee, err := b.batchFee(ctx, recipients, chainID)
	if err != nil {
		// The payload itself is unbuildable: only a recipient can cause that.
		return nil, batchSplit, 0, failf(ReasonRejected, err, "could not build the transaction")
	}
	done, perr := b.f.place(ctx, placement{
		to: b.f.cfg.Batching.Contract.Principal(), amount: total, fee: fee,
		choose: b.f.chooseDistributor(b.slotWait(entries)),
		build: func(key *stacks.PrivateKey, nonce uint64) (*stacks.Transaction, error) {
			return stacks.NewSendMany(stacks.SendManyParams{
				Contract: b.f.cfg.Batching.Contract, Recipients: recipients, Nonce: nonce, Fee: fee, ChainID: chainID,
			}, key)
		},
	})
	if perr != nil {
		next := b.batchRefused(perr)
		if next == batchFail && perr.Reason == ReasonExhausted {
			// No key can pay the whole batch: send the part the best key
			// can pay, then the rest.
			if n := b.f.pool.affordable(amount, fee, MaxBatch); n > 0 {
				return nil, batchSplit, n, perr
			}
		}
		return nil, next, 0, perr
	}
	p := done.tx
	if done.lostAnswer != nil {
		b.f.log.Warn("broadcast outcome unknown; the batch is tracked and rebroadcast until its nonce confirms",
			"sender", p.Sender.String(), "nonce", p.Nonce, "txid", p.TxID.Hex0x(), "recipients", len(entries), "err", done.lostAnswer)
	}
	b.txs.Add(1)
	b.drips.Add(uint64(len(entries)))
	b.f.log.Debug("send-many batch sent", "sender", p.Sender.String(), "nonce", p.Nonce, "txid", p.TxID.Hex0x(),
		"recipients", len(entries), "fee_ustx", fee)
	return &Result{TxID: p.TxID, TxRaw: p.Raw, Amount: amount, Fee: fee, Nonce: p.Nonce, Sender: p.Sender,
		InDoubt: done.lostAnswer != nil}, batchDone, 0, nil
}

// batchRefused decides what a batch the engine could not place does next.
func (b *batcher) batchRefused(err *Error) batchNext {
	if errors.Is(err, errBuild) {
		return batchSplit // only a recipient can make the payload unbuildable
	}
	var rej *node.RejectionError
	if errors.As(err, &rej) {
		switch rej.Reason {
		case node.ReasonNoSuchContract, node.ReasonNoSuchPublicFunction:
			b.pauseBatching(err)
			return batchSingles
		case node.ReasonBadFunctionArgument:
			// The argument is the recipient list: one of them may be
			// what the node refuses.
			return batchSplit
		}
		// Any other refusal is about the whole transaction (its fee,
		// signature, the node's state): halves would be refused too.
	}
	return batchFail
}

// pauseBatching turns batching off for contractPause: the configured
// contract is not deployed on this node.
func (b *batcher) pauseBatching(err error) {
	b.mu.Lock()
	b.pausedUntil = b.f.cfg.Now().Add(contractPause)
	b.mu.Unlock()
	b.f.log.Error("the send-many contract is not usable on this node; drips are plain transfers for a while",
		"contract", b.f.cfg.Batching.Contract.String(), "retry_in", contractPause.String(), "err", err)
}

// batchFee prices the send-many call from the node's estimate for this very
// payload (the middle estimation, as stacks.js uses), clamped to FeeMin and
// FeeMax scaled to the length (batchFeeMax) and never below the length (the
// node's minimum relay fee). Without an estimate it is the transfer fee rate
// × the length.
func (b *batcher) batchFee(ctx context.Context, recipients []stacks.SendManyEntry, chainID uint32) (uint64, error) {
	// Unsigned, with a throwaway nonce and fee: only the payload and the
	// length matter here, and both are the same for the real transaction.
	probe, err := stacks.SendManyDraft(stacks.SendManyParams{
		Contract: b.f.cfg.Batching.Contract, Recipients: recipients, ChainID: chainID,
	}, b.f.pool.keys[0].key)
	if err != nil {
		return 0, err
	}
	length := uint64(probe.EncodedLen())
	var fee uint64
	// One estimate serves CacheTTL of batches, scaled to each one's
	// length: a call's cost grows with its recipient list, as its length
	// does, and a round trip per batch would add to every batched drip's
	// wait.
	if est, err := b.f.batchFeeSample.Get(ctx, func(ctx context.Context) (feeSample, error) {
		est, err := b.f.cfg.Node.TransactionFeeEstimate(ctx, probe.PayloadBytes(), length)
		if err != nil {
			return feeSample{}, err
		}
		return feeSample{fee: est.Middle(), length: length}, nil
	}); err == nil {
		fee = est.scaled(length)
	} else {
		if !errors.Is(err, node.ErrNoFeeEstimate) && !errors.Is(err, node.ErrFeeEstimationDisabled) {
			b.f.log.Warn("fee estimate for a send-many batch failed; using the transfer fee rate", "err", err)
		}
		var ok bool
		if fee, ok = b.f.rateFee(ctx, length); !ok {
			// FeeFallback prices a plain transfer; a batch is as many
			// times dearer as it is longer.
			hi, lo := bits.Mul64(b.f.cfg.Fees.Fallback, length)
			fee = lo / transferLen(stacks.Principal{})
			if hi != 0 {
				fee = b.f.cfg.Fees.Max
			}
		}
	}
	return max(min(max(fee, b.f.cfg.Fees.Min), batchFeeMax(b.f.cfg.Fees.Max, length)), length), nil
}

// feeSample is a fee the node estimated for a transaction of length bytes.
type feeSample struct{ fee, length uint64 }

// scaled is the sample's fee for a transaction of n bytes, rounded up.
func (s feeSample) scaled(n uint64) uint64 {
	if n == s.length || s.length == 0 {
		return s.fee
	}
	hi, lo := bits.Mul64(s.fee, n)
	if hi != 0 {
		return ^uint64(0)
	}
	return (lo + s.length - 1) / s.length
}

// batchFeeMax scales FeeMax, which is sized for a transfer, to a send-many
// call of length bytes: the cap per byte (so per drip) stays the same, and
// a big batch is not priced out when fees rise.
func batchFeeMax(feeMax, length uint64) uint64 {
	unit := transferLen(stacks.Principal{})
	hi, lo := bits.Mul64(feeMax, length)
	if hi != 0 {
		return ^uint64(0)
	}
	scaled := lo / unit
	if lo%unit != 0 {
		scaled++
	}
	return max(feeMax, scaled)
}
