package guard

import (
	"context"
	"net/netip"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func limit(n int, w time.Duration) Limit { return Limit{Requests: n, Window: w} }

func TestRaisedDifficulty(t *testing.T) {
	cases := []struct{ base, count, threshold, step, max, want int }{
		{0, 0, 10, 2, 24, 0},
		{0, 10, 10, 2, 24, 0},  // at the threshold: not above it
		{5, 10, 10, 2, 24, 5},  // base otherwise
		{0, 11, 10, 2, 24, 16}, // just above: at least 16
		{0, 19, 10, 2, 24, 16},
		{0, 20, 10, 2, 24, 18}, // one doubling
		{0, 39, 10, 2, 24, 18},
		{0, 40, 10, 2, 24, 20},
		{0, 80, 10, 3, 32, 25},
		{20, 11, 10, 2, 24, 20}, // a base above 16 is the floor
		{20, 40, 10, 2, 24, 24},
		{0, 1 << 20, 10, 2, 24, 24}, // capped
		{4, 100, 10, 2, 10, 10},     // a cap below 16
		{0, 100, 0, 2, 24, 0},       // off
	}
	for _, tc := range cases {
		if got := raisedDifficulty(tc.base, tc.count, tc.threshold, tc.step, tc.max); got != tc.want {
			t.Errorf("raisedDifficulty(%d, %d, %d, %d, %d) = %d, want %d", tc.base, tc.count, tc.threshold, tc.step, tc.max, got, tc.want)
		}
	}
}

func TestRateWindow(t *testing.T) {
	w := newRateWindow(time.Minute) // 1s buckets
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	if w.count(t0) != 0 {
		t.Fatal("empty window counts")
	}
	for i := range 5 {
		w.add(t0.Add(time.Duration(i) * 10 * time.Second)) // 0s..40s
	}
	if n := w.count(t0.Add(40 * time.Second)); n != 5 {
		t.Fatalf("count = %d, want 5", n)
	}
	if n := w.count(t0.Add(59 * time.Second)); n != 5 {
		t.Fatalf("count at 59s = %d, want 5", n)
	}
	if n := w.count(t0.Add(60 * time.Second)); n != 4 {
		t.Fatalf("count at 60s = %d, want 4 (the first left the window)", n)
	}
	if n := w.count(t0.Add(101 * time.Second)); n != 0 {
		t.Fatalf("count at 101s = %d, want 0", n)
	}
	// Ring entries are reused, not summed with stale data.
	w.add(t0.Add(120 * time.Second)) // same ring slot as 0s and 60s
	if n := w.count(t0.Add(120 * time.Second)); n != 1 {
		t.Fatalf("count after wrap = %d, want 1", n)
	}
}

func TestAdaptiveDifficulty(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	c := newChain(t, Config{
		Clock: clock,
		Allow: mustPrefixes(t, "10.0.0.0/8"),
		PoW:   PoWConfig{Difficulty: 4, Secret: testSecret, RaiseAbove: limit(3, time.Minute), MaxDifficulty: 10, TTL: time.Hour},
	})
	ctx := context.Background()
	if c.Difficulty() != 4 {
		t.Fatalf("base difficulty %d", c.Difficulty())
	}
	early := c.Challenge() // issued at 4, before the raise
	earlySol, _ := Solve(ctx, early.Token, early.Difficulty)

	// Allow-listed drips do not count towards the raise.
	for range 10 {
		g, err := c.Check(ctx, Request{ClientIP: netip.MustParseAddr("10.0.0.1"), Recipient: testPrincipal(1)})
		if err != nil {
			t.Fatal(err)
		}
		c.Dispensed(g)
	}
	if c.Difficulty() != 4 {
		t.Fatalf("allow-listed drips raised the difficulty to %d", c.Difficulty())
	}
	for i := range 4 {
		tok, sol := solved(t, c)
		g, err := c.Check(ctx, Request{Recipient: testPrincipal(1), Challenge: tok, Solution: sol})
		if err != nil {
			t.Fatalf("drip %d: %v", i, err)
		}
		c.Dispensed(g)
		clock.Step(time.Second)
	}
	// 4 > 3 within a minute: max(4,16) capped at 10.
	if d := c.Difficulty(); d != 10 {
		t.Fatalf("raised difficulty %d, want 10", d)
	}
	if ch := c.Challenge(); ch.Difficulty != 10 {
		t.Fatalf("new challenge at %d, want 10", ch.Difficulty)
	}
	// A challenge issued before the raise is worth nothing after it: hoarded
	// easy challenges cannot get round the raise.
	_, err := c.Check(ctx, Request{Recipient: testPrincipal(1), Challenge: early.Token, Solution: earlySol})
	wantRejection(t, err, CheckProofOfWork, 400, "challenge_invalid")
	// After the window the difficulty falls back, and the early challenge
	// (still unexpired and unspent) is good again.
	clock.Step(time.Minute)
	if d := c.Difficulty(); d != 4 {
		t.Fatalf("difficulty after the window %d, want 4", d)
	}
	if _, err := c.Check(ctx, Request{Recipient: testPrincipal(1), Challenge: early.Token, Solution: earlySol}); err != nil {
		t.Fatalf("early challenge after the fall: %v", err)
	}
}

func TestAdaptiveFromZero(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	c := newChain(t, Config{
		Clock: clock,
		PoW:   PoWConfig{Secret: testSecret, RaiseAbove: limit(2, 10*time.Second), RaiseStep: 3, MaxDifficulty: 32},
	})
	ctx := context.Background()
	dripFree := func() {
		t.Helper()
		g, err := c.Check(ctx, Request{Recipient: testPrincipal(1)})
		if err != nil {
			t.Fatal(err)
		}
		c.Dispensed(g)
	}
	dripFree()
	dripFree()
	if c.Required() {
		t.Fatal("required at the threshold")
	}
	dripFree()
	if !c.Required() || c.Difficulty() != 16 {
		t.Fatalf("above threshold: Required %v Difficulty %d, want 16", c.Required(), c.Difficulty())
	}
	_, err := c.Check(ctx, Request{Recipient: testPrincipal(1)})
	wantRejection(t, err, CheckProofOfWork, 428, "challenge_required")
	// Rejected drips do not count.
	if c.Difficulty() != 16 {
		t.Fatalf("a rejected drip changed the difficulty to %d", c.Difficulty())
	}
	// Feed the counter directly (solving 16-bit challenges is slow under -race).
	now := clock.Now()
	for range 2 {
		c.rate.add(now)
	}
	if d := c.Difficulty(); d != 19 { // 5/2 → one doubling × 3 bits
		t.Fatalf("difficulty %d, want 19", d)
	}
	clock.Step(10 * time.Second)
	if c.Required() {
		t.Fatalf("still required after the window: %d", c.Difficulty())
	}
}
