package btcfaucet

import (
	"github.com/stxfaucet/faucet-operator/server/journal"

	"context"
	"encoding/hex"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/btcsuite/btcd/wire"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
	"github.com/stxfaucet/faucet-operator/server/chain/btcnode"
	"github.com/stxfaucet/faucet-operator/server/chain/btcnode/btcdtest"
)

// feeNode is the real btcd with one answer replaced: its fee estimate,
// which never moves on regtest. Every other call, the broadcasts
// included, goes to btcd.
type feeNode struct {
	*btcnode.Client
	satPerVB atomic.Int64
}

func (n *feeNode) EstimateFee(_ context.Context, target int) (*btcnode.FeeEstimate, error) {
	return &btcnode.FeeEstimate{SatPerKvB: n.satPerVB.Load() * 1000, Blocks: target, Method: "test"}, nil
}

// bumpRig is a payer of a key whose only mature coin is block 1's
// coinbase, on btcd with a settable fee estimate and a clock the test
// moves.
type bumpRig struct {
	key   *bitcoin.PrivateKey
	c     *btcnode.Client
	node  *feeNode
	fees  Fees
	clock *clocktesting.FakeClock
}

func newBumpRig(t *testing.T, fees Fees) *bumpRig {
	t.Helper()
	key := regtestKey(t)
	c := btcdtest.Start(t, key.Address().String()).Client()
	if _, err := c.Generate(context.Background(), 100); err != nil {
		t.Fatal(err)
	}
	r := &bumpRig{key: key, c: c, node: &feeNode{Client: c}, fees: fees, clock: clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))}
	r.node.satPerVB.Store(1)
	return r
}

// payer is a new payer (a new process) on ledger, resumed.
func (r *bumpRig) payer(t *testing.T, ledger journal.Store) *Payer {
	t.Helper()
	p := NewPayer(r.key, r.node, ledger, r.fees, 1, r.clock)
	p.estimate.TTL = 0 // read the estimate the test sets at every use
	if err := p.Resume(context.Background()); err != nil {
		t.Fatal(err)
	}
	return p
}

