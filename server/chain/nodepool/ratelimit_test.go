package nodepool_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/stxfaucet/faucet-operator/server/chain/devnode"
	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/nodepool"
	"github.com/stxfaucet/faucet-operator/server/chain/rpcclient"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// A lone node whose tip the faucet read since the last probe round is not
// probed again: its own poll reads the same /v2/info. Several nodes are
// all probed, so a round compares their tips.
func TestLoneNodeReadIsNotProbedAgain(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Now())
	c := newChain(t, 1, nodepool.Config{Clock: clk})
	c.pool.Probe(ctx)
	if got := c.pool.Due(); got != 1 {
		t.Fatalf("first round: %d due, want 1", got)
	}
	clk.Step(time.Second)
	if _, err := c.pool.Info(ctx); err != nil {
		t.Fatal(err)
	}
	if got := c.pool.Due(); got != 0 {
		t.Errorf("after a read of the tip: %d due, want 0", got)
	}
	clk.Step(time.Second)
	if got := c.pool.Due(); got != 1 {
		t.Errorf("a round with no read since the last: %d due, want 1", got)
	}

	two := newChain(t, 2, nodepool.Config{Clock: clk})
	two.pool.Probe(ctx)
	_ = two.pool.Due()
	if _, err := two.pool.Info(ctx); err != nil {
		t.Fatal(err)
	}
	if got := two.pool.Due(); got != 2 {
		t.Errorf("two nodes after a read: %d due, want 2", got)
	}
}

// gateway answers 429 with Retry-After while limited, as a rate-limited
// public API does, and passes requests to the node otherwise.
type gateway struct {
	limited         atomic.Bool
	passed, refused atomic.Int64
	url             string
}

func serveGateway(t *testing.T, fe *devnode.FrontEnd) *gateway {
	t.Helper()
	g := &gateway{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.limited.Load() {
			g.refused.Add(1)
			w.Header().Set("Retry-After", "20")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		g.passed.Add(1)
		fe.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	g.url = srv.URL
	return g
}

// A node that answers 429 leaves the rotation ("rate limits the faucet")
// and is sent nothing until its Retry-After has passed; reads go to the
// other node meanwhile. Once the wait is over a probe brings it back.
func TestRateLimitedNodeIsWaitedOut(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Now())
	key, err := stacks.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	dn := devnode.New(devnode.Config{Seed: 1, Genesis: map[stacks.Address]uint64{key.TestnetAddress(): 1_000_000}})
	limitedGW, plain := serveGateway(t, dn.FrontEnd()), serveGateway(t, dn.FrontEnd())
	var clients []*node.Client
	for _, u := range []string{limitedGW.url, plain.url} {
		cl, err := node.New(u, rpcclient.WithTimeout(time.Second), rpcclient.WithClock(clk))
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, cl)
	}
	pool, err := nodepool.New(nodepool.Config{Clients: clients, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	pool.Probe(ctx)
	limitedGW.limited.Store(true)
	pool.Probe(ctx)
	if s := pool.Nodes()[0]; s.State != "out" || s.Reason != "rate limits the faucet (HTTP 429)" {
		t.Fatalf("the limited node after a probe: %+v", s)
	}
	for range 5 {
		if _, err := pool.Account(ctx, key.TestnetAddress().String()); err != nil {
			t.Fatalf("read with one node limited: %v", err)
		}
		pool.Probe(ctx)
	}
	if n := limitedGW.refused.Load(); n != 1 {
		t.Errorf("the limited node was asked %d times during its wait, want once", n)
	}
	limitedGW.limited.Store(false)
	clk.Step(20 * time.Second)
	pool.Probe(ctx)
	if s := pool.Nodes()[0]; s.State != "ready" {
		t.Errorf("the node after its wait: %+v", s)
	}

	// A lone node's 429 is the caller's error, with the wait it asked for.
	lone, err := nodepool.New(nodepool.Config{Clients: clients[:1], Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	limitedGW.limited.Store(true)
	_, err = lone.Info(ctx)
	var he *node.HTTPError
	if !errors.As(err, &he) || he.StatusCode != http.StatusTooManyRequests || node.RetryAfter(err) != 20*time.Second {
		t.Fatalf("lone node's 429: %v", err)
	}
	clk.Step(5 * time.Second)
	_, err = lone.Info(ctx)
	if _, ok := errors.AsType[*node.ThrottledError](err); !ok || node.RetryAfter(err) != 15*time.Second || !node.IsUnavailable(err) {
		t.Fatalf("lone node during its wait: %v", err)
	}
}
