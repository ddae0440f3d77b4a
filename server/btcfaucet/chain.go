// Package btcfaucet is the BTC dispensing engine: it knows the faucet's
// coins by following the chain itself (chain.go), not by asking the node
// for a wallet or an address index, which btcd and Bitcoin Core do not
// share. What the engine pays with, and how it places payouts, builds on
// this view.
package btcfaucet

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/btcsuite/btcd/chaincfg/chainhash"
	"github.com/btcsuite/btcd/wire"

	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
	"github.com/stxfaucet/faucet-operator/server/chain/btcnode"
)

// CoinbaseMaturity is how many confirmations a coinbase output needs
// before consensus lets it be spent.
const CoinbaseMaturity = 100

// DefaultReorgDepth is how many recent blocks the follower can undo: far
// deeper than any reorg a test network sees, and cheap (a few outpoints
// per block).
const DefaultReorgDepth = 144

// ErrReorgTooDeep: the node's main chain left ours further back than the
// follower keeps blocks for; its view must be rebuilt from a rescan.
var ErrReorgTooDeep = errors.New("reorg deeper than the blocks kept")

// ErrNodeBehind: the node's chain is shorter than every block the follower
// keeps, as when a node restarted empty (btcd wipes a regtest chain) or is
// reindexing. The coins the view holds may not exist there; payouts wait
// until the node is back up to the view.
var ErrNodeBehind = errors.New("the Bitcoin node's chain is behind the faucet's view of it")

// BlockSource is what the follower reads from the node.
type BlockSource interface {
	BlockCount(ctx context.Context) (int64, error)
	BlockHash(ctx context.Context, height int64) (string, error)
	Block(ctx context.Context, hash string) (*btcnode.Block, error)
}

var _ BlockSource = (*btcnode.Client)(nil)

// ChainCoin is an output paying the faucet's script, as the main chain
// shows it.
type ChainCoin struct {
	bitcoin.Coin
	Height   int64 // the block that created it
	Coinbase bool
	// SpentBy is the txid of the main-chain transaction that spent it, ""
	// while it is unspent on chain; SpentHeight is that block's height.
	SpentBy     string
	SpentHeight int64
}

// Mature reports whether the coin may be spent in the block after tip.
func (c ChainCoin) Mature(tip int64) bool {
	return !c.Coinbase || tip-c.Height+1 >= CoinbaseMaturity
}

// blockDelta is what one applied block changed, kept so a reorg can undo
// it without reading the orphaned block again (btcd will not describe a
// block off its main chain).
type blockDelta struct {
	height int64
	hash   string
	added  []wire.OutPoint
	spent  []wire.OutPoint
}

// chainFollower tracks the outputs paying one script from a start height
// to the node's tip, block by block, undoing the blocks a reorg removes.
// Safe for concurrent use.
type chainFollower struct {
	src       BlockSource
	script    []byte
	scriptHex string // as the node describes outputs
	start     int64
	depth     int

	mu     sync.Mutex
	coins  map[wire.OutPoint]*ChainCoin
	blocks []blockDelta // applied blocks, oldest first, at most depth
	tip    int64        // height of the last applied block; start-1 before any
}

func newChainFollower(src BlockSource, script []byte, start int64, depth int) *chainFollower {
	if depth <= 0 {
		depth = DefaultReorgDepth
	}
	return &chainFollower{src: src, script: slices.Clone(script), scriptHex: hex.EncodeToString(script), start: start, depth: depth,
		coins: map[wire.OutPoint]*ChainCoin{}, tip: start - 1}
}

// SyncResult says what a Sync changed.
type SyncResult struct {
	Undone, Applied int
	Tip             int64
	TipHash         string
}

// Sync brings the view to the node's main chain: it undoes our blocks the
// node no longer has at their height, then applies the new ones in order.
// A failure part way leaves a consistent view at an earlier block; the
// next Sync continues from there.
func (f *chainFollower) Sync(ctx context.Context) (SyncResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var res SyncResult
	height, err := f.src.BlockCount(ctx)
	if err != nil {
		return res, fmt.Errorf("chain follower: %w", err)
	}
	if len(f.blocks) > 0 && height < f.blocks[0].height {
		// Shorter than every block kept: a node starting over (btcd wipes
		// a regtest chain at start; a reindexing node) rather than a reorg
		// anyone can prove. Keep the view until it is back up to it.
		return res, fmt.Errorf("chain follower: %w: its height %d is below the oldest block kept (%d); waiting for it to catch up", ErrNodeBehind, height, f.blocks[0].height)
	}
	// Undo from our tip down to the last block the node still has at its
	// height (a node whose chain got shorter counts as a reorg too).
	for len(f.blocks) > 0 {
		last := f.blocks[len(f.blocks)-1]
		if last.height <= height {
			hash, err := f.src.BlockHash(ctx, last.height)
			if err != nil {
				return res, fmt.Errorf("chain follower: %w", err)
			}
			if hash == last.hash {
				break
			}
		}
		f.undo(last)
		res.Undone++
	}
	if len(f.blocks) == 0 && f.tip >= f.start {
		// Every kept block was undone and the fork is older still.
		return res, fmt.Errorf("chain follower: %w (%d blocks)", ErrReorgTooDeep, f.depth)
	}
	prev := ""
	if n := len(f.blocks); n > 0 {
		prev = f.blocks[n-1].hash
	}
	for h := f.tip + 1; h <= height; h++ {
		hash, err := f.src.BlockHash(ctx, h)
		if err != nil {
			return res, fmt.Errorf("chain follower: %w", err)
		}
		b, err := f.src.Block(ctx, hash)
		if err != nil {
			return res, fmt.Errorf("chain follower: %w", err)
		}
		if prev != "" && b.PreviousHash != prev {
			// The node reorganised while we read: the next Sync undoes.
			break
		}
		if err := f.apply(b, h); err != nil {
			return res, err
		}
		prev = b.Hash
		res.Applied++
	}
	res.Tip = f.tip
	if n := len(f.blocks); n > 0 {
		res.TipHash = f.blocks[n-1].hash
	}
	return res, nil
}