func (r *bumpRig) mempool(t *testing.T) []string {
	t.Helper()
	pool, err := r.c.RawMempool(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(pool)
	return pool
}

// mineOne mines a block and returns its transactions and its coinbase's
// value (subsidy and fees), then syncs p unless it is nil.
func (r *bumpRig) mineOne(t *testing.T, p *Payer) (txids []string, coinbase int64) {
	t.Helper()
	ctx := context.Background()
	hashes, err := r.c.Generate(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.c.Block(ctx, hashes[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range b.Txs[0].Vout {
		coinbase += o.Value
	}
	for _, tx := range b.Txs[1:] {
		txids = append(txids, tx.TxID)
	}
	if p != nil {
		if err := p.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return txids, coinbase
}

func (r *bumpRig) bump(t *testing.T, p *Payer, want int) {
	t.Helper()
	n, err := p.BumpStuck(context.Background(), time.Minute)
	if err != nil || n != want {
		t.Fatalf("BumpStuck: %d bumped, %v; want %d", n, err, want)
	}
}

// listed returns the journal's records of every key by txid.
func listed(t *testing.T, l journal.Store) map[string]PayoutRecord {
	t.Helper()
	out := map[string]PayoutRecord{}
	for _, r := range journalRecords(t, l) {
		out[r.TxID] = r
	}
	return out
}

// journalRecords reads back every payout a memory journal holds.
func journalRecords(t *testing.T, l journal.Store) []PayoutRecord {
	t.Helper()
	m, ok := l.(*journal.MemoryStore)
	if !ok {
		t.Fatalf("journal %T is not a memory store", l)
	}
	var out []PayoutRecord
	for _, key := range m.Keys() {
		entries, err := l.List(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			r, err := recordOf(e)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, r)
		}
	}
	return out
}

// checkReplacement checks rep against the payout it replaces: the same
// coins and outputs, a fee meeting BIP-125 rule 4 and at least rate.
func checkReplacement(t *testing.T, old, rep PayoutRecord, rate int64) {
	t.Helper()
	tx, err := bitcoin.DecodeTx(rep.Raw, rep.Coins)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Replaces != old.TxID || !slices.Equal(rep.Outputs, old.Outputs) || len(rep.Coins) != len(old.Coins) || rep.Depth != old.Depth {
		t.Fatalf("replacement %+v of %+v", rep, old)
	}
	for i := range rep.Coins {
		if rep.Coins[i].OutPoint != old.Coins[i].OutPoint {
			t.Fatalf("replacement input %d spends %v, the original %v", i, rep.Coins[i].OutPoint, old.Coins[i].OutPoint)
		}
	}
	msg := tx.MsgTx()
	for i, o := range rep.Outputs {
		if msg.TxOut[i].Value != o.Amount {
			t.Fatalf("replacement output %d pays %d, want %d", i, msg.TxOut[i].Value, o.Amount)
		}
	}
	if rep.Fee < old.Fee+tx.VSize()*bitcoin.IncrementalRelayFeeRate || rep.Fee < rate*tx.VSize() {
		t.Fatalf("replacement fee %d for %d vB (replaced fee %d, rate %d)", rep.Fee, tx.VSize(), old.Fee, rate)
	}
	if rep.Change == nil || old.Change == nil || rep.Change.Value != old.Change.Value-(rep.Fee-old.Fee) {
		t.Fatalf("replacement change %+v, original %+v", rep.Change, old.Change)
	}
}

// A payout sent at 1 sat/vB, once the estimate rises to 20 and it has
// waited long enough, is replaced: the node's mempool holds the
// replacement and not the original, new payouts keep off both versions'
// change until a block decides, and the recipient is paid once, the
// replacement's fee going to the miner.
func TestBumpStuckReplacesUnderpaidPayout(t *testing.T) {
	ctx := context.Background()
	rig := newBumpRig(t, testFees)
	ledger := journal.NewMemoryStore()
	p := rig.payer(t, ledger)
	to := recipients(t, 2)
	orig, err := p.Pay(ctx, []bitcoin.Payout{{Address: to[0], Amount: dripSats}})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := bitcoin.DecodeTx(orig.Raw, orig.Coins)
	if err != nil {
		t.Fatal(err)
	}
	for i, in := range tx.MsgTx().TxIn {
		if in.Sequence >= wire.MaxTxInSequenceNum-1 {
			t.Fatalf("input %d has nSequence %#x: no BIP-125 signal", i, in.Sequence)
		}
	}

	rig.bump(t, p, 0) // too young
	rig.clock.Step(2 * time.Minute)
	rig.bump(t, p, 0) // pays the estimate
	rig.node.satPerVB.Store(20)
	rig.bump(t, p, 1)

	recs := listed(t, ledger)
	if len(recs) != 2 {
		t.Fatalf("ledger %+v: want the original and the replacement", recs)
	}
	var rep PayoutRecord
	for _, r := range recs {
		if r.TxID != orig.TxID {
			rep = r
		}
	}
	checkReplacement(t, *orig, rep, 20)
	if pool := rig.mempool(t); !slices.Equal(pool, []string{rep.TxID}) {
		t.Fatalf("mempool %v, want only the replacement %s (original %s)", pool, rep.TxID, orig.TxID)
	}
	rig.bump(t, p, 0) // the replacement pays the estimate

	// The only mature coin is spent by both versions, and neither's
	// change may be spent yet.
	if _, err := p.Pay(ctx, []bitcoin.Payout{{Address: to[1], Amount: dripSats}}); !errors.Is(err, ErrNoCoins) {
		t.Fatalf("a payout while the bump is undecided: %v, want ErrNoCoins", err)
	}

	txids, coinbase := rig.mineOne(t, p)
	if !slices.Equal(txids, []string{rep.TxID}) || coinbase != 50e8+rep.Fee {
		t.Fatalf("block holds %v paying the miner %d; want the replacement %s and 50 BTC + its fee %d", txids, coinbase, rep.TxID, rep.Fee)
	}
	if n := p.InFlight(); n != 0 || !slices.Equal(keptMined(t, p, ledger), []string{rep.TxID}) {
		t.Fatalf("%d in flight, ledger %+v after the replacement confirmed; want only the replacement, kept until settled", n, listed(t, ledger))
	}
	// The confirmed change and the newly matured coinbase pay the next.
	if _, err := p.Pay(ctx, []bitcoin.Payout{{Address: to[1], Amount: dripSats}}); err != nil {
		t.Fatal(err)
	}
	checkPaidOnce(t, rig.c, p, to)
}

// checkPaidOnce mines everything and checks that each recipient holds one
// drip and the key the subsidies less the drips (it mines every block, so
// the fees come back to it).
func checkPaidOnce(t *testing.T, c *btcnode.Client, p *Payer, to []bitcoin.Address) {
	t.Helper()
	mineAll(t, c, p)
	paid := paidTo(t, c)
	for i, a := range to {
		if got := paid[hex.EncodeToString(a.PkScript())]; len(got) != 1 || got[0] != dripSats {
			t.Fatalf("recipient %d got %v, want one drip of %d", i, got, dripSats)
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
	if want := tip*50e8 - int64(len(to))*dripSats; held != want {
		t.Fatalf("the key holds %d sats, want %d (subsidies − drips)", held, want)
	}
	if n := p.InFlight(); n != 0 {
		t.Fatalf("%d payouts in flight after mining", n)
	}
}

// Only chain tips are bumped (the parent's replacement would evict the
// child); the new rate is capped by Fees.Max; a replacement is bumped
// again, each time by at least BIP-125's step; a payout whose change
// cannot pay for the bump is left alone.
func TestBumpStuckRules(t *testing.T) {
	ctx := context.Background()
	rig := newBumpRig(t, Fees{Min: 1, Max: 5, Fallback: 1})
	ledger := journal.NewMemoryStore()
	p := rig.payer(t, ledger)
	to := recipients(t, 3)
	parent, err := p.Pay(ctx, []bitcoin.Payout{{Address: to[0], Amount: dripSats}})
	if err != nil {
		t.Fatal(err)
	}
	child, err := p.Pay(ctx, []bitcoin.Payout{{Address: to[1], Amount: dripSats}})
	if err != nil {
		t.Fatal(err)
	}
	if child.Coins[0].OutPoint != parent.Change.OutPoint {
		t.Fatalf("the second payout spends %v, not the first's change", child.Coins)
	}
	rig.clock.Step(time.Hour)
	rig.node.satPerVB.Store(20) // above Max: 5 applies
	rig.bump(t, p, 1)
	recs := listed(t, ledger)
	var rep PayoutRecord
	for _, r := range recs {
		if r.Replaces != "" {
			rep = r
		}
	}
	if len(recs) != 3 || rep.Replaces != child.TxID {
		t.Fatalf("ledger %+v: want the parent, the child and the child's replacement", recs)
	}
	checkReplacement(t, *child, rep, 5)
	if tx, _ := bitcoin.DecodeTx(rep.Raw, rep.Coins); rep.Fee != 5*tx.FeeVSize() {
		t.Fatalf("replacement pays %d for %d vB, want the 5 sat/vB cap", rep.Fee, tx.FeeVSize())
	}
	rig.bump(t, p, 0) // at the cap already

	// 6 sat/vB: the replacement is replaced in turn.
	rig.fees.Max, p.fees.Max = 6, 6
	rig.clock.Step(time.Hour)
	rig.bump(t, p, 1)
	var rep2 PayoutRecord
	for _, r := range listed(t, ledger) {
		if r.Replaces == rep.TxID {
			rep2 = r
		}
	}
	checkReplacement(t, rep, rep2, 6)
	if pool := rig.mempool(t); !slices.Equal(pool, sorted(parent.TxID, rep2.TxID)) {
		t.Fatalf("mempool %v, want the parent %s and the last replacement %s", pool, parent.TxID, rep2.TxID)
	}
	txids, _ := rig.mineOne(t, p)
	if !slices.Equal(sorted(txids...), sorted(parent.TxID, rep2.TxID)) {
		t.Fatalf("block holds %v", txids)
	}
	if kept := keptMined(t, p, ledger); !slices.Equal(kept, sorted(parent.TxID, rep2.TxID)) || p.InFlight() != 0 {
		t.Fatalf("kept %v, %d in flight once the block decided", kept, p.InFlight())
	}

	// A payout leaving less than 1000 sats of change cannot pay 5 sat/vB
	// more.
	var spendable int64
	coins, _, err := p.spendable()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range coins {
		spendable += c.Value
	}
	rig.node.satPerVB.Store(1)
	big, err := p.Pay(ctx, []bitcoin.Payout{{Address: to[2], Amount: spendable - 1000}})
	if err != nil {
		t.Fatal(err)
	}
	if big.Change == nil || big.Change.Value > 1000 {
		t.Fatalf("the large payout's change is %+v", big.Change)
	}
	rig.node.satPerVB.Store(6)
	rig.clock.Step(time.Hour)
	rig.bump(t, p, 0)
	if pool := rig.mempool(t); !slices.Equal(pool, []string{big.TxID}) || p.InFlight() != 1 {
		t.Fatalf("mempool %v, %d in flight: want the large payout alone", pool, p.InFlight())
	}
	mineAll(t, rig.c, p)
	if got := paidTo(t, rig.c)[hex.EncodeToString(to[2].PkScript())]; len(got) != 1 || got[0] != spendable-1000 {
		t.Fatalf("the large payout paid %v", got)
	}
}

func sorted(s ...string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// A replacement recorded but never sent (the process died in between) is
// sent by the next process after the original: the node ends up with the
// replacement, one of the two confirms, the other is forgotten, and the
// recipient is paid once.
func TestBumpResumedAfterCrash(t *testing.T) {
	ctx := context.Background()
	rig := newBumpRig(t, testFees)
	ledger := journal.NewMemoryStore()
	p := rig.payer(t, ledger)
	to := recipients(t, 1)
	orig, err := p.Pay(ctx, []bitcoin.Payout{{Address: to[0], Amount: dripSats}})
	if err != nil {
		t.Fatal(err)
	}
	crash := errors.New("process killed")
	p.beforeSend = func(r PayoutRecord) error {
		if r.Replaces != "" {
			return crash
		}
		return nil
	}
	rig.clock.Step(time.Hour)
	rig.node.satPerVB.Store(20)
	if n, err := p.BumpStuck(ctx, time.Minute); !errors.Is(err, crash) || n != 0 {
		t.Fatalf("the crashing bump: %d, %v", n, err)
	}
	recs := listed(t, ledger)
	if len(recs) != 2 {
		t.Fatalf("ledger %+v: want the original and the unsent replacement", recs)
	}
	if pool := rig.mempool(t); !slices.Equal(pool, []string{orig.TxID}) {
		t.Fatalf("mempool %v, want the original alone", pool)
	}

	p2 := rig.payer(t, ledger) // the next process
	pool := rig.mempool(t)
	if len(pool) != 1 || pool[0] == orig.TxID || recs[pool[0]].Replaces != orig.TxID {
		t.Fatalf("mempool after resume %v: want the replacement alone", pool)
	}
	if n := p2.InFlight(); n < 1 || n > 2 {
		t.Fatalf("%d in flight after resume", n)
	}
	txids, _ := rig.mineOne(t, p2)
	if !slices.Equal(txids, pool) {
		t.Fatalf("block holds %v, want %v", txids, pool)
	}
	if kept := keptMined(t, p2, ledger); !slices.Equal(kept, sorted(txids...)) || p2.InFlight() != 0 {
		t.Fatalf("kept %v, %d in flight once one version confirmed", kept, p2.InFlight())
	}
	checkPaidOnce(t, rig.c, p2, to)
}

// The same crash, but the original confirms before the restart: the next
// process forgets the replacement unsent (its coins are spent by the
// original), and the recipient is paid once.
func TestBumpCrashOriginalConfirms(t *testing.T) {
	ctx := context.Background()
	rig := newBumpRig(t, testFees)
	ledger := journal.NewMemoryStore()
	p := rig.payer(t, ledger)
	to := recipients(t, 1)
	orig, err := p.Pay(ctx, []bitcoin.Payout{{Address: to[0], Amount: dripSats}})
	if err != nil {
		t.Fatal(err)
	}
	crash := errors.New("process killed")
	p.beforeSend = func(r PayoutRecord) error {
		if r.Replaces != "" {
			return crash
		}
		return nil
	}
	rig.clock.Step(time.Hour)
	rig.node.satPerVB.Store(20)
	if _, err := p.BumpStuck(ctx, time.Minute); !errors.Is(err, crash) {
		t.Fatalf("the crashing bump: %v", err)
	}
	if txids, _ := rig.mineOne(t, nil); !slices.Equal(txids, []string{orig.TxID}) {
		t.Fatalf("block holds %v, want the original", txids)
	}

	p2 := rig.payer(t, ledger)
	if pool := rig.mempool(t); len(pool) != 0 {
		t.Fatalf("mempool after resume %v: the replacement of a confirmed payout was sent", pool)
	}
	if kept := keptMined(t, p2, ledger); len(kept) != 1 || p2.InFlight() != 0 {
		t.Fatalf("kept %v, %d in flight after resume; want the confirmed original only", kept, p2.InFlight())
	}
	checkPaidOnce(t, rig.c, p2, to)
}

// keptMined returns the txids the ledger still holds, sorted, failing if
// any is not in a block: confirmed payouts are kept (against a reorg)
// until SettleDepth deep, and only they.
func keptMined(t *testing.T, p *Payer, l journal.Store) []string {
	t.Helper()
	var out []string
	for txid := range listed(t, l) {
		p.mu.Lock()
		r, ok := p.inflight[txid]
		mined := ok && r.MinedAt != 0
		p.mu.Unlock()
		if !mined {
			t.Fatalf("ledger holds %s, which is not in a block", txid)
		}
		out = append(out, txid)
	}
	return sorted(out...)
}
