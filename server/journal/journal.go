// Package journal is the faucet's crash-safety rule, written once for every
// chain it pays on. A payer signs a transaction, and then:
//
//  1. records the signed bytes (state Broadcasting) in a Store whose writes
//     are fenced by key ownership: nothing is sent without a successful
//     write, so a replica that lost its key cannot send with it;
//  2. sends them to the chain's node;
//  3. commits (state Pending) when the node took them, keeps them in doubt
//     when its answer was lost, and forgets them when they surely did not
//     reach it (the chain then decides what the refusal means);
//  4. after a crash, sends the recorded bytes again, byte for byte (a node
//     answers "already have it" for a transaction it holds);
//  5. forgets them once the chain confirmed or replaced them.
//
// A fee bump is a Send whose entry names the one it replaces: recorded
// first like any other, so a crash between the broadcast and the record
// cannot leave the store holding bytes the node no longer has.
//
// The Stacks engine (package faucet) and the Bitcoin payer (package
// btcfaucet) both place every transaction through a Journal; the store
// (package store) keeps its entries in one table. Ownership of keys across
// replicas is one protocol for both (owner.go).
package journal

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"k8s.io/utils/clock"
)

// State says how far an entry got.
type State string

const (
	// Broadcasting: recorded before the first send, or sent with the
	// answer lost. The node may or may not hold it; sending the same bytes
	// again settles it.
	Broadcasting State = "broadcasting"
	// Pending: the node took it; it waits for a block.
	Pending State = "pending"
)

// Entry is one signed transaction a key has in flight.
type Entry struct {
	// Key is the sending key's address: the unit of ownership. Stacks and
	// Bitcoin addresses never collide.
	Key string
	// TxID identifies the entry within its key: lower-case hex, no 0x.
	TxID string
	// Seq orders a key's entries: a Stacks account's nonce; on Bitcoin,
	// whose payouts spend coins, a payout's depth in its chain of
	// unconfirmed payouts, so that parents list first.
	Seq uint64
	// Raw is the signed transaction, sent again byte for byte.
	Raw    []byte
	State  State
	SentAt time.Time
	// Replaces is the TxID of the entry this one replaces (a fee bump): the
	// same payment at a higher fee. Both may be recorded until the chain
	// decides which one it keeps.
	Replaces string
	// Meta is the chain's own record of what the transaction pays (JSON);
	// the journal and the store keep it as it is.
	Meta []byte
}

// Clone returns e with its byte slices copied.
func (e Entry) Clone() Entry {
	e.Raw, e.Meta = slices.Clone(e.Raw), slices.Clone(e.Meta)
	return e
}

// Store keeps the entries of every key. Writes are fenced by ownership: on
// a store shared by replicas a write for a key this process does not own
// fails wrapping ErrNotOwner, and nothing is written.
type Store interface {
	// Put adds or replaces the entry (Key, TxID).
	Put(ctx context.Context, e Entry) error
	// Delete removes the entry (key, txid), if present.
	Delete(ctx context.Context, key, txid string) error
	// DeleteBelow removes every entry of key whose Seq is below seq: one
	// write for all that a block confirmed.
	DeleteBelow(ctx context.Context, key string, seq uint64) error
	// List returns key's entries by Seq, then SentAt, then TxID.
	List(ctx context.Context, key string) ([]Entry, error)
}

// ErrNotOwner is returned (wrapped) by a shared store's writes for a key
// this process does not own (any more). The payer drops the key; nothing
// was written, so nothing is sent.
var ErrNotOwner = errors.New("key is owned by another replica")

// Verdict is what a chain makes of a send's outcome.
type Verdict int

const (
	// Accepted: the node holds the transaction (it took it now or had it).
	Accepted Verdict = iota
	// InDoubt: the request may have reached the node and its answer was
	// lost. The entry stays Broadcasting and is sent again until settled.
	InDoubt
	// NotSent: the node surely does not hold it (it refused it, or the
	// request never reached it).
	NotSent
)

func (v Verdict) String() string {
	switch v {
	case Accepted:
		return "accepted"
	case InDoubt:
		return "in doubt"
	case NotSent:
		return "not sent"
	}
	return fmt.Sprintf("verdict(%d)", int(v))
}

// Chain sends a key's transactions to its node and judges the outcome.
type Chain interface {
	// Send gives raw to the node; nil means it holds it now.
	Send(ctx context.Context, raw []byte) error
	// Judge classifies a non-nil error of Send.
	Judge(err error) Verdict
}

// Journal records, sends and settles transactions in a Store.
type Journal struct {
	store Store
	clock clock.PassiveClock
}

