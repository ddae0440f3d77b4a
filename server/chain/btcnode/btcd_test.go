package btcnode_test

// Tests against a real btcd in regtest (btcdtest): what the client reads
// and how it classifies btcd's answers. They need bin/btcd (`make btcd`).

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/btcnode"
	"github.com/stxfaucet/faucet-operator/server/chain/btcnode/btcdtest"
)

const (
	coinbaseValue = 50 * 100_000_000 // regtest subsidy below height 150
	maturity      = 100              // blocks before a coinbase can be spent
)

func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return c
}

func startNode(t *testing.T) (*btcdtest.Node, *btcnode.Client, *testKey) {
	t.Helper()
	key := newTestKey(t)
	n := btcdtest.Start(t, key.addr)
	c := n.Client()
	return n, c, key
}

func generate(t *testing.T, c *btcnode.Client, n int) []string {
	t.Helper()
	hashes, err := c.Generate(ctx(t), n)
	if err != nil {
		t.Fatalf("generate %d: %v", n, err)
	}
	return hashes
}

// coinbaseCoin is the mining output of the block at hash.
func coinbaseCoin(t *testing.T, c *btcnode.Client, hash string) coin {
	t.Helper()
	b, err := c.Block(ctx(t), hash)
	if err != nil {
		t.Fatal(err)
	}
	cb := b.Txs[0]
	return coin{txid: cb.TxID, vout: 0, value: cb.Vout[0].Value}
}

