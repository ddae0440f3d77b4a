package store_test

import (
	"context"
	"encoding/hex"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/btcsuite/btcd/btcutil"
	"github.com/btcsuite/btcd/chaincfg"

	"github.com/stxfaucet/faucet-operator/hack/eventually"
	"github.com/stxfaucet/faucet-operator/server/btcfaucet"
	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
	"github.com/stxfaucet/faucet-operator/server/chain/btcnode/btcdtest"
	"github.com/stxfaucet/faucet-operator/server/faucet"
	"github.com/stxfaucet/faucet-operator/server/store"
	"github.com/stxfaucet/faucet-operator/server/store/pgtest"
)

const btcOwnerKey = "bcrt1qownerkey"

// killBTCHolds ends every BTC key lock connection to uri's database from
// the server side, as when a replica's pod or network dies: its locks go
// with it. (Only BTC holds run here; STX Run is not under way.)
func killBTCHolds(t *testing.T, raw rawPG) {
	t.Helper()
	var n int
	if err := raw.c.QueryRow(t.Context(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
WHERE datname = current_database() AND application_name = 'faucet key-ownership'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no lock connection to end")
	}
}

func notOwner(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, faucet.ErrNotOwner) {
		t.Fatalf("%s: %v, want ErrNotOwner", what, err)
	}
}

// The BTC key has one owner at a time. Postgres: a second replica is
// refused while the first holds the key, takes it once the first's hold
// ends (its connection died, or it released), and from then on the first
// one's ledger writes fail with ErrNotOwner, before it has even noticed.
func TestBTCOwnerPostgres(t *testing.T) {
	ctx := t.Context()
	uri := pgtest.Shared(t).CreateDB(t)
	s1, s2 := openPostgresURI(t, uri, store.Options{ReplicaName: "r1"}), openPostgresURI(t, uri, store.Options{ReplicaName: "r2"})
	raw := openRawPG(t, uri)
	o1, o2 := s1.BTCOwner(btcOwnerKey), s2.BTCOwner(btcOwnerKey)
	l1, l2 := o1.Ledger(), o2.Ledger()
	r1, r2, r3 := btcRecord(t, 1, 1, true), btcRecord(t, 2, 1, true), btcRecord(t, 3, 1, true)

	notOwner(t, "put before acquiring", l1.Put(ctx, r1))
	if ok, err := o1.Acquire(ctx); !ok || err != nil {
		t.Fatalf("first acquire: %v, %v", ok, err)
	}
	if ok, err := o2.Acquire(ctx); ok || err != nil {
		t.Fatalf("second acquire while the first holds: %v, %v; want refused", ok, err)
	}
	if err := l1.Put(ctx, r1); err != nil {
		t.Fatal(err)
	}
	notOwner(t, "the second's put", l2.Put(ctx, r2))
	notOwner(t, "the second's delete", l2.Delete(ctx, r1.TxID))
	if err := o1.Renew(ctx); err != nil {
		t.Fatalf("renew: %v", err)
	}
	if ok, err := o1.Acquire(ctx); !ok || err != nil {
		t.Fatalf("acquire while holding: %v, %v", ok, err)
	}

	// The first's connection dies: the second takes over.
	killBTCHolds(t, raw)
	eventually.True(t, 10*time.Second, "the second acquires", func() bool {
		ok, err := o2.Acquire(ctx)
		return ok && err == nil
	})
	notOwner(t, "the fenced-out first's put", l1.Put(ctx, r3))
	notOwner(t, "the fenced-out first's delete", l1.Delete(ctx, r1.TxID))
	notOwner(t, "the first's renew", o1.Renew(ctx))
	if ok, err := o1.Acquire(ctx); ok || err != nil {
		t.Fatalf("the first re-acquiring: %v, %v; want refused", ok, err)
	}
	if err := l2.Put(ctx, r2); err != nil {
		t.Fatal(err)
	}
	if got, err := l2.List(ctx); err != nil || len(got) != 2 || got[0].TxID != r1.TxID || got[1].TxID != r2.TxID {
		t.Fatalf("ledger %+v, %v: want r1 (the first's) and r2, not the fenced-out r3", got, err)
	}
	var owner string
	if err := raw.c.QueryRow(ctx, `SELECT owner FROM key_owners WHERE key = $1`, btcOwnerKey).Scan(&owner); err != nil || owner != "r2" {
		t.Fatalf("key_owners says %q, %v", owner, err)
	}

	// The second releases: its writes fail at once, the first takes over.
	if err := o2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	notOwner(t, "put after release", l2.Put(ctx, r3))
	if ok, err := o1.Acquire(ctx); !ok || err != nil {
		t.Fatalf("acquire after the other's release: %v, %v", ok, err)
	}
	if err := l1.Delete(ctx, r2.TxID); err != nil {
		t.Fatal(err)
	}

	// A store on which no hold was asked for is not fenced (a single
	// replica), as with the STX keys.
	if err := openPostgresURI(t, uri, store.Options{}).BTCLedger(btcOwnerKey).Put(ctx, r3); err != nil {
		t.Fatalf("unfenced put: %v", err)
	}
	// Close releases the hold.
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	if ok, err := o2.Acquire(ctx); !ok || err != nil {
		t.Fatalf("acquire after the holder closed: %v, %v", ok, err)
	}
}

