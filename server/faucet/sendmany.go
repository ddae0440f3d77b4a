package faucet

import (
	"context"
	"errors"
	"sync"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// A batch on its way: one send-many call paying every drip of it, split
// when the node refuses it for what one recipient may cause, and paid as
// plain transfers when the contract is missing.

// sendBatch pays every entry and answers each exactly once. A batch of one
// is a plain transfer (smaller, cheaper). A batch the node refuses for a
// reason that may lie in one recipient is split in two and each half tried
// again, so one bad recipient cannot sink the others.
func (b *batcher) sendBatch(ctx context.Context, entries []*batchEntry) {
	if len(entries) == 1 {
		res, err := b.singles.transfer(ctx, b.single, entries[0].to, b.amount)
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
		b.log.Warn("send-many batch not sent; retrying in two parts", "recipients", len(entries), "err", err)
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
				res, err := b.singles.transfer(ctx, b.single, e.to, b.amount)
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
	chainID, amount := b.chain.id(), b.amount
	recipients := make([]stacks.SendManyEntry, len(entries))
	for i, e := range entries {
		recipients[i] = stacks.SendManyEntry{To: e.to, Amount: amount, Memo: b.memo}
	}
	total, err := stacks.SendManyTotal(recipients)
	if err != nil {
		return nil, batchSplit, 0, failf(ReasonRejected, err, "the batch total overflows")
	}
	// Unsigned, with a throwaway nonce and fee: only the payload and the
	// length matter to its price, and both are the real call's.
	draft, err := stacks.SendManyDraft(stacks.SendManyParams{
		Contract: b.contract, Recipients: recipients, ChainID: chainID,
	}, b.pool.keys[0].key)
	if err != nil {
		// The payload itself is unbuildable: only a recipient can cause that.
		return nil, batchSplit, 0, failf(ReasonRejected, err, "could not build the transaction")
	}
	fee := b.price.batch(ctx, draft)
	done, perr := b.placer.place(ctx, placement{
		to: b.contract.Principal(), amount: total, fee: fee,
		choose: &distributorChoice{pool: b.pool, prep: b.prep, wait: b.slotWait(entries)},
		build: func(key *stacks.PrivateKey, nonce uint64) (*stacks.Transaction, error) {
			return stacks.NewSendMany(stacks.SendManyParams{
				Contract: b.contract, Recipients: recipients, Nonce: nonce, Fee: fee, ChainID: chainID,
			}, key)
		},
	})
	if perr != nil {
		next := b.batchRefused(perr)
		if next == batchFail && perr.Reason == ReasonExhausted {
			// No key can pay the whole batch: send the part the best key
			// can pay, then the rest.
			if n := b.pool.affordable(amount, fee, MaxBatch); n > 0 {
				return nil, batchSplit, n, perr
			}
		}
		return nil, next, 0, perr
	}
	p := done.tx
	if done.lostAnswer != nil {
		b.log.Warn("broadcast outcome unknown; the batch is tracked and rebroadcast until its nonce confirms",
			"sender", p.Sender.String(), "nonce", p.Nonce, "txid", p.TxID.Hex0x(), "recipients", len(entries), "err", done.lostAnswer)
	}
	b.txs.Add(1)
	b.drips.Add(uint64(len(entries)))
	b.log.Debug("send-many batch sent", "sender", p.Sender.String(), "nonce", p.Nonce, "txid", p.TxID.Hex0x(),
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
	b.pausedUntil = b.clk.Now().Add(contractPause)
	b.mu.Unlock()
	b.log.Error("the send-many contract is not usable on this node; drips are plain transfers for a while",
		"contract", b.contract.String(), "retry_in", contractPause.String(), "err", err)
}
