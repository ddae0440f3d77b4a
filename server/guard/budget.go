package guard

import (
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"time"
)

// A budget bounds what an asset pays out in total, whoever asks: at most
// Amount base units in any window of Per. The window slides in steps of
// Per/60 (at least a second): each drip adds its amount to the current
// step of its pools, and the window counts every step that overlaps it, so
// no window of Per, aligned or not, ever sees more than Amount leave. A
// token bucket of the same rate would let twice that through in the Per
// after a quiet one; "a million STX a day" means a day, any day.
//
// A budget has pools: the asset's total, and a share of it per tier of
// requester (anonymous, each sign-in tier), and for STX the share that
// stacking drips may take together. A drip draws from the total and from
// each share it belongs to, all or nothing, in the same store step as its
// rate-limit slots, so replicas sharing the store never pass any. A farm
// of anonymous clients can empty the anonymous share, and no more; a farm
// of fresh addresses asking for stacking drips (each hundreds of default
// drips' worth) can empty the stacking share, and no more.
//
// Below ScaleBelowPercent of a pool left, drips scale down linearly, to
// FloorPercent of the full drip when the pool is empty; a drip that does
// not fit at its floor is refused until enough steps leave the window.

// Budget is an asset's outflow budget and the treasury's reserve.
type Budget struct {
	// Amount is the most paid out in any window of Per, in base units; 0
	// is no budget.
	Amount uint64
	Per    time.Duration
	// ScaleBelowPercent: below this share of a pool left, drips scale
	// down (0: DefaultScaleBelowPercent; 100 scales from the start).
	ScaleBelowPercent int
	// FloorPercent is the smallest drip paid, in percent of the full one
	// (0: DefaultFloorPercent; 100: never scale).
	FloorPercent int
	// Reserve is kept on the faucet's keys for fees and never paid out,
	// in base units.
	Reserve uint64
	// Target is the balance below which drips scale down with it (0:
	// never), in base units: at Target a full drip, at Reserve the floor.
	Target uint64
	// StackingPercent is the most of Amount that stacking drips may take
	// together in a window (0: DefaultStackingPercent; 100: no share of
	// their own). STX only.
	StackingPercent int
}

// Budget defaults.
const (
	DefaultBudgetPer         = 24 * time.Hour
	DefaultScaleBelowPercent = 25
	DefaultFloorPercent      = 10
	// DefaultStackingPercent leaves at least half of an STX budget to
	// default drips, whatever stacking drips ask.
	DefaultStackingPercent = 50
	// DefaultBudgetDrips is an asset's default budget in its default
	// drips per DefaultBudgetPer: 2,000 drips a day (1,000,000 STX of
	// 500 STX drips).
	DefaultBudgetDrips = 2000
	// budgetSteps is how many steps a window slides in.
	budgetSteps = 60
)

// On reports whether the budget bounds anything.
func (b Budget) On() bool { return b.Amount > 0 && b.Per > 0 }

// Step is the granularity of the sliding window.
func (b Budget) Step() time.Duration { return max(b.Per/budgetSteps, time.Second) }

// Floor is the floor percent with its default applied.
func (b Budget) Floor() int { return percentOr(b.FloorPercent, DefaultFloorPercent) }

// Stacking is the stacking share's percent with its default applied.
func (b Budget) Stacking() int { return percentOr(b.StackingPercent, DefaultStackingPercent) }

// ScaleBelow is the scale-below percent with its default applied.
func (b Budget) ScaleBelow() int { return percentOr(b.ScaleBelowPercent, DefaultScaleBelowPercent) }

// percentOr is p capped at 100, or def when p is unset (0 or less).
func percentOr(p, def int) int {
	if p <= 0 {
		return def
	}
	return min(p, 100)
}

// Validate checks b for the asset it is of; name is how the error names it.
func (b Budget) Validate(name string) error {
	switch {
	case b.Amount > 0 && b.Per <= 0:
		return fmt.Errorf("%s: per must be a positive duration", name)
	case b.Amount > 0 && b.Per < time.Minute:
		return fmt.Errorf("%s: per must be at least a minute (got %s)", name, b.Per)
	case b.ScaleBelowPercent < 0 || b.ScaleBelowPercent > 100:
		return fmt.Errorf("%s: scale-below must be a percent, 0 to 100", name)
	case b.FloorPercent < 0 || b.FloorPercent > 100:
		return fmt.Errorf("%s: floor must be a percent, 0 to 100", name)
	case b.StackingPercent < 0 || b.StackingPercent > 100:
		return fmt.Errorf("%s: stacking must be a percent, 0 to 100", name)
	case b.Target > 0 && b.Target <= b.Reserve:
		return fmt.Errorf("%s: target (%d) must be above the reserve (%d)", name, b.Target, b.Reserve)
	}
	return nil
}

