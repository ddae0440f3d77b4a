package btcfaucet

import "context"

// Owner is this process's hold on the BTC key where several replicas share
// one store: one replica at a time pays from the key, as with the STX keys
// (faucet.KeyOwner). While another replica holds it, or once this one has
// lost it, the writes of Ledger fail with an error wrapping
// faucet.ErrNotOwner, and a Payer on that ledger sends nothing: Pay and
// BumpStuck record before they broadcast.
//
// Use: Acquire; when it says true, build a Payer on Ledger and Resume it
// (the previous owner may have left payouts in flight); Renew
// periodically, and on its error stop using that Payer; Release on
// shutdown so that another replica takes over at once.
type Owner interface {
	// Acquire takes the key unless another replica holds it, and reports
	// whether this one holds it now. When it already did, it checks that
	// the hold is still good, as Renew does.
	Acquire(ctx context.Context) (bool, error)
	// Renew checks that this process still holds the key; when it does
	// not (any more) the error wraps faucet.ErrNotOwner and the hold is
	// gone: Acquire again, and resume a new Payer, to pay again.
	Renew(ctx context.Context) error
	// Release gives the key up; Ledger's writes fail from the call on.
	Release(ctx context.Context) error
	// Ledger is the key's ledger, its writes fenced by this hold.
	Ledger() Ledger
}

// SoleOwner is the Owner for a store no other process writes (SQLite,
// which one process opens at a time, or memory): the key is always held.
func SoleOwner(l Ledger) Owner { return soleOwner{l} }

type soleOwner struct{ l Ledger }

func (soleOwner) Acquire(context.Context) (bool, error) { return true, nil }
func (soleOwner) Renew(context.Context) error           { return nil }
func (soleOwner) Release(context.Context) error         { return nil }
func (o soleOwner) Ledger() Ledger                      { return o.l }