// SQLite: one process opens the file at a time, so the hold is always
// held; a second process is refused while the first has the store open,
// takes over once it closes, and the first can write no more.
func TestBTCOwnerSQLite(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "faucet.db")
	s1 := openSQLitePath(t, path, store.Options{})
	o1 := s1.BTCOwner(btcOwnerKey)
	if ok, err := o1.Acquire(ctx); !ok || err != nil {
		t.Fatalf("acquire: %v, %v", ok, err)
	}
	r1, r2 := btcRecord(t, 1, 1, true), btcRecord(t, 2, 1, true)
	if err := o1.Ledger().Put(ctx, r1); err != nil {
		t.Fatal(err)
	}
	if err := o1.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	if s, err := store.OpenSQLite(ctx, path, store.Options{LockTimeout: 300 * time.Millisecond, Logger: testLogger(t)}); err == nil {
		s.Close()
		t.Fatal("a second process opened the store while the first held it")
	}
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	o2 := openSQLitePath(t, path, store.Options{}).BTCOwner(btcOwnerKey)
	if ok, err := o2.Acquire(ctx); !ok || err != nil {
		t.Fatalf("acquire after the first closed: %v, %v", ok, err)
	}
	if got, err := o2.Ledger().List(ctx); err != nil || len(got) != 1 || got[0].TxID != r1.TxID {
		t.Fatalf("ledger %+v, %v", got, err)
	}
	if err := o1.Ledger().Put(ctx, r2); err == nil {
		t.Fatal("the closed first store wrote")
	}
}

