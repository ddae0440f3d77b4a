package btcfaucet

import (
	"context"
	"errors"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/stxfaucet/faucet-operator/hack/eventually"
	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
)

// 200 concurrent drips from one key with 2 mature coins are paid by a few
// batched transactions and settle exactly.
func TestBatchedDripsSettleExactly(t *testing.T) {
	const n = 200
	_, c, p := fundedPayer(t, 101, nil) // mature coinbases of blocks 1 and 2
	b, err := NewBatcher(p, 50, 100*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	to, recs := payConcurrently(t, n, func(po bitcoin.Payout) (*PayoutRecord, error) {
		return b.Pay(context.Background(), po)
	})
	txs := checkSettled(t, c, p, to, recs)
	if txs > n/10 {
		t.Fatalf("%d drips in %d transactions: not batched", n, txs)
	}
	t.Logf("%d drips in %d transactions", n, txs)
}

// A drip no transaction could pay is refused alone, before it joins a
// batch: another network's address, or dust.
func TestBatcherRefusesBadDrips(t *testing.T) {
	key := regtestKey(t)
	p := NewPayer(key, nil, nil, testFees, 1, nil)
	b, err := NewBatcher(p, 10, time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	tk, err := bitcoin.GeneratePrivateKey(bitcoin.Testnet)
	if err != nil {
		t.Fatal(err)
	}
	for _, po := range []bitcoin.Payout{
		{Address: tk.Address(), Amount: dripSats},
		{Address: recipients(t, 1)[0], Amount: 1},
		{Amount: dripSats},
	} {
		if _, err := b.Pay(context.Background(), po); !errors.Is(err, ErrInvalidDrip) {
			t.Fatalf("drip %+v: %v, want ErrInvalidDrip", po, err)
		}
	}
	if _, err := NewBatcher(p, MaxBatch+1, 0, nil); err == nil {
		t.Fatal("a batch above MaxBatch was accepted")
	}
}

// A drip whose caller gives up while it waits in the queue is withdrawn:
// nothing pays it, and the caller's "failed" is true.
func TestBatcherWithdrawsAQueuedDripGivenUp(t *testing.T) {
	_, c, p := fundedPayer(t, 101, nil)
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	b, err := NewBatcher(p, 50, time.Second, clk)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	paid := make(chan error, 1)
	go func() {
		_, err := b.Pay(ctx, bitcoin.Payout{Address: recipients(t, 1)[0], Amount: dripSats})
		paid <- err
	}()
	eventually.True(t, 5*time.Second, "the drip waits for its batch", clk.HasWaiters)
	cancel()
	if err := <-paid; !errors.Is(err, context.Canceled) {
		t.Fatalf("given-up drip: %v", err)
	}
	if clk.HasWaiters() {
		t.Fatal("the window's timer still runs for an empty queue")
	}
	clk.Step(2 * time.Second) // past the window: the batch would have left
	if n := p.InFlight(); n != 0 {
		t.Fatalf("%d payouts for a withdrawn drip", n)
	}
	if pool, err := c.RawMempool(context.Background()); err != nil || len(pool) != 0 {
		t.Fatalf("mempool %v %v: the withdrawn drip was paid", pool, err)
	}
}
