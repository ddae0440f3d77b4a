package nodepool_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/btcsuite/btcd/chaincfg/chainhash"
	"github.com/btcsuite/btcd/wire"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/stxfaucet/faucet-operator/hack/eventually"
	"github.com/stxfaucet/faucet-operator/server/btcfaucet"
	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
	"github.com/stxfaucet/faucet-operator/server/chain/btcnode"
	"github.com/stxfaucet/faucet-operator/server/chain/btcnode/btcdtest"
	"github.com/stxfaucet/faucet-operator/server/chain/nodepool"
	"github.com/stxfaucet/faucet-operator/server/chain/rpcclient"
	"github.com/stxfaucet/faucet-operator/server/internal/logtest"
)

// These tests run the Bitcoin pool against real btcd nodes on regtest.

var _ btcfaucet.FaucetNode = (*nodepool.BTCPool)(nil)

// btcPair is a btcd with 110 blocks paying key, and a second btcd that is
// not its peer and has mined 5 blocks of its own: the same genesis, far
// behind.
type btcPair struct {
	key         *bitcoin.PrivateKey
	ahead, held *btcdtest.Node
	pool        *nodepool.BTCPool
	logs        *logtest.Buffer
}

// newBTCPair pools the two nodes on clk (nil: the real clock).
func newBTCPair(t *testing.T, clk clock.WithTicker) *btcPair {
	t.Helper()
	if testing.Short() {
		t.Skip("runs two btcd nodes")
	}
	key, err := bitcoin.GeneratePrivateKey(bitcoin.Regtest)
	if err != nil {
		t.Fatal(err)
	}
	p := &btcPair{key: key, logs: &logtest.Buffer{}}
	p.ahead = btcdtest.Start(t, key.Address().String())
	p.held = btcdtest.Start(t, key.Address().String())
	ctx := context.Background()
	if _, err := p.ahead.Client().Generate(ctx, btcfaucet.CoinbaseMaturity+10); err != nil {
		t.Fatal(err)
	}
	if _, err := p.held.Client().Generate(ctx, 5); err != nil {
		t.Fatal(err)
	}
	p.pool, err = nodepool.NewBTC(nodepool.BTCConfig{
		Clients: []*btcnode.Client{p.held.Client(rpcclient.WithTimeout(time.Second)), p.ahead.Client(rpcclient.WithTimeout(time.Second))},
		Chains:  []btcnode.Chain{btcnode.ChainRegtest}, ProbeInterval: 20 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(p.logs, nil)), Clock: clk,
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A node far behind the best tip is out of rotation: every read comes
// from the node ahead, though the one behind is listed first; it says why
// in the status and the log.
func TestBTCNodeBehindServesNoRead(t *testing.T) {
	p := newBTCPair(t, nil)
	ctx := context.Background()
	p.pool.Probe(ctx)
	for range 20 {
		h, err := p.pool.BlockCount(ctx)
		if err != nil || h != btcfaucet.CoinbaseMaturity+10 {
			t.Fatalf("BlockCount = %d, %v: want the node ahead's %d", h, err, btcfaucet.CoinbaseMaturity+10)
		}
	}
	st := p.pool.Nodes()
	if st[0].State != "out" || !strings.Contains(st[0].Reason, "105 blocks behind") || st[1].State != "ready" {
		t.Fatalf("nodes: %+v", st)
	}
	if !strings.Contains(p.logs.String(), "bitcoin node left the rotation") {
		t.Errorf("no log line for the node behind:\n%s", p.logs)
	}
	if p.pool.Healthy() != 1 {
		t.Errorf("Healthy() = %d, want 1", p.pool.Healthy())
	}
}

// A broadcast that no node accepts answers with the verdict that matters:
// the node that already holds the transaction ("already have") wins over
// the node that does not know its inputs, so the payer counts it as sent
// instead of retiring it.
func TestBTCBroadcastPrefersAlreadyHave(t *testing.T) {
	p := newBTCPair(t, nil) // not probed: both nodes are tried
	ctx := context.Background()
	ahead := p.ahead.Client()
	raw := spendFirstCoinbase(t, ahead, p.key)
	txid, err := ahead.SendRawTransaction(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.pool.SendRawTransaction(ctx, raw)
	if !btcnode.IsAlreadyInMempool(err) {
		t.Fatalf("broadcast of a transaction one node holds and the other cannot place: %v, want btcd's 'already have transaction'", err)
	}
	st := p.pool.Nodes()
	if st[0].Refused != 1 || st[1].Refused != 1 {
		t.Errorf("refusals counted: %+v", st)
	}
	// Once the node behind is out of rotation, a resend goes to the node
	// ahead alone.
	p.pool.Probe(ctx)
	if _, err := p.pool.SendRawTransaction(ctx, raw); !btcnode.IsAlreadyInMempool(err) {
		t.Fatalf("resend: %v", err)
	}
	if st := p.pool.Nodes(); st[0].Refused != 1 || st[1].Refused != 2 {
		t.Errorf("the node out of rotation was sent to: %+v", st)
	}
	t.Logf("txid %s", txid)
}

// Stopped, the node ahead is out at the next probe round; the reads fail
// over, and it rejoins once it is back.
func TestBTCNodeRejoinsAfterARestart(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	p := newBTCPair(t, clk)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = p.pool.Run(ctx) }()
	// Time passes, a second at each look: the probe rounds and the
	// back-off of the node out of rotation are the fake clock's.
	until := func(within time.Duration, what string, state string) {
		t.Helper()
		eventually.True(t, within, what, func() bool { clk.Step(time.Second); return p.pool.Nodes()[1].State == state })
	}
	until(10*time.Second, "the node ahead is in rotation", "ready")
	if err := p.ahead.Stop(); err != nil {
		t.Fatal(err)
	}
	until(10*time.Second, "the stopped node leaves the rotation", "out")
	if err := p.ahead.Start(); err != nil {
		t.Fatal(err)
	}
	until(30*time.Second, "the node rejoins the rotation", "ready")
	if !strings.Contains(p.logs.String(), "bitcoin node rejoined the rotation") {
		t.Errorf("no rejoin log line:\n%s", p.logs)
	}
}

// spendFirstCoinbase signs a transaction of key spending the coinbase of
// block 1 (mature on a 110-block chain).
func spendFirstCoinbase(t *testing.T, c *btcnode.Client, key *bitcoin.PrivateKey) []byte {
	t.Helper()
	ctx := context.Background()
	hash, err := c.BlockHash(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Block(ctx, hash)
	if err != nil {
		t.Fatal(err)
	}
	cb := b.Txs[0]
	id, err := chainhash.NewHashFromStr(cb.TxID)
	if err != nil {
		t.Fatal(err)
	}
	to, err := bitcoin.GeneratePrivateKey(bitcoin.Regtest)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := bitcoin.BuildPayout(bitcoin.BuildParams{
		Key:           key,
		Coins:         []bitcoin.Coin{{OutPoint: *wire.NewOutPoint(id, 0), Value: cb.Vout[0].Value, PkScript: key.Address().PkScript()}},
		Payouts:       []bitcoin.Payout{{Address: to.Address(), Amount: 10_000}},
		ChangeAddress: key.Address(), FeeRate: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	return tx.Raw()
}
