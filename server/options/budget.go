package options

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stxfaucet/faucet-operator/server/guard"
	"github.com/stxfaucet/faucet-operator/server/settings"
)

// Budget is one asset's outflow budget and reserve, as --budget takes it.
type Budget struct {
	Asset string
	guard.Budget
}

// Budgets are the assets' budgets: each asset gets DefaultBudget unless a
// --budget names it.
type Budgets struct {
	List BudgetList
}

// BindFlags binds --budget.
func (o *Budgets) BindFlags(fs *Flags) {
	fs.Var(&o.List, "budget", fmt.Sprintf("an asset's outflow budget, as comma-separated key=value pairs: asset (stx, a token's name, btc), amount (the most paid out in any window of per, in base units; 0 turns the budget off), per (default %s), scale-below (drips scale down once less than this percent of the budget is left, default %d), floor (the smallest drip, in percent, default %d), reserve (base units the faucet never pays out), target (below this balance drips scale down with it) and, for stx only, stacking (the most percent of amount that stacking drips take together, 1 to 100, default %d; 100 gives them no share of their own); repeat for more assets. Without one an asset's budget is %d default drips per %s",
		guard.DefaultBudgetPer, guard.DefaultScaleBelowPercent, guard.DefaultFloorPercent, guard.DefaultStackingPercent,
		guard.DefaultBudgetDrips, guard.DefaultBudgetPer))
}

// DefaultBudget is an asset's budget when no --budget names it: 2,000 of
// its drips a day.
func DefaultBudget(drip uint64) guard.Budget {
	return guard.Budget{Amount: drip * guard.DefaultBudgetDrips, Per: guard.DefaultBudgetPer}
}

// Of is asset's budget: its --budget, else the default for its drip.
func (o *Budgets) Of(asset string, drip uint64) guard.Budget {
	for _, b := range o.List {
		if b.Asset == asset {
			return b.Budget
		}
	}
	return DefaultBudget(drip)
}

// validate checks that every --budget names an asset the faucet drips,
// once.
func (o *Budgets) validate(known []string) error {
	seen := map[string]bool{}
	for _, b := range o.List {
		flag := "--budget asset=" + b.Asset
		switch {
		case !slices.Contains(known, b.Asset):
			return fmt.Errorf("%s: the faucet drips no such asset; it drips %s", flag, strings.Join(known, ", "))
		case seen[b.Asset]:
			return fmt.Errorf("%s: given twice", flag)
		case b.StackingPercent != 0 && b.Asset != settings.AssetSTX:
			return fmt.Errorf("%s: stacking: stacking drips are STX only; set it on --budget asset=%s", flag, settings.AssetSTX)
		}
		seen[b.Asset] = true
		if err := b.Validate(flag); err != nil {
			return err
		}
	}
	return nil
}

// String is b as --budget takes it.
func (b Budget) String() string {
	parts := []string{"asset=" + b.Asset, "amount=" + strconv.FormatUint(b.Amount, 10), "per=" + b.Per.String()}
	for _, kv := range []struct {
		k string
		v uint64
	}{{"scale-below", uint64(b.ScaleBelowPercent)}, {"floor", uint64(b.FloorPercent)}, {"reserve", b.Reserve}, {"target", b.Target},
		{"stacking", uint64(b.StackingPercent)}} {
		if kv.v != 0 {
			parts = append(parts, kv.k+"="+strconv.FormatUint(kv.v, 10))
		}
	}
	return strings.Join(parts, ",")
}

// ParseBudget reads one --budget value.
func ParseBudget(s string) (Budget, error) {
	b := Budget{Budget: guard.Budget{Per: guard.DefaultBudgetPer}}
	seen, err := setPairs(s, "asset, amount, per, scale-below, floor, reserve, target, stacking", "", b.set)
	if err != nil {
		return Budget{}, err
	}
	if !seen["asset"] || !seen["amount"] {
		return Budget{}, errors.New("asset and amount are required, e.g. asset=stx,amount=1000000000000,per=24h")
	}
	return b, nil
}

func (b *Budget) set(k, v string) error {
	var err error
	var n uint64
	switch k {
	case "asset":
		if v == "" {
			return errors.New("empty")
		}
		b.Asset = v
	case "amount":
		b.Amount, err = strconv.ParseUint(v, 10, 64)
	case "per":
		if b.Per, err = time.ParseDuration(v); err != nil {
			return DurationError(v)
		}
	case "scale-below", "floor":
		if n, err = strconv.ParseUint(v, 10, 8); err == nil && n > 100 {
			return errors.New("want a percent, 0 to 100")
		}
		if k == "floor" {
			b.FloorPercent = int(n)
		} else {
			b.ScaleBelowPercent = int(n)
		}
	case "stacking":
		// Unlike scale-below and floor, which take 0 as their default as
		// they always have, stacking=0 is refused: it reads as "no
		// stacking drips" yet would give them the default share
		// (DefaultStackingPercent). Leaving the key out asks for that.
		if n, err = strconv.ParseUint(v, 10, 8); err != nil || n < 1 || n > 100 {
			return fmt.Errorf("want a percent, 1 to 100 (leave stacking out for the default, %d)", guard.DefaultStackingPercent)
		}
		b.StackingPercent = int(n)
	case "reserve":
		b.Reserve, err = strconv.ParseUint(v, 10, 64)
	case "target":
		b.Target, err = strconv.ParseUint(v, 10, 64)
	default:
		return errors.New("unknown key")
	}
	if err != nil {
		return errors.New("want a whole number, 0 or more")
	}
	return nil
}

// BudgetList is the repeatable --budget flag; one value may also hold
// several budgets separated by ';' (FAUCET_BUDGET).
type BudgetList []Budget

// ArgName is the placeholder -h shows after the flag's name.
func (*BudgetList) ArgName() string { return "asset=…,amount=…,per=…" }

func (l *BudgetList) String() string { return joinList(l, ";", Budget.String) }

// Set adds the budgets of v.
func (l *BudgetList) Set(v string) error { return addEach(l, v, ";", ParseBudget) }
