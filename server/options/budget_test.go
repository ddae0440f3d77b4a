package options_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/server/guard"
	"github.com/stxfaucet/faucet-operator/server/options"
)

// A budget is comma-separated key=value pairs; String writes what
// ParseBudget reads, leaving out the keys at their default.
func TestParseBudget(t *testing.T) {
	for in, want := range map[string]options.Budget{
		"asset=stx,amount=1000,per=12h,scale-below=30,floor=20,reserve=5,target=900,stacking=40": {Asset: "stx",
			Budget: guard.Budget{Amount: 1000, Per: 12 * time.Hour, ScaleBelowPercent: 30, FloorPercent: 20, Reserve: 5, Target: 900, StackingPercent: 40}},
		// 100: stacking drips have no share of their own, only the total.
		"asset=stx,amount=1,stacking=100": {Asset: "stx", Budget: guard.Budget{Amount: 1, Per: guard.DefaultBudgetPer, StackingPercent: 100}},
		"stacking=1, amount=1, asset=stx": {Asset: "stx", Budget: guard.Budget{Amount: 1, Per: guard.DefaultBudgetPer, StackingPercent: 1}},
		// Left out: the engine's default share (guard.Budget.Stacking).
		"asset=tusd,amount=7": {Asset: "tusd", Budget: guard.Budget{Amount: 7, Per: guard.DefaultBudgetPer}},
	} {
		got, err := options.ParseBudget(in)
		if err != nil || got != want {
			t.Errorf("ParseBudget(%q) = %+v, %v; want %+v", in, got, err, want)
			continue
		}
		if back, err := options.ParseBudget(got.String()); err != nil || back != got {
			t.Errorf("String %q parses to %+v, %v", got.String(), back, err)
		}
	}
	if s := (options.Budget{Asset: "stx", Budget: guard.Budget{Amount: 1, Per: time.Hour, StackingPercent: 25}}).String(); !strings.HasSuffix(s, ",stacking=25") {
		t.Errorf("String of a stacking share: %q", s)
	}
	if s := (options.Budget{Asset: "stx", Budget: guard.Budget{Amount: 1, Per: time.Hour}}).String(); strings.Contains(s, "stacking") {
		t.Errorf("String without a stacking share writes one: %q", s)
	}
	if d := guard.DefaultStackingPercent; d < 1 || d > 100 {
		t.Fatalf("DefaultStackingPercent %d is no percent stacking= takes", d)
	}
	for in, want := range map[string]string{
		// 0 would read as "no stacking drips" and mean the default share.
		"asset=stx,amount=1,stacking=0":            fmt.Sprintf("stacking: want a percent, 1 to 100 (leave stacking out for the default, %d)", guard.DefaultStackingPercent),
		"asset=stx,amount=1,stacking=101":          "stacking: want a percent, 1 to 100",
		"asset=stx,amount=1,stacking=-5":           "stacking: want a percent, 1 to 100",
		"asset=stx,amount=1,stacking=half":         "stacking: want a percent, 1 to 100",
		"asset=stx,amount=1,stacking=50%":          "stacking: want a percent, 1 to 100",
		"asset=stx,amount=1,stacking=":             "stacking: want a percent, 1 to 100",
		"asset=stx,amount=1,floor=101":             "floor: want a percent, 0 to 100",
		"asset=stx,amount=1,colour=red":            "colour: unknown key",
		"asset=stx,amount=1,stacking=5,stacking=6": "each key once (asset, amount, per, scale-below, floor, reserve, target, stacking)",
		"amount=1,stacking=50":                     "asset and amount are required",
	} {
		if _, err := options.ParseBudget(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseBudget(%q): %v, want an error containing %q", in, err, want)
		}
	}
}