func TestBtcdMinedBlocksReadBack(t *testing.T) {
	_, c, key := startNode(t)

	chain, err := c.RequireTestChain(ctx(t))
	if err != nil || chain != btcnode.ChainRegtest {
		t.Fatalf("RequireTestChain = %q, %v; want regtest", chain, err)
	}
	info, err := c.BlockchainInfo(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if info.ChainName != "regtest" || info.Blocks != 0 {
		t.Fatalf("fresh node: %+v", info)
	}
	genesis := info.BestBlockHash

	const n = maturity + 1
	hashes := generate(t, c, n)

	if h, err := c.BlockCount(ctx(t)); err != nil || h != n {
		t.Fatalf("BlockCount = %d, %v; want %d", h, err, n)
	}
	if tip, err := c.BestBlockHash(ctx(t)); err != nil || tip != hashes[n-1] {
		t.Fatalf("BestBlockHash = %s, %v; want %s", tip, err, hashes[n-1])
	}
	prev := genesis
	for i, want := range hashes {
		height := int64(i + 1)
		got, err := c.BlockHash(ctx(t), height)
		if err != nil || got != want {
			t.Fatalf("BlockHash(%d) = %s, %v; want %s", height, got, err, want)
		}
		b, err := c.Block(ctx(t), want)
		if err != nil {
			t.Fatalf("Block(%d): %v", height, err)
		}
		if b.Hash != want || b.Height != height || b.PreviousHash != prev || b.Confirmations != n-height+1 {
			t.Fatalf("block %d: hash %s height %d prev %s confirmations %d; want %s, %d, %s, %d",
				height, b.Hash, b.Height, b.PreviousHash, b.Confirmations, want, height, prev, n-height+1)
		}
		if h, err := c.BlockHeight(ctx(t), want); err != nil || h != height {
			t.Fatalf("BlockHeight(%s) = %d, %v; want %d", want, h, err, height)
		}
		if len(b.Txs) != 1 || len(b.Txs[0].Vin) != 1 || !b.Txs[0].Vin[0].IsCoinbase() {
			t.Fatalf("block %d: want only a coinbase, got %+v", height, b.Txs)
		}
		out := b.Txs[0].Vout[0]
		if out.Value != coinbaseValue || out.ScriptPubKey != key.scriptHex() || out.Address != key.addr || out.Type != "witness_v0_keyhash" {
			t.Fatalf("block %d coinbase output: %+v; want %d sat to %s (%s)", height, out, coinbaseValue, key.addr, key.scriptHex())
		}
		prev = want
	}

	// The raw block decodes (with btcd's own decoder) to the same block.
	raw, err := c.BlockRaw(ctx(t), hashes[0])
	if err != nil {
		t.Fatal(err)
	}
	if h, ntx := blockHash(t, raw); h != hashes[0] || ntx != 1 {
		t.Fatalf("raw block: hash %s with %d txs; want %s with 1", h, ntx, hashes[0])
	}

	// A confirmed coinbase through the transaction index.
	cb := coinbaseCoin(t, c, hashes[0])
	tx, err := c.RawTransaction(ctx(t), cb.txid)
	if err != nil {
		t.Fatal(err)
	}
	if tx.BlockHash != hashes[0] || tx.Confirmations != n || tx.Vout[0].Value != coinbaseValue {
		t.Fatalf("coinbase tx: block %s confirmations %d value %d; want %s, %d, %d",
			tx.BlockHash, tx.Confirmations, tx.Vout[0].Value, hashes[0], n, coinbaseValue)
	}

	// What is not there.
	_, err = c.BlockHash(ctx(t), n+1)
	if !errors.Is(err, btcnode.ErrHeightOutOfRange) {
		t.Fatalf("BlockHash above the tip: %v; want ErrHeightOutOfRange", err)
	}
	t.Logf("above the tip: %v", err)
	missing := strings.Repeat("ab", 32)
	if _, err = c.Block(ctx(t), missing); !errors.Is(err, btcnode.ErrBlockNotFound) {
		t.Fatalf("unknown block: %v; want ErrBlockNotFound", err)
	}
	if _, err = c.BlockHeight(ctx(t), missing); !errors.Is(err, btcnode.ErrBlockNotFound) {
		t.Fatalf("the height of an unknown block: %v; want ErrBlockNotFound", err)
	}
	if _, err = c.RawTransaction(ctx(t), missing); !errors.Is(err, btcnode.ErrTxNotFound) {
		t.Fatalf("unknown tx: %v; want ErrTxNotFound", err)
	}
	t.Logf("unknown tx: %v", err)
}

func TestBtcdReorgIsObserved(t *testing.T) {
	_, c, _ := startNode(t)
	hashes := generate(t, c, 5)
	oldTip := hashes[4]

	// Invalidate the tip: the node falls back one block.
	if err := c.InvalidateBlock(ctx(t), oldTip); err != nil {
		t.Fatal(err)
	}
	if tip, _ := c.BestBlockHash(ctx(t)); tip != hashes[3] {
		t.Fatalf("after invalidateblock the tip is %s, want its parent %s", tip, hashes[3])
	}
	// Reconsider it: back to the old tip.
	if err := c.ReconsiderBlock(ctx(t), oldTip); err != nil {
		t.Fatal(err)
	}
	if tip, _ := c.BestBlockHash(ctx(t)); tip != oldTip {
		t.Fatalf("after reconsiderblock the tip is %s, want %s", tip, oldTip)
	}

	// A competing chain: invalidate the tip and mine two blocks on its
	// parent. btcd randomises the coinbase's extra nonce, so the new block
	// at height 5 differs from the invalidated one.
	if err := c.InvalidateBlock(ctx(t), oldTip); err != nil {
		t.Fatal(err)
	}
	fork := generate(t, c, 2)
	if fork[0] == oldTip {
		t.Fatal("the competing block at height 5 is the invalidated block")
	}
	b, err := c.Block(ctx(t), fork[0])
	if err != nil || b.Height != 5 || b.PreviousHash != hashes[3] {
		t.Fatalf("competing block: %+v, %v; want height 5 on %s", b, err, hashes[3])
	}
	if h, _ := c.BlockHash(ctx(t), 5); h != fork[0] {
		t.Fatalf("height 5 is %s, want the competing %s", h, fork[0])
	}
	// Reconsidering the old tip does not switch back: the fork has more work.
	if err := c.ReconsiderBlock(ctx(t), oldTip); err != nil {
		t.Fatal(err)
	}
	if tip, _ := c.BestBlockHash(ctx(t)); tip != fork[1] {
		t.Fatalf("tip %s, want the longer fork's %s", tip, fork[1])
	}

	// The stale block: btcd will not describe it verbosely, but serves it raw.
	_, err = c.Block(ctx(t), oldTip)
	if !errors.Is(err, btcnode.ErrNotInMainChain) {
		t.Fatalf("verbose getblock of a stale block: %v; want ErrNotInMainChain", err)
	}
	t.Logf("stale block, verbose: %v", err)
	raw, err := c.BlockRaw(ctx(t), oldTip)
	if err != nil {
		t.Fatalf("raw getblock of a stale block: %v", err)
	}
	if h, _ := blockHash(t, raw); h != oldTip {
		t.Fatalf("raw stale block hashes to %s, want %s", h, oldTip)
	}

	// Invalidating the fork's first block reorganises back to the old chain.
	if err := c.InvalidateBlock(ctx(t), fork[0]); err != nil {
		t.Fatal(err)
	}
	if tip, _ := c.BestBlockHash(ctx(t)); tip != oldTip {
		t.Fatalf("tip %s, want the old chain's %s back", tip, oldTip)
	}
	if h, _ := c.BlockCount(ctx(t)); h != 5 {
		t.Fatalf("height %d, want 5", h)
	}
}

func TestBtcdSendRawTransaction(t *testing.T) {
	_, c, key := startNode(t)
	hashes := generate(t, c, maturity+2)
	dest := newTestKey(t)

	// A valid spend of the mature coinbase of block 1.
	cb := coinbaseCoin(t, c, hashes[0])
	const fee = 2000
	raw, wantID := key.spend(t, cb,
		payment{dest.pkScript, 100_000_000},
		payment{key.pkScript, cb.value - 100_000_000 - fee})
	txid, err := c.SendRawTransaction(ctx(t), raw)
	if err != nil || txid != wantID {
		t.Fatalf("SendRawTransaction = %s, %v; want %s", txid, err, wantID)
	}
	pool, err := c.RawMempool(ctx(t))
	if err != nil || !slices.Contains(pool, txid) {
		t.Fatalf("mempool %v, %v; want it to hold %s", pool, err, txid)
	}
	tx, err := c.RawTransaction(ctx(t), txid)
	if err != nil || tx.Confirmations != 0 || tx.BlockHash != "" || tx.Vin[0].TxID != cb.txid || tx.Vout[0].ScriptPubKey != dest.scriptHex() {
		t.Fatalf("mempool tx: %+v, %v", tx, err)
	}

	// The same transaction again, while it waits in the mempool.
	_, err = c.SendRawTransaction(ctx(t), raw)
	if !btcnode.IsAlreadyInMempool(err) {
		t.Fatalf("resend from the mempool: %v; want IsAlreadyInMempool", err)
	}
	t.Logf("resend, in mempool: %v", err)

	// A double spend of the same coin, not signalling replacement.
	dbl, _ := key.spend(t, cb, payment{key.pkScript, cb.value - 5*fee})
	_, err = c.SendRawTransaction(ctx(t), dbl)
	if !btcnode.IsMempoolConflict(err) || !btcnode.IsRejected(err) {
		t.Fatalf("double spend against the mempool: %v; want IsMempoolConflict", err)
	}
	t.Logf("double spend, mempool: %v", err)

	// Mined: the resend is already in the chain, the double spend now
	// spends a coin that is gone.
	mined := generate(t, c, 1)
	tx, err = c.RawTransaction(ctx(t), txid)
	if err != nil || tx.Confirmations != 1 || tx.BlockHash != mined[0] {
		t.Fatalf("mined tx: %+v, %v; want 1 confirmation in %s", tx, err, mined[0])
	}
	_, err = c.SendRawTransaction(ctx(t), raw)
	if !btcnode.IsAlreadyInChain(err) {
		t.Fatalf("resend once mined: %v; want IsAlreadyInChain", err)
	}
	t.Logf("resend, mined: %v", err)
	_, err = c.SendRawTransaction(ctx(t), dbl)
	if !btcnode.IsMissingInputs(err) {
		t.Fatalf("double spend of a mined coin: %v; want IsMissingInputs", err)
	}
	t.Logf("double spend, mined: %v", err)

	// A reorg that drops its block puts the transaction back in the mempool.
	if err := c.InvalidateBlock(ctx(t), mined[0]); err != nil {
		t.Fatal(err)
	}
	tx, err = c.RawTransaction(ctx(t), txid)
	if err != nil || tx.Confirmations != 0 || tx.BlockHash != "" {
		t.Fatalf("after its block was invalidated: %+v, %v; want it unconfirmed", tx, err)
	}
	if pool, err := c.RawMempool(ctx(t)); err != nil || !slices.Contains(pool, txid) {
		t.Fatalf("mempool %v, %v; want %s back in it", pool, err, txid)
	}
}

// The harness's policy flags make btcd refuse what Core and signet nodes
// refuse: free transactions and dust.
func TestBtcdPolicyLikeCore(t *testing.T) {
	_, c, key := startNode(t)
	hashes := generate(t, c, maturity+2)

	free, _ := key.spend(t, coinbaseCoin(t, c, hashes[0]), payment{key.pkScript, coinbaseValue})
	_, err := c.SendRawTransaction(ctx(t), free)
	if !btcnode.IsInsufficientFee(err) {
		t.Fatalf("zero-fee spend of an old coin: %v; want IsInsufficientFee", err)
	}
	t.Logf("zero fee: %v", err)

	dust, _ := key.spend(t, coinbaseCoin(t, c, hashes[1]),
		payment{key.pkScript, 100}, payment{key.pkScript, coinbaseValue - 100 - 2000})
	_, err = c.SendRawTransaction(ctx(t), dust)
	if !btcnode.IsRejected(err) || !strings.Contains(err.Error(), "dust") {
		t.Fatalf("a 100 sat output: %v; want a -26 dust rejection", err)
	}
	t.Logf("dust: %v", err)

	// An immature coinbase (block 102's) cannot be spent yet. btcd answers
	// every consensus-rule failure with -25 (Core: -26
	// "bad-txns-premature-spend-of-coinbase"); it must not read as spent.
	young, _ := key.spend(t, coinbaseCoin(t, c, hashes[len(hashes)-1]), payment{key.pkScript, coinbaseValue - 2000})
	_, err = c.SendRawTransaction(ctx(t), young)
	var re *btcnode.RPCError
	if !errors.As(err, &re) || re.Code != btcnode.CodeVerify || !strings.Contains(re.Message, "before required maturity") || btcnode.IsMissingInputs(err) {
		t.Fatalf("immature coinbase spend: %v; want -25 about maturity, not missing inputs", err)
	}
	t.Logf("immature: %v", err)
}

func TestBtcdNoFeeEstimate(t *testing.T) {
	_, c, _ := startNode(t)
	_, err := c.EstimateFee(ctx(t), 6)
	if !errors.Is(err, btcnode.ErrNoFeeEstimate) {
		t.Fatalf("fresh node: %v; want ErrNoFeeEstimate", err)
	}
	t.Logf("fresh: %v", err)
	// Blocks without transactions give btcd nothing to estimate from either.
	generate(t, c, 5)
	_, err = c.EstimateFee(ctx(t), 6)
	if !errors.Is(err, btcnode.ErrNoFeeEstimate) {
		t.Fatalf("after empty blocks: %v; want ErrNoFeeEstimate", err)
	}
	t.Logf("empty blocks: %v", err)
}

func TestBtcdMethodsItLacks(t *testing.T) {
	n, c, _ := startNode(t)
	err := c.Call(ctx(t), "estimatesmartfee", []any{6}, nil)
	if !btcnode.IsMethodNotFound(err) {
		t.Fatalf("estimatesmartfee on btcd: %v; want IsMethodNotFound", err)
	}
	_, err = c.GenerateToAddress(ctx(t), 1, n.MiningAddr())
	if !btcnode.IsMethodNotFound(err) {
		t.Fatalf("generatetoaddress on btcd: %v; want IsMethodNotFound", err)
	}
}

func TestBtcdWrongPassword(t *testing.T) {
	n, _, _ := startNode(t)
	const wrong = "not-the-password-4f2a"
	c, err := btcnode.New("http://" + n.User() + ":" + wrong + "@" + n.RPCAddr())
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.BlockCount(ctx(t))
	var ae *btcnode.AuthError
	if !errors.As(err, &ae) || ae.StatusCode != 401 || btcnode.IsUnavailable(err) {
		t.Fatalf("wrong password: %v; want a 401 AuthError, not unavailable", err)
	}
	for _, secret := range []string{wrong, n.Password()} {
		if strings.Contains(err.Error(), secret) {
			t.Fatalf("the error %q contains a password", err)
		}
	}
}

func TestBtcdDownIsUnavailableAndRestartKeepsTheChain(t *testing.T) {
	n, c, _ := startNode(t)
	hashes := generate(t, c, 3)
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	_, err := c.BlockCount(ctx(t))
	var te *btcnode.TransportError
	if !errors.As(err, &te) || !btcnode.IsUnavailable(err) {
		t.Fatalf("node down: %v; want an unavailable TransportError", err)
	}
	if strings.Contains(err.Error(), n.Password()) {
		t.Fatalf("the error %q contains the password", err)
	}
	t.Logf("down: %v", err)

	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	if tip, err := c.BestBlockHash(ctx(t)); err != nil || tip != hashes[2] {
		t.Fatalf("after a restart the tip is %s, %v; want %s", tip, err, hashes[2])
	}

	// A crash (SIGKILL) keeps the mined blocks too.
	more := generate(t, c, 2)
	if err := n.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	if tip, err := c.BestBlockHash(ctx(t)); err != nil || tip != more[1] {
		t.Fatalf("after a crash the tip is %s, %v; want %s", tip, err, more[1])
	}
}

// AddressBalance against btcd, which has no scantxoutset: the address
// index (--addrindex) adds up each address's confirmed history.
func TestBtcdAddressBalance(t *testing.T) {
	key := newTestKey(t)
	n := btcdtest.Start(t, key.addr, btcdtest.WithArgs("--addrindex"))
	c := n.Client()
	dest, unseen := newTestKey(t), newTestKey(t)

	balance := func(addr string) int64 {
		t.Helper()
		sats, err := c.AddressBalance(ctx(t), addr)
		if err != nil {
			t.Fatalf("AddressBalance(%s): %v", addr, err)
		}
		return sats
	}
	if got := balance(key.addr); got != 0 {
		t.Fatalf("before any block: %d sats, want 0", got)
	}

	hashes := generate(t, c, maturity+1)
	if got, want := balance(key.addr), int64((maturity+1)*coinbaseValue); got != want {
		t.Fatalf("after %d blocks: %d sats, want %d (immature coinbases count)", maturity+1, got, want)
	}

	// Pay 1 BTC of the first coinbase away, the change back, and mine it:
	// the fee returns to the key, which mines the block.
	cb := coinbaseCoin(t, c, hashes[0])
	const sent, fee = 100_000_000, 2000
	raw, _ := key.spend(t, cb, payment{dest.pkScript, sent}, payment{key.pkScript, cb.value - sent - fee})
	if _, err := c.SendRawTransaction(ctx(t), raw); err != nil {
		t.Fatal(err)
	}
	if got, want := balance(key.addr), int64((maturity+1)*coinbaseValue); got != want {
		t.Fatalf("with the spend in the mempool: %d sats, want the confirmed %d", got, want)
	}
	if got := balance(dest.addr); got != 0 {
		t.Fatalf("destination with the payment in the mempool: %d sats, want 0", got)
	}
	generate(t, c, 1)
	if got, want := balance(key.addr), int64((maturity+2)*coinbaseValue-sent); got != want {
		t.Fatalf("after the spend: %d sats, want %d", got, want)
	}
	if got := balance(dest.addr); got != sent {
		t.Fatalf("destination: %d sats, want %d", got, sent)
	}
	if got := balance(unseen.addr); got != 0 {
		t.Fatalf("an address btcd never saw: %d sats, want 0", got)
	}
}

func TestBtcdAddressBalanceWithoutAddrIndex(t *testing.T) {
	_, c, key := startNode(t)
	_, err := c.AddressBalance(ctx(t), key.addr)
	if !errors.Is(err, btcnode.ErrNoAddressIndex) || !strings.Contains(err.Error(), "--addrindex") {
		t.Fatalf("btcd without --addrindex: %v; want ErrNoAddressIndex", err)
	}
	t.Logf("without --addrindex: %v", err)
}