// BalancePercent is the largest drip the balance allows, in percent of
// want: 100 at or above the target, falling linearly to the floor at the
// reserve. ok is false when the balance above the reserve cannot pay a
// drip at the floor: the faucet is out of funds for drips.
func (b Budget) BalancePercent(balance, want uint64) (pct int, ok bool) {
	floor := b.Floor()
	spare := sub(balance, b.Reserve)
	if spare < ceilPercent(want, floor) || want == 0 {
		return 0, want == 0
	}
	pct = 100
	if b.Target > b.Reserve && balance < b.Target {
		pct = floor + int(mulDiv(uint64(100-floor), spare, b.Target-b.Reserve))
	}
	// Never more than the spare balance pays.
	return min(pct, int(min(mulDiv(spare, 100, want), 100))), true
}

// Pool is one budget pool a drip draws from.
type Pool struct {
	// Key names the pool in the store; the window's length is part of
	// it, so that a new window starts afresh rather than misreading the
	// steps of another.
	Key string
	// Capacity is the most the pool pays in a window, in base units.
	Capacity uint64
	// Policy names it in RateLimit fields: "budget", "budget-anonymous", …
	Policy string
}

// PoolKey is the store key of an asset's pool: the total ("" tier), a
// tier's share, or StackingPool's, for a window of per.
func PoolKey(asset, tier string, per time.Duration) string {
	k := "budget:" + asset
	if tier != "" {
		k += ":" + tier
	}
	return k + "/" + strconv.FormatInt(int64(per/time.Second), 10) + "s"
}

// StackingPool names the stacking drips' share in PoolKey; no tier can
// be named so ('+' is not in a tier's name).
const StackingPool = "+stacking"

// Draw is one drip's take from its asset's budget.
type Draw struct {
	Pools []Pool
	// Window and Step are the budget's Per and Step.
	Window, Step time.Duration
	// Want is the full drip, in base units.
	Want uint64
	// MaxPercent caps the drip (the balance's scaling): 0 is 100.
	MaxPercent        int
	FloorPercent      int
	ScaleBelowPercent int
}

// Active reports whether d draws anything.
func (d *Draw) Active() bool { return d != nil && len(d.Pools) > 0 && d.Want > 0 }

// StepAmount is what a pool paid in one step of the window.
type StepAmount struct {
	Index  int64 // the step's start, in steps since the Unix epoch
	Amount uint64
}

// PoolUse is a pool's steps within the window, oldest first, as a store
// read them (steps already out of the window are ignored).
type PoolUse struct {
	Steps []StepAmount
}

// StepIndex is the step now falls in.
func StepIndex(now time.Time, step time.Duration) int64 {
	return floorDiv(now.UnixNano(), step.Nanoseconds())
}

// FirstStep is the oldest step that still overlaps the window ending at
// now: steps before it have left.
func FirstStep(now time.Time, window, step time.Duration) int64 {
	return floorDiv(now.UnixNano()-window.Nanoseconds(), step.Nanoseconds())
}

