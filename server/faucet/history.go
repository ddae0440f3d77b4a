package faucet

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// HistoryReader finds a drip by its transaction id. The stores implement it;
// the drip status endpoint reads through Faucet.LookupDrip.
type HistoryReader interface {
	// DripByTxID returns the newest record with that txid (with or without
	// 0x); ok is false when there is none.
	DripByTxID(ctx context.Context, txid string) (d DripRecord, ok bool, err error)
}

// DefaultMemoryHistorySize bounds the in-memory history of an engine
// configured without a store: about a day of a busy public faucet, a few MB.
const DefaultMemoryHistorySize = 50_000

// MemoryHistory keeps the newest records in process memory, oldest dropped
// first; it serves drip status lookups for `serve --store memory` (and the
// devnet), where nothing survives a restart anyway.
type MemoryHistory struct {
	mu   sync.Mutex
	size int
	ring []DripRecord // insertion order; next is the slot written next
	next int
	byTx map[string]int // txid → ring index of its newest record
}

// NewMemoryHistory returns a history holding at most size records.
func NewMemoryHistory(size int) *MemoryHistory {
	if size <= 0 {
		size = DefaultMemoryHistorySize
	}
	return &MemoryHistory{size: size, byTx: map[string]int{}}
}

// Record implements History.
func (h *MemoryHistory) Record(_ context.Context, d DripRecord) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.ring) < h.size {
		h.ring = append(h.ring, DripRecord{})
	}
	if old := h.ring[h.next]; old.TxID != "" && h.byTx[old.TxID] == h.next {
		delete(h.byTx, old.TxID)
	}
	d.TxID = normTxID(d.TxID)
	h.ring[h.next] = d
	if d.TxID != "" {
		h.byTx[d.TxID] = h.next
	}
	h.next = (h.next + 1) % h.size
	return nil
}

// Prune implements History: records older than before are forgotten.
func (h *MemoryHistory) Prune(_ context.Context, before time.Time) (int64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var n int64
	for i, d := range h.ring {
		if d.At.IsZero() || !d.At.Before(before) {
			continue
		}
		if d.TxID != "" && h.byTx[d.TxID] == i {
			delete(h.byTx, d.TxID)
		}
		h.ring[i] = DripRecord{}
		n++
	}
	return n, nil
}

// DripByTxID implements HistoryReader.
func (h *MemoryHistory) DripByTxID(_ context.Context, txid string) (DripRecord, bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	i, ok := h.byTx[normTxID(txid)]
	if !ok {
		return DripRecord{}, false, nil
	}
	return h.ring[i], true, nil
}

// normTxID is the form records keep: lower-case hex without 0x.
func normTxID(s string) string {
	s = strings.TrimSpace(s)
	if len(s) >= 2 && (s[:2] == "0x" || s[:2] == "0X") {
		s = s[2:]
	}
	return strings.ToLower(s)
}

// LookupDrip finds a drip this faucet answered by txid, from its history;
// ok is false when the history does not hold it or cannot be searched.
func (f *Faucet) LookupDrip(ctx context.Context, txid string) (DripRecord, bool, error) {
	r, can := f.cfg.State.History.(HistoryReader)
	if !can {
		return DripRecord{}, false, nil
	}
	d, ok, err := r.DripByTxID(ctx, txid)
	if err != nil {
		return DripRecord{}, false, storeFailure(err, "read the drip history")
	}
	if ok {
		return d, true, nil
	}
	// A drip still queued for the history writer is not in the store yet.
	return DripRecord{}, false, nil
}

// historyWriter is the queue between drips and the history store: while
// Run is under way a worker writes records off the request path.
type historyWriter struct {
	queue   chan DripRecord
	running atomic.Bool
	store   History
	log     *slog.Logger
}

// record writes d to the history: queued while the worker runs, else (or
// when the queue is full) here. A failed write is logged.
func (h *historyWriter) record(ctx context.Context, d DripRecord) {
	if h.running.Load() {
		select {
		case h.queue <- d:
			return
		default:
		}
	}
	h.write(context.WithoutCancel(ctx), d)
}

func (h *historyWriter) write(ctx context.Context, d DripRecord) {
	if err := h.store.Record(ctx, d); err != nil {
		h.log.Warn("drip history write failed", "txid", hex0x(d.TxID), "err", err)
	}
}

// run writes queued records until ctx ends, then flushes the queue.
func (h *historyWriter) run(ctx context.Context) {
	h.running.Store(true)
	for {
		select {
		case d := <-h.queue:
			h.write(context.WithoutCancel(ctx), d)
		case <-ctx.Done():
			h.running.Store(false)
			for {
				select {
				case d := <-h.queue:
					h.write(context.WithoutCancel(ctx), d)
				default:
					return
				}
			}
		}
	}
}

// hex0x is a stored txid (bare hex) as the API and the logs write it; ""
// (a drip that sent nothing) stays "".
func hex0x(txid string) string {
	if txid == "" || strings.HasPrefix(txid, "0x") {
		return txid
	}
	return "0x" + txid
}
