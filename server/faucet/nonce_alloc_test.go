package faucet

import (
	"testing"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

func newTestKey(t *testing.T) *keyState {
	t.Helper()
	k, err := stacks.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	return newKeyState(k)
}

// Concurrent drips fail in any order; whatever the order, the next
// allocation must be the lowest free nonce, never one above a gap.
func TestReleaseOrderLeavesNoGap(t *testing.T) {
	k := newTestKey(t)
	k.synced = true
	a, b, c := k.allocate(cost{stx: 1}), k.allocate(cost{stx: 1}), k.allocate(cost{stx: 1})
	k.unallocate(b)
	k.unallocate(c)
	k.unallocate(a)
	if n := k.allocate(cost{stx: 1}); n != 0 {
		t.Fatalf("allocated nonce %d after all of 0..2 were released, want 0", n)
	}
	if n := k.allocate(cost{stx: 1}); n != 1 {
		t.Fatalf("second allocation %d, want 1", n)
	}
}

// A hole the repair loop has claimed must not also go to a drip.
func TestClaimedHoleNotReallocated(t *testing.T) {
	k := newTestKey(t)
	k.synced = true
	n0 := k.allocate(cost{stx: 1})
	n1 := k.allocate(cost{stx: 1})
	k.pending[n1] = &PendingTx{Nonce: n1}
	delete(k.allocated, n1)
	k.unallocate(n0)         // hole at 0
	k.allocated[n0] = cost{} // the repair loop claims it
	if n := k.allocate(cost{stx: 1}); n == n0 {
		t.Fatalf("nonce %d handed to a drip while the repair loop holds it", n)
	}
}
