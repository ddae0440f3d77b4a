package devnode

import (
	"context"
	"encoding/hex"
	"net/http"
	"reflect"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/stxfaucet/faucet-operator/hack/eventually"
	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

func TestMineNonceGap(t *testing.T) {
	h := newHarness(t, Config{})
	alice, bob := newWallet(t), newWallet(t)
	h.n.Fund(alice.addr, aliceFunds)

	tx0 := h.mustAccept(alice.send(t, bob.principal(), 100, 0, 180, ""))
	tx2 := h.mustAccept(alice.send(t, bob.principal(), 300, 2, 180, ""))
	tx3 := h.mustAccept(alice.send(t, bob.principal(), 400, 3, 180, ""))

	b1 := h.n.Mine()
	if !reflect.DeepEqual(b1.TxIDs, []stacks.TxID{tx0}) {
		t.Fatalf("block 1 = %v, want only nonce 0 (nonce 1 is missing)", b1.TxIDs)
	}
	if h.n.MempoolSize() != 2 || h.n.TxStatus(tx2).State != TxPending {
		t.Fatalf("gapped txs must stay pending: size %d", h.n.MempoolSize())
	}
	// An empty block changes nothing while the gap is open.
	if b := h.n.Mine(); len(b.TxIDs) != 0 {
		t.Fatalf("block 2 = %v, want empty", b.TxIDs)
	}

	tx1 := h.mustAccept(alice.send(t, bob.principal(), 200, 1, 180, ""))
	b3 := h.n.Mine()
	if want := []stacks.TxID{tx1, tx2, tx3}; !reflect.DeepEqual(b3.TxIDs, want) {
		t.Fatalf("block 3 = %v, want nonces 1,2,3 in order %v", b3.TxIDs, want)
	}
	for id, height := range map[stacks.TxID]uint64{tx0: 1, tx1: 3, tx2: 3, tx3: 3} {
		if st := h.n.TxStatus(id); st != (TxStatus{State: TxConfirmed, Height: height}) {
			t.Errorf("%s: %+v, want confirmed at %d", id, st, height)
		}
	}
	if bal, nonce := h.n.Account(alice.addr); bal != aliceFunds-1000-4*180 || nonce != 4 {
		t.Errorf("alice %d nonce %d", bal, nonce)
	}
	if bal, nonce := h.n.Account(bob.addr); bal != 1000 || nonce != 0 {
		t.Errorf("bob %d nonce %d", bal, nonce)
	}
	if h.n.MempoolSize() != 0 {
		t.Errorf("mempool size %d", h.n.MempoolSize())
	}
}

// TestMineFeeOrderAndBlockLimit: across senders the higher fee rate goes
// first; MaxBlockTxs spills the rest into later blocks in nonce order.
func TestMineFeeOrderAndBlockLimit(t *testing.T) {
	h := newHarness(t, Config{MaxBlockTxs: 2})
	a, b, c, sink := newWallet(t), newWallet(t), newWallet(t), newWallet(t)
	for _, w := range []wallet{a, b, c} {
		h.n.Fund(w.addr, aliceFunds)
	}
	lowA0 := h.mustAccept(a.send(t, sink.principal(), 1, 0, 180, ""))
	lowA1 := h.mustAccept(a.send(t, sink.principal(), 1, 1, 5000, "")) // rich, but behind nonce 0
	highB := h.mustAccept(b.send(t, sink.principal(), 1, 0, 900, ""))
	midC := h.mustAccept(c.send(t, sink.principal(), 1, 0, 400, ""))

	if got := h.n.Mine().TxIDs; !reflect.DeepEqual(got, []stacks.TxID{highB, midC}) {
		t.Fatalf("block 1 = %v, want [B(900) C(400)]", got)
	}
	if got := h.n.Mine().TxIDs; !reflect.DeepEqual(got, []stacks.TxID{lowA0, lowA1}) {
		t.Fatalf("block 2 = %v, want A's nonces 0 then 1", got)
	}
	if bal, _ := h.n.Account(sink.addr); bal != 4 {
		t.Errorf("sink = %d", bal)
	}
}

func TestBalancesAfterMining(t *testing.T) {
	alice, bob := newWallet(t), newWallet(t)
	h := newHarness(t, Config{Genesis: map[stacks.Address]uint64{alice.addr: 5_000_000}})
	vault := stacks.Principal{Address: bob.addr, ContractName: "faucet-vault"}

	h.mustAccept(alice.send(t, bob.principal(), 1_234_567, 0, 180, ""))
	h.mustAccept(alice.send(t, vault, 1_000, 1, 250, ""))
	h.n.Mine()

	ctx := context.Background()
	checks := []struct {
		principal     string
		balance, nonc uint64
	}{
		{alice.addr.String(), 5_000_000 - 1_234_567 - 180 - 1_000 - 250, 2},
		{bob.addr.String(), 1_234_567, 0},
		{vault.String(), 1_000, 0},
	}
	for _, c := range checks {
		acct, err := h.c.Account(ctx, c.principal)
		if err != nil {
			t.Fatal(err)
		}
		if *acct != (node.Account{Balance: c.balance, Nonce: c.nonc}) {
			t.Errorf("%s = %+v, want balance %d nonce %d", c.principal, acct, c.balance, c.nonc)
		}
	}
	if bal, _ := h.n.PrincipalAccount(vault); bal != 1_000 {
		t.Errorf("PrincipalAccount(vault) = %d", bal)
	}
	// Fees are burnt in this simulation (no miner account): supply shrinks by them.
	pox, err := h.c.PoX(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if pox.TotalLiquidSupplyUstx != 5_000_000-180-250 {
		t.Errorf("liquid supply %d", pox.TotalLiquidSupplyUstx)
	}
}

// TestMempoolGC: a tx is collected once the tip is more than 256 blocks
// past the height it arrived at; mined txs stay in the mempool table (200
// on re-post, "Mempool" on the unconfirmed route) until then.
func TestMempoolGC(t *testing.T) {
	h := newHarness(t, Config{})
	alice, bob := newWallet(t), newWallet(t)
	h.n.Fund(alice.addr, aliceFunds)

	minedTx := alice.send(t, bob.principal(), 1, 0, 180, "")
	mined := h.mustAccept(minedTx)
	gapped := h.mustAccept(alice.send(t, bob.principal(), 1, 2, 180, "")) // nonce 1 never comes
	h.n.Mine()                                                            // tip 1; both received at 0

	for h.n.Tip().Height < MempoolMaxTxAge {
		h.n.Mine()
	}
	if st := h.n.TxStatus(gapped); st.State != TxPending {
		t.Fatalf("at tip %d the gapped tx is %v, want still pending", h.n.Tip().Height, st.State)
	}
	if r := h.post(minedTx); r.status != http.StatusOK {
		t.Fatalf("re-post of mined tx before GC: %d %s", r.status, r.body)
	}
	if r := h.get("/v2/transactions/unconfirmed/" + mined.String()); r.status != http.StatusOK || r.body != `{"tx":"`+hexOf(minedTx)+`","status":"Mempool"}` {
		t.Fatalf("unconfirmed route for mined tx before GC: %d %s", r.status, r.body)
	}

	h.n.Mine() // tip 257 > 0 + 256
	if st := h.n.TxStatus(gapped); st.State != TxUnknown {
		t.Fatalf("after GC the gapped tx is %v", st.State)
	}
	if h.n.MempoolSize() != 0 {
		t.Fatalf("mempool size %d", h.n.MempoolSize())
	}
	if st := h.n.TxStatus(mined); st != (TxStatus{State: TxConfirmed, Height: 1}) {
		t.Fatalf("mined tx status %+v survives GC", st)
	}
	if _, err := h.n.Submit(minedTx.Serialize()); !isReason(err, node.ReasonBadNonce) {
		t.Fatalf("re-post of mined tx after GC: %v, want BadNonce", err)
	}
	if r := h.get("/v2/transactions/unconfirmed/" + mined.String()); r.status != http.StatusNotFound {
		t.Fatalf("unconfirmed route after GC: %d", r.status)
	}
}

// TestRun steps the node's clock: Run mines one block per BlockTime, each
// stamped with the clock's time, and none in between.
func TestRun(t *testing.T) {
	t.Run("mines every BlockTime", func(t *testing.T) {
		clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
		n := New(Config{BlockTime: time.Second, Clock: clk})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- n.Run(ctx) }()
		eventually.True(t, 10*time.Second, "Run's ticker is set", clk.HasWaiters)
		clk.Step(time.Second - time.Nanosecond)
		if h := n.Tip().Height; h != 0 {
			t.Fatalf("height %d before a BlockTime passed", h)
		}
		for want := uint64(1); want <= 3; want++ {
			clk.Step(time.Second)
			eventually.True(t, 10*time.Second, "a block per BlockTime", func() bool { return n.Tip().Height == want })
			if got := n.Tip().Time; !got.Equal(clk.Now()) {
				t.Errorf("block %d at %v, want the clock's %v", want, got, clk.Now())
			}
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run = %v", err)
		}
	})
	t.Run("BlockTime 0 only waits", func(t *testing.T) {
		clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
		n := New(Config{Clock: clk})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- n.Run(ctx) }()
		clk.Step(time.Hour)
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run = %v", err)
		}
		if h := n.Tip().Height; h != 0 {
			t.Fatalf("height %d, want 0", h)
		}
	})
}

func hexOf(tx *stacks.Transaction) string { return hex.EncodeToString(tx.Serialize()) }
