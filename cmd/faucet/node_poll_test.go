package main

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/stxfaucet/faucet-operator/server/chain/nodepool"
	"github.com/stxfaucet/faucet-operator/server/faucet"
	"github.com/stxfaucet/faucet-operator/server/options"
)

// The poll cadences, from a flag or its FAUCET_ variable (the flag
// winning), reach the engine's timing and the Stacks node pool's probes;
// left alone they are the engine's and the pool's own defaults.
func TestNodePollFlagsReachTheEngineAndPool(t *testing.T) {
	clearServeEnv(t)
	log := slog.New(slog.DiscardHandler)
	cadences := func(o *options.Serve) (poll, busy, probe time.Duration) {
		t.Helper()
		cfg, err := engineConfig(o, clock.RealClock{}, nil, nil, nil, faucet.State{}, log)
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Timing.PollInterval, cfg.Timing.BusyPollInterval, stacksPoolConfig(&o.Node, nil, clock.RealClock{}, log).ProbeInterval
	}

	d := options.Defaults()
	if poll, busy, probe := cadences(&d); poll != faucet.DefaultPollInterval || busy != faucet.DefaultBusyPollInterval || probe != nodepool.DefaultProbeInterval {
		t.Errorf("defaults: engine polls %s, busy %s, pool probes %s; want %s, %s, %s", poll, busy, probe,
			faucet.DefaultPollInterval, faucet.DefaultBusyPollInterval, nodepool.DefaultProbeInterval)
	}

	t.Setenv("FAUCET_NODE_POLL_INTERVAL", "30s")
	t.Setenv("FAUCET_NODE_BUSY_POLL_INTERVAL", "5s")
	o := options.Defaults()
	if err := parseWithEnv(newServeFlags(&o), []string{"--node-busy-poll-interval=3s"}); err != nil {
		t.Fatal(err)
	}
	if poll, busy, probe := cadences(&o); poll != 30*time.Second || busy != 3*time.Second || probe != 30*time.Second {
		t.Errorf("FAUCET_NODE_POLL_INTERVAL=30s, FAUCET_NODE_BUSY_POLL_INTERVAL=5s, --node-busy-poll-interval=3s: "+
			"engine polls %s, busy %s, pool probes %s; want 30s, 3s (the flag wins), 30s", poll, busy, probe)
	}

	t.Setenv("FAUCET_NODE_POLL_INTERVAL", "30")
	o = options.Defaults()
	if err := parseWithEnv(newServeFlags(&o), nil); err == nil || !strings.Contains(err.Error(), "FAUCET_NODE_POLL_INTERVAL") {
		t.Errorf("FAUCET_NODE_POLL_INTERVAL=30: %v, want an error naming the variable", err)
	}
}

// serve refuses a busy cadence slower than the idle one before starting
// anything, from the command line or the environment.
func TestNodePollFlagsRefused(t *testing.T) {
	clearServeEnv(t)
	base := []string{"serve", "--devnet", "--listen", "127.0.0.1:0", "--log-format", "text"}
	err := run(context.Background(), clock.RealClock{}, append(base, "--node-busy-poll-interval", "2s"), io.Discard, io.Discard)
	if want := "--node-busy-poll-interval 2s is above --node-poll-interval 1s"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("--node-busy-poll-interval 2s: %v, want an error containing %q", err, want)
	}
	t.Setenv("FAUCET_NODE_POLL_INTERVAL", "2m")
	err = run(context.Background(), clock.RealClock{}, base, io.Discard, io.Discard)
	if want := "--node-poll-interval must be 50ms..1m0s, got 2m0s"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("FAUCET_NODE_POLL_INTERVAL=2m: %v, want an error containing %q", err, want)
	}
}
