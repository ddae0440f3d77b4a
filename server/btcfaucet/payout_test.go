package btcfaucet

import (
	"github.com/stxfaucet/faucet-operator/server/journal"

	"context"
	"encoding/hex"
	"errors"
	"sync"
	"testing"

	"github.com/btcsuite/btcd/btcutil"
	"github.com/btcsuite/btcd/chaincfg"

	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
	"github.com/stxfaucet/faucet-operator/server/chain/btcnode"
	"github.com/stxfaucet/faucet-operator/server/chain/btcnode/btcdtest"
)

const dripSats = 10_000

var testFees = Fees{Min: 1, Max: 50, Fallback: 2}

// recipients returns n fresh regtest addresses, cycling through every
// type a payout may pay: P2WPKH, P2PKH, P2SH, P2WSH, P2TR.
func recipients(t *testing.T, n int) []bitcoin.Address {
	t.Helper()
	params := &chaincfg.RegressionNetParams
	out := make([]bitcoin.Address, n)
	for i := range out {
		k := regtestKey(t)
		h160 := btcutil.Hash160(k.PublicKey())
		var a btcutil.Address
		var err error
		switch i % 5 {
		case 0:
			a, err = btcutil.NewAddressWitnessPubKeyHash(h160, params)
		case 1:
			a, err = btcutil.NewAddressPubKeyHash(h160, params)
		case 2:
			a, err = btcutil.NewAddressScriptHashFromHash(h160, params)
		case 3:
			a, err = btcutil.NewAddressWitnessScriptHash(append(h160, h160[:12]...), params)
		case 4:
			a, err = btcutil.NewAddressTaproot(k.PublicKey()[1:], params)
		}
		if err != nil {
			t.Fatal(err)
		}
		if out[i], err = bitcoin.ParseAddress(a.EncodeAddress(), bitcoin.Regtest); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// paidTo reads the main chain from height 1 and lists, by output script
// (hex), the values of every output: what each address was paid.
func paidTo(t *testing.T, c *btcnode.Client) map[string][]int64 {
	t.Helper()
	return btcdtest.Outputs(t, c, 0)
}

// mineAll mines until the mempool is empty, then syncs the payer.
func mineAll(t *testing.T, c *btcnode.Client, p *Payer) {
	t.Helper()
	ctx := context.Background()
	for i := 0; ; i++ {
		pool, err := c.RawMempool(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(pool) == 0 {
			break
		}
		if i > 5 {
			t.Fatalf("%d transactions still in the mempool", len(pool))
		}
		if _, err := c.Generate(ctx, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Sync(ctx); err != nil {
		t.Fatal(err)
	}
}

// fundedPayer starts btcd paying the key's coinbases, mines blocks so
// that mature coins exist, and syncs a payer.
func fundedPayer(t *testing.T, blocks int, ledger journal.Store) (*bitcoin.PrivateKey, *btcnode.Client, *Payer) {
	t.Helper()
	ctx := context.Background()
	key := regtestKey(t)
	node := btcdtest.Start(t, key.Address().String())
	c := node.Client()
	if _, err := c.Generate(ctx, blocks); err != nil {
		t.Fatal(err)
	}
	p := NewPayer(key, c, ledger, testFees, 1, nil)
	if err := p.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	return key, c, p
}

// payConcurrently runs pay for each of n fresh recipients at once and
// returns the recipients and the records, failing on any error.
func payConcurrently(t *testing.T, n int, pay func(bitcoin.Payout) (*PayoutRecord, error)) ([]bitcoin.Address, []*PayoutRecord) {
	t.Helper()
	to := recipients(t, n)
	recs := make([]*PayoutRecord, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r, err := pay(bitcoin.Payout{Address: to[i], Amount: dripSats})
			if err != nil {
				t.Errorf("drip %d: %v", i, err)
				return
			}
			recs[i] = r
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return to, recs
}

// checkSettled checks the distinct payouts among recs (no coin spent by
// two, each within the unconfirmed-chain limit), mines them, and checks
// that every recipient holds exactly one output of exactly the drip and
// the key exactly the subsidies less the drips (every block's coinbase,
// subsidy and fees, pays the key: the fees come back, the drips do not).
// It returns the number of payout transactions.
func checkSettled(t *testing.T, c *btcnode.Client, p *Payer, to []bitcoin.Address, recs []*PayoutRecord) int {
	t.Helper()
	txs := map[string]*PayoutRecord{}
	for _, r := range recs {
		txs[r.TxID] = r
	}
	spent := map[string]bool{}
	outputs := 0
	for _, r := range txs {
		if r.State != PayoutPending || r.Depth < 1 || r.Depth > MaxChain || r.Fee <= 0 {
			t.Fatalf("payout %+v", r)
		}
		for _, co := range r.Coins {
			if spent[co.OutPoint.String()] {
				t.Fatalf("coin %s spent by two payouts", co.OutPoint)
			}
			spent[co.OutPoint.String()] = true
		}
		outputs += len(r.Outputs)
	}
	if outputs != len(to) {
		t.Fatalf("%d payouts pay %d outputs for %d drips", len(txs), outputs, len(to))
	}
	mineAll(t, c, p)
	if n := p.InFlight(); n != 0 {
		t.Fatalf("%d payouts still in flight after mining", n)
	}
	paid := paidTo(t, c)
	for i, a := range to {
		if got := paid[hex.EncodeToString(a.PkScript())]; len(got) != 1 || got[0] != dripSats {
			t.Fatalf("recipient %d (%s, %s) got %v, want one output of %d", i, a, a.Type(), got, dripSats)
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
	if want := tip*50e8 - int64(len(to))*dripSats; held != want || p.chain.Tip() != tip {
		t.Fatalf("the key holds %d sats at %d, want %d at %d (subsidies − drips)", held, p.chain.Tip(), want, tip)
	}
	return len(txs)
}

// 60 concurrent payouts from one key with 3 mature coins, one drip each:
// each is placed (chaining on in-flight change, never past the
// unconfirmed-chain limit) and settles exactly.
func TestConcurrentPayoutsSettleExactly(t *testing.T) {
	_, c, p := fundedPayer(t, 102, nil) // mature coinbases of blocks 1..3
	to, recs := payConcurrently(t, 60, func(po bitcoin.Payout) (*PayoutRecord, error) {
		return p.Pay(context.Background(), []bitcoin.Payout{po})
	})
	if n := checkSettled(t, c, p, to, recs); n != 60 {
		t.Fatalf("%d transactions for 60 unbatched payouts", n)
	}
}

// A payout recorded but never sent (the process died in between) is sent
// by the next process, byte for byte, and paid exactly once; the payouts
// sent before the crash are not paid again, and new payouts do not touch
// the coins the resumed one spends.
func TestPayoutResumedAfterCrash(t *testing.T) {
	ctx := context.Background()
	ledger := journal.NewMemoryStore()
	key, c, p := fundedPayer(t, 101, ledger)
	to := recipients(t, 4)
	for i := range 2 {
		if _, err := p.Pay(ctx, []bitcoin.Payout{{Address: to[i], Amount: dripSats}}); err != nil {
			t.Fatal(err)
		}
	}
	crash := errors.New("process killed")
	p.beforeSend = func(PayoutRecord) error { return crash }
	if _, err := p.Pay(ctx, []bitcoin.Payout{{Address: to[2], Amount: dripSats}}); !errors.Is(err, crash) {
		t.Fatalf("the crashing payout: %v", err)
	}
	pool, err := c.RawMempool(ctx)
	if err != nil || len(pool) != 2 {
		t.Fatalf("mempool %v, %v: want the two payouts sent before the crash", pool, err)
	}

	// The next process.
	p2 := NewPayer(key, c, ledger, testFees, 1, nil)
	if err := p2.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if pool, err := c.RawMempool(ctx); err != nil || len(pool) != 3 {
		t.Fatalf("mempool after resume %v, %v: want all three payouts", pool, err)
	}
	if _, err := p2.Pay(ctx, []bitcoin.Payout{{Address: to[3], Amount: dripSats}}); err != nil {
		t.Fatalf("a payout after the resume: %v", err)
	}
	mineAll(t, c, p2)
	paid := paidTo(t, c)
	for i, a := range to {
		if got := paid[hex.EncodeToString(a.PkScript())]; len(got) != 1 || got[0] != dripSats {
			t.Fatalf("recipient %d got %v, want exactly one drip", i, got)
		}
	}
	if kept := keptMined(t, p2, ledger); len(kept) == 0 || p2.InFlight() != 0 {
		t.Fatalf("kept %v, %d in flight after everything confirmed", kept, p2.InFlight())
	}
	if _, err := c.Generate(ctx, SettleDepth); err != nil {
		t.Fatal(err)
	}
	if err := p2.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if recs := journalRecords(t, ledger); len(recs) != 0 {
		t.Fatalf("%d records %d blocks after everything confirmed", len(recs), SettleDepth)
	}
}

// With no mature coin the payer says so, and sends nothing.
func TestPayoutWithoutMatureCoins(t *testing.T) {
	_, c, p := fundedPayer(t, 50, nil)
	_, err := p.Pay(context.Background(), []bitcoin.Payout{{Address: recipients(t, 1)[0], Amount: dripSats}})
	if !errors.Is(err, ErrNoCoins) {
		t.Fatalf("payout with only immature coinbases: %v, want ErrNoCoins", err)
	}
	if pool, _ := c.RawMempool(context.Background()); len(pool) != 0 {
		t.Fatalf("mempool %v", pool)
	}
}

// A node that cannot be reached gets nothing recorded: the payout fails
// as unreachable, its coins stay free, and once the node is back the next
// payout is paid exactly once.
func TestPayoutNodeDown(t *testing.T) {
	ctx := context.Background()
	key := regtestKey(t)
	node := btcdtest.Start(t, key.Address().String())
	c := node.Client()
	if _, err := c.Generate(ctx, 101); err != nil {
		t.Fatal(err)
	}
	p := NewPayer(key, c, nil, testFees, 1, nil)
	if err := p.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if err := node.Stop(); err != nil {
		t.Fatal(err)
	}
	to := recipients(t, 2)
	if _, err := p.Pay(ctx, []bitcoin.Payout{{Address: to[0], Amount: dripSats}}); !errors.Is(err, ErrNodeDown) {
		t.Fatalf("payout with the node down: %v, want ErrNodeDown", err)
	}
	if n := p.InFlight(); n != 0 {
		t.Fatalf("%d payouts recorded while the node was down", n)
	}
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Pay(ctx, []bitcoin.Payout{{Address: to[1], Amount: dripSats}}); err != nil {
		t.Fatalf("payout after the node came back: %v", err)
	}
	mineAll(t, c, p)
	paid := paidTo(t, c)
	if got := paid[hex.EncodeToString(to[0].PkScript())]; len(got) != 0 {
		t.Fatalf("the refused payout was paid: %v", got)
	}
	if got := paid[hex.EncodeToString(to[1].PkScript())]; len(got) != 1 || got[0] != dripSats {
		t.Fatalf("the payout after recovery: %v", got)
	}
}

// A payer that starts again without its records (a memory store, a lost
// volume) while three earlier payouts wait in the mempool pays the next
// drips with coins they do not spend, instead of a refused double spend
// until the next block; every recipient is paid exactly once.
func TestPayoutAfterARestartWithoutRecords(t *testing.T) {
	ctx := context.Background()
	key, c, p := fundedPayer(t, 110, nil)
	to := recipients(t, 6)
	for i := range 3 {
		if _, err := p.Pay(ctx, []bitcoin.Payout{{Address: to[i], Amount: dripSats}}); err != nil {
			t.Fatal(err)
		}
	}
	if pool, err := c.RawMempool(ctx); err != nil || len(pool) != 3 {
		t.Fatalf("mempool %v, %v: want the three payouts", pool, err)
	}

	// The next process, with nothing recorded.
	fresh := NewPayer(key, c, nil, testFees, 1, nil)
	if err := fresh.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 3; i < 6; i++ {
		if _, err := fresh.Pay(ctx, []bitcoin.Payout{{Address: to[i], Amount: dripSats}}); err != nil {
			t.Fatalf("drip %d after the restart: %v", i, err)
		}
	}
	mineAll(t, c, fresh)
	paid := paidTo(t, c)
	for i, a := range to {
		if got := paid[hex.EncodeToString(a.PkScript())]; len(got) != 1 || got[0] != dripSats {
			t.Errorf("recipient %d got %v, want exactly one drip", i, got)
		}
	}
}
