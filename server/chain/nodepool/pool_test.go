package nodepool_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/stxfaucet/faucet-operator/hack/eventually"
	"github.com/stxfaucet/faucet-operator/server/chain/devnode"
	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/nodepool"
	"github.com/stxfaucet/faucet-operator/server/chain/rpcclient"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/internal/logtest"
)

// These tests run the pool against several RPC front ends of one simulated
// chain, over real HTTP.

type chain struct {
	n    *devnode.Node
	fes  []*devnode.FrontEnd
	urls []string
	pool *nodepool.Pool
	logs *logtest.Buffer
	from *stacks.PrivateKey // funded
}

// newChain serves frontEnds front ends of one devnode and pools them.
func newChain(t *testing.T, frontEnds int, cfg nodepool.Config) *chain {
	t.Helper()
	key, err := stacks.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	c := &chain{logs: &logtest.Buffer{}, from: key}
	c.n = devnode.New(devnode.Config{Seed: 1, Genesis: map[stacks.Address]uint64{key.TestnetAddress(): 1_000_000_000}})
	for range frontEnds {
		fe := c.n.FrontEnd()
		srv := httptest.NewServer(fe.Handler())
		t.Cleanup(srv.Close)
		c.fes, c.urls = append(c.fes, fe), append(c.urls, srv.URL)
	}
	cfg.Clients = clients(t, c.urls...)
	cfg.Logger = slog.New(slog.NewTextHandler(c.logs, nil))
	if c.pool, err = nodepool.New(cfg); err != nil {
		t.Fatal(err)
	}
	return c
}

