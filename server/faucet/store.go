package faucet

import (
	"context"
	"errors"
	"time"
)

// The engine's state lives behind small interfaces so that it can be kept in
// memory (the default of tests and `serve --devnet`) or in a durable store
// shared by restarts and replicas (package store): the journal of in-flight
// transactions (journal.Store) and the drip history below. Each interface is
// the whole contract: store's contract suite runs the same tests against the
// memory implementations and against SQLite and Postgres.

// History keeps a record of every drip decision for audits and the drip
// status endpoint, pruned after a retention period.
type History interface {
	Record(ctx context.Context, d DripRecord) error
	// Prune deletes records older than before and reports how many.
	Prune(ctx context.Context, before time.Time) (int64, error)
}

// DripRecord is one answered drip request.
type DripRecord struct {
	At        time.Time
	Recipient string
	// Asset is what the drip paid (Amount's unit); "" in rows from before
	// assets existed, read as STX.
	Asset    Asset
	Stacking bool
	Amount   uint64 // in the asset's units; 0 when refused before an amount was chosen
	Fee      uint64
	TxID     string // 0x-less hex; empty when no tx was signed
	Sender   string // faucet key address; empty when none was chosen
	Nonce    uint64
	// Outcome is "sent" or the failure Reason.
	Outcome string
	// ClientBucket is the client's rate-limit group (IPv4 address or IPv6
	// /64), never more precise than the limit uses; empty when unknown.
	ClientBucket string
	// Batch is how many drips the transaction pays when it is a send-many
	// call shared with other drips (Fee is then this drip's share); 0 for
	// a plain transfer.
	Batch int
}

// OutcomeSent is DripRecord.Outcome for an accepted drip.
const OutcomeSent = "sent"

// ErrStoreUnavailable marks store errors caused by the store being
// unreachable (as opposed to a bug or a refused write); stores wrap it.
var ErrStoreUnavailable = errors.New("store unavailable")
