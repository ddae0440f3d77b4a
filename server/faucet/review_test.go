package faucet

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stxfaucet/faucet-operator/server/chain/devnode"
	"github.com/stxfaucet/faucet-operator/server/chain/node"
)

// gatedAccount holds the first Account read it serves: it reads the node at
// once (so its answer is as of that moment) and returns it only when the
// gate opens, after later reads have been applied.
type gatedAccount struct {
	NodeClient
	once    sync.Once
	entered chan struct{}
	gate    chan struct{}
}

func (g *gatedAccount) Account(ctx context.Context, p string) (*node.Account, error) {
	first := false
	g.once.Do(func() { first = true })
	acct, err := g.NodeClient.Account(ctx, p)
	if first {
		close(g.entered)
		<-g.gate
	}
	return acct, err
}

// A stale account read that finishes after a newer one never moves the key
// back: its nonce stays at what the newer read saw, so no confirmed nonce is
// handed out again.
func TestStaleAccountReadIgnored(t *testing.T) {
	e := newEnv(t, 1, 100_000_000_000, devnode.Config{}, Config{})
	if _, err := e.f.Drip(context.Background(), Request{Recipient: recipient(t)}); err != nil {
		t.Fatal(err)
	}
	g := &gatedAccount{NodeClient: e.f.cfg.Node, entered: make(chan struct{}), gate: make(chan struct{})}
	e.f.setNode(g)
	k := e.f.pool.keys[0]
	done := make(chan error, 1)
	go func() { done <- e.f.accounts.syncKey(context.Background(), k) }() // reads nonce 0
	<-g.entered
	e.dn.Mine() // nonce 0 confirms
	if err := e.f.accounts.syncKey(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	if st := e.f.Keys()[0]; st.ConfirmedNonce != 1 {
		t.Fatalf("after the newer read: confirmed %d, want 1", st.ConfirmedNonce)
	}
	close(g.gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	st := e.f.Keys()[0]
	if st.ConfirmedNonce != 1 || st.NextNonce != 1 {
		t.Fatalf("stale read applied: %+v", st)
	}
	res, err := e.f.Drip(context.Background(), Request{Recipient: recipient(t)})
	if err != nil || res.Nonce != 1 {
		t.Fatalf("next drip: %+v, %v; want nonce 1", res, err)
	}
}

// countingBroadcast counts broadcasts.
type countingBroadcast struct {
	NodeClient
	n atomic.Int32
}

func (c *countingBroadcast) Broadcast(ctx context.Context, raw []byte) (string, error) {
	c.n.Add(1)
	return c.NodeClient.Broadcast(ctx, raw)
}

// Readiness reads accounts but never repairs: a key whose nonce looks stuck
// gets no rebroadcast from a probe.
func TestReadyDoesNotRepair(t *testing.T) {
	e := newEnv(t, 1, 100_000_000_000, devnode.Config{}, Config{Timing: Timing{StuckBlocks: 1}})
	// The node answers 200 but loses the tx; blocks pass without the nonce moving.
	e.dn.SetDropRate(1)
	if _, err := e.f.Drip(context.Background(), Request{Recipient: recipient(t)}); err != nil {
		t.Fatal(err)
	}
	cb := &countingBroadcast{NodeClient: e.f.cfg.Node}
	e.f.setNode(cb)
	k := e.f.pool.keys[0]
	k.mu.Lock()
	k.synced = false // as before the first poll, so Ready reads accounts
	k.lastAdvance = 0
	k.mu.Unlock()
	for range 3 {
		e.dn.Mine()
	}
	for range 5 {
		if err := e.f.Ready(context.Background()); err != nil {
			t.Fatalf("ready: %v", err)
		}
	}
	if n := cb.n.Load(); n != 0 {
		t.Fatalf("readiness caused %d broadcasts", n)
	}
	// The poll loop does repair it.
	if err := e.f.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := cb.n.Load(); n == 0 {
		t.Fatal("poll did not repair the stuck nonce")
	}
}
