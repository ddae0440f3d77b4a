package faucet

import (
	"slices"
	"sync"

	"github.com/stxfaucet/faucet-operator/server/stacks"
)

// keyState is one sending key's view of its account: the node's confirmed
// balance and nonce, plus what we have in flight above that nonce. Only nonce
// allocation and bookkeeping hold mu; signing and broadcasting do not.
type keyState struct {
	key  *stacks.PrivateKey
	addr stacks.Address

	mu        sync.Mutex
	synced    bool
	balance   uint64 // confirmed µSTX as of the last sync
	confirmed uint64 // the node's next nonce (confirmed txs only)
	// pending holds accepted or possibly-accepted txs by nonce (≥ confirmed).
	pending map[uint64]*PendingTx
	// allocated marks nonces handed to a drip (or the repair loop) that has
	// not finished broadcasting.
	allocated map[uint64]uint64 // nonce → reserved spend (amount + fee)
	dry       bool
	// lastAdvance is the tip height at which confirmed last moved (stuck detection).
	lastAdvance uint64

	// owned: this process may send with the key (always, without a
	// KeyOwner). loaded: pending was read from the ledger since ownership
	// began; loadMu serialises that load.
	owned  bool
	loaded bool
	loadMu sync.Mutex
	// syncStarted numbers account reads as they start; syncApplied is the
	// number of the newest one applied. An older read finishing later is
	// stale and must not move the key backwards.
	syncStarted, syncApplied uint64
}

func newKeyState(k *stacks.PrivateKey) *keyState {
	return &keyState{
		key:       k,
		addr:      k.TestnetAddress(),
		pending:   map[uint64]*PendingTx{},
		allocated: map[uint64]uint64{},
	}
}

// inFlight counts pending and allocated nonces. Caller holds mu.
func (k *keyState) inFlight() int { return len(k.pending) + len(k.allocated) }

// committedSpend is what in-flight txs will take from the balance. Caller holds mu.
func (k *keyState) committedSpend() uint64 {
	var s uint64
	for _, p := range k.pending {
		s = satAdd(s, satAdd(p.Amount, p.Fee))
	}
	for _, v := range k.allocated {
		s = satAdd(s, v)
	}
	return s
}

// available is balance − in-flight spends − reserve. Caller holds mu.
func (k *keyState) available(reserve uint64) uint64 {
	return satSub(satSub(k.balance, k.committedSpend()), reserve)
}

// nextNonce is the nonce the next drip gets: the lowest one at or above the
// confirmed nonce that no pending or allocated tx occupies. Without gaps that
// is max(confirmed, highest in flight + 1); a gap (a hole left by a drip whose
// broadcast failed) is reused first so it cannot block the chain. Holes are
// derived from the maps every time, so they can neither go stale nor be
// handed out twice. Caller holds mu.
func (k *keyState) nextNonce() uint64 {
	used := make([]uint64, 0, len(k.pending)+len(k.allocated))
	for n := range k.pending {
		used = append(used, n)
	}
	for n := range k.allocated {
		used = append(used, n)
	}
	slices.Sort(used)
	next := k.confirmed
	for _, n := range used {
		if n > next {
			break // next is a hole
		}
		if n == next {
			next++
		}
	}
	return next
}

// allocate reserves the lowest usable nonce for a spend. Caller holds mu.
func (k *keyState) allocate(spend uint64) uint64 {
	nonce := k.nextNonce()
	k.allocated[nonce] = spend
	return nonce
}

// unallocate gives a nonce back after a drip that did not get a tx accepted;
// if it lies below another in-flight nonce it is now a hole, which the next
// allocation (or the repair loop) fills. Caller holds mu.
func (k *keyState) unallocate(nonce uint64) {
	delete(k.allocated, nonce)
}

// applyAccount takes the node's confirmed view and drops the pending txs it
// confirms, returning their nonces so the caller can delete them from the
// ledger outside the lock. It reports whether the confirmed nonce advanced.
// Caller holds mu.
func (k *keyState) applyAccount(balance, nonce, height uint64) (advanced bool, confirmed []uint64) {
	advanced = nonce > k.confirmed || !k.synced
	k.balance, k.confirmed, k.synced = balance, nonce, true
	if advanced {
		k.lastAdvance = height
	}
	for n := range k.pending {
		if n < nonce {
			delete(k.pending, n)
			confirmed = append(confirmed, n)
		}
	}
	return advanced, confirmed
}

// KeyStatus is a point-in-time view of one key, for metrics and readiness.
type KeyStatus struct {
	Address        string
	Balance        uint64 // confirmed µSTX
	Available      uint64 // balance minus in-flight spends and reserve
	ConfirmedNonce uint64
	NextNonce      uint64
	InFlight       int
	Dry            bool
	Synced         bool
	// Owned: this replica sends with the key (always true without a KeyOwner).
	Owned bool
}

func (k *keyState) status(reserve uint64) KeyStatus {
	k.mu.Lock()
	defer k.mu.Unlock()
	return KeyStatus{
		Address:        k.addr.String(),
		Balance:        k.balance,
		Available:      k.available(reserve),
		ConfirmedNonce: k.confirmed,
		NextNonce:      k.nextNonce(),
		InFlight:       k.inFlight(),
		Dry:            k.dry,
		Synced:         k.synced,
		Owned:          k.owned,
	}
}

func satAdd(a, b uint64) uint64 {
	if a+b < a {
		return ^uint64(0)
	}
	return a + b
}

func satSub(a, b uint64) uint64 {
	if b > a {
		return 0
	}
	return a - b
}
