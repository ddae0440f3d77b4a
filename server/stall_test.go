package server

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/stxfaucet/faucet-operator/server/faucet"
)

// stallHarness is a harness with sBTC whose engine and server share one
// fake clock, over a devnode that mines only when the test calls Mine: the
// chain stands still until the test moves it, and a stall is reached by
// stepping the clock.
func stallHarness(t *testing.T, o options) (*harness, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	o.clock = clk
	o.faucetCfg = func(c *faucet.Config) { c.Clock = clk }
	return sbtcHarness(t, o), clk
}

// poll is one turn of the engine's poll loop.
func (h *harness) poll() {
	h.t.Helper()
	if err := h.f.Sync(context.Background()); err != nil {
		h.t.Fatal(err)
	}
}

// states are info's top-level state and each asset's, by asset.
func (h *harness) states() (top infoBody, byAsset map[string]string) {
	h.t.Helper()
	b := h.info()
	byAsset = map[string]string{}
	for _, a := range b.Assets {
		byAsset[a.Asset] = a.State
	}
	return b, byAsset
}

// gauge is a gauge's value; false when it has no sample.
func gauge(t *testing.T, h *harness, name string) (float64, bool) {
	t.Helper()
	mfs, err := h.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// A chain that makes no block for --stall-after turns the Stacks assets'
// state to stalled with the tip's age, while drips are still paid and the
// pod stays ready; the next block turns them back to ready.
func TestChainStall(t *testing.T) {
	h, clk := stallHarness(t, options{stallAfter: 30 * time.Minute})
	if v, ok := gauge(t, h, "faucet_stacks_tip_age_seconds"); ok {
		t.Errorf("faucet_stacks_tip_age_seconds %v before the first poll, want no sample", v)
	}
	if v, _ := gauge(t, h, "faucet_stacks_stall_after_seconds"); v != 1800 {
		t.Errorf("faucet_stacks_stall_after_seconds %v, want 1800", v)
	}
	h.poll()
	wantStates := func(step, want string) {
		t.Helper()
		top, assets := h.states()
		if top.State != want || assets["stx"] != want || assets["sbtc"] != want {
			t.Fatalf("%s: state %q (%s), assets %v; want %s", step, top.State, top.StateMessage, assets, want)
		}
	}
	wantAge := func(step string, want time.Duration) {
		t.Helper()
		if v, ok := gauge(t, h, "faucet_stacks_tip_age_seconds"); !ok || v != want.Seconds() {
			t.Fatalf("%s: faucet_stacks_tip_age_seconds %v (sampled %v), want %v", step, v, ok, want.Seconds())
		}
	}
	wantStates("first poll", stateReady)
	wantAge("first poll", 0)

	clk.Step(29 * time.Minute)
	h.poll()
	wantStates("29m without a block", stateReady)
	wantAge("29m without a block", 29*time.Minute)

	clk.Step(2 * time.Minute)
	h.poll()
	wantStates("31m without a block", stateStalled)
	wantAge("31m without a block", 31*time.Minute)
	top, _ := h.states()
	if want := "No new Stacks block for 31 min"; !strings.HasPrefix(top.StateMessage, want) {
		t.Errorf("state_message %q, want it to start with %q", top.StateMessage, want)
	}
	if w := h.do(http.MethodGet, "/readyz", nil, nil); w.Code != http.StatusOK {
		t.Errorf("/readyz on a stalled chain: %d %s", w.Code, w.Body)
	}
	if w := h.drip("address=" + newRecipient(t)); w.Code != http.StatusOK {
		t.Errorf("a drip on a stalled chain: %d %s", w.Code, w.Body)
	}

	h.dn.Mine()
	clk.Step(time.Second)
	h.poll()
	wantStates("a block", stateReady)
	wantAge("a block", 0)
}

// Stalled goes over ready and low, not over the states in which drips are
// refused, and never shows with --stall-after 0.
func TestChainStallPrecedence(t *testing.T) {
	for name, tc := range map[string]struct {
		o       options
		nodeOff bool
		want    string
		message []string // what state_message says
	}{
		"ready":            {o: options{}, want: stateStalled, message: []string{"No new Stacks block for 10 h"}},
		"low":              {o: options{lowDrips: 5000}, want: stateStalled, message: []string{"No new Stacks block", "drips left"}},
		"empty":            {o: options{unfunded: true}, want: stateEmpty},
		"node unreachable": {o: options{}, nodeOff: true, want: stateNodeUnreachable},
		"suspended":        {o: options{disabled: true}, want: stateSuspended},
		"never":            {o: options{stallAfter: -1}, want: stateReady},
	} {
		t.Run(name, func(t *testing.T) {
			o := tc.o
			switch o.stallAfter {
			case 0:
				o.stallAfter = 30 * time.Minute
			case -1:
				o.stallAfter = 0
			}
			h, clk := stallHarness(t, o)
			h.poll()
			clk.Step(10 * time.Hour)
			if tc.nodeOff {
				h.dn.SetDown(true)
				_ = h.f.Sync(context.Background())
			} else {
				h.poll()
			}
			top, assets := h.states()
			if top.State != tc.want || assets["stx"] != tc.want {
				t.Fatalf("state %q (%s), stx %q; want %s", top.State, top.StateMessage, assets["stx"], tc.want)
			}
			for _, m := range tc.message {
				if !strings.Contains(top.StateMessage, m) {
					t.Errorf("state_message %q lacks %q", top.StateMessage, m)
				}
			}
		})
	}
}

func TestAgeText(t *testing.T) {
	for d, want := range map[time.Duration]string{
		45 * time.Second:                  "45 s",
		time.Minute - time.Millisecond:    "59 s",
		42*time.Minute + 59*time.Second:   "42 min",
		2 * time.Hour:                     "2 h",
		3*time.Hour + 5*time.Minute + 1e9: "3 h 5 min",
		50 * time.Hour:                    "50 h",
	} {
		if got := ageText(d); got != want {
			t.Errorf("ageText(%s) = %q, want %q", d, got, want)
		}
	}
}
