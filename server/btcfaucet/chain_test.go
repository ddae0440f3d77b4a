package btcfaucet

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"

	"github.com/btcsuite/btcd/wire"

	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
	"github.com/stxfaucet/faucet-operator/server/chain/btcnode"
	"github.com/stxfaucet/faucet-operator/server/chain/btcnode/btcdtest"
)

// regtestKey is a fresh faucet key on regtest.
func regtestKey(t *testing.T) *bitcoin.PrivateKey {
	t.Helper()
	k, err := bitcoin.GeneratePrivateKey(bitcoin.Regtest)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// fullScan is the oracle: a follower that reads the whole chain afresh.
func fullScan(t *testing.T, c *btcnode.Client, script []byte) map[wire.OutPoint]ChainCoin {
	t.Helper()
	f := newChainFollower(c, script, 1, 0)
	if _, err := f.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	return viewOf(f)
}

// viewOf is every coin the follower knows, spent or not.
func viewOf(f *chainFollower) map[wire.OutPoint]ChainCoin {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[wire.OutPoint]ChainCoin{}
	for op, c := range f.coins {
		out[op] = *c
	}
	return out
}

func sameView(t *testing.T, what string, got, want map[wire.OutPoint]ChainCoin) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d coins, the chain has %d", what, len(got), len(want))
	}
	for op, w := range want {
		g, ok := got[op]
		if !ok || g.Value != w.Value || g.Height != w.Height || g.Coinbase != w.Coinbase || g.SpentBy != w.SpentBy {
			t.Fatalf("%s: coin %s is %+v, the chain says %+v", what, op, g, w)
		}
	}
}

