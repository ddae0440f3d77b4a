package devnode

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// frontEnd serves a new front end of n and returns it with a client.
func frontEnd(t *testing.T, n *Node) (*FrontEnd, *node.Client) {
	t.Helper()
	fe := n.FrontEnd()
	srv := httptest.NewServer(fe.Handler())
	t.Cleanup(srv.Close)
	c, err := node.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return fe, c
}

// A front end held behind answers /v2/info, accounts and mined txs as of
// its older tip while the chain and the other front ends move on.
func TestFrontEndHeldBehind(t *testing.T) {
	ctx := context.Background()
	alice, bob := newWallet(t), newWallet(t)
	h := newHarness(t, Config{Genesis: map[stacks.Address]uint64{alice.addr: 1_000_000}})
	fe, behind := frontEnd(t, h.n)
	for range 3 {
		h.n.Mine()
	}
	fe.HoldBehind(2)
	txid := h.mustAccept(alice.send(t, bob.principal(), 1000, 0, 300, ""))
	h.n.Mine() // tip 4: the transfer is mined here

	info, err := behind.Info(ctx)
	if err != nil || info.StacksTipHeight != 2 {
		t.Fatalf("held-back info: %+v, %v; want tip 2", info, err)
	}
	if tipBlock := h.n.chain.headers[2]; info.StacksTip != tipBlock.Hash || info.BurnBlockHeight != tipBlock.BurnHeight {
		t.Errorf("held-back tip %s at burn %d, want block 2's %s at %d", info.StacksTip, info.BurnBlockHeight, tipBlock.Hash, tipBlock.BurnHeight)
	}
	if a, err := behind.Account(ctx, alice.addr.String()); err != nil || a.Nonce != 0 || a.Balance != 1_000_000 {
		t.Errorf("held-back account: %+v, %v; want the state before the transfer", a, err)
	}
	if _, err := behind.Transaction(ctx, txid.String()); !errors.Is(err, node.ErrTxNotFound) {
		t.Errorf("a tx mined above the held tip: %v, want not found", err)
	}
	if a, err := h.c.Account(ctx, alice.addr.String()); err != nil || a.Nonce != 1 || a.Balance != 1_000_000-1300 {
		t.Errorf("the node's own front end: %+v, %v", a, err)
	}

	fe.HoldBehind(0)
	if info, err := behind.Info(ctx); err != nil || info.StacksTipHeight != 4 {
		t.Errorf("caught up: %+v, %v", info, err)
	}
	if got := fe.Served(node.CallInfo); got != 2 {
		t.Errorf("served %d info reads, want 2", got)
	}
}

// A front end that drops broadcasts answers them as the node would, but the
// chain never sees them; a stopped one answers nothing; a hung one holds
// the request until the client gives up.
func TestFrontEndFaults(t *testing.T) {
	ctx := context.Background()
	alice, bob := newWallet(t), newWallet(t)
	h := newHarness(t, Config{Genesis: map[stacks.Address]uint64{alice.addr: 1_000_000}})
	fe, c := frontEnd(t, h.n)

	fe.DropBroadcasts(true)
	tx := alice.send(t, bob.principal(), 1000, 0, 300, "")
	if txid, err := c.Broadcast(ctx, tx.Serialize()); err != nil || txid != tx.TxID().String() {
		t.Fatalf("dropped broadcast answered %q, %v", txid, err)
	}
	if h.n.MempoolSize() != 0 {
		t.Error("a dropped broadcast reached the mempool")
	}
	var rej *node.RejectionError
	if _, err := c.Broadcast(ctx, alice.send(t, bob.principal(), 1000, 0, 1, "").Serialize()); !errors.As(err, &rej) || rej.Reason != node.ReasonFeeTooLow {
		t.Errorf("a bad tx through the dropping front end: %v, want its rejection", err)
	}
	fe.DropBroadcasts(false)
	if _, err := c.Broadcast(ctx, tx.Serialize()); err != nil || h.n.MempoolSize() != 1 {
		t.Errorf("after the fault: %v, mempool %d", err, h.n.MempoolSize())
	}

	fe.Stop()
	if _, err := c.Info(ctx); !node.IsUnavailable(err) {
		t.Errorf("stopped: %v", err)
	}
	if _, err := h.c.Info(ctx); err != nil {
		t.Errorf("the node's own front end while another is stopped: %v", err)
	}
	fe.Start()

	fe.Hang(true)
	const giveUp = 300 * time.Millisecond
	hungCtx, cancel := context.WithTimeout(ctx, giveUp)
	defer cancel()
	start := time.Now()
	if _, err := c.Info(hungCtx); !node.IsUnavailable(err) || time.Since(start) < giveUp {
		t.Errorf("hung: %v after %s", err, time.Since(start))
	}
	fe.Hang(false)
	if _, err := c.Info(ctx); err != nil {
		t.Errorf("released: %v", err)
	}
}
