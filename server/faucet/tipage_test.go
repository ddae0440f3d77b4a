package faucet

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/stxfaucet/faucet-operator/server/chain/devnode"
	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/rpcclient"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// The tip's age runs on the engine's clock from the first successful
// poll, starts over at each block the poll sees, and keeps running while
// the node is down. The devnode mines only on Mine (no BlockTime), so the
// chain stands still unless the test moves it.
func TestTipAge(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	k, err := stacks.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	dn := devnode.New(devnode.Config{Genesis: map[stacks.Address]uint64{k.TestnetAddress(): 10_000_000_000}})
	srv := httptest.NewServer(dn.Handler())
	t.Cleanup(srv.Close)
	client, err := node.New(srv.URL, rpcclient.WithTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	f, err := New(Config{Keys: []*stacks.PrivateKey{k}, Node: client, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	wantAge := func(step string, want time.Duration) {
		t.Helper()
		if age, known := f.TipAge(); !known || age != want {
			t.Fatalf("%s: TipAge %s (known %v), want %s", step, age, known, want)
		}
	}

	if age, known := f.TipAge(); known {
		t.Fatalf("TipAge %s before any poll, want unknown", age)
	}
	dn.SetDown(true)
	if err := f.Sync(ctx); err == nil {
		t.Fatal("poll succeeded with the node down")
	}
	if _, known := f.TipAge(); known {
		t.Fatal("TipAge known after a failed poll only")
	}
	dn.SetDown(false)
	clk.Step(time.Hour) // the outage before the first read does not count
	mustSync(t, f)
	wantAge("first poll", 0)

	clk.Step(40 * time.Minute)
	mustSync(t, f)
	wantAge("no block for 40m", 40*time.Minute)

	dn.Mine()
	clk.Step(time.Second)
	mustSync(t, f)
	wantAge("the poll that sees a block", 0)

	clk.Step(3 * time.Minute)
	dn.SetDown(true)
	_ = f.Sync(ctx)
	clk.Step(2 * time.Minute)
	wantAge("node down", 5*time.Minute)
}

func mustSync(t *testing.T, f *Faucet) {
	t.Helper()
	if err := f.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A tip below the highest seen (a read from a node a block behind) is no
// progress, nor is the same tip; a chain that stays lower has restarted.
func TestTipWatchCountsARiseOrARestart(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	w := tipWatch{clk: clk}
	w.observe(10)
	clk.Step(time.Minute)
	w.observe(9)
	clk.Step(time.Minute)
	w.observe(10)
	if age, _ := w.age(); age != 2*time.Minute {
		t.Errorf("age %s after 10, 9, 10, want 2m", age)
	}
	w.observe(11)
	if age, _ := w.age(); age != 0 {
		t.Errorf("age %s after a rise, want 0", age)
	}
	// A chain reset: every read from now on is lower. Only once they have
	// stayed lower for chainRestartHold is it a new chain, whose blocks
	// then count.
	clk.Step(time.Minute)
	w.observe(2)
	clk.Step(chainRestartHold - time.Second)
	w.observe(3)
	if age, _ := w.age(); age != 2*time.Minute-time.Second {
		t.Errorf("age %s before the restart hold has passed, want it still counted from 11", age)
	}
	clk.Step(time.Second)
	w.observe(3)
	if age, _ := w.age(); age != 0 {
		t.Errorf("age %s once the lower chain held for %s, want 0", age, chainRestartHold)
	}
	clk.Step(time.Minute)
	w.observe(4)
	if age, _ := w.age(); age != 0 {
		t.Errorf("age %s after the restarted chain rose, want 0", age)
	}
}
