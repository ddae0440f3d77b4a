package guard

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

const stx = 1_000_000

func TestBalanceCap(t *testing.T) {
	contract := stacks.Principal{Address: testPrincipal(9).Address, ContractName: "vault"}
	accts := &fakeAccounts{balances: map[string]node.Account{
		testPrincipal(1).String(): {Balance: 500 * stx},
		testPrincipal(2).String(): {Balance: 500*stx - 1},
		testPrincipal(3).String(): {Balance: 400 * stx, Locked: 200 * stx},
		testPrincipal(4).String(): {Balance: 900 * stx},
		contract.String():         {Balance: 501 * stx},
	}}
	c := newChain(t, Config{BalanceCap: 500 * stx, Accounts: accts})
	ctx := context.Background()
	for _, p := range []stacks.Principal{testPrincipal(1), testPrincipal(3), testPrincipal(4), contract} {
		_, err := c.Check(ctx, Request{Recipient: p})
		r := rejection(t, err, CheckBalanceCap, http.StatusForbidden, "balance_cap")
		if !strings.Contains(r.Message, "500 STX") {
			t.Errorf("message %q does not give the cap in STX", r.Message)
		}
	}
	for _, p := range []stacks.Principal{testPrincipal(2), testPrincipal(5)} { // below the cap, and an unknown account (zero)
		if _, err := c.Check(ctx, Request{Recipient: p}); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	if !strings.Contains(contract.String(), ".vault") {
		t.Fatalf("contract principal %s", contract)
	}
	// The cap is on STX: an sBTC drip to an STX-rich address passes, with
	// no account read.
	reads := accts.Reads()
	if _, err := c.Check(ctx, Request{Recipient: testPrincipal(4), Asset: "sbtc"}); err != nil {
		t.Errorf("sBTC drip refused by the STX balance cap: %v", err)
	}
	if n := accts.Reads(); n != reads {
		t.Errorf("%d account reads for an sBTC drip", n-reads)
	}
}

func TestBalanceCache(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	accts := &fakeAccounts{balances: map[string]node.Account{testPrincipal(1).String(): {Balance: 10 * stx}}}
	c := newChain(t, Config{BalanceCap: 500 * stx, Accounts: accts, BalanceTTL: time.Minute, Clock: clock})
	ctx := context.Background()
	for range 3 {
		if _, err := c.Check(ctx, Request{Recipient: testPrincipal(1)}); err != nil {
			t.Fatal(err)
		}
	}
	if n := accts.Reads(); n != 1 {
		t.Fatalf("%d reads within the TTL, want 1", n)
	}
	clock.Step(time.Minute)
	if _, err := c.Check(ctx, Request{Recipient: testPrincipal(1)}); err != nil {
		t.Fatal(err)
	}
	if n := accts.Reads(); n != 2 {
		t.Fatalf("%d reads after the TTL, want 2", n)
	}
	// Another recipient is read separately.
	if _, err := c.Check(ctx, Request{Recipient: testPrincipal(2)}); err != nil {
		t.Fatal(err)
	}
	if n := accts.Reads(); n != 3 {
		t.Fatalf("%d reads, want 3", n)
	}
}

func TestBalanceNodeErrorFailsOpen(t *testing.T) {
	logs := &syncBuffer{}
	accts := &fakeAccounts{err: errors.New("node unreachable")}
	c := newChain(t, Config{BalanceCap: 500 * stx, Accounts: accts, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	for range 2 {
		if _, err := c.Check(context.Background(), Request{Recipient: testPrincipal(1)}); err != nil {
			t.Fatalf("node error did not fail open: %v", err)
		}
	}
	if accts.Reads() != 2 {
		t.Errorf("a failed read was cached: %d reads", accts.Reads())
	}
	if !strings.Contains(logs.String(), "node unreachable") || !strings.Contains(logs.String(), "WARN") {
		t.Errorf("no warning logged: %s", logs.String())
	}
	// A nil account without an error fails open too.
	c = newChain(t, Config{BalanceCap: 1, Accounts: nilAccounts{}})
	if _, err := c.Check(context.Background(), Request{Recipient: testPrincipal(1)}); err != nil {
		t.Fatal(err)
	}
}

type nilAccounts struct{}

func (nilAccounts) Account(context.Context, string) (*node.Account, error) { return nil, nil }

func TestBalanceCacheBounded(t *testing.T) {
	b := newBalanceCache(time.Minute, 3)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 10 {
		b.put(string(rune('a'+i)), uint64(i), t0)
	}
	if n := b.size(); n != 3 {
		t.Fatalf("size %d, want 3", n)
	}
	if v, ok := b.get("j", t0); !ok || v != 9 {
		t.Fatalf("newest entry: %d %v", v, ok)
	}
	// Expired entries are swept before anything live is evicted.
	b.put("x", 1, t0.Add(2*time.Minute))
	if n := b.size(); n != 1 {
		t.Fatalf("size after expiry %d, want 1", n)
	}
	if _, ok := b.get("x", t0.Add(3*time.Minute)); ok {
		t.Fatal("an expired entry was served")
	}
}

func TestBalanceConfig(t *testing.T) {
	if _, err := New(Config{BalanceCap: 1}); err == nil {
		t.Error("a balance cap without an account reader was accepted")
	}
	if _, err := New(Config{BalanceTTL: -time.Second}); err == nil {
		t.Error("a negative balance TTL was accepted")
	}
	c := newChain(t, Config{BalanceCap: 1, Accounts: &fakeAccounts{}})
	if c.balances.ttl != 30*time.Second || c.balances.max != 10_000 {
		t.Errorf("defaults: ttl %v max %d", c.balances.ttl, c.balances.max)
	}
}

func TestFormatSTX(t *testing.T) {
	cases := map[uint64]string{0: "0", 1: "0.000001", 500 * stx: "500", 1_500_000: "1.5", 1_234_567_890: "1234.56789"}
	for in, want := range cases {
		if got := formatSTX(in); got != want {
			t.Errorf("formatSTX(%d) = %q, want %q", in, got, want)
		}
	}
}