// apply records block b at height: outputs paying the script become
// coins, inputs spending our coins mark them spent. A coin created and
// spent in the same block is seen in that order (block order).
func (f *chainFollower) apply(b *btcnode.Block, height int64) error {
	d := blockDelta{height: height, hash: b.Hash}
	for i, tx := range b.Txs {
		for _, in := range tx.Vin {
			if in.IsCoinbase() {
				continue
			}
			op, err := outPoint(in.TxID, in.Vout)
			if err != nil {
				return fmt.Errorf("chain follower: block %s: %w", b.Hash, err)
			}
			if c, ok := f.coins[op]; ok && c.SpentBy == "" {
				c.SpentBy, c.SpentHeight = tx.TxID, height
				d.spent = append(d.spent, op)
			}
		}
		for _, out := range tx.Vout {
			if out.ScriptPubKey != f.scriptHex {
				continue
			}
			op, err := outPoint(tx.TxID, out.N)
			if err != nil {
				return fmt.Errorf("chain follower: block %s: %w", b.Hash, err)
			}
			f.coins[op] = &ChainCoin{Coin: bitcoin.Coin{OutPoint: op, Value: out.Value, PkScript: slices.Clone(f.script)},
				Height: height, Coinbase: i == 0}
			d.added = append(d.added, op)
		}
	}
	f.blocks = append(f.blocks, d)
	if len(f.blocks) > f.depth {
		f.blocks = f.blocks[len(f.blocks)-f.depth:]
		// Coins spent deeper than any reorg the follower can undo are
		// history: dropped, so the view grows with the coins held, not
		// with every payout ever made.
		for op, c := range f.coins {
			if c.SpentBy != "" && c.SpentHeight < f.blocks[0].height {
				delete(f.coins, op)
			}
		}
	}
	f.tip = height
	return nil
}

// undo reverts the last applied block.
func (f *chainFollower) undo(d blockDelta) {
	for _, op := range d.spent {
		if c, ok := f.coins[op]; ok {
			c.SpentBy, c.SpentHeight = "", 0
		}
	}
	for _, op := range d.added {
		delete(f.coins, op)
	}
	f.blocks = f.blocks[:len(f.blocks)-1]
	f.tip = d.height - 1
}

// Coins lists the coins unspent on chain, oldest first (then by txid and
// index), each a copy.
func (f *chainFollower) Coins() []ChainCoin {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]ChainCoin, 0, len(f.coins))
	for _, c := range f.coins {
		if c.SpentBy == "" {
			out = append(out, *c)
		}
	}
	slices.SortFunc(out, func(a, b ChainCoin) int {
		if a.Height != b.Height {
			return int(a.Height - b.Height)
		}
		if c := slices.Compare(a.OutPoint.Hash[:], b.OutPoint.Hash[:]); c != 0 {
			return c
		}
		return int(a.OutPoint.Index) - int(b.OutPoint.Index)
	})
	return out
}

// Coin returns the coin at op, spent or not.
func (f *chainFollower) Coin(op wire.OutPoint) (ChainCoin, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.coins[op]
	if !ok {
		return ChainCoin{}, false
	}
	return *c, true
}

// Depth is how many blocks the follower keeps: a coin spent deeper is
// forgotten.
func (f *chainFollower) Depth() int64 { return int64(f.depth) }

// Tip is the height of the last applied block.
func (f *chainFollower) Tip() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tip
}

func outPoint(txid string, vout uint32) (wire.OutPoint, error) {
	h, err := chainhash.NewHashFromStr(txid)
	if err != nil {
		return wire.OutPoint{}, fmt.Errorf("txid %q: %w", txid, err)
	}
	return wire.OutPoint{Hash: *h, Index: vout}, nil
}
