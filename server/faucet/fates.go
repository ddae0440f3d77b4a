package faucet

import (
	"sync"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// maxFates bounds the memory of replaced and dropped txids: they matter for
// the few minutes a client follows its drip.
const maxFates = 10_000

// txFates remembers what became of transactions that will never be mined
// under their own id: replaced by a fee bump (same transfer, new txid) or
// dropped (refused for good; the nonce went to another drip). Process
// memory only: after a restart the drip status endpoint says it cannot tell.
type txFates struct {
	mu       sync.Mutex
	replace  map[stacks.TxID]stacks.TxID
	drop     map[stacks.TxID]bool
	order    []stacks.TxID // insertion order, for eviction
	capacity int
}

func (t *txFates) note(id stacks.TxID) {
	if t.replace == nil {
		t.replace, t.drop = map[stacks.TxID]stacks.TxID{}, map[stacks.TxID]bool{}
	}
	capacity := t.capacity
	if capacity <= 0 {
		capacity = maxFates
	}
	t.order = append(t.order, id)
	for len(t.order) > capacity {
		old := t.order[0]
		t.order = t.order[1:]
		delete(t.replace, old)
		delete(t.drop, old)
	}
}

func (t *txFates) replaced(old, by stacks.TxID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.note(old)
	t.replace[old] = by
}

func (t *txFates) dropped(id stacks.TxID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.note(id)
	t.drop[id] = true
}

// ReplacementOf returns the txid (0x-less hex) now carrying the transfer of
// txid after one or more fee bumps by this process; ok is false when txid
// was never replaced here.
func (f *Faucet) ReplacementOf(txid string) (string, bool) {
	id, err := stacks.ParseTxID(txid)
	if err != nil {
		return "", false
	}
	f.fates.mu.Lock()
	defer f.fates.mu.Unlock()
	cur, ok := f.fates.replace[id]
	if !ok {
		return "", false
	}
	for range maxFates { // follow bump after bump, bounded
		next, more := f.fates.replace[cur]
		if !more {
			break
		}
		cur = next
	}
	return cur.String(), true
}

// Dropped reports whether this process saw the node refuse txid for good
// (its nonce then went to another transaction).
func (f *Faucet) Dropped(txid string) bool {
	id, err := stacks.ParseTxID(txid)
	if err != nil {
		return false
	}
	f.fates.mu.Lock()
	defer f.fates.mu.Unlock()
	return f.fates.drop[id]
}