// New returns a journal on store dating its records by clk (nil: the real
// clock).
func New(store Store, clk clock.PassiveClock) *Journal {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Journal{store: store, clock: clk}
}

// Store is the journal's store.
func (j *Journal) Store() Store { return j.store }

// Now is the journal's clock.
func (j *Journal) Now() time.Time { return j.clock.Now() }

// Sent is the outcome of Send.
type Sent struct {
	Verdict Verdict
	// Err is the send's error: nil when Accepted, the lost answer when
	// InDoubt, the refusal when NotSent.
	Err error
}

// Send records e and sends it: steps 1 to 3 of the package comment. An
// error means the record failed and nothing was sent (errors.Is
// ErrNotOwner when another replica owns the key); otherwise the Sent
// outcome says where e stands, and e.State is updated. A NotSent entry is
// forgotten before Send returns, so the chain may reuse what it held (a
// nonce, coins); a failure to forget it is logged by nobody and harmless:
// resending refused bytes settles it again.
func (j *Journal) Send(ctx context.Context, e *Entry, c Chain) (Sent, error) {
	if e.Key == "" || e.TxID == "" || len(e.Raw) == 0 {
		return Sent{}, fmt.Errorf("journal: record %q/%q: key, txid and bytes are required", e.Key, e.TxID)
	}
	if e.SentAt.IsZero() {
		e.SentAt = j.clock.Now()
	}
	e.State = Broadcasting
	if err := j.store.Put(ctx, *e); err != nil {
		return Sent{}, fmt.Errorf("journal: record %s of %s: %w", e.TxID, e.Key, err)
	}
	err := c.Send(ctx, e.Raw)
	v := Accepted
	if err != nil {
		v = c.Judge(err)
	}
	switch v {
	case Accepted:
		j.commit(ctx, e)
	case NotSent:
		_ = j.store.Delete(context.WithoutCancel(ctx), e.Key, e.TxID)
	}
	return Sent{Verdict: v, Err: err}, nil
}

// Replace sends by, a replacement of old (a fee bump), through Send: it is
// recorded before it is sent. old stays recorded; the caller forgets it
// when its chain says the replacement took its place.
func (j *Journal) Replace(ctx context.Context, old Entry, by *Entry, c Chain) (Sent, error) {
	if old.Key != by.Key {
		return Sent{}, fmt.Errorf("journal: %s cannot replace %s: keys %s and %s differ", by.TxID, old.TxID, by.Key, old.Key)
	}
	by.Replaces = old.TxID
	return j.Send(ctx, by, c)
}

// Resend sends a recorded entry again, byte for byte (steps 4 and 5's
// watch): Accepted commits it; any other verdict leaves it as it is, for
// the caller to keep or forget by its chain's rules.
func (j *Journal) Resend(ctx context.Context, e *Entry, c Chain) Sent {
	err := c.Send(ctx, e.Raw)
	if err == nil {
		j.commit(ctx, e)
		return Sent{Verdict: Accepted}
	}
	return Sent{Verdict: c.Judge(err), Err: err}
}

// commit marks e Pending. A failed write leaves it Broadcasting in the
// store, which only means it is sent again after a restart, and the node
// answers that it has it: nothing is lost.
func (j *Journal) commit(ctx context.Context, e *Entry) {
	if e.State == Pending {
		return
	}
	e.State = Pending
	_ = j.store.Put(context.WithoutCancel(ctx), *e)
}

// Update writes a changed entry (a count of resends, say).
func (j *Journal) Update(ctx context.Context, e Entry) error {
	if err := j.store.Put(ctx, e); err != nil {
		return fmt.Errorf("journal: update %s of %s: %w", e.TxID, e.Key, err)
	}
	return nil
}

// Forget removes an entry its chain settled (confirmed, replaced or
// refused for good).
func (j *Journal) Forget(ctx context.Context, key, txid string) error {
	if err := j.store.Delete(context.WithoutCancel(ctx), key, txid); err != nil {
		return fmt.Errorf("journal: forget %s of %s: %w", txid, key, err)
	}
	return nil
}

// ForgetBelow removes every entry of key below seq: what a block
// confirmed on a chain with sequences.
func (j *Journal) ForgetBelow(ctx context.Context, key string, seq uint64) error {
	if err := j.store.DeleteBelow(context.WithoutCancel(ctx), key, seq); err != nil {
		return fmt.Errorf("journal: forget %s below %d: %w", key, seq, err)
	}
	return nil
}

// Load lists key's entries, to resume them.
func (j *Journal) Load(ctx context.Context, key string) ([]Entry, error) {
	entries, err := j.store.List(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("journal: load %s: %w", key, err)
	}
	return entries, nil
}
