package settings

import (
	"fmt"
	"math"
)

// DripCost is what one default drip costs a key in every funding figure
// (the page, the metrics, the operator's status): the amount plus the fee
// fallback, the fee the faucet budgets for. A real fee is usually lower, so
// the figures err on the safe side, and they agree wherever they are shown.
func DripCost(amount, feeFallback uint64) uint64 {
	return max(satAdd(amount, feeFallback), 1)
}

// FundingLevel is how the drips a faucet can still pay compare with its
// low threshold.
type FundingLevel string

const (
	FundsEmpty FundingLevel = "empty" // not one drip
	FundsLow   FundingLevel = "low"   // fewer than the low threshold
	FundsOK    FundingLevel = "ok"
)

// LevelOf classifies dripsLeft against lowDrips: the one rule of "low"
// that the page, the alerts' threshold and the operator's Funded
// condition share.
func LevelOf(dripsLeft, lowDrips uint64) FundingLevel {
	switch {
	case dripsLeft == 0:
		return FundsEmpty
	case dripsLeft < lowDrips:
		return FundsLow
	}
	return FundsOK
}

// Refill resolves a treasury top-up rule in base units: below (0: the
// default of RefillBelowDrips drips of dripCost) and amount (0:
// RefillAmountFactor times below). A refill that would not lift a key
// above its threshold is refused.
func Refill(below, amount, dripCost uint64) (resolvedBelow, resolvedAmount uint64, err error) {
	if below == 0 {
		below = satMul(RefillBelowDrips, max(dripCost, 1))
	}
	if amount == 0 {
		amount = satMul(RefillAmountFactor, below)
	}
	if amount < below {
		return below, amount, fmt.Errorf("refill amount %d is below the refill threshold %d; a refill must lift a key above it", amount, below)
	}
	return below, amount, nil
}

func satAdd(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return math.MaxUint64
	}
	return a + b
}

func satMul(a, b uint64) uint64 {
	if a != 0 && b > math.MaxUint64/a {
		return math.MaxUint64
	}
	return a * b
}
