package journal

import (
	"cmp"
	"context"
	"slices"
	"sync"
)

// MemoryStore is a Store in process memory: what a faucet without a
// database, and the tests, use. Its writes are never fenced.
type MemoryStore struct {
	mu  sync.Mutex
	byK map[string]map[string]Entry // key → txid → entry
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore { return &MemoryStore{byK: map[string]map[string]Entry{}} }

// Put stores a copy of e.
func (m *MemoryStore) Put(_ context.Context, e Entry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := m.byK[e.Key]
	if k == nil {
		k = map[string]Entry{}
		m.byK[e.Key] = k
	}
	k[e.TxID] = e.Clone()
	return nil
}

// Delete removes (key, txid) if present.
func (m *MemoryStore) Delete(_ context.Context, key, txid string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.byK[key], txid)
	return nil
}

// DeleteBelow removes key's entries below seq.
func (m *MemoryStore) DeleteBelow(_ context.Context, key string, seq uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, e := range m.byK[key] {
		if e.Seq < seq {
			delete(m.byK[key], id)
		}
	}
	return nil
}

// List returns copies of key's entries in Store order.
func (m *MemoryStore) List(_ context.Context, key string) ([]Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Entry, 0, len(m.byK[key]))
	for _, e := range m.byK[key] {
		out = append(out, e.Clone())
	}
	SortEntries(out)
	return out, nil
}

// SortEntries puts entries in Store order: Seq, SentAt, TxID.
func SortEntries(es []Entry) {
	slices.SortFunc(es, func(a, b Entry) int {
		return cmp.Or(cmp.Compare(a.Seq, b.Seq), a.SentAt.Compare(b.SentAt), cmp.Compare(a.TxID, b.TxID))
	})
}

// Keys lists the keys with entries, sorted.
func (m *MemoryStore) Keys() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for k, es := range m.byK {
		if len(es) > 0 {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}
