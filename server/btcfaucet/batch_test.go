package btcfaucet

import (
	"context"
	"encoding/hex"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
)

// 200 concurrent drips from one key with 2 mature coins are paid by a few
// batched transactions, never past the unconfirmed-chain limit; once mined
// every recipient, of every address type, holds exactly one output of
// exactly the drip, no coin was spent twice, and the key holds exactly the
// subsidies less the drips.
func TestBatchedDripsSettleExactly(t *testing.T) {
	const n = 200
	_, c, p := fundedPayer(t, 101, nil) // mature coinbases of blocks 1 and 2
	b, err := NewBatcher(p, 50, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	to := recipients(t, n)
	recs := make([]*PayoutRecord, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r, err := b.Pay(context.Background(), bitcoin.Payout{Address: to[i], Amount: dripSats})
			if err != nil {
				t.Errorf("drip %d: %v", i, err)
				return
			}
			recs[i] = r
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	txs := map[string]*PayoutRecord{}
	for _, r := range recs {
		txs[r.TxID] = r
	}
	spent := map[string]bool{}
	paidOut := 0
	for _, r := range txs {
		for _, co := range r.Coins {
			if spent[co.OutPoint.String()] {
				t.Fatalf("coin %s spent by two payouts", co.OutPoint)
			}
			spent[co.OutPoint.String()] = true
		}
		paidOut += len(r.Outputs)
	}
	if paidOut != n || len(txs) > n/10 {
		t.Fatalf("%d drips in %d transactions paying %d outputs: want every drip once, batched", n, len(txs), paidOut)
	}
	mineAll(t, c, p)
	paid := paidTo(t, c)
	for i, a := range to {
		if got := paid[hex.EncodeToString(a.PkScript())]; len(got) != 1 || got[0] != dripSats {
			t.Fatalf("recipient %d (%s) got %v, want one output of %d", i, a.Type(), got, dripSats)
		}
	}
	tip, err := c.BlockCount(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var held int64
	for _, co := range p.chain.Coins() {
		held += co.Value
	}
	if want := tip*50e8 - n*dripSats; held != want {
		t.Fatalf("the key holds %d sats, want %d", held, want)
	}
	t.Logf("%d drips in %d transactions", n, len(txs))
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
