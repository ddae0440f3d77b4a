package faucet

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/journal"
)

// TxState says how far a transaction got: the journal's states.
type TxState = journal.State

const (
	// TxBroadcasting: recorded, bytes included, before the first send (or
	// sent with the answer lost). After a crash the node may or may not
	// hold it; resuming resolves it by rebroadcasting the same bytes (the
	// node answers 200 for a tx it has).
	TxBroadcasting = journal.Broadcasting
	// TxPending: the node accepted it (or answered in a way that may mean
	// so, and repair keeps rebroadcasting it until the nonce confirms).
	TxPending = journal.Pending
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
	// ConflictingNonceInMempool); we hold no bytes for it and record
	// nothing.
	Foreign bool
	// Rebroadcasts and Replacements count repair attempts.
	Rebroadcasts int
	Replacements int
	// Replaces is the txid of the transaction a fee bump replaced; prev is
	// that transaction when the journal still held it (a crash before the
	// replacement was settled), to stand again if the node refuses the
	// replacement.
	Replaces stacks.TxID
	prev     *PendingTx
}

// stxMeta is a Stacks entry's part of the journal record.
type stxMeta struct {
	Recipient    string `json:"recipient"`
	Asset        string `json:"asset"`
	Amount       int64  `json:"amount"` // the uint64, bit for bit
	Fee          int64  `json:"fee"`
	Rebroadcasts int    `json:"rebroadcasts,omitempty"`
	Replacements int    `json:"replacements,omitempty"`
}

// entry is p as the journal records it.
func (p PendingTx) entry() journal.Entry {
	meta, _ := json.Marshal(stxMeta{Recipient: p.Recipient.String(), Asset: string(p.Asset.OrSTX()),
		Amount: int64(p.Amount), Fee: int64(p.Fee), Rebroadcasts: p.Rebroadcasts, Replacements: p.Replacements})
	e := journal.Entry{Key: p.Sender.String(), TxID: p.TxID.String(), Seq: p.Nonce, Raw: p.Raw, State: p.State,
		SentAt: p.SentAt, Meta: meta}
	if p.Replaces != (stacks.TxID{}) {
		e.Replaces = p.Replaces.String()
	}
	return e
}

// pendingOf reads a journal entry of a Stacks key back.
func pendingOf(e journal.Entry) (PendingTx, error) {
	sender, err := stacks.ParseAddress(e.Key)
	if err != nil {
		return PendingTx{}, fmt.Errorf("journal entry %s: sender: %w", e.TxID, err)
	}
	id, err := stacks.ParseTxID(e.TxID)
	if err != nil {
		return PendingTx{}, fmt.Errorf("journal entry of %s: %w", e.Key, err)
	}
	var m stxMeta
	if err := json.Unmarshal(e.Meta, &m); err != nil {
		return PendingTx{}, fmt.Errorf("journal entry %s: record: %w", e.TxID, err)
	}
	to, err := stacks.ParsePrincipal(m.Recipient)
	if err != nil {
		return PendingTx{}, fmt.Errorf("journal entry %s: recipient: %w", e.TxID, err)
	}
	p := PendingTx{Sender: sender, Nonce: e.Seq, TxID: id, Raw: e.Raw, Recipient: to, Asset: Asset(m.Asset).OrSTX(),
		Amount: uint64(m.Amount), Fee: uint64(m.Fee), SentAt: e.SentAt, State: e.State,
		Rebroadcasts: m.Rebroadcasts, Replacements: m.Replacements}
	if e.Replaces != "" {
		if p.Replaces, err = stacks.ParseTxID(e.Replaces); err != nil {
			return PendingTx{}, fmt.Errorf("journal entry %s: replaces: %w", e.TxID, err)
		}
	}
	return p, nil
}

// pendingOfAll reads a key's entries, one per nonce: where a fee bump left
// two (a crash before it was settled), the replacement, with the entry it
// replaces kept behind it.
func pendingOfAll(entries []journal.Entry) ([]PendingTx, error) {
	byNonce := map[uint64]*PendingTx{}
	var order []uint64
	for _, e := range entries {
		p, err := pendingOf(e)
		if err != nil {
			return nil, err
		}
		cur, seen := byNonce[p.Nonce]
		switch {
		case !seen:
			byNonce[p.Nonce] = &p
			order = append(order, p.Nonce)
		case p.Replaces == cur.TxID:
			p.prev = cur
			byNonce[p.Nonce] = &p
		case cur.Replaces == p.TxID:
			cur.prev = &p
		case p.SentAt.After(cur.SentAt):
			// Two unrelated rows at one nonce: a refused broadcast whose
			// row outlived it. The newer one is the nonce's.
			byNonce[p.Nonce] = &p
		}
	}
	out := make([]PendingTx, 0, len(order))
	for _, n := range order {
		out = append(out, *byNonce[n])
	}
	return out, nil
}
