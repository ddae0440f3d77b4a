package devnode

import (
	"cmp"
	"container/heap"
	"context"
	"math/bits"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// Run mines a block every Config.BlockTime until ctx is done, then returns
// nil. With BlockTime 0 it only waits for ctx (blocks come from Mine).
func (n *Node) Run(ctx context.Context) error {
	if n.cfg.BlockTime <= 0 {
		<-ctx.Done()
		return nil
	}
	t := time.NewTicker(n.cfg.BlockTime)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			n.Mine()
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
func (n *Node) Mine() Block {
	n.mu.Lock()
	defer n.mu.Unlock()

	height := n.tip.Height + 1
	n.past.mining = height
	defer func() { n.past.mining = 0 }()
	var included []stacks.TxID
	var raws [][]byte
	var outcomes []callOutcome
	var ready readyHeap
	for sender := range n.pending {
		if e := n.nextReady(sender); e != nil {
			ready = append(ready, e)
		}
	}
	heap.Init(&ready)
	for ready.Len() > 0 {
		if n.cfg.MaxBlockTxs > 0 && len(included) >= n.cfg.MaxBlockTxs {
			break
		}
		e := heap.Pop(&ready).(*poolEntry)
		from := n.acct(e.sender)
		// A transfer must cover amount+fee (the devnode drops one that
		// cannot; see doc.go). A contract call pays its fee first, as
		// stacks-core does since epoch 2.1, and is invalid (dropped) only
		// when even the fee is unpayable: its transfers may still fail.
		cost, carry := bits.Add64(e.tx.Payload.Amount, e.tx.Auth.Fee, 0)
		if e.tx.ContractCall != nil {
			cost, carry = e.tx.Auth.Fee, 0
		}
		if carry != 0 || from.balance < cost {
			// The miner cannot include it; the real miner drops such txs.
			n.log.Warn("devnode: dropping tx that can no longer pay",
				"txid", e.txid.Hex0x(), "sender", e.sender, "nonce", e.tx.Auth.Nonce,
				"needed", cost, "balance", from.balance)
			n.removePending(e)
			delete(n.pool, e.txid)
			continue
		}
		from.balance -= cost
		from.nonce++
		out := callOutcome{result: resultTransferOK}
		switch {
		case e.token != nil:
			out = n.runTokenCall(e)
		case e.tx.ContractCall != nil:
			out = n.runContractCall(e, from)
		default:
			n.credit(e.tx.Payload.Recipient.String(), e.tx.Payload.Amount)
		}
		outcomes = append(outcomes, out)
		n.removePending(e)
		e.mined = true
		included = append(included, e.txid)
		raws = append(raws, e.raw)
		if next := n.nextReady(e.sender); next != nil {
			heap.Push(&ready, next)
		}
	}

	n.tip = n.makeBlock(n.tip.Hash, height, included)
	// The block id depends on the included txids, so index them afterwards.
	n.blockIDs = append(n.blockIDs, n.tip.IndexBlockHash)
	n.past.mined(n.tip)
	n.past.prune(n.tip.Height)
	for i, id := range included {
		o := outcomes[i]
		n.confirmed[id] = minedTx{height: height, raw: raws[i], result: o.result, aborted: o.aborted, pcFailure: o.pcFailure, events: o.events}
	}
	n.gc()
	// Debug: a block every few seconds would drown the devnet's log.
	n.log.Debug("devnode: mined block", "height", height, "txs", len(included), "mempool", n.nPending)
	b := n.tip
	b.TxIDs = append([]stacks.TxID(nil), included...)
	return b
}

// nextReady returns sender's pending tx at the account's next nonce,
// dropping stale lower-nonce rows on the way. Callers hold n.mu.
func (n *Node) nextReady(sender string) *poolEntry {
	nonce := n.peek(sender).nonce
	for k, e := range n.pending[sender] {
		if k < nonce { // cannot happen through admission; keep the pool sane anyway
			n.removePending(e)
			delete(n.pool, e.txid)
		}
	}
	return n.pending[sender][nonce]
}

// gc deletes mempool rows (pending or mined) received more than
// MempoolMaxTxAge blocks before the tip, like MemPoolDB::garbage_collect.
func (n *Node) gc() {
	if n.tip.Height <= MempoolMaxTxAge {
		return
	}
	minHeight := n.tip.Height - MempoolMaxTxAge
	for id, e := range n.pool {
		if e.received >= minHeight {
			continue
		}
		if !e.mined {
			n.log.Info("devnode: garbage-collecting stale mempool tx", "txid", id.Hex0x(), "received", e.received)
			n.removePending(e)
		}
		delete(n.pool, id)
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
