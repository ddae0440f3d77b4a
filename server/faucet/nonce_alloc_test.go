package faucet

import (
	"testing"
	"time"

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

// A broadcast that reaches the node late (the chain waited on its nonce
// for blocks while it was being sent) is not stuck: the clock starts when
// the node has it, in blocks and, once the gap is known, in time.
func TestLateBroadcastIsNotStuck(t *testing.T) {
	k := newTestKey(t)
	t0 := time.Unix(1_700_000_000, 0)
	k.applySync(k.startSync(), 1_000_000, 0, 10, 0, 0, t0)
	n0 := k.allocate(cost{stx: 1}) // slow to send
	n1 := k.allocate(cost{stx: 1})
	k.commitPending(&PendingTx{Nonce: n1}, 10, t0)
	for h := uint64(11); h <= 14; h++ {
		k.applySync(k.startSync(), 1_000_000, 0, h, 0, 0, t0.Add(time.Duration(h-10)*50*time.Millisecond))
	}
	if plan := k.planRepair(14, 3, t0.Add(200*time.Millisecond), 0); plan != nil {
		t.Fatalf("nonce %d planned a repair while its own broadcast was still going", plan.nonce)
	}
	sent := t0.Add(210 * time.Millisecond)
	k.commitPending(&PendingTx{Nonce: n0}, 14, sent)
	if plan := k.planRepair(16, 3, sent.Add(100*time.Millisecond), 0); plan != nil {
		t.Fatalf("repair planned 2 blocks after the late broadcast reached the node, want %d", 3)
	}
	// Three blocks on, but a poll loop that fell behind saw them within
	// 60 ms of the broadcast: less than three 50 ms gaps, so not yet.
	if plan := k.planRepair(17, 3, sent.Add(60*time.Millisecond), 150*time.Millisecond); plan != nil {
		t.Fatal("repair planned before the node had the tx for three block gaps")
	}
	plan := k.planRepair(17, 3, sent.Add(150*time.Millisecond), 150*time.Millisecond)
	if plan == nil || plan.stuck == nil || plan.stuck.Nonce != n0 || len(plan.chain) != 2 {
		t.Fatalf("plan %+v, want nonce %d stuck with a chain of 2", plan, n0)
	}
}
