package faucet

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/devnode"
	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/rpcclient"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// A node that goes silent (a network cut: no answer, no reset) is noticed
// at the next tip poll, which does not wait out the node client's timeout;
// from then on a drip is refused node_unavailable and readiness fails at
// once, instead of each waiting on the node. Once it answers, drips go on.
func TestSilentNodeRefusesAtOnce(t *testing.T) {
	key, err := stacks.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	dn := devnode.New(devnode.Config{Genesis: map[stacks.Address]uint64{key.TestnetAddress(): 1_000_000_000_000}})
	fe := dn.FrontEnd()
	srv := httptest.NewServer(fe.Handler())
	t.Cleanup(srv.Close)
	t.Cleanup(func() { fe.Hang(false) }) // before srv.Close: release what it holds
	// A client as patient as the default one (10 s) or more: the engine's
	// own bounds must cut the waits short.
	client, err := node.New(srv.URL, rpcclient.WithTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	f, err := New(Config{Keys: []*stacks.PrivateKey{key}, Node: client})
	if err != nil {
		t.Fatal(err)
	}
	// The bounds, shortened from their defaults (3 s, 2 s) for the test.
	f.poller.tipWait, f.chain.downWait = 200*time.Millisecond, 200*time.Millisecond
	ctx := context.Background()
	if err := f.Sync(ctx); err != nil {
		t.Fatal(err)
	}

	fe.Hang(true)
	start := time.Now()
	if err := f.Sync(ctx); err == nil {
		t.Fatal("a poll of a silent node succeeded")
	}
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := f.Drip(dctx, Request{Recipient: recipient(t)})
	if ReasonOf(err) != ReasonNodeUnavailable {
		t.Fatalf("drip with the node silent: %+v, %v; want node_unavailable", res, err)
	}
	if err := f.Ready(ctx); err == nil {
		t.Fatal("ready with the node silent")
	}
	// Each wait is the engine's bound (200 ms here), not the node client's
	// minute nor the shared read's 10 s.
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("poll, drip and readiness took %s with the node silent: they waited on it", took)
	}

	fe.Hang(false)
	if err := f.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Drip(ctx, Request{Recipient: recipient(t)}); err != nil {
		t.Fatalf("drip with the node back: %v", err)
	}
}
