package store_test

import (
	"bytes"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/btcsuite/btcd/chaincfg/chainhash"
	"github.com/btcsuite/btcd/wire"

	"github.com/stxfaucet/faucet-operator/server/btcfaucet"
	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
	"github.com/stxfaucet/faucet-operator/server/store"
)

// The BTC payout ledger keeps what Resume needs, exactly, per key: the
// same contract in memory, in SQLite (also across a reopen) and in
// Postgres.
func TestBTCLedgerContract(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		testBTCLedger(t, func(string) btcfaucet.Ledger { return btcfaucet.NewMemoryLedger() }, nil)
	})
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "faucet.db")
		s := openSQLitePath(t, path, store.Options{})
		testBTCLedger(t, s.BTCLedger, func() func(string) btcfaucet.Ledger {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			return openSQLitePath(t, path, store.Options{}).BTCLedger
		})
	})
	t.Run("postgres", func(t *testing.T) {
		testBTCLedger(t, openPostgres(t).BTCLedger, nil)
	})
}

func btcRecord(t *testing.T, seed byte, depth int, withChange bool) btcfaucet.PayoutRecord {
	t.Helper()
	hash := func(b byte) chainhash.Hash {
		var h chainhash.Hash
		for i := range h {
			h[i] = b + byte(i)
		}
		return h
	}
	script := append([]byte{0x00, 0x14}, bytes.Repeat([]byte{seed}, 20)...)
	r := btcfaucet.PayoutRecord{
		TxID: hash(seed).String(), Raw: bytes.Repeat([]byte{seed, 0xff, 0x00}, 70),
		Coins: []bitcoin.Coin{
			{OutPoint: wire.OutPoint{Hash: hash(seed + 1), Index: 0}, Value: 50e8, PkScript: script},
			{OutPoint: wire.OutPoint{Hash: hash(seed + 2), Index: 7}, Value: 1, PkScript: script},
		},
		Outputs: []btcfaucet.Output{{Address: "bcrt1qexample", Amount: 10_000}, {Address: "2N-example", Amount: 1<<62 + 3}},
		Fee:     1234, Depth: depth, State: btcfaucet.PayoutBroadcasting,
		SentAt: time.Unix(1_700_000_000+int64(seed), 987_654_321),
	}
	if withChange {
		r.Change = &bitcoin.Coin{OutPoint: wire.OutPoint{Hash: hash(seed), Index: 2}, Value: 49e8, PkScript: script}
	}
	return r
}

func sameBTC(t *testing.T, got, want btcfaucet.PayoutRecord) {
	t.Helper()
	if !got.SentAt.Equal(want.SentAt) {
		t.Errorf("%s: sent at %v, want %v", want.TxID, got.SentAt, want.SentAt)
	}
	got.SentAt, want.SentAt = time.Time{}, time.Time{}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("record\n got %+v\nwant %+v", got, want)
	}
}

func testBTCLedger(t *testing.T, open func(key string) btcfaucet.Ledger, reopen func() func(string) btcfaucet.Ledger) {
	ctx := t.Context()
	a, b := open("bcrt1qkeya"), open("bcrt1qkeyb")
	r1, r2 := btcRecord(t, 1, 1, true), btcRecord(t, 2, 2, false)
	r2.Replaces = btcRecord(t, 5, 2, false).TxID // a fee bump
	for _, r := range []btcfaucet.PayoutRecord{r2, r1} {
		if err := a.Put(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Put(ctx, btcRecord(t, 9, 1, true)); err != nil {
		t.Fatal(err)
	}
	r1.State = btcfaucet.PayoutPending // an upsert, as send does
	if err := a.Put(ctx, r1); err != nil {
		t.Fatal(err)
	}
	if reopen != nil {
		open = reopen()
		a, b = open("bcrt1qkeya"), open("bcrt1qkeyb")
	}
	got, err := a.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("list: %d records, want 2: %+v", len(got), got)
	}
	sameBTC(t, got[0], r1) // oldest first
	sameBTC(t, got[1], r2)
	if err := a.Delete(ctx, r1.TxID); err != nil {
		t.Fatal(err)
	}
	if err := a.Delete(ctx, "00"); err != nil {
		t.Fatalf("deleting an unknown payout: %v", err)
	}
	if got, err := a.List(ctx); err != nil || len(got) != 1 || got[0].TxID != r2.TxID {
		t.Fatalf("after delete: %+v, %v", got, err)
	}
	if got, err := b.List(ctx); err != nil || len(got) != 1 || got[0].Outputs[1].Amount != 1<<62+3 {
		t.Fatalf("the other key's ledger: %+v, %v", got, err)
	}
}
