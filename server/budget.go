package server

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/stxfaucet/faucet-operator/server/faucet"
	"github.com/stxfaucet/faucet-operator/server/guard"
	"github.com/stxfaucet/faucet-operator/server/identity"
)

// How much a drip pays is decided before the limits, in three steps:
//
//  1. the asset's drip (the stacking amount, a BTC size), times the
//     requester's tier (a signed-in tier may get twice it);
//  2. the treasury: no drip may take the balance below the asset's
//     reserve, and below its target drips scale down with the balance;
//  3. the budget: the limits' reservation draws the drip from the asset's
//     budget and the tier's share of it, scaled down when little is left
//     (see guard.Budget), in the same atomic step as the rate-limit slots.
//
// An asset with none of these configured skips all three: the engine pays
// its configured drip, as before budgets existed.

// Drip failures of the budget and the reserve.
const (
	reasonBudgetExhausted = "budget_exhausted"
)

// budgetOf is asset's budget (zero when it has none).
func (t *treasury) budgetOf(asset faucet.Asset) guard.Budget {
	return t.limits.Limits().Budgets[string(asset.OrSTX())]
}

// quoted reports whether a drip of asset by tier needs its amount decided
// here: a budget, a reserve or target, or a tier that scales the drip.
func (t *treasury) quoted(asset faucet.Asset, tier *identity.Tier) bool {
	b := t.budgetOf(asset)
	return b.On() || b.Reserve > 0 || b.Target > 0 || tier.Amount() != 100
}

// plan fills adm's amount fields for a drip whose configured amount base
// gives: the tier's factor, the treasury's cap and the budget's pool. It
// returns false when the treasury cannot pay the drip above its reserve.
func (t *treasury) plan(ctx context.Context, adm *guard.Admission, asset faucet.Asset, base uint64, tier *identity.Tier) bool {
	want := guard.PercentOf(base, tier.Amount())
	adm.Want = want
	if adm.Stacking {
		// A stacking drip is useful whole or not at all: PoX needs its
		// minimum.
		adm.Floor = 100
	}
	if tier != nil {
		adm.Pool, adm.PoolPercent = tier.Name, tier.Share()
	}
	b := t.budgetOf(asset)
	if b.Reserve == 0 && b.Target == 0 {
		return true
	}
	avail, share, known := t.spendable(asset)
	if !known {
		// Before the first block poll the keys' balances are unknown:
		// read them, so that the first drip after a start keeps the
		// reserve too.
		_ = t.engine.Ready(ctx)
		avail, share, known = t.spendable(asset)
	}
	if !known {
		return true // the engine answers for a faucet that knows no balance
	}
	// Each replica pays from its own keys: the reserve and target are the
	// treasury's, in proportion.
	scaled := b
	scaled.Reserve, scaled.Target = scaleShare(b.Reserve, share), scaleShare(b.Target, share)
	if adm.Floor > 0 {
		scaled.FloorPercent = adm.Floor
	}
	pct, ok := scaled.BalancePercent(avail, want)
	adm.MaxPercent = pct
	return ok
}

// spendable is what this replica can pay of asset now, and its share of
// the treasury (the keys it counts among all); known is false before it
// has read any balance.
func (t *treasury) spendable(asset faucet.Asset) (avail uint64, share float64, known bool) {
	a, ok := t.labels.lookup(asset)
	if !ok {
		return 0, 0, false
	}
	return a.funds()
}

func scaleShare(v uint64, share float64) uint64 {
	if share >= 1 {
		return v
	}
	return uint64(float64(v) * share)
}

// reserveFailure answers a drip the treasury cannot pay without going
// below its reserve: the faucet's "out of funds", as the engine's.
func (t *treasury) reserveFailure(asset faucet.Asset) *dripFailure {
	return &dripFailure{status: t.exhaustedV1(asset), reason: string(faucet.ReasonExhausted), message: dripErrorText[faucet.ReasonExhausted],
		detail:   "the faucet keeps its last " + t.labels.assetLabel(asset) + " in reserve for fees",
		v3Status: http.StatusServiceUnavailable, v3Message: v3OutOfFunds}
}

// budgetFailure answers a drip the budget refused: 503 with Retry-After
// (v1 STX keeps the seed's 500), whose detail says which share is spent.
func (t *treasury) budgetFailure(asset faucet.Asset, ex *guard.Exhausted, tier *identity.Tier) *dripFailure {
	label := t.labels.assetLabel(asset)
	msg := "The faucet has paid out its " + label + " budget for now; try again later"
	f := &dripFailure{status: t.exhaustedV1(asset), reason: reasonBudgetExhausted, message: msg,
		retryAfter: retryAfterSeconds(ex.RetryAfter), v3Status: http.StatusServiceUnavailable, v3Message: msg}
	budget := t.budgetOf(asset)
	of := "the " + label + " budget of " + t.formatAmount(asset, budget.Amount) + " per " + formatPeriod(budget.Per)
	switch {
	case ex.Pool == guard.PoolKey(string(asset.OrSTX()), guard.StackingPool, budget.Per):
		f.detail = "stacking drips' share (" + strconv.Itoa(budget.Stacking()) + " %) of " + of + " is used up; default drips are still paid"
	case ex.Pool != "" && tier != nil:
		f.detail = "the " + tier.Name + " share (" + strconv.Itoa(tier.Share()) + " %) of " + of + " is used up"
		if tier.Name == identity.AnonymousName && t.signInOffered {
			f.detail += "; signed-in developers draw from a share of their own: sign in on the faucet's page or send an ID token"
		}
	default:
		f.detail = of + " is used up"
	}
	return f
}

// formatAmount writes base units of asset in its own unit for people
// ("1000000 STX", "0.5 BTC"), or in base units when its decimals are
// unknown.
func (t *treasury) formatAmount(asset faucet.Asset, v uint64) string {
	dec := -1
	if a, ok := t.labels.lookup(asset); ok {
		dec = a.decimals()
	}
	if dec < 0 {
		return strconv.FormatUint(v, 10) + " base units of " + t.labels.assetLabel(asset)
	}
	return decimalString(v, dec) + " " + t.labels.assetLabel(asset)
}

// decimalString writes v / 10^dec, its whole part grouped by thousands
// and without trailing zeros ("1,750", "0.5").
func decimalString(v uint64, dec int) string {
	s := strconv.FormatUint(v, 10)
	for len(s) <= dec {
		s = "0" + s
	}
	whole, frac := s[:len(s)-dec], strings.TrimRight(s[len(s)-dec:], "0")
	for i := len(whole) - 3; i > 0; i -= 3 {
		whole = whole[:i] + "," + whole[i:]
	}
	if frac == "" {
		return whole
	}
	return whole + "." + frac
}

// exhaustedV1 is the v1 status of asset's empty faucet or spent budget.
func (t *treasury) exhaustedV1(asset faucet.Asset) int {
	if a, ok := t.labels.lookup(asset); ok {
		return a.exhaustedV1
	}
	return http.StatusServiceUnavailable
}

// formatPeriod writes d as people say it: "24 h", "90 min", "45 s".
func formatPeriod(d time.Duration) string {
	switch {
	case d >= time.Hour && d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + " h"
	case d >= time.Minute && d%time.Minute == 0:
		return strconv.FormatInt(int64(d/time.Minute), 10) + " min"
	case d%time.Second == 0:
		return strconv.FormatInt(int64(d/time.Second), 10) + " s"
	}
	return d.String()
}
