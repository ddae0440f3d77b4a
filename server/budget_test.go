package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/faucet"
	"github.com/stxfaucet/faucet-operator/server/guard"
	clocktesting "k8s.io/utils/clock/testing"
)

const ustx = 1_000_000

// budgetLimits is a budget of amount µSTX per hour for STX alone, no other
// limit.
func budgetLimits(amount uint64) guard.Limits {
	return guard.Limits{Budgets: map[string]guard.Budget{"stx": {Amount: amount, Per: time.Hour}}}
}

// paidSTX is the µSTX a v3 drip answer says it paid.
func paidSTX(t *testing.T, w *httptest.ResponseRecorder) uint64 {
	t.Helper()
	var b struct {
		Amount map[string]string `json:"amount"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil {
		t.Fatalf("v3 answer %s: %v", w.Body, err)
	}
	v, err := strconv.ParseUint(b.Amount["stx"], 10, 64)
	if err != nil {
		t.Fatalf("v3 amount %q: %v", b.Amount["stx"], err)
	}
	return v
}

// A budget of 1,900 STX an hour: three full drips of 500, a fourth scaled
// to the 400 left, then budget_exhausted everywhere — v3 503 and v1 500
// with Retry-After, the RateLimit fields and eligibility saying the same
// wait — until the step the drips fell in leaves the window, to the
// second. The engine pays exactly the scaled amount.
func TestBudgetScalesRefusesAndRefills(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	h := newHarness(t, options{limits: budgetLimits(1900 * ustx), clock: clk})
	ctx := t.Context()
	var paid []uint64
	var last string
	for range 4 {
		last = newRecipient(t)
		w := h.dripV3(`{"address":"`+last+`"}`, nil)
		if w.Code != http.StatusOK {
			t.Fatalf("drip %d: %d %s", len(paid)+1, w.Code, w.Body)
		}
		paid = append(paid, paidSTX(t, w))
	}
	if want := []uint64{500 * ustx, 500 * ustx, 500 * ustx, 400 * ustx}; !slices.Equal(paid, want) {
		t.Fatalf("paid %v, want %v", paid, want)
	}
	// Everything fell in the clock's step, which leaves the hour's window
	// at its end plus the hour.
	idx := guard.StepIndex(clk.Now(), time.Minute)
	wait := guard.StepExpiry(idx, time.Hour, time.Minute).Sub(clk.Now())
	secs := retryAfterSeconds(wait)

	to := newRecipient(t)
	el, _ := h.eligibility("asset=stx&address="+to, nil)
	if el.Eligible || el.Reason != reasonBudgetExhausted || el.RetryAfterSeconds != secs || !strings.Contains(el.Detail, "1,900 STX per 1 h") {
		t.Fatalf("eligibility %+v, want budget_exhausted in %ds", el, secs)
	}
	w := h.dripV3(`{"address":"`+to+`"}`, nil)
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != strconv.FormatInt(secs, 10) {
		t.Fatalf("v3: %d Retry-After %q %s, want 503 %d", w.Code, w.Header().Get("Retry-After"), w.Body, secs)
	}
	if rl := w.Header().Get("RateLimit"); !strings.Contains(rl, `"budget";r=0;t=`+strconv.FormatInt(secs, 10)) {
		t.Fatalf("RateLimit %q", rl)
	}
	w = h.drip("address=" + to)
	body := assertError(t, w, http.StatusInternalServerError, "budget")
	if body["reason"] != reasonBudgetExhausted || body["retry_after_seconds"] != float64(secs) {
		t.Fatalf("v1: %v", body)
	}

	clk.Step(wait - time.Second)
	if el, _ := h.eligibility("asset=stx&address="+to, nil); el.Eligible || el.RetryAfterSeconds != 1 {
		t.Fatalf("a second early: %+v", el)
	}
	clk.Step(time.Second)
	if el, _ := h.eligibility("asset=stx&address="+to, nil); !el.Eligible || el.Amount != strconv.Itoa(500*ustx) {
		t.Fatalf("once the step left: %+v", el)
	}
	if w := h.dripV3(`{"address":"`+to+`"}`, nil); w.Code != http.StatusOK || paidSTX(t, w) != 500*ustx {
		t.Fatalf("after the refill: %d %s", w.Code, w.Body)
	}

	h.dn.Mine()
	addr, _ := stacks.ParseTestnetPrincipal(last)
	acct, err := h.client.Account(ctx, addr.String())
	if err != nil || acct.Balance != 400*ustx {
		t.Fatalf("the scaled drip's recipient holds %+v (%v), want 400 STX", acct, err)
	}
	if got := counterValue(t, h.reg, "faucet_drips_total", map[string]string{"asset": "stx", "outcome": "error", "reason": reasonBudgetExhausted}); got != 2 {
		t.Fatalf("%v budget_exhausted drips counted, want 2", got)
	}
}

// A drip the engine fails gives its draw back: the budget is charged only
// for what was sent.
func TestBudgetGivenBackOnFailure(t *testing.T) {
	h := newHarness(t, options{limits: budgetLimits(1000 * ustx), unfunded: true})
	for range 3 {
		if w := h.drip("address=" + newRecipient(t)); w.Code == http.StatusOK {
			t.Fatalf("an unfunded faucet dripped: %s", w.Body)
		}
	}
	info := h.info()
	b := info.Assets[0].Budget
	if b == nil || b.Amount != 1000*ustx || b.Left != 1000*ustx {
		t.Fatalf("budget after failed drips: %+v", b)
	}
}

// A stacking drip is whole or nothing: it is never scaled, and a budget
// that cannot pay it whole refuses it while default drips still pass.
func TestBudgetStackingIsWhole(t *testing.T) {
	lim := budgetLimits(200_000 * ustx)
	lim.Budgets["stx"] = guard.Budget{Amount: 200_000 * ustx, Per: time.Hour, StackingPercent: 100} // no share of their own
	h := newHarness(t, options{limits: lim})
	stack, err := h.f.StackingAmount(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if w := h.drip("address=" + newRecipient(t) + "&stacking=true"); w.Code != http.StatusOK {
		t.Fatalf("first stacking drip: %d %s", w.Code, w.Body)
	}
	// 200,000 − 150,000 left: no second whole one.
	w := h.drip("address=" + newRecipient(t) + "&stacking=true")
	if body := assertError(t, w, http.StatusInternalServerError, "budget"); body["reason"] != reasonBudgetExhausted {
		t.Fatalf("second stacking drip (%d of %d left): %v", 200_000*ustx-stack, stack, body)
	}
	if w := h.dripV3(`{"address":"`+newRecipient(t)+`"}`, nil); w.Code != http.StatusOK || paidSTX(t, w) != 500*ustx {
		t.Fatalf("a default drip beside it: %d %s", w.Code, w.Body)
	}
}

// Stacking drips take at most their share of the STX budget (50 % by
// default), together: a farm of fresh addresses asking for stacking drips,
// each worth 300 default drips, empties that share and no more, and
// default drips go on being paid in full. The refusal says which share is
// spent; eligibility and the info document agree.
func TestStackingShareLeavesDefaultDripsTheirPart(t *testing.T) {
	h := newHarness(t, options{limits: budgetLimits(400_000 * ustx)})
	stack, err := h.f.StackingAmount(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if w := h.drip("address=" + newRecipient(t) + "&stacking=true"); w.Code != http.StatusOK {
		t.Fatalf("first stacking drip: %d %s", w.Code, w.Body)
	}
	// 150,000 of the share's 200,000 taken: no second whole one, though
	// the budget has 250,000 left.
	next := newRecipient(t)
	el, _ := h.eligibility("address="+next+"&stacking=true", nil)
	if el.Eligible || el.Reason != reasonBudgetExhausted || !strings.Contains(el.Detail, "stacking drips' share (50 %)") {
		t.Errorf("eligibility of a second stacking drip: %+v", el)
	}
	w := h.drip("address=" + next + "&stacking=true")
	body := assertError(t, w, http.StatusInternalServerError, "budget")
	if body["reason"] != reasonBudgetExhausted || !strings.Contains(body["detail"].(string), "stacking drips' share (50 %) of the STX budget of 400,000 STX per 1 h is used up; default drips are still paid") {
		t.Fatalf("second stacking drip: %v", body)
	}
	for range 3 {
		if w := h.dripV3(`{"address":"`+newRecipient(t)+`"}`, nil); w.Code != http.StatusOK || paidSTX(t, w) != 500*ustx {
			t.Fatalf("a default drip after the stacking share is spent: %d %s", w.Code, w.Body)
		}
	}
	b := h.info().Assets[0].Budget
	if b == nil || b.StackingShare == nil {
		t.Fatalf("info budget: %+v", b)
	}
	if ss := *b.StackingShare; ss.Percent != 50 || ss.Amount != 200_000*ustx || ss.Left != 200_000*ustx-stack {
		t.Errorf("info stacking share: %+v, want 50 %% of 400,000 STX with %d left", ss, 200_000*ustx-stack)
	}
	if want := 400_000*ustx - stack - 3*500*ustx; b.Left != want {
		t.Errorf("info budget left %d, want %d", b.Left, want)
	}
}

// The reserve is never paid out: a faucet at its reserve answers as out of
// funds (v1 STX 500, v3 503), and below its target drips scale with the
// balance.
func TestReserveAndTarget(t *testing.T) {
	lim := budgetLimits(0)
	lim.Budgets["stx"] = guard.Budget{Reserve: testFunding - 400*ustx, Target: testFunding + 9_000*ustx}
	h := newHarness(t, options{limits: lim})
	// 400 STX above the reserve; target − reserve = 9,400: 10 + 90 × 400/9,400 = 13 % — then capped
	// by the spare balance, 400 of 500 = 80 %, so 13 %.
	w := h.dripV3(`{"address":"`+newRecipient(t)+`"}`, nil)
	if w.Code != http.StatusOK || paidSTX(t, w) != 65*ustx {
		t.Fatalf("below the target: %d %s, want 65 STX", w.Code, w.Body)
	}
	lim.Budgets["stx"] = guard.Budget{Reserve: testFunding}
	h = newHarness(t, options{limits: lim})
	w = h.dripV3(`{"address":"`+newRecipient(t)+`"}`, nil)
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), v3OutOfFunds) {
		t.Fatalf("at the reserve, v3: %d %s", w.Code, w.Body)
	}
	body := assertError(t, h.drip("address="+newRecipient(t)), http.StatusInternalServerError, "out of funds")
	if body["reason"] != string(faucet.ReasonExhausted) || !strings.Contains(body["detail"].(string), "reserve") {
		t.Fatalf("at the reserve, v1: %v", body)
	}
}

// The info document and the metrics show what is left and the runway.
func TestBudgetInfoAndRunway(t *testing.T) {
	h := newHarness(t, options{limits: budgetLimits(10_000 * ustx)})
	if w := h.drip("address=" + newRecipient(t)); w.Code != http.StatusOK {
		t.Fatalf("drip: %d %s", w.Code, w.Body)
	}
	info := h.info()
	stx := info.Assets[0]
	if b := stx.Budget; b == nil || b.Left != 9_500*ustx || b.PeriodSeconds != 3600 || b.FloorPercent != guard.DefaultFloorPercent {
		t.Fatalf("budget %+v", b)
	}
	if r := stx.Runway; r == nil || r.OutflowLastHour != 500*ustx || r.Seconds == nil || *r.Seconds <= 0 {
		t.Fatalf("runway %+v", r)
	}
	// The 999,500 STX left at 500 an hour: 1,999 hours.
	if got := time.Duration(*stx.Runway.Seconds) * time.Second; got != 1999*time.Hour {
		t.Fatalf("runway %v, want 1999h", got)
	}
	metrics := h.do(http.MethodGet, "/metrics", nil, nil).Body.String()
	for _, want := range []string{
		`faucet_budget_remaining{asset="stx",pool="total"} 9.5e+09`,
		`faucet_budget_remaining{asset="stx",pool="+stacking"} 5e+09`, // half of it, untouched by a default drip
		`faucet_budget_amount{asset="stx"} 1e+10`,
		`faucet_runway_seconds{asset="stx"} 7.1964e+06`,
		`faucet_outflow_last_hour{asset="stx"} 5e+08`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func (h *harness) info() infoBody {
	h.t.Helper()
	w := h.do(http.MethodGet, pathInfo, nil, nil)
	var b infoBody
	if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil {
		h.t.Fatalf("info: %v %s", err, w.Body)
	}
	return b
}
