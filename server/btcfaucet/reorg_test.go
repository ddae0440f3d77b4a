package btcfaucet

import (
	"github.com/stxfaucet/faucet-operator/server/journal"

	"context"
	"encoding/hex"
	"testing"

	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
	"github.com/stxfaucet/faucet-operator/server/chain/btcnode/btcdtest"
)

// A payout whose block a reorg removes is in flight again: re-confirmed
// when the new chain takes it back, sent again byte for byte when the node
// lost it (here: the block invalidated, then a node crash that empties its
// mempool), and never paid twice.
func TestPayoutSurvivesAReorg(t *testing.T) {
	for _, lose := range []bool{false, true} {
		name := "re-confirmed"
		if lose {
			name = "re-sent"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			key := regtestKey(t)
			node := btcdtest.Start(t, key.Address().String())
			c := node.Client()
			if _, err := c.Generate(ctx, CoinbaseMaturity+2); err != nil {
				t.Fatal(err)
			}
			p := NewPayer(key, c, journal.NewMemoryStore(), testFees, 1, nil)
			if err := p.Resume(ctx); err != nil {
				t.Fatal(err)
			}
			to := recipients(t, 1)[0]
			rec, err := p.Pay(ctx, []bitcoin.Payout{{Address: to, Amount: 10_000}})
			if err != nil {
				t.Fatal(err)
			}
			hashes, err := c.Generate(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			if p.InFlight() != 0 || len(p.inflight) != 1 {
				t.Fatalf("after its block: %d in flight, %d kept; want 0 and 1 (kept until %d deep)", p.InFlight(), len(p.inflight), SettleDepth)
			}
			// The block holding the payout leaves the main chain.
			if err := c.InvalidateBlock(ctx, hashes[0]); err != nil {
				t.Fatal(err)
			}
			if lose {
				// A crash now forgets the mempool (btcd keeps none), so
				// the payout is nowhere but in the faucet's ledger.
				if err := node.Kill(); err != nil {
					t.Fatal(err)
				}
				if err := node.Start(); err != nil {
					t.Fatal(err)
				}
				if pool, err := c.RawMempool(ctx); err != nil || len(pool) != 0 {
					t.Fatalf("mempool after the crash: %v %v", pool, err)
				}
			}
			if err := p.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			if p.InFlight() != 1 {
				t.Fatalf("after the reorg: %d in flight, want the payout back in flight", p.InFlight())
			}
			pool, err := c.RawMempool(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(pool) != 1 || pool[0] != rec.TxID {
				t.Fatalf("mempool %v, want the payout %s (sent again or taken back)", pool, rec.TxID)
			}
			// The competing chain grows past the old one and mines it.
			if _, err := c.Generate(ctx, SettleDepth+1); err != nil {
				t.Fatal(err)
			}
			if err := p.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			if len(p.inflight) != 0 {
				t.Fatalf("%d payouts kept %d blocks after the payout's block", len(p.inflight), SettleDepth+1)
			}
			paid := paidTo(t, c)[hex.EncodeToString(to.PkScript())]
			if len(paid) != 1 || paid[0] != 10_000 {
				t.Fatalf("recipient paid %v on the main chain, want exactly one 10000", paid)
			}
			tx, err := c.RawTransaction(ctx, rec.TxID)
			if err != nil || tx.Confirmations < 1 || tx.BlockHash == hashes[0] {
				t.Fatalf("payout %s: %+v %v", rec.TxID, tx, err)
			}
		})
	}
}

// A payout the node refuses when it is sent again (here: a conflicting
// spend of its coin took its place in the node's emptied mempool) is kept,
// its coin reserved, until a block decides; then the loser is forgotten.
// Forgetting it at the refusal would free a coin and lose a drip that was
// answered.
func TestRefusedResendIsKeptUntilABlockDecides(t *testing.T) {
	ctx := context.Background()
	key := regtestKey(t)
	node := btcdtest.Start(t, key.Address().String())
	c := node.Client()
	if _, err := c.Generate(ctx, CoinbaseMaturity+1); err != nil {
		t.Fatal(err)
	}
	ledger := journal.NewMemoryStore()
	p := NewPayer(key, c, ledger, testFees, 1, nil)
	if err := p.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	rec, err := p.Pay(ctx, []bitcoin.Payout{{Address: recipients(t, 1)[0], Amount: 10_000}})
	if err != nil {
		t.Fatal(err)
	}
	// The node crashes (its mempool is gone), and someone with the key
	// spends the same coin otherwise before the faucet sends again.
	if err := node.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	other, err := bitcoin.BuildPayout(bitcoin.BuildParams{Key: key, Coins: rec.Coins,
		Payouts: []bitcoin.Payout{{Address: recipients(t, 1)[0], Amount: 20_000}}, FeeRate: 5})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.SendRawTransaction(ctx, other.Raw()); err != nil {
		t.Fatal(err)
	}
	p2 := NewPayer(key, c, ledger, testFees, 1, nil)
	if err := p2.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if n := p2.InFlight(); n != 1 {
		t.Fatalf("%d in flight after the refused resend, want the payout kept", n)
	}
	if recs := journalRecords(t, ledger); len(recs) != 1 {
		t.Fatalf("ledger holds %d records after the refused resend", len(recs))
	}
	if _, err := c.Generate(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := p2.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if n := p2.InFlight(); n != 0 {
		t.Fatalf("%d in flight after the conflicting spend was mined", n)
	}
	if recs := journalRecords(t, ledger); len(recs) != 0 {
		t.Fatalf("ledger still holds %d records after the block decided", len(recs))
	}
}