// StepExpiry is when step i leaves a window: its end plus the window.
func StepExpiry(i int64, window, step time.Duration) time.Time {
	return time.Unix(0, (i+1)*step.Nanoseconds()+window.Nanoseconds())
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// Verdict is a draw's outcome.
type Verdict struct {
	// Amount is what the drip pays (0: refused) and Percent that in
	// percent of Want.
	Amount  uint64
	Percent int
	// Wait is how long until a drip at the floor fits (refused only).
	Wait time.Duration
	// Use is each pool's use (Draw.Pools' order) after the draw, or now
	// when refused: for the RateLimit fields.
	Use []BudgetUse
}

// BudgetUse is a pool's state at a moment.
type BudgetUse struct {
	Pool Pool
	Left uint64
	// Reset is how long until the oldest step of the window leaves (0
	// when nothing was paid).
	Reset time.Duration
}

// Decide judges d against the pools' use at now: the pure rule every
// store applies inside its atomic step.
func (d Draw) Decide(use []PoolUse, now time.Time) Verdict {
	first := FirstStep(now, d.Window, d.Step)
	floor := d.floor()
	floorAmount := ceilPercent(d.Want, floor)
	v := Verdict{Use: make([]BudgetUse, len(d.Pools))}
	pct := 100
	if d.MaxPercent > 0 {
		pct = min(d.MaxPercent, 100)
	}
	left := make([]uint64, len(d.Pools))
	for i, p := range d.Pools {
		var used uint64
		var oldest int64 = -1
		if i < len(use) {
			for _, s := range use[i].Steps {
				if s.Index >= first && s.Amount > 0 {
					used = satAdd(used, s.Amount)
					if oldest < 0 || s.Index < oldest {
						oldest = s.Index
					}
				}
			}
		}
		left[i] = sub(p.Capacity, used)
		v.Use[i] = BudgetUse{Pool: p, Left: left[i]}
		if oldest >= 0 {
			v.Use[i].Reset = max(StepExpiry(oldest, d.Window, d.Step).Sub(now), time.Nanosecond)
		}
		if threshold := mulDiv(p.Capacity, uint64(d.scaleBelow()), 100); left[i] < threshold {
			pct = min(pct, floor+int(mulDiv(uint64(100-floor), left[i], threshold)))
		}
	}
	amount := mulDiv(d.Want, uint64(pct), 100)
	for _, l := range left {
		amount = min(amount, l)
	}
	// Whole percents of the drip: a scaled drip reads as a share of the
	// full one, and every replica computes the same.
	pct = int(min(mulDiv(amount, 100, d.Want), 100))
	amount = mulDiv(d.Want, uint64(pct), 100)
	if pct < floor || amount < floorAmount || amount == 0 {
		v.Wait = d.waitFor(use, first, left, floorAmount, now)
		return v
	}
	v.Amount, v.Percent = amount, pct
	for i := range v.Use {
		v.Use[i].Left -= amount
		if v.Use[i].Reset == 0 {
			v.Use[i].Reset = StepExpiry(StepIndex(now, d.Step), d.Window, d.Step).Sub(now)
		}
	}
	return v
}

// waitFor is how long until every pool has need left: the time its
// oldest steps take to leave the window. A pool smaller than need never
// will: a whole window is the honest "not soon".
func (d Draw) waitFor(use []PoolUse, first int64, left []uint64, need uint64, now time.Time) time.Duration {
	var wait time.Duration
	for i, p := range d.Pools {
		if left[i] >= need {
			continue
		}
		if p.Capacity < need || i >= len(use) {
			return d.Window
		}
		freed := left[i]
		for _, s := range use[i].Steps {
			if s.Index < first {
				continue
			}
			freed = satAdd(freed, s.Amount)
			if freed >= need {
				wait = max(wait, StepExpiry(s.Index, d.Window, d.Step).Sub(now))
				break
			}
		}
		if freed < need {
			return d.Window
		}
	}
	return max(wait, time.Nanosecond)
}

func (d Draw) floor() int { return percentOr(d.FloorPercent, DefaultFloorPercent) }

func (d Draw) scaleBelow() int { return percentOr(d.ScaleBelowPercent, DefaultScaleBelowPercent) }

// Drawn is what a granted reservation took from a budget, for Release.
type Drawn struct {
	Pools  []string // keys
	Index  int64    // the step it was added to
	Amount uint64
}

// PercentOf is pct percent of v, rounded down (without overflow).
func PercentOf(v uint64, pct int) uint64 { return mulDiv(v, uint64(max(pct, 0)), 100) }

// mulDiv is a*b/c rounded down, without overflow in a*b; a quotient too
// large for 64 bits saturates.
func mulDiv(a, b, c uint64) uint64 {
	if c == 0 {
		return 0
	}
	hi, lo := bits.Mul64(a, b)
	if hi >= c {
		return math.MaxUint64
	}
	q, _ := bits.Div64(hi, lo, c)
	return q
}

// ceilPercent is pct percent of v, rounded up.
func ceilPercent(v uint64, pct int) uint64 {
	hi, lo := bits.Mul64(v, uint64(pct))
	if hi >= 100 {
		return math.MaxUint64
	}
	q, r := bits.Div64(hi, lo, 100)
	if r != 0 {
		q++
	}
	return q
}

func sub(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}

func satAdd(a, b uint64) uint64 {
	if s := a + b; s >= a {
		return s
	}
	return math.MaxUint64
}
