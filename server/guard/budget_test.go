package guard

import (
	"math"
	"strings"
	"testing"
	"time"
)

// The budget's rule, as a table: the pools' use in, the drip out.
func TestDrawDecide(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	step := time.Second
	idx := StepIndex(now, step)
	total := Pool{Key: "t", Capacity: 1000}
	half := Pool{Key: "h", Capacity: 500}
	used := func(steps ...StepAmount) PoolUse { return PoolUse{Steps: steps} }
	at := func(ago int64, amt uint64) StepAmount { return StepAmount{Index: idx - ago, Amount: amt} }
	for _, c := range []struct {
		name       string
		pools      []Pool
		use        []PoolUse
		want       uint64
		maxPct     int
		floor      int
		amount     uint64
		pct        int
		waitSecond int64 // whole seconds of Wait when refused
	}{
		{name: "empty budget pays in full", pools: []Pool{total}, want: 100, amount: 100, pct: 100},
		{name: "at the threshold still in full", pools: []Pool{total}, use: []PoolUse{used(at(0, 750))}, want: 100, amount: 100, pct: 100},
		{name: "below the threshold scales", pools: []Pool{total}, use: []PoolUse{used(at(0, 800))}, want: 100, amount: 82, pct: 82},
		{name: "scales down to what is left", pools: []Pool{total}, use: []PoolUse{used(at(0, 988))}, want: 100, amount: 12, pct: 12},
		{name: "below the floor waits for the oldest step", pools: []Pool{total},
			use: []PoolUse{used(at(30, 500), at(10, 495))}, want: 100, waitSecond: 31},
		{name: "waits for as many steps as the floor needs", pools: []Pool{total},
			use: []PoolUse{used(at(50, 4), at(40, 4), at(20, 992))}, want: 100, waitSecond: 41},
		{name: "steps out of the window do not count", pools: []Pool{total},
			use: []PoolUse{used(at(61, 1000))}, want: 100, amount: 100, pct: 100},
		{name: "a share is smaller than the total", pools: []Pool{total, half},
			use: []PoolUse{used(at(0, 400)), used(at(0, 400))}, want: 100, amount: 82, pct: 82},
		{name: "the total refuses although the share has room", pools: []Pool{total, half},
			use: []PoolUse{used(at(5, 1000)), used()}, want: 100, waitSecond: 56},
		{name: "a whole drip or nothing", pools: []Pool{total}, use: []PoolUse{used(at(0, 920))}, want: 100, floor: 100, waitSecond: 61},
		{name: "the balance caps the drip", pools: []Pool{total}, want: 100, maxPct: 40, amount: 40, pct: 40},
		{name: "a pool smaller than the floor waits a window", pools: []Pool{{Key: "s", Capacity: 5}}, want: 100, waitSecond: 60},
		{name: "huge amounts do not overflow", pools: []Pool{{Key: "x", Capacity: math.MaxUint64}},
			use: []PoolUse{used(at(0, math.MaxUint64-1))}, want: math.MaxUint64 / 2, waitSecond: 61},
	} {
		t.Run(c.name, func(t *testing.T) {
			floor := c.floor
			if floor == 0 {
				floor = 10
			}
			d := Draw{Pools: c.pools, Window: time.Minute, Step: step, Want: c.want, MaxPercent: c.maxPct, FloorPercent: floor, ScaleBelowPercent: 25}
			v := d.Decide(c.use, now)
			if v.Amount != c.amount || v.Percent != c.pct {
				t.Fatalf("amount %d (%d %%), want %d (%d %%)", v.Amount, v.Percent, c.amount, c.pct)
			}
			if c.amount == 0 {
				if got := v.Wait; got != time.Duration(c.waitSecond)*time.Second {
					t.Fatalf("wait %v, want %ds", got, c.waitSecond)
				}
			} else if v.Wait != 0 {
				t.Fatalf("granted with wait %v", v.Wait)
			}
		})
	}
}

func TestBalancePercent(t *testing.T) {
	b := Budget{Reserve: 1000, Target: 11000, FloorPercent: 10}
	for _, c := range []struct {
		balance, want uint64
		pct           int
		ok            bool
	}{
		{balance: 20000, want: 100, pct: 100, ok: true},
		{balance: 11000, want: 100, pct: 100, ok: true},
		{balance: 6000, want: 100, pct: 55, ok: true}, // halfway: 10 + 90 × 1/2
		{balance: 1010, want: 100, pct: 10, ok: true}, // the spare pays exactly the floor
		{balance: 1009, want: 100, ok: false},         // below the floor above the reserve
		{balance: 500, want: 100, ok: false},
		{balance: 1050, want: 1000, ok: false}, // 50 spare is under 10 % of 1000
	} {
		pct, ok := b.BalancePercent(c.balance, c.want)
		if ok != c.ok || (ok && pct != c.pct) {
			t.Errorf("balance %d, drip %d: %d %% ok=%v, want %d %% ok=%v", c.balance, c.want, pct, ok, c.pct, c.ok)
		}
	}
	// No target: full drips while the spare covers them.
	nb := Budget{Reserve: 100}
	if pct, ok := nb.BalancePercent(160, 100); !ok || pct != 60 {
		t.Fatalf("without target: %d %% ok=%v, want the spare's 60 %%", pct, ok)
	}
}

func TestBudgetValidate(t *testing.T) {
	for _, c := range []struct {
		b    Budget
		want string
	}{
		{Budget{Amount: 1, Per: 0}, "per must be a positive duration"},
		{Budget{Amount: 1, Per: time.Second}, "at least a minute"},
		{Budget{Amount: 1, Per: time.Hour, FloorPercent: 101}, "floor must be a percent"},
		{Budget{Amount: 1, Per: time.Hour, ScaleBelowPercent: -1}, "scale-below must be a percent"},
		{Budget{Reserve: 10, Target: 10}, "must be above the reserve"},
	} {
		err := c.b.Validate("stx")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.b, err, c.want)
		}
	}
	if err := (Budget{Amount: 1, Per: time.Hour}).Validate("stx"); err != nil {
		t.Fatal(err)
	}
}
