package store_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/server/guard"
	"github.com/stxfaucet/faucet-operator/server/store"
	"github.com/stxfaucet/faucet-operator/server/store/pgtest"
)

// The budget contract: every limiter that keeps budgets draws, scales,
// refuses, waits and gives back exactly alike.

// testDraw is a budget of 1,000 per minute (steps of a second) and drips
// of 100, scaled below 250 left down to a floor of 10.
func testDraw(pools ...guard.Pool) guard.Draw {
	if len(pools) == 0 {
		pools = []guard.Pool{{Key: "budget:stx/60s", Capacity: 1000, Policy: "budget"}}
	}
	return guard.Draw{Pools: pools, Window: time.Minute, Step: time.Second, Want: 100, FloorPercent: 10, ScaleBelowPercent: 25}
}

func budgetLimiter(t *testing.T, s subject) guard.BudgetLimiter {
	t.Helper()
	bl, ok := s.limiter.(guard.BudgetLimiter)
	if !ok {
		t.Fatalf("%T keeps no budgets", s.limiter)
	}
	return bl
}

func draw(t *testing.T, l guard.BudgetLimiter, now time.Time, d guard.Draw, bs ...guard.Bucket) (guard.Reservation, time.Duration, guard.Verdict) {
	t.Helper()
	r, wait, v, err := l.ReserveDraw(t.Context(), now, bs, d)
	if err != nil {
		t.Fatalf("reserve and draw: %v", err)
	}
	return r, wait, v
}

// left reads what is left of d's first pool at now.
func left(t *testing.T, l guard.BudgetLimiter, now time.Time, d guard.Draw) uint64 {
	t.Helper()
	use, err := l.ReadPools(t.Context(), now, d)
	if err != nil {
		t.Fatalf("read pools: %v", err)
	}
	var used uint64
	for _, s := range use[0].Steps {
		if s.Index >= guard.FirstStep(now, d.Window, d.Step) {
			used += s.Amount
		}
	}
	return d.Pools[0].Capacity - used
}

// Full drips while a quarter is left, then smaller ones down to the floor,
// a refusal that waits exactly for the step to leave, and the whole budget
// back once it has.
func testBudgetScalesAndRefills(t *testing.T, s subject) {
	l, d := budgetLimiter(t, s), testDraw()
	var got []uint64
	for i := range 14 {
		_, _, v := draw(t, l, t0.Add(time.Duration(i)*time.Millisecond), d)
		if v.Amount == 0 {
			break
		}
		got = append(got, v.Amount)
	}
	want := []uint64{100, 100, 100, 100, 100, 100, 100, 100, 82, 52, 33, 21, 12}
	if len(got) != len(want) {
		t.Fatalf("drips %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("drips %v, want %v", got, want)
		}
	}
	if l := left(t, l, t0.Add(time.Second), d); l != 0 {
		t.Fatalf("%d left, want 0", l)
	}
	// Everything was drawn in t0's step, which leaves the window at t0+61s.
	_, wait, v := draw(t, l, t0.Add(30*time.Second), d)
	if v.Amount != 0 || wait != 0 || v.Wait != 31*time.Second {
		t.Fatalf("empty budget: amount %d, slot wait %v, wait %v; want 0, 0, 31s", v.Amount, wait, v.Wait)
	}
	if _, _, v := draw(t, l, t0.Add(61*time.Second-time.Nanosecond), d); v.Amount != 0 || v.Wait != time.Nanosecond {
		t.Fatalf("a nanosecond early: amount %d, wait %v", v.Amount, v.Wait)
	}
	if _, _, v := draw(t, l, t0.Add(61*time.Second), d); v.Amount != 100 {
		t.Fatalf("after the step left: amount %d, want 100", v.Amount)
	}
}

