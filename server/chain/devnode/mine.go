package devnode

import (
	"cmp"
	"container/heap"
	"context"
	"math/bits"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// Run mines a block every Config.BlockTime, on the node's clock, until ctx
// is done, then returns nil. With BlockTime 0 it only waits for ctx (blocks
// come from Mine).
func (c *chain) Run(ctx context.Context) error {
	if c.blockTime <= 0 {
		<-ctx.Done()
		return nil
	}
	t := c.clock.NewTicker(c.blockTime)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
			c.Mine()
		}
	}
}

// Mine mines one block now and returns it. For each sender it includes
// pending txs whose nonce is the account's next nonce, in nonce order, so a
// nonce gap holds back everything after it. Across senders the highest fee
// rate goes first (then arrival order), up to Config.MaxBlockTxs. A tx that
// can no longer pay amount+fee is dropped from the mempool; a contract call
// only needs its fee, which it pays even when the call aborts. Afterwards txs
// received more than MempoolMaxTxAge blocks ago are garbage-collected.
func (c *chain) Mine() Block {
	c.mu.Lock()
	defer c.mu.Unlock()

	height := c.tip.Height + 1
	c.ledger.beginBlock(height)
	var included []*poolEntry
	var outcomes []callOutcome
	ready := c.pool.ready()
	for ready.Len() > 0 {
		if c.maxBlockTxs > 0 && len(included) >= c.maxBlockTxs {
			break
		}
		e := heap.Pop(&ready).(*poolEntry)
		out, ok := c.execute(e)
		if !ok { // dropped: the sender's later nonces wait for a replacement
			continue
		}
		c.pool.markMined(e)
		included = append(included, e)
		outcomes = append(outcomes, out)
		if next := c.pool.nextReady(e.sender); next != nil {
			heap.Push(&ready, next)
		}
	}

	txids := make([]stacks.TxID, len(included))
	for i, e := range included {
		txids[i] = e.txid
	}
	c.tip = c.makeBlock(c.tip.Hash, height, txids)
	// The block id depends on the included txids, so index them afterwards.
	header := c.tip
	header.TxIDs = nil
	c.headers = append(c.headers, header)
	c.ledger.endBlock(height)
	for i, e := range included {
		o := outcomes[i]
		c.confirmed[e.txid] = minedTx{height: height, raw: e.raw, result: o.result, aborted: o.aborted, pcFailure: o.pcFailure, events: o.events}
	}
	c.pool.blockMined(height)
	// Debug: a block every few seconds would drown the devnet's log.
	c.log.Debug("devnode: mined block", "height", height, "txs", len(included), "mempool", c.pool.nPending)
	b := c.tip
	b.TxIDs = append([]stacks.TxID(nil), txids...)
	return b
}

// execute charges e to its sender and runs it, or drops it from the
// mempool (false) when it cannot pay. A transfer must cover amount+fee
// (the devnode drops one that cannot; see doc.go). A contract call pays
// its fee first, as stacks-core does since epoch 2.1, and is invalid
// (dropped) only when even the fee is unpayable: its transfers may still
// fail. Callers hold the state lock.
func (c *chain) execute(e *poolEntry) (callOutcome, bool) {
	from := c.ledger.acct(e.sender)
	cost, carry := bits.Add64(e.tx.Payload.Amount, e.tx.Auth.Fee, 0)
	if e.tx.ContractCall != nil {
		cost, carry = e.tx.Auth.Fee, 0
	}
	if carry != 0 || from.balance < cost {
		// The miner cannot include it; the real miner drops such txs.
		c.log.Warn("devnode: dropping tx that can no longer pay",
			"txid", e.txid.Hex0x(), "sender", e.sender, "nonce", e.tx.Auth.Nonce,
			"needed", cost, "balance", from.balance)
		c.pool.drop(e)
		return callOutcome{}, false
	}
	from.balance -= cost
	from.nonce++
	switch {
	case e.token != nil:
		return c.calls.runTokenCall(e), true
	case e.tx.ContractCall != nil:
		return c.calls.runContractCall(e, from), true
	default:
		c.ledger.credit(e.tx.Payload.Recipient.String(), e.tx.Payload.Amount)
		return callOutcome{result: resultTransferOK}, true
	}
}

// readyHeap orders minable txs by fee rate (fee per byte) descending, then
// by arrival.
type readyHeap []*poolEntry

func (h readyHeap) Len() int { return len(h) }
func (h readyHeap) Less(i, j int) bool {
	// Compare fee_i/len_i > fee_j/len_j without division: fee_i*len_j > fee_j*len_i.
	a := mul128(h[i].tx.Auth.Fee, uint64(len(h[j].raw)))
	b := mul128(h[j].tx.Auth.Fee, uint64(len(h[i].raw)))
	if c := cmp128(a, b); c != 0 {
		return c > 0
	}
	return h[i].seq < h[j].seq
}
func (h readyHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *readyHeap) Push(x any)   { *h = append(*h, x.(*poolEntry)) }
func (h *readyHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

type u128 struct{ hi, lo uint64 }

func mul128(a, b uint64) u128 {
	hi, lo := bits.Mul64(a, b)
	return u128{hi, lo}
}

func cmp128(a, b u128) int {
	if c := cmp.Compare(a.hi, b.hi); c != 0 {
		return c
	}
	return cmp.Compare(a.lo, b.lo)
}
