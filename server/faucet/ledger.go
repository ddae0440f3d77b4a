package faucet

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// PendingTx is a transaction the node accepted (or may have accepted) that is
// not yet confirmed. Raw is kept so a stuck nonce can be rebroadcast.
type PendingTx struct {
	Sender    stacks.Address
	Nonce     uint64
	TxID      stacks.TxID
	Raw       []byte
	Recipient stacks.Principal
	// Asset is what Amount counts: µSTX, or base units of the token for a
	// SIP-010 transfer (whose µSTX cost is then the fee alone).
	Asset  Asset
	Amount uint64
	Fee    uint64
	SentAt time.Time
	State  TxState
	// Foreign marks a nonce some other writer occupies (learned from
	// ConflictingNonceInMempool); we hold no bytes for it.
	Foreign bool
	// Rebroadcasts and Replacements count repair attempts.
	Rebroadcasts int
	Replacements int
}

// Ledger stores in-flight transactions per sender key. The engine keeps it
// consistent with its own per-key state; a persistent implementation lets a
// restarted faucet resume repairs.
type Ledger interface {
	Put(ctx context.Context, tx PendingTx) error
	Delete(ctx context.Context, sender stacks.Address, nonce uint64) error
	// DeleteBelow removes every entry of sender with a nonce below nonce:
	// one write for all the txs a block confirmed.
	DeleteBelow(ctx context.Context, sender stacks.Address, nonce uint64) error
	// List returns the sender's entries in ascending nonce order.
	List(ctx context.Context, sender stacks.Address) ([]PendingTx, error)
}

// MemoryLedger is a Ledger in process memory.
type MemoryLedger struct {
	mu      sync.Mutex
	pending map[stacks.Address]map[uint64]PendingTx
}

// NewMemoryLedger returns an empty in-memory ledger.
func NewMemoryLedger() *MemoryLedger {
	return &MemoryLedger{pending: map[stacks.Address]map[uint64]PendingTx{}}
}

// Put stores or replaces the entry for (sender, nonce).
func (m *MemoryLedger) Put(_ context.Context, tx PendingTx) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	bySender := m.pending[tx.Sender]
	if bySender == nil {
		bySender = map[uint64]PendingTx{}
		m.pending[tx.Sender] = bySender
	}
	tx.Raw = slices.Clone(tx.Raw)
	bySender[tx.Nonce] = tx
	return nil
}

// Delete removes the entry for (sender, nonce) if present.
func (m *MemoryLedger) Delete(_ context.Context, sender stacks.Address, nonce uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.pending[sender], nonce)
	return nil
}

// DeleteBelow removes the sender's entries with a nonce below nonce.
func (m *MemoryLedger) DeleteBelow(_ context.Context, sender stacks.Address, nonce uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for n := range m.pending[sender] {
		if n < nonce {
			delete(m.pending[sender], n)
		}
	}
	return nil
}

// List returns the sender's entries sorted by nonce.
func (m *MemoryLedger) List(_ context.Context, sender stacks.Address) ([]PendingTx, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]PendingTx, 0, len(m.pending[sender]))
	for _, tx := range m.pending[sender] {
		out = append(out, tx)
	}
	slices.SortFunc(out, func(a, b PendingTx) int { return compareU64(a.Nonce, b.Nonce) })
	return out, nil
}

func compareU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
