package faucet

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/devnode"
)

// Under injected node errors and silently dropped transactions, concurrent
// drips across several keys may fail, but every drip that was answered with a
// txid lands exactly once and no key is left with a nonce gap.
func TestChaosEveryAcceptedDripLands(t *testing.T) {
	for seed := uint64(1); seed <= 2; seed++ {
		e := newEnv(t, 3, 1_000_000_000_000_000, devnode.Config{Seed: seed}, Config{Timing: Timing{StuckBlocks: 2, MaxInFlight: 25, BusyWait: 200 * time.Millisecond}})
		e.dn.SetErrorRate(0.2)
		e.dn.SetDropRate(0.1)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var ok []*Result
		reasons := map[Reason]int{}
		for round := 0; round < 6; round++ {
			for i := 0; i < 40; i++ {
				wg.Go(func() {
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					defer cancel()
					res, err := e.f.Drip(ctx, Request{Recipient: recipient(t)})
					mu.Lock()
					defer mu.Unlock()
					if err == nil {
						ok = append(ok, res)
					} else {
						reasons[ReasonOf(err)]++
					}
				})
			}
			wg.Wait()
			e.dn.Mine()
			_ = e.f.Sync(context.Background())
		}
		e.dn.SetErrorRate(0)
		e.dn.SetDropRate(0)
		for range 30 {
			e.dn.Mine()
			if err := e.f.Sync(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		for _, r := range ok {
			to := r.Recipient(t)
			if bal, _ := e.dn.Account(to); bal != DefaultAmount {
				t.Errorf("seed %d: recipient of nonce %d from %s has %d", seed, r.Nonce, r.Sender, bal)
			}
		}
		if e.dn.MempoolSize() != 0 {
			t.Errorf("seed %d: mempool %d left", seed, e.dn.MempoolSize())
		}
		for _, st := range e.f.Keys() {
			if st.InFlight != 0 {
				t.Errorf("seed %d: key %+v still in flight", seed, st)
			}
		}
		if len(ok) == 0 {
			t.Errorf("seed %d: no drip succeeded (failures %v)", seed, reasons)
		}
		t.Logf("seed %d: ok %d, failures %v", seed, len(ok), reasons)
	}
}
