package devnode

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/hack/eventually"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// TestConcurrentSubmissions: 200 senders broadcast at once, one sender
// chains 26 nonces from 26 goroutines in random order, readers poll and a
// miner runs meanwhile. Every tx must end up mined exactly once and every
// balance must be exact.
func TestConcurrentSubmissions(t *testing.T) {
	const senders, chain, amount, fee = 200, 26, 1000, 180
	wallets := make([]wallet, senders)
	genesis := make(map[stacks.Address]uint64)
	for i := range wallets {
		wallets[i] = newWallet(t)
		genesis[wallets[i].addr] = amount + fee
	}
	chainer, sink := newWallet(t), newWallet(t)
	genesis[chainer.addr] = chain * (amount + fee)
	h := newHarness(t, Config{Genesis: genesis, BlockTime: 3 * time.Millisecond})

	var txs []*stacks.Transaction
	for _, w := range wallets {
		txs = append(txs, w.send(t, sink.principal(), amount, 0, fee, ""))
	}
	for nonce := range uint64(chain) {
		txs = append(txs, chainer.send(t, sink.principal(), amount, nonce, fee, ""))
	}

	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- h.n.Run(ctx) }()

	var readers sync.WaitGroup
	for range 4 {
		readers.Go(func() {
			for ctx.Err() == nil {
				_, _ = h.c.Info(ctx)
				_, _ = h.c.PoX(ctx)
				_, _ = h.c.Account(ctx, sink.addr.String())
				h.n.MempoolSize()
				h.n.Tip()
			}
		})
	}

	var wg sync.WaitGroup
	errs := make(chan error, len(txs))
	for _, tx := range txs {
		wg.Go(func() {
			txid, err := h.c.Broadcast(context.Background(), tx.Serialize())
			if err == nil && txid != tx.TxID().String() {
				t.Errorf("txid %s, want %s", txid, tx.TxID())
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("broadcast: %v", err)
		}
	}

	eventually.True(t, 10*time.Second, "mempool drained", func() bool { return h.n.MempoolSize() == 0 })
	cancel()
	readers.Wait()
	if err := <-runDone; err != nil {
		t.Fatalf("Run = %v", err)
	}

	seen := make(map[stacks.TxID]bool)
	for _, tx := range txs {
		st := h.n.TxStatus(tx.TxID())
		if st.State != TxConfirmed {
			t.Fatalf("tx nonce %d of %s: %v", tx.Auth.Nonce, tx.SenderAddress(), st.State)
		}
		seen[tx.TxID()] = true
	}
	if len(seen) != len(txs) {
		t.Fatalf("%d distinct txids, want %d", len(seen), len(txs))
	}
	if bal, _ := h.n.Account(sink.addr); bal != uint64(len(txs))*amount {
		t.Errorf("sink %d, want %d", bal, uint64(len(txs))*amount)
	}
	if bal, nonce := h.n.Account(chainer.addr); bal != 0 || nonce != chain {
		t.Errorf("chainer %d nonce %d", bal, nonce)
	}
	for _, w := range wallets {
		if bal, nonce := h.n.Account(w.addr); bal != 0 || nonce != 1 {
			t.Fatalf("%s: %d nonce %d", w.addr, bal, nonce)
		}
	}
}

// TestKnobsWhileServing flips every knob while requests are in flight; it
// exists for the race detector.
func TestKnobsWhileServing(t *testing.T) {
	alice, bob := newWallet(t), newWallet(t)
	h := newHarness(t, Config{Genesis: map[stacks.Address]uint64{alice.addr: aliceFunds}})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()

	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			on := i%2 == 0
			h.n.SetLatency(time.Duration(i%3) * time.Millisecond)
			h.n.SetErrorRate(float64(i%4) / 4)
			h.n.SetDropRate(float64(i%5) / 5)
			h.n.SetDown(i%7 == 0)
			h.n.SetMainnet(i%11 == 0)
			h.n.SetSynced(on)
			h.n.SetMinAmountUstx(uint64(i))
			h.n.SetFeeRate(uint64(i%3 + 1))
			h.n.Fund(bob.addr, 1)
			h.n.Mine()
			time.Sleep(time.Millisecond)
		}
	})
	for g := range 8 {
		wg.Go(func() {
			for i := uint64(0); ctx.Err() == nil; i++ {
				callCtx, done := context.WithTimeout(ctx, 100*time.Millisecond)
				_, _ = h.c.Info(callCtx)
				_, _ = h.c.PoX(callCtx)
				_, _ = h.c.Account(callCtx, alice.addr.String())
				_, _ = h.c.TransferFeeRate(callCtx)
				tx := alice.send(t, bob.principal(), 1, i%26, 180+uint64(g), "")
				_, _ = h.c.Broadcast(callCtx, tx.Serialize())
				done()
			}
		})
	}
	wg.Wait()
}
