package store_test

import (
	"context"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/btcsuite/btcd/btcutil"
	"github.com/btcsuite/btcd/chaincfg"

	"github.com/stxfaucet/faucet-operator/hack/eventually"
	"github.com/stxfaucet/faucet-operator/server/btcfaucet"
	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
	"github.com/stxfaucet/faucet-operator/server/chain/btcnode"
	"github.com/stxfaucet/faucet-operator/server/chain/btcnode/btcdtest"
	"github.com/stxfaucet/faucet-operator/server/journal"
	"github.com/stxfaucet/faucet-operator/server/store"
	"github.com/stxfaucet/faucet-operator/server/store/pgtest"
)

// The BTC payer on the unified key ownership (journal.Owner) and journal:
// real btcd, real Postgres.

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

// startBTCNode starts btcd paying its blocks to a fresh faucet key, mines
// blocks blocks, and returns the key and a client.
func startBTCNode(t *testing.T, blocks int) (*bitcoin.PrivateKey, *btcnode.Client) {
	t.Helper()
	key, err := bitcoin.GeneratePrivateKey(bitcoin.Regtest)
	if err != nil {
		t.Fatal(err)
	}
	c := btcdtest.Start(t, key.Address().String()).Client()
	if _, err := c.Generate(t.Context(), blocks); err != nil {
		t.Fatal(err)
	}
	return key, c
}

// paidIn counts, per output script (hex), the outputs paying it in the
// blocks.
func paidIn(t *testing.T, c *btcnode.Client, hashes ...string) map[string]int {
	t.Helper()
	paid := map[string]int{}
	for _, h := range hashes {
		b, err := c.Block(t.Context(), h)
		if err != nil {
			t.Fatal(err)
		}
		for _, tx := range b.Txs {
			for _, o := range tx.Vout {
				paid[o.ScriptPubKey]++
			}
		}
	}
	return paid
}