// The follower sees the coinbases paying the faucet's key and their
// maturity, a payout spending one and its change, and, after a reorg the
// node makes (invalidateblock, then a longer competing chain), exactly what
// a fresh scan of the new main chain sees: undone blocks leave no coin and
// no spend behind, and the payout is confirmed again where the new chain
// holds it.
func TestChainFollowerAgainstBtcd(t *testing.T) {
	ctx := context.Background()
	key := regtestKey(t)
	script := key.Address().PkScript()
	node := btcdtest.Start(t, key.Address().String())
	c := node.Client()
	if _, err := c.Generate(ctx, 101); err != nil {
		t.Fatal(err)
	}
	f := newChainFollower(c, script, 1, 0)
	res, err := f.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Applied != 101 || res.Undone != 0 || res.Tip != 101 {
		t.Fatalf("first sync %+v", res)
	}
	coins := f.Coins()
	if len(coins) != 101 {
		t.Fatalf("%d coins after 101 blocks paying the key", len(coins))
	}
	mature := 0
	for _, co := range coins {
		if !co.Coinbase || co.Value != 50*1e8 {
			t.Fatalf("coin %+v: want a 50 BTC coinbase", co)
		}
		if co.Mature(f.Tip()) {
			mature++
		}
	}
	// A coinbase may be spent 100 blocks on: in block 102, those of
	// blocks 1 and 2.
	if mature != 2 || !coins[1].Mature(f.Tip()) || coins[2].Mature(f.Tip()) || coins[0].Height != 1 {
		t.Fatalf("%d mature coins, oldest %+v; want the coinbases of blocks 1 and 2", mature, coins[0])
	}

	// The node agrees: the block-3 coinbase cannot be spent yet.
	to := regtestKey(t).Address()
	early, err := bitcoin.BuildPayout(bitcoin.BuildParams{Key: key, Coins: []bitcoin.Coin{coins[2].Coin},
		Payouts: []bitcoin.Payout{{Address: to, Amount: 10_000}}, FeeRate: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.SendRawTransaction(ctx, early.Raw()); err == nil {
		t.Fatal("the node took a spend of a coinbase the follower calls immature")
	}

	// A payout from the mature coin, change back to the key.
	tx, err := bitcoin.BuildPayout(bitcoin.BuildParams{Key: key, Coins: []bitcoin.Coin{coins[0].Coin},
		Payouts: []bitcoin.Payout{{Address: to, Amount: 10_000}}, FeeRate: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.SendRawTransaction(ctx, tx.Raw()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Generate(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if res, err := f.Sync(ctx); err != nil || res.Applied != 1 || res.Undone != 0 {
		t.Fatalf("sync after the payout: %+v, %v", res, err)
	}
	spent, _ := f.Coin(coins[0].OutPoint)
	if spent.SpentBy != tx.TxID().String() {
		t.Fatalf("the paid-from coin is spent by %q, want %s", spent.SpentBy, tx.TxID().String())
	}
	change, ok := f.Coin(wire.OutPoint{Hash: tx.MsgTx().TxHash(), Index: uint32(tx.ChangeIndex())})
	if !ok || change.Coinbase || change.Height != 102 || change.Value != 50*1e8-10_000-tx.Fee() {
		t.Fatalf("change coin %+v (found %v)", change, ok)
	}
	sameView(t, "after the payout", viewOf(f), fullScan(t, c, script))

	// Reorg: the block holding the payout is invalidated and a longer
	// chain mined; the payout returns to the mempool and is mined again.
	tipHash, err := c.BestBlockHash(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.InvalidateBlock(ctx, tipHash); err != nil {
		t.Fatal(err)
	}
	res, err = f.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Undone != 1 || res.Applied != 0 || res.Tip != 101 {
		t.Fatalf("sync after invalidateblock %+v", res)
	}
	if spent, _ := f.Coin(coins[0].OutPoint); spent.SpentBy != "" {
		t.Fatalf("the undone block's spend is still recorded: %+v", spent)
	}
	if _, ok := f.Coin(change.OutPoint); ok {
		t.Fatal("the undone block's change coin is still there")
	}
	sameView(t, "after invalidateblock", viewOf(f), fullScan(t, c, script))
	if _, err := c.Generate(ctx, 2); err != nil {
		t.Fatal(err)
	}
	res, err = f.Sync(ctx)
	if err != nil || res.Applied != 2 || res.Tip != 103 || res.TipHash == tipHash {
		t.Fatalf("sync after the competing chain %+v, %v", res, err)
	}
	view := viewOf(f)
	sameView(t, "after the reorg", view, fullScan(t, c, script))
	if spent := view[coins[0].OutPoint]; spent.SpentBy != tx.TxID().String() {
		t.Fatalf("the payout was not confirmed again on the new chain: %+v", spent)
	}
	heights := slices.Sorted(maps.Keys(func() map[int64]bool {
		m := map[int64]bool{}
		for _, co := range view {
			m[co.Height] = true
		}
		return m
	}()))
	if heights[len(heights)-1] != 103 {
		t.Fatalf("coin heights %v: the new chain's blocks are not all seen", heights)
	}
}

// A reorg deeper than the blocks kept is reported, not papered over.
func TestChainFollowerReorgTooDeep(t *testing.T) {
	ctx := context.Background()
	key := regtestKey(t)
	node := btcdtest.Start(t, key.Address().String())
	c := node.Client()
	hashes, err := c.Generate(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	f := newChainFollower(c, key.Address().PkScript(), 1, 2)
	if _, err := f.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.InvalidateBlock(ctx, hashes[1]); err != nil { // back to height 1
		t.Fatal(err)
	}
	if _, err := c.Generate(ctx, 6); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Sync(ctx); !errors.Is(err, ErrReorgTooDeep) {
		t.Fatalf("sync across a 4-block reorg keeping 2: %v, want ErrReorgTooDeep", err)
	}
}

// A node whose chain restarted below every block the follower keeps is
// behind, not reorganised: the view stays, and Sync says so until the
// node catches up.
func TestFollowerSeesANodeBehind(t *testing.T) {
	ctx := context.Background()
	key := regtestKey(t)
	node := btcdtest.Start(t, key.Address().String())
	c := node.Client()
	if _, err := c.Generate(ctx, 20); err != nil {
		t.Fatal(err)
	}
	f := newChainFollower(c, key.Address().PkScript(), 1, 5)
	if _, err := f.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	before := viewOf(f)
	if err := node.StopEmpty(); err != nil {
		t.Fatal(err)
	}
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Sync(ctx); !errors.Is(err, ErrNodeBehind) {
		t.Fatalf("sync against an emptied node: %v, want ErrNodeBehind", err)
	}
	sameView(t, "the view while the node is behind", viewOf(f), before)
}
