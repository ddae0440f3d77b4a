package faucet

import (
	"context"
	"errors"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// The engine's state lives behind three small interfaces so that it can be
// kept in memory (the default of tests and `serve --devnet`) or in a durable
// store shared by restarts and replicas (package store). Each interface is
// the whole contract: store's contract suite runs the same tests against the
// memory implementations here and against SQLite and Postgres.

// TxState says how far a ledger entry got.
type TxState string

const (
	// TxBroadcasting: recorded, bytes included, before the first send. After
	// a crash the node may or may not hold it; resuming resolves it by
	// rebroadcasting the same bytes (the node answers 200 for a tx it has).
	TxBroadcasting TxState = "broadcasting"
	// TxPending: the node accepted it (or answered in a way that may mean so,
	// and repair keeps rebroadcasting it until the nonce confirms).
	TxPending TxState = "pending"
)

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

// KeyOwner decides which keys this process may send with when several
// replicas share a store: each key has exactly one writer at any moment.
// Without one the engine owns every key.
type KeyOwner interface {
	// Run spreads the keys over live replicas until ctx ends, telling h
	// about every change. It returns only when ctx ends or ownership can no
	// longer be kept (the caller restarts it after a pause).
	Run(ctx context.Context, keys []stacks.Address, h OwnershipHandler) error
}

// OwnershipHandler is the engine's side of KeyOwner.
type OwnershipHandler interface {
	// Acquired: the key is ours. The engine loads its ledger, resolves
	// entries in doubt and starts using it; it returns once done.
	Acquired(ctx context.Context, key stacks.Address)
	// Releasing: we are about to give the key up. The engine stops handing
	// it to drips and returns once none is using it; the owner then unlocks.
	Releasing(ctx context.Context, key stacks.Address)
	// Lost: ownership ended without notice (the lock's connection died).
	// The engine stops using the key at once; the store's fencing refuses
	// any write still under way, so nothing is sent twice.
	Lost(key stacks.Address)
}

// ErrNotOwner is returned (wrapped) by a shared store's ledger writes for a
// key this process no longer owns. The engine drops the key and retries the
// drip on another one; nothing is broadcast without a successful write.
var ErrNotOwner = errors.New("key is owned by another replica")

// ErrStoreUnavailable marks store errors caused by the store being
// unreachable (as opposed to a bug or a refused write); stores wrap it.
var ErrStoreUnavailable = errors.New("store unavailable")