// A payer whose replica lost the BTC key to another sends nothing: its
// payout is refused at the record, before any broadcast, with
// ErrNotOwner; the new owner resumes the payouts left in flight and pays.
// Real btcd, real Postgres.
func TestBTCPayerFencedOut(t *testing.T) {
	ctx := context.Background()
	key, err := bitcoin.GeneratePrivateKey(bitcoin.Regtest)
	if err != nil {
		t.Fatal(err)
	}
	c := btcdtest.Start(t, key.Address().String()).Client()
	if _, err := c.Generate(ctx, 101); err != nil {
		t.Fatal(err)
	}
	uri := pgtest.Shared(t).CreateDB(t)
	s1, s2 := openPostgresURI(t, uri, store.Options{}), openPostgresURI(t, uri, store.Options{})
	raw := openRawPG(t, uri)
	addr := key.Address().String()
	o1, o2 := s1.BTCOwner(addr), s2.BTCOwner(addr)
	fees := btcfaucet.Fees{Min: 1, Max: 50, Fallback: 2}
	to := btcRecipients(t, 3)
	mempool := func() []string {
		pool, err := c.RawMempool(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return pool
	}

	if ok, err := o1.Acquire(ctx); !ok || err != nil {
		t.Fatalf("acquire: %v, %v", ok, err)
	}
	p1 := btcfaucet.NewPayer(key, c, o1.Ledger(), fees, 1)
	if err := p1.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	first, err := p1.Pay(ctx, []bitcoin.Payout{{Address: to[0], Amount: 10_000}})
	if err != nil {
		t.Fatal(err)
	}

	killBTCHolds(t, raw)
	eventually.True(t, 10*time.Second, "the second replica acquires", func() bool {
		ok, err := o2.Acquire(ctx)
		return ok && err == nil
	})
	p2 := btcfaucet.NewPayer(key, c, o2.Ledger(), fees, 1)
	if err := p2.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if p2.InFlight() != 1 {
		t.Fatalf("the new owner resumed %d payouts, want the first's one", p2.InFlight())
	}
	if _, err := p1.Pay(ctx, []bitcoin.Payout{{Address: to[1], Amount: 10_000}}); !errors.Is(err, faucet.ErrNotOwner) {
		t.Fatalf("the fenced-out payer's payout: %v, want ErrNotOwner", err)
	}
	if pool := mempool(); len(pool) != 1 || pool[0] != first.TxID {
		t.Fatalf("mempool %v: want the first payout alone", pool)
	}
	if _, err := p2.Pay(ctx, []bitcoin.Payout{{Address: to[2], Amount: 10_000}}); err != nil {
		t.Fatal(err)
	}
	hashes, err := c.Generate(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := p2.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	// Mined payouts stay recorded until btcfaucet.SettleDepth deep (a
	// reorg may undo their block); none is in flight.
	if got, err := o2.Ledger().List(ctx); err != nil || len(got) != 2 || p2.InFlight() != 0 {
		t.Fatalf("ledger %+v, %v, %d in flight after mining", got, err, p2.InFlight())
	}
	b, err := c.Block(ctx, hashes[0])
	if err != nil {
		t.Fatal(err)
	}
	paid := map[string]int{}
	for _, tx := range b.Txs {
		for _, o := range tx.Vout {
			paid[o.ScriptPubKey]++
		}
	}
	for i, want := range []int{1, 0, 1} {
		if got := paid[hex.EncodeToString(to[i].PkScript())]; got != want {
			t.Fatalf("recipient %d paid %d times, want %d", i, got, want)
		}
	}
}

// btcRecipients returns n fresh regtest P2WPKH addresses.
func btcRecipients(t *testing.T, n int) []bitcoin.Address {
	t.Helper()
	out := make([]bitcoin.Address, n)
	for i := range out {
		k, err := bitcoin.GeneratePrivateKey(bitcoin.Regtest)
		if err != nil {
			t.Fatal(err)
		}
		a, err := btcutil.NewAddressWitnessPubKeyHash(btcutil.Hash160(k.PublicKey()), &chaincfg.RegressionNetParams)
		if err != nil {
			t.Fatal(err)
		}
		if out[i], err = bitcoin.ParseAddress(a.EncodeAddress(), bitcoin.Regtest); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// Two replicas' BTC faucets on one Postgres: one pays, the other stands by
// and answers ErrStandby; when the first stops (releasing the key), the
// second takes it within its renew interval, resumes what the first left
// in flight and pays. Every drip answered is mined once.
func TestBTCFaucetFailover(t *testing.T) {
	ctx := context.Background()
	key, err := bitcoin.GeneratePrivateKey(bitcoin.Regtest)
	if err != nil {
		t.Fatal(err)
	}
	c := btcdtest.Start(t, key.Address().String()).Client()
	if _, err := c.Generate(ctx, btcfaucet.CoinbaseMaturity+3); err != nil {
		t.Fatal(err)
	}
	uri := pgtest.Shared(t).CreateDB(t)
	addr := key.Address().String()
	start := func(name string) (*btcfaucet.Faucet, context.CancelFunc, <-chan error) {
		s := openPostgresURI(t, uri, store.Options{ReplicaName: name})
		f, err := btcfaucet.New(btcfaucet.Config{Key: key, Node: c, Owner: s.BTCOwner(addr),
			Fees: btcfaucet.Fees{Min: 1, Max: 50, Fallback: 2}, BatchWindow: time.Millisecond,
			PollInterval: 20 * time.Millisecond, RenewEvery: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- f.Run(runCtx); close(done) }()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil { // closed: never blocks twice
				t.Errorf("%s: %v", name, err)
			}
		})
		return f, cancel, done
	}
	f1, stop1, done1 := start("r1")
	if err := eventually.Wait(t, 20*time.Second, func() bool { return f1.Status().Ready }); err != nil {
		t.Fatal("the first replica never took the key")
	}
	f2, _, _ := start("r2")
	if err := eventually.Wait(t, 20*time.Second, func() bool { return f2.Status().Standby }); err != nil {
		t.Fatalf("the second replica does not stand by: %+v", f2.Status())
	}
	to := btcRecipients(t, 3)
	if _, err := f2.Drip(ctx, to[0], btcfaucet.SizeDefault); !errors.Is(err, btcfaucet.ErrStandby) {
		t.Fatalf("drip on the standby: %v, want ErrStandby", err)
	}
	d1, err := f1.Drip(ctx, to[0], btcfaucet.SizeDefault)
	if err != nil {
		t.Fatal(err)
	}
	// The first stops with its payout unconfirmed; the second takes over.
	stop1()
	if err := <-done1; err != nil {
		t.Fatal(err)
	}
	if err := eventually.Wait(t, 20*time.Second, func() bool { return f2.Status().Ready }); err != nil {
		t.Fatalf("the second replica did not take over: %+v", f2.Status())
	}
	if st := f2.Status(); st.InFlight != 1 {
		t.Fatalf("the second resumed %d payouts, want the first's one", st.InFlight)
	}
	d2, err := f2.Drip(ctx, to[1], btcfaucet.SizeLarge)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Generate(ctx, 1); err != nil {
		t.Fatal(err)
	}
	for i, d := range []*btcfaucet.Drip{d1, d2} {
		tx, err := c.RawTransaction(ctx, d.TxID)
		if err != nil || tx.Confirmations != 1 {
			t.Fatalf("drip %d (%s) not mined: %v", i, d.TxID, err)
		}
		var paid int64
		for _, o := range tx.Vout {
			if o.ScriptPubKey == hex.EncodeToString(to[i].PkScript()) {
				paid += o.Value
			}
		}
		if paid != d.Amount {
			t.Fatalf("drip %d paid %d, want %d", i, paid, d.Amount)
		}
	}
}