func clients(t *testing.T, urls ...string) []*node.Client {
	t.Helper()
	var out []*node.Client
	for _, u := range urls {
		c, err := node.New(u, rpcclient.WithTimeout(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	return out
}

// transfer signs a transfer of the funded key at nonce.
func (c *chain) transfer(t *testing.T, nonce, fee uint64) *stacks.Transaction {
	t.Helper()
	to, _ := stacks.ParsePrincipal("ST2ZRX0K27GW0SP3GJCEMHD95TQGJMKB7G9Y0X1MH")
	tx, err := stacks.NewTokenTransfer(stacks.TransferParams{Recipient: to, Amount: 1000, Nonce: nonce, Fee: fee}, c.from)
	if err != nil {
		t.Fatal(err)
	}
	return tx
}

func (c *chain) state(i int) nodepool.NodeStatus { return c.pool.Nodes()[i] }

// A node held ten blocks behind leaves the rotation on its first probe and
// serves no read; the tip the pool shows is the chain's.
func TestNodeHeldBehindServesNoRead(t *testing.T) {
	ctx := context.Background()
	c := newChain(t, 2, nodepool.Config{})
	for range 12 {
		c.n.Mine()
	}
	c.fes[0].HoldBehind(10) // the first listed, so preferred among equals
	c.pool.Probe(ctx)
	if s := c.state(0); s.State != "out" || s.Lag != 10 || !strings.Contains(s.Reason, "10 blocks behind") {
		t.Fatalf("held-back node: %+v", s)
	}
	for range 20 {
		info, err := c.pool.Info(ctx)
		if err != nil || info.StacksTipHeight != 12 {
			t.Fatalf("info %+v, %v; want tip 12", info, err)
		}
		if _, err := c.pool.Account(ctx, c.from.TestnetAddress().String()); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.fes[0].Served(node.CallAccount); got != 0 {
		t.Errorf("the node held behind served %d account reads", got)
	}
	if got := c.fes[0].Served(node.CallInfo); got != 1 {
		t.Errorf("the node held behind served %d info reads, want the probe's one", got)
	}
	c.fes[0].HoldBehind(1)
	c.pool.Probe(ctx)
	if s := c.state(0); s.State != "ready" || s.Lag != 1 {
		t.Errorf("a node one block behind: %+v, want back in rotation", s)
	}
}

// lb alternates between two handlers, as a load balancer over a fresh and
// a stale node does.
type lb struct {
	n        atomic.Uint64
	backends [2]http.Handler
}

func (l *lb) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	l.backends[l.n.Add(1)%2].ServeHTTP(w, r)
}

// Behind a load balancer that flips between a node at the tip and one
// three blocks behind, the tip the pool answers never goes back.
func TestTipNeverGoesBack(t *testing.T) {
	ctx := context.Background()
	dn := devnode.New(devnode.Config{Seed: 1})
	stale := dn.FrontEnd()
	stale.HoldBehind(3)
	srv := httptest.NewServer(&lb{backends: [2]http.Handler{dn.Handler(), stale.Handler()}})
	t.Cleanup(srv.Close)
	pool, err := nodepool.New(nodepool.Config{Clients: clients(t, srv.URL)})
	if err != nil {
		t.Fatal(err)
	}
	var last uint64
	sawStale := false
	for i := range 40 {
		if i%3 == 0 {
			dn.Mine()
		}
		info, err := pool.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.StacksTipHeight < last {
			t.Fatalf("read %d: tip %d after %d", i, info.StacksTipHeight, last)
		}
		last = info.StacksTipHeight
		sawStale = sawStale || stale.Served(node.CallInfo) > 0
	}
	if !sawStale || last != dn.Tip().Height {
		t.Errorf("stale backend used: %v; last tip %d, chain %d", sawStale, last, dn.Tip().Height)
	}
}

// A stopped node costs no read and no broadcast: the next node answers,
// the stopped one leaves the rotation, and rejoins once it answers again.
func TestFailoverWhenANodeStops(t *testing.T) {
	ctx := context.Background()
	c := newChain(t, 2, nodepool.Config{})
	c.pool.Probe(ctx)
	c.fes[0].Stop()
	for nonce := range uint64(5) {
		if _, err := c.pool.Info(ctx); err != nil {
			t.Fatalf("info with one node stopped: %v", err)
		}
		tx := c.transfer(t, nonce, 300)
		if txid, err := c.pool.Broadcast(ctx, tx.Serialize()); err != nil || txid != tx.TxID().String() {
			t.Fatalf("broadcast with one node stopped: %q, %v", txid, err)
		}
	}
	if c.n.MempoolSize() != 5 {
		t.Errorf("mempool holds %d, want 5", c.n.MempoolSize())
	}
	if s := c.state(0); s.State != "out" || s.Reason != "unreachable" {
		t.Errorf("stopped node: %+v", s)
	}
	if c.pool.Healthy() != 1 {
		t.Errorf("healthy %d, want 1", c.pool.Healthy())
	}
	c.fes[0].Start()
	c.pool.Probe(ctx)
	if s := c.state(0); s.State != "ready" {
		t.Errorf("restarted node: %+v", s)
	}
	logs := c.logs.String()
	for _, want := range []string{"stacks node left the rotation", "stacks node rejoined the rotation", c.urls[0]} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %q:\n%s", want, logs)
		}
	}
}

// A broadcast is refused only when no node accepts it, and then with the
// node's reason, even if another node did not answer.
func TestBroadcastRefusedOnlyWhenNoNodeAccepts(t *testing.T) {
	ctx := context.Background()
	c := newChain(t, 2, nodepool.Config{})
	c.pool.Probe(ctx)
	c.fes[1].Hang(true)
	defer c.fes[1].Hang(false)
	_, err := c.pool.Broadcast(ctx, c.transfer(t, 0, 1).Serialize())
	var rej *node.RejectionError
	if !errors.As(err, &rej) || rej.Reason != node.ReasonFeeTooLow {
		t.Fatalf("fee too low through two nodes, one hung: %v, want the rejection", err)
	}
	// One accepts (the replacement pays more), the other already holds a
	// transaction of that nonce: accepted.
	tx := c.transfer(t, 0, 300)
	if _, err := c.n.Submit(tx.Serialize()); err != nil {
		t.Fatal(err)
	}
	c.fes[1].Hang(false)
	c.pool.Probe(ctx)
	if txid, err := c.pool.Broadcast(ctx, tx.Serialize()); err != nil || txid != tx.TxID().String() {
		t.Errorf("a tx the node already holds: %q, %v", txid, err)
	}
	// The other node's answer lands after the call returned.
	_ = eventually.Wait(t, 5*time.Second, func() bool { n := c.pool.Nodes(); return n[0].Accepted+n[1].Accepted >= 2 })
	if n := c.pool.Nodes(); n[0].Accepted != 1 || n[1].Accepted != 1 || n[0].Refused != 1 || n[1].Unanswered != 1 {
		t.Errorf("broadcast counts %+v", n)
	}
}

// A transaction sent only through a node that silently drops it reaches
// the chain once another node is back: the pool finds that node lacks it
// and sends it again, without the engine's stuck-nonce repair.
func TestResendsToANodeThatLacksATransaction(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clk := clocktesting.NewFakeClock(time.Now())
	c := newChain(t, 2, nodepool.Config{Clock: clk, ProbeInterval: time.Second, ResendAfter: 2 * time.Second})
	c.pool.Probe(ctx)
	c.fes[0].Stop()
	c.fes[1].DropBroadcasts(true)
	tx := c.transfer(t, 0, 300)
	if _, err := c.pool.Broadcast(ctx, tx.Serialize()); err != nil {
		t.Fatal(err)
	}
	// The post to the stopped node ends after the call returned.
	_ = eventually.Wait(t, 5*time.Second, func() bool { return c.state(0).Unanswered != 0 })
	if c.n.MempoolSize() != 0 || c.state(0).Unanswered != 1 {
		t.Fatalf("the dropping node kept the tx, or the stopped one answered: %+v", c.pool.Nodes())
	}
	c.fes[0].Start()
	done := make(chan error, 1)
	go func() { done <- c.pool.Run(ctx) }()
	// Time passes, a probe interval at each look, until the node's back-off
	// and ResendAfter are over and a round re-sends the transaction.
	_ = eventually.Wait(t, 10*time.Second, func() bool {
		clk.Step(time.Second)
		return c.n.TxStatus(tx.TxID()).State == devnode.TxPending && c.state(0).Resent != 0
	})
	if st := c.n.TxStatus(tx.TxID()); st.State != devnode.TxPending {
		t.Fatalf("tx %s never reached the mempool", st.State)
	}
	c.n.Mine()
	if st := c.n.TxStatus(tx.TxID()); st.State != devnode.TxConfirmed {
		t.Errorf("after a block: %s", st.State)
	}
	if s := c.state(0); s.Resent != 1 {
		t.Errorf("node 0 resent %d, want 1", s.Resent)
	}
	cancel()
	if err := <-done; err != nil {
		t.Error(err)
	}
	if !strings.Contains(c.logs.String(), "sent a transaction again to a node that lacked it") {
		t.Error("no log line for the resend")
	}
}

// A node of another chain is out of rotation and named so.
func TestNodeOfAnotherChainIsOut(t *testing.T) {
	ctx := context.Background()
	c := newChain(t, 1, nodepool.Config{})
	other := devnode.New(devnode.Config{Seed: 1, ChainID: 0x80000001})
	srv := httptest.NewServer(other.Handler())
	t.Cleanup(srv.Close)
	pool, err := nodepool.New(nodepool.Config{ChainID: stacks.ChainIDTestnet, Clients: clients(t, c.urls[0], srv.URL)})
	if err != nil {
		t.Fatal(err)
	}
	pool.Probe(ctx)
	if s := pool.Nodes()[1]; s.State != "out" || !strings.Contains(s.Reason, "network_id 0x80000001") {
		t.Errorf("node of another chain: %+v", s)
	}
	if s := pool.Nodes()[0]; s.State != "ready" {
		t.Errorf("node of the chain: %+v", s)
	}
}

// One node is its own client: its failure is the caller's error, as is,
// and it is tried even while out of rotation.
func TestOneNodeIsItsClient(t *testing.T) {
	ctx := context.Background()
	c := newChain(t, 1, nodepool.Config{})
	c.fes[0].Stop()
	_, err := c.pool.Info(ctx)
	var te *node.TransportError
	if !errors.As(err, &te) || !node.IsUnavailable(err) {
		t.Fatalf("stopped lone node: %v (%T)", err, err)
	}
	c.fes[0].Start()
	if _, err := c.pool.Info(ctx); err != nil {
		t.Errorf("lone node back: %v", err)
	}
	if strings.Contains(c.logs.String(), "rotation") {
		t.Errorf("a lone node's outage is the engine's to log:\n%s", c.logs.String())
	}
	if _, err := nodepool.New(nodepool.Config{Clients: clients(t, c.urls[0], c.urls[0])}); err == nil {
		t.Error("a node listed twice was accepted")
	}
}

// A hung node costs a read no more than the hedge delay: the next node is
// asked too and answers; the next probe takes the hung one out.
func TestReadsAroundAHungNode(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Now())
	c := newChain(t, 2, nodepool.Config{Clock: clk})
	c.pool.Probe(ctx)
	c.fes[0].Hang(true)
	defer c.fes[0].Hang(false)
	// Well below the clients' own timeout: without the hedge every read
	// would wait for it and fail.
	rctx, cancel := context.WithTimeout(ctx, 800*time.Millisecond)
	defer cancel()
	read := make(chan error, 1)
	go func() {
		_, err := c.pool.Account(rctx, c.from.TestnetAddress().String())
		read <- err
	}()
	// The hedge delay passes once the read waits on it: a node of unknown
	// latency (the fake clock measured none) is given a second.
	eventually.True(t, 5*time.Second, "the read's hedge timer", clk.HasWaiters)
	clk.Step(time.Second)
	if err := <-read; err != nil {
		t.Fatalf("account read with the best node hung: %v", err)
	}
	if c.fes[1].Served(node.CallAccount) != 1 {
		t.Errorf("the healthy node served %d account reads, want 1", c.fes[1].Served(node.CallAccount))
	}
	c.pool.Probe(ctx)
	if s := c.state(0); s.State != "out" || s.Reason != "does not answer in time" {
		t.Errorf("hung node after a probe: %+v", s)
	}
	ictx, cancel2 := context.WithTimeout(ctx, 800*time.Millisecond)
	defer cancel2()
	if _, err := c.pool.Info(ictx); err != nil {
		t.Errorf("info with the hung node out: %v", err)
	}
}