// A full bucket draws nothing; a budget that refuses takes no slot.
func testBudgetAllOrNothing(t *testing.T, s subject) {
	l, d := budgetLimiter(t, s), testDraw()
	a := bucket("address:A", 1, time.Hour)
	if _, _, v := draw(t, l, t0, d, a); v.Amount != 100 {
		t.Fatalf("first drip drew %d", v.Amount)
	}
	if _, wait, v := draw(t, l, t0, d, a); wait <= 0 || v.Amount != 0 {
		t.Fatalf("full bucket: wait %v, amount %d", wait, v.Amount)
	}
	if got := left(t, l, t0, d); got != 900 {
		t.Fatalf("a refused slot drew from the budget: %d left, want 900", got)
	}
	// Empty the budget with drips that must be whole (floor 100).
	whole := d
	whole.FloorPercent = 100
	for range 9 {
		if _, _, v := draw(t, l, t0, whole); v.Amount != 100 {
			t.Fatalf("whole drip drew %d", v.Amount)
		}
	}
	b := bucket("address:B", 1, time.Hour)
	if _, _, v := draw(t, l, t0, d, b); v.Amount != 0 {
		t.Fatalf("empty budget drew %d", v.Amount)
	}
	if _, _, ok := reserve(t, l, t0, b); !ok {
		t.Fatal("a drip the budget refused kept its slot")
	}
}

// Release gives the draw back with the slots.
func testBudgetRelease(t *testing.T, s subject) {
	l, d := budgetLimiter(t, s), testDraw()
	a := bucket("address:A", 1, time.Hour)
	r, _, v := draw(t, l, t0, d, a)
	if v.Amount != 100 || r.Drawn == nil || r.Drawn.Amount != 100 {
		t.Fatalf("draw: %+v %+v", r, v)
	}
	if err := l.Release(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	if got := left(t, l, t0, d); got != 1000 {
		t.Fatalf("%d left after release, want 1000", got)
	}
	if _, _, ok := reserve(t, l, t0, a); !ok {
		t.Fatal("released slot not freed")
	}
}

// A share draws from itself and the total: anonymous drips stop at their
// half, drips of the total alone go on to the rest.
func testBudgetShares(t *testing.T, s subject) {
	l := budgetLimiter(t, s)
	total := guard.Pool{Key: "budget:stx/60s", Capacity: 1000, Policy: "budget"}
	anon := testDraw(total, guard.Pool{Key: "budget:stx:anonymous/60s", Capacity: 500, Policy: "budget-anonymous"})
	anon.FloorPercent, anon.Want = 100, 100
	n := 0
	for {
		_, _, v := draw(t, l, t0, anon)
		if v.Amount == 0 {
			break
		}
		n++
	}
	if n != 5 {
		t.Fatalf("anonymous drew %d drips of 100 from a share of 500", n)
	}
	other := testDraw(total)
	other.FloorPercent = 100
	for i := range 5 {
		if _, _, v := draw(t, l, t0, other); v.Amount != 100 {
			t.Fatalf("drip %d of the total refused after the anonymous share ran out", i)
		}
	}
	if _, _, v := draw(t, l, t0, other); v.Amount != 0 {
		t.Fatal("the total paid past its budget")
	}
}

func testBudgetConcurrentExact(t *testing.T, s subject) {
	if got := concurrentDraw(t, []guard.BudgetLimiter{budgetLimiter(t, s)}, 40); got != 1000 {
		t.Fatalf("40 concurrent drips drew %d of a budget of 1000", got)
	}
}

// concurrentDraw runs n whole drips of 100 at once against a budget of
// 1,000, spread over limiters (replicas), and returns what they drew.
func concurrentDraw(t *testing.T, limiters []guard.BudgetLimiter, n int) uint64 {
	t.Helper()
	d := testDraw()
	d.FloorPercent = 100
	var drawn atomic.Uint64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			b := bucket("address:"+string(rune('a'+i)), 1, time.Hour)
			_, _, v, err := limiters[i%len(limiters)].ReserveDraw(t.Context(), t0, []guard.Bucket{b}, d)
			if err != nil {
				t.Error(err)
				return
			}
			drawn.Add(v.Amount)
		})
	}
	close(start)
	wg.Wait()
	return drawn.Load()
}

// Two replicas on one database never pass the budget together.
func TestPostgresReplicasBudgetExact(t *testing.T) {
	uri := pgtest.Shared(t).CreateDB(t)
	a := openPostgresURI(t, uri, store.Options{})
	b := openPostgresURI(t, uri, store.Options{})
	if got := concurrentDraw(t, []guard.BudgetLimiter{a, b}, 60); got != 1000 {
		t.Fatalf("60 concurrent drips across two replicas drew %d of a budget of 1000", got)
	}
}