// A payer whose replica lost the BTC key to another sends nothing: its
// payout is refused at the record, before any broadcast, with
// journal.ErrNotOwner, although its replica has not noticed the loss yet;
// the new owner resumes the payout left in flight and pays.
func TestBTCPayerFencedOut(t *testing.T) {
	ctx := t.Context()
	key, c := startBTCNode(t, 101)
	uri := pgtest.Shared(t).CreateDB(t)
	// r1 would notice the loss of its lock connection at its next round,
	// an hour away, or at once if it were not busy (gated).
	s1 := openPostgresURI(t, uri, store.Options{ReplicaName: "r1", OwnershipInterval: time.Hour})
	s2 := openPostgresURI(t, uri, store.Options{ReplicaName: "r2", OwnershipInterval: 50 * time.Millisecond})
	raw := openRawPG(t, uri)
	addr := key.Address().String()
	// The Bitcoin key rides with a Stacks key, as in a faucet process.
	keys := []string{stxKey(100), addr}
	h1, h2 := newCluster().replica("r1"), newCluster().replica("r2")
	fees := btcfaucet.Fees{Min: 1, Max: 50, Fallback: 2}
	to := btcRecipients(t, 3)
	mempool := func() []string {
		pool, err := c.RawMempool(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return pool
	}

	runOwner(t, ctx, s1, keys, gated{replica: h1, keys: len(keys), open: make(chan struct{})})
	eventually.True(t, 10*time.Second, "r1 owns both keys", func() bool { return h1.owned() == 2 })
	p1 := btcfaucet.NewPayer(key, c, s1, fees, 1, nil)
	if err := p1.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	first, err := p1.Pay(ctx, []bitcoin.Payout{{Address: to[0], Amount: 10_000}})
	if err != nil {
		t.Fatal(err)
	}

	killOwnership(t, raw)
	runOwner(t, ctx, s2, keys, h2)
	eventually.True(t, 10*time.Second, "r2 takes both keys", func() bool { return h2.owned() == 2 })
	p2 := btcfaucet.NewPayer(key, c, s2, fees, 1, nil)
	if err := p2.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if p2.InFlight() != 1 {
		t.Fatalf("the new owner resumed %d payouts, want the first's one", p2.InFlight())
	}
	if h1.owned() != 2 {
		t.Fatal("r1 noticed the loss: the fence is not what refuses it below")
	}
	if _, err := p1.Pay(ctx, []bitcoin.Payout{{Address: to[1], Amount: 10_000}}); !errors.Is(err, journal.ErrNotOwner) {
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
	if got, err := s2.List(ctx, addr); err != nil || len(got) != 2 || p2.InFlight() != 0 {
		t.Fatalf("journal %s, %v, %d in flight after mining", entryIDs(got), err, p2.InFlight())
	}
	paid := paidIn(t, c, hashes...)
	for i, want := range []int{1, 0, 1} {
		if got := paid[hex.EncodeToString(to[i].PkScript())]; got != want {
			t.Fatalf("recipient %d paid %d times, want %d", i, got, want)
		}
	}
}

// btcReplica is one faucet replica's BTC side: its own store on the
// shared database, its faucet, and key ownership by journal.Keep.
type btcReplica struct {
	name  string
	store *store.Postgres
	f     *btcfaucet.Faucet
	stop  func() // cancels Keep and Run, waits for both, closes the store
}

func startBTCReplica(t *testing.T, uri, name string, key *bitcoin.PrivateKey, c *btcnode.Client) *btcReplica {
	t.Helper()
	// Its connections name it, so that the test can tell the replicas'
	// key-ownership sessions apart (rankedFirst).
	s := openPostgresURI(t, uri+"&application_name="+name, store.Options{ReplicaName: name, OwnershipInterval: 50 * time.Millisecond})
	f, err := btcfaucet.New(btcfaucet.Config{Key: key, Node: c, Journal: s, Shared: true,
		Fees: btcfaucet.Fees{Min: 1, Max: 50, Fallback: 2}, BatchWindow: time.Millisecond,
		PollInterval: 20 * time.Millisecond, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	r := &journal.Router{}
	r.Add(f, key.Address().String())
	ctx, cancel := context.WithCancel(context.Background())
	kept, ran := make(chan struct{}), make(chan error, 1)
	go func() {
		defer close(kept)
		journal.Keep(ctx, nil, s, r, 100*time.Millisecond, testLogger(t))
	}()
	go func() { ran <- f.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			<-kept
			if err := <-ran; err != nil {
				t.Errorf("%s: Run: %v", name, err)
			}
			if err := s.Close(); err != nil {
				t.Errorf("%s: close: %v", name, err)
			}
		})
	}
	t.Cleanup(stop)
	return &btcReplica{name: name, store: s, f: f, stop: stop}
}

// memberLocks selects the membership locks of the replicas running key
// ownership on the database (owner.go's namespace "FCMB").
const memberLocks = `FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2 AND l.classid = 1178815810::oid
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())`

// liveMembers counts the replicas running key ownership on raw's database.
func liveMembers(t *testing.T, raw rawPG) int {
	t.Helper()
	return raw.count(t, "SELECT COUNT(*) "+memberLocks)
}

// rankedFirst names the replica whose membership id ranks first (the
// youngest, the highest id): with one key to spread, the replica that ends
// up holding it (owner.go's quotas).
func rankedFirst(t *testing.T, raw rawPG) string {
	t.Helper()
	var app string
	if err := raw.c.QueryRow(t.Context(), "SELECT a.application_name "+memberLocks+" ORDER BY l.objid DESC LIMIT 1").Scan(&app); err != nil {
		t.Fatal(err)
	}
	name, ok := strings.CutSuffix(app, " key-ownership")
	if !ok {
		t.Fatalf("membership lock held by %q, not a key-ownership connection", app)
	}
	return name
}

// Two replicas' BTC faucets on one Postgres, on the one ownership protocol
// (journal.Keep over store.Run, the faucet as the BTC key's handler). The
// first, alone, takes the key and pays. Once the second runs too, the key
// is with one of them (the ranks decide which — the youngest: the
// holder) while the other stands by and answers ErrStandby. When the
// holder stops, the other takes the key, resumes the payout the holder
// left in flight and pays. Every drip is mined once, at its amount.
func TestBTCFaucetFailover(t *testing.T) {
	ctx := t.Context()
	key, c := startBTCNode(t, btcfaucet.CoinbaseMaturity+3)
	uri := pgtest.Shared(t).CreateDB(t)
	raw := openRawPG(t, uri)
	addr := key.Address().String()
	to := btcRecipients(t, 3)
	var mined []string
	mine := func() {
		t.Helper()
		hashes, err := c.Generate(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		mined = append(mined, hashes...)
	}

	r1 := startBTCReplica(t, uri, "r1", key, c)
	if err := eventually.Wait(t, 20*time.Second, func() bool { return r1.f.Status().Ready }); err != nil {
		t.Fatalf("the first replica never took the key: %+v", r1.f.Status())
	}
	d0, err := r1.f.Drip(ctx, to[0], btcfaucet.SizeDefault)
	if err != nil {
		t.Fatal(err)
	}
	mine()

	r2 := startBTCReplica(t, uri, "r2", key, c)
	// Settled: the replica ranked first holds the key (it keeps it, or
	// the first hands it over with Releasing), key_owners says so, and the
	// other stands by.
	var holder, standby *btcReplica
	eventually.True(t, 30*time.Second, "one replica holds the key, the other stands by", func() bool {
		if liveMembers(t, raw) != 2 {
			return false
		}
		holder, standby = r1, r2
		if rankedFirst(t, raw) == r2.name {
			holder, standby = r2, r1
		}
		var owner string
		if err := raw.c.QueryRow(ctx, `SELECT owner FROM key_owners WHERE key = $1`, addr).Scan(&owner); err != nil || owner != holder.name {
			return false
		}
		return holder.f.Status().Ready && standby.f.Status().Standby
	})
	t.Logf("%s holds the BTC key, %s stands by", holder.name, standby.name)
	if _, err := standby.f.Drip(ctx, to[1], btcfaucet.SizeDefault); !errors.Is(err, btcfaucet.ErrStandby) {
		t.Fatalf("drip on the standby: %v, want ErrStandby", err)
	}
	d1, err := holder.f.Drip(ctx, to[1], btcfaucet.SizeLarge)
	if err != nil {
		t.Fatal(err)
	}

	// The holder stops with its payout unconfirmed; the other takes over.
	holder.stop()
	if err := eventually.Wait(t, 20*time.Second, func() bool { return standby.f.Status().Ready }); err != nil {
		t.Fatalf("the standby did not take over: %+v", standby.f.Status())
	}
	if st := standby.f.Status(); st.InFlight != 1 {
		t.Fatalf("the new holder resumed %d payouts, want the stopped one's one", st.InFlight)
	}
	d2, err := standby.f.Drip(ctx, to[2], btcfaucet.SizeDefault)
	if err != nil {
		t.Fatal(err)
	}
	mine()

	paid := paidIn(t, c, mined...)
	for i, d := range []*btcfaucet.Drip{d0, d1, d2} {
		tx, err := c.RawTransaction(ctx, d.TxID)
		if err != nil || tx.Confirmations < 1 {
			t.Fatalf("drip %d (%s) not mined: %+v, %v", i, d.TxID, tx, err)
		}
		script := hex.EncodeToString(to[i].PkScript())
		var amount int64
		for _, o := range tx.Vout {
			if o.ScriptPubKey == script {
				amount += o.Value
			}
		}
		if amount != d.Amount {
			t.Fatalf("drip %d paid %d, want %d", i, amount, d.Amount)
		}
		if n := paid[script]; n != 1 {
			t.Fatalf("drip %d's recipient paid by %d outputs of the mined blocks, want 1", i, n)
		}
	}
	if d1.Amount != btcfaucet.DefaultLargeAmount || d0.Amount != btcfaucet.DefaultAmount {
		t.Fatalf("drip amounts %d and %d, want the default sizes", d0.Amount, d1.Amount)
	}
}
