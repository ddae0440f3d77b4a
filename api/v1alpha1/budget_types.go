package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BudgetSpec bounds what one asset pays out in total, whoever asks: at
// most amount base units in any window of per, the window sliding (a
// drip's amount leaves it per/60 after per). Every tier of requesters
// draws from it; the anonymous tier and each sign-in tier may be held to
// a share of it (spec.identity). As less of it is left, drips shrink, and
// a reserve is never paid out. It becomes one `faucet serve --budget`
// (asset=…,amount=…,per=…,scale-below=…,floor=…,reserve=…,target=…, and
// for STX stacking=…).
//
// amount is required: the server's --budget has no "default amount", so
// a budget that only sets a reserve must state its amount too (the
// default is 2,000 drips of the asset's amount; 0 turns the budget off
// and keeps the reserve).
// +kubebuilder:validation:XValidation:rule="!has(self.target) || self.target == 0 || self.target > (has(self.reserve) ? self.reserve : 0)",message="budget.target must be above budget.reserve: drips shrink from a full drip at the target to the floor at the reserve (0 or unset: they never shrink with the balance)",fieldPath=".target"
type BudgetSpec struct {
	// amount is the most the asset pays out in any window of per, in its
	// base units: µSTX for spec.budget, a token's base units or sats for
	// an entry of spec.assets. 0 turns the budget off (the reserve and
	// target still apply). Required: leave budget out for the default of
	// 2,000 drips per 24h.
	// +required
	// +kubebuilder:validation:XValidation:rule="self >= 0",message="budget.amount must be 0 or more base units (0 turns the budget off)"
	Amount *int64 `json:"amount,omitempty"`

	// per is the budget's window, as a duration ("24h", "1h"): at least
	// 1m, as the window slides in 60 steps. Defaults to 24h.
	// +optional
	// +kubebuilder:default="24h"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m')",message="budget.per must be at least 1m: the window slides in 60 steps"
	Per *metav1.Duration `json:"per,omitempty"`

	// scaleBelowPercent: once less than this percent of the budget (or of
	// a tier's share of it) is left, drips shrink linearly, down to
	// floorPercent of a full drip when it is used up. 1 to 100 (100
	// shrinks them from the start); the faucet reads 0 as its default, so
	// 0 is refused. Defaults to 25.
	// +optional
	// +kubebuilder:default=25
	// +kubebuilder:validation:XValidation:rule="self >= 1 && self <= 100",message="budget.scaleBelowPercent must be 1 to 100 (the percent of the budget left below which drips shrink); the faucet would read 0 as its default, 25"
	ScaleBelowPercent *int32 `json:"scaleBelowPercent,omitempty"`

	// floorPercent is the smallest drip, in percent of a full one: a drip
	// that does not fit at its floor is refused until enough of the
	// window has passed. 1 to 100 (100 never shrinks drips); the faucet
	// reads 0 as its default, so 0 is refused. Defaults to 10.
	// +optional
	// +kubebuilder:default=10
	// +kubebuilder:validation:XValidation:rule="self >= 1 && self <= 100",message="budget.floorPercent must be 1 to 100 (the smallest drip, in percent of a full one; 100 never shrinks drips); the faucet would read 0 as its default, 10"
	FloorPercent *int32 `json:"floorPercent,omitempty"`

	// reserve is kept on the faucet's keys (for STX: in total, for fees)
	// and never paid out in drips, in base units. The runway the faucet
	// reports (faucet_runway_seconds) and, for STX, status.funding.runway
	// count only the balance above it. Unset: none.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self >= 0",message="budget.reserve must be 0 or more base units"
	Reserve *int64 `json:"reserve,omitempty"`

	// target is the balance below which drips shrink with it, in base
	// units: a full drip at the target, floorPercent of one at the
	// reserve. It must be above the reserve. Unset or 0: drips do not
	// shrink with the balance.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self >= 0",message="budget.target must be 0 or more base units"
	Target *int64 `json:"target,omitempty"`

	// stackingPercent is the most of the STX budget that stacking drips
	// (each PoX's minimum plus a margin, hundreds of default drips) take
	// together in a window, so that a run of them cannot starve default
	// drips. 1 to 100 (100: no share of their own, only the budget's
	// total); the faucet reads 0 as its default, so 0 is refused. Unset:
	// the faucet's default, 50. Only in spec.budget: stacking drips are
	// STX only, so an entry of spec.assets refuses it.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self >= 1 && self <= 100",message="budget.stackingPercent must be 1 to 100 (the most of the STX budget stacking drips take together; 100 gives them no share of their own); the faucet would read 0 as its default, 50"
	StackingPercent *int32 `json:"stackingPercent,omitempty"`
}
