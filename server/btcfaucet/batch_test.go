package btcfaucet

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
)

// 200 concurrent drips from one key with 2 mature coins are paid by a few
// batched transactions and settle exactly.
func TestBatchedDripsSettleExactly(t *testing.T) {
	const n = 200
	_, c, p := fundedPayer(t, 101, nil) // mature coinbases of blocks 1 and 2
	b, err := NewBatcher(p, 50, 100*time.Millisecond)
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
	p := NewPayer(key, nil, nil, testFees, 1)
	b, err := NewBatcher(p, 10, time.Millisecond)
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
	if _, err := NewBatcher(p, MaxBatch+1, 0); err == nil {
		t.Fatal("a batch above MaxBatch was accepted")
	}
}
