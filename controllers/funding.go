package controllers

import (
	"fmt"
	"math"
	"net/url"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
	"github.com/stxfaucet/faucet-operator/server/settings"
)

// This file holds the pure part of funding: from balances the
// FundingMonitor read to status.funding and the Funded condition. No client,
// no clock but the one passed in.

// fundingSample is the faucet keys' total balance at one time.
type fundingSample struct {
	at    time.Time
	total uint64
}

// fundingResult is what the FundingMonitor last learned about one
// FaucetServer's accounts. Balances are those of the last successful read;
// err is set when the latest attempt failed.
type fundingResult struct {
	target fundingTarget
	// ok is true once a read of the STX balances succeeded: balances,
	// treasury and checked are then valid.
	ok       bool
	balances []uint64 // aligned with target.addresses
	treasury uint64   // balance of target.treasury, when set
	checked  time.Time
	samples  []fundingSample // oldest first, successful reads only
	err      error           // the latest attempt's error; nil if it succeeded
	// nodes are the Stacks nodes as the last read's pool judged them,
	// aligned with target.nodeURLs; nil before the first. btcNodes are the
	// Bitcoin nodes', aligned with target.btc.rpcURLs.
	nodes, btcNodes []nodeReading
	// tokens, aligned with target.tokens, are read after the STX balances,
	// each on its own: one that fails keeps its last figures and says why.
	tokens []tokenResult
	// The BTC balance of target.btc.address, read from the Bitcoin node on
	// its own: btcOK once a read succeeded (btc and btcChecked are then
	// valid), btcErr the latest attempt's error.
	btcOK      bool
	btc        uint64
	btcChecked time.Time
	btcErr     error
}

// dripCost is the µSTX one default drip costs a key: the amount plus the
// fee fallback, the fee the server budgets for.
func dripCost(fs *faucetv1alpha1.FaucetServer) uint64 {
	amount, fee := settings.STXAmount, settings.FeeFallback
	if a := fs.Spec.Amounts; a != nil && a.Default != nil && *a.Default > 0 {
		amount = uint64(*a.Default)
	}
	if f := fs.Spec.Fee; f != nil && f.Fallback != nil && *f.Fallback > 0 {
		fee = uint64(*f.Fallback)
	}
	return settings.DripCost(amount, fee)
}

// btcDripCost is what one default BTC drip costs in sats: its amount. The
// payout's fee, paid from the same coins and shared by the drips a payout
// batches, is not counted.
func btcDripCost(b *faucetv1alpha1.BTCSpec) uint64 {
	amount := int64(faucetv1alpha1.DefaultBTCAmount)
	if b.Amounts != nil && b.Amounts.Default != nil && *b.Amounts.Default > 0 {
		amount = *b.Amounts.Default
	}
	return uint64(amount)
}

// lowThreshold is the faucet's one low threshold (FaucetServer.LowThreshold),
// the same the faucet gets as --low-drips.
func lowThreshold(fs *faucetv1alpha1.FaucetServer) int64 {
	low, _ := fs.LowThreshold()
	return low
}

// clampInt64 converts a balance for the status, which has int64 fields
// (kubectl prints them as plain integers). No testnet holds 2^63 µSTX.
func clampInt64(v uint64) int64 {
	if v > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(v)
}

// formatSTX renders µSTX as STX with two decimals, rounded down.
func formatSTX(ustx uint64) string {
	return fmt.Sprintf("%d.%02d", ustx/1_000_000, ustx%1_000_000/10_000)
}

// formatSTXExact renders µSTX as STX without trailing zeros, for messages.
func formatSTXExact(ustx uint64) string {
	s := fmt.Sprintf("%d.%06d", ustx/1_000_000, ustx%1_000_000)
	return strings.TrimSuffix(strings.TrimRight(s, "0"), ".")
}

// maxRunway caps the runway estimate: beyond it a number means nothing,
// and time.Duration overflows at about 292 years.
const maxRunway = 10 * 365 * 24 * time.Hour

// runway estimates how long spendable lasts at the spending rate the
// samples show: the sum of the decreases between consecutive samples
// (refills are not spending, so increases are ignored) over the time they
// span. false when there are fewer than two samples or nothing was spent;
// 0 when something was spent and nothing is left to spend.
func runway(samples []fundingSample, spendable uint64) (time.Duration, bool) {
	if len(samples) < 2 {
		return 0, false
	}
	span := samples[len(samples)-1].at.Sub(samples[0].at)
	if span <= 0 {
		return 0, false
	}
	var spent uint64
	for i := 1; i < len(samples); i++ {
		if prev, cur := samples[i-1].total, samples[i].total; cur < prev {
			spent += prev - cur
		}
	}
	if spent == 0 {
		return 0, false
	}
	if spendable == 0 {
		return 0, true
	}
	perSecond := float64(spent) / span.Seconds()
	secs := float64(spendable) / perSecond
	if secs >= maxRunway.Seconds() {
		return maxRunway, true
	}
	d := time.Duration(secs * float64(time.Second))
	if d >= time.Hour {
		// Minutes are as precise as an estimate from samples a minute
		// apart gets.
		return d.Round(time.Minute), true
	}
	return max(d.Round(time.Second), time.Second), true
}

// fundingOutcome is status.funding and the Funded condition for one result.
type fundingOutcome struct {
	status                  *faucetv1alpha1.FundingStatus
	condStatus              metav1.ConditionStatus
	condReason, condMessage string
}

// computeFunding derives status.funding and the Funded condition from the
// monitor's latest result. previous is the current status.funding, kept
// while the node cannot be read and there is no read of these addresses to
// report instead.
func computeFunding(fs *faucetv1alpha1.FaucetServer, res fundingResult, previous *faucetv1alpha1.FundingStatus) fundingOutcome {
	var out fundingOutcome
	if !res.ok {
		out.status = previous.DeepCopy()
	} else {
		out.status = fundingStatusOf(fs, res)
	}
	if res.err != nil {
		out.condStatus, out.condReason = metav1.ConditionUnknown, faucetv1alpha1.ReasonNodeUnreachable
		out.condMessage = truncate(fmt.Sprintf("cannot read the balances from the node %s: %v", redactURLs(res.target.nodeURLs), res.err), maxConditionMessage)
		return out
	}
	assets := append([]assetOutcome{stxOutcome(fs, out.status, lowThreshold(fs), res.target.addresses)}, assetOutcomes(fs, res, out.status)...)
	// The worst asset leads the message and decides the reason; a stable
	// sort keeps STX, then spec order, among equals.
	slices.SortStableFunc(assets, func(a, b assetOutcome) int { return b.severity() - a.severity() })
	parts := make([]string, len(assets))
	for i, a := range assets {
		parts[i] = a.message
	}
	out.condMessage = truncate(strings.Join(parts, "; "), maxConditionMessage)
	switch worst := assets[0]; {
	case worst.unknown != "":
		out.condStatus, out.condReason = metav1.ConditionUnknown, worst.unknown
	case worst.level == settings.FundsEmpty:
		out.condStatus, out.condReason = metav1.ConditionFalse, faucetv1alpha1.ReasonEmpty
	case worst.level == settings.FundsLow:
		out.condStatus, out.condReason = metav1.ConditionFalse, faucetv1alpha1.ReasonLow
	default:
		out.condStatus, out.condReason = metav1.ConditionTrue, faucetv1alpha1.ReasonFunded
	}
	return out
}

// stxOutcome judges the keys' STX. Its message is the whole Funded message
// of a faucet without other assets, as it was before there were any.
func stxOutcome(fs *faucetv1alpha1.FaucetServer, st *faucetv1alpha1.FundingStatus, low int64, addresses []string) assetOutcome {
	cost := dripCost(fs)
	o := assetOutcome{level: settings.LevelOf(uint64(max(st.DripsLeft, 0)), uint64(max(low, 0)))}
	o.message = fmt.Sprintf("%s STX on %d key(s): %d drip(s) of %s STX (amount plus fee fallback) left",
		formatSTXExact(uint64(max(st.TotalUSTX, 0))), len(st.Keys), st.DripsLeft, formatSTXExact(cost))
	switch o.level {
	case settings.FundsEmpty:
		o.message += ": no key can pay one drip; fund " + strings.Join(addresses, ", ")
	case settings.FundsLow:
		o.message += fmt.Sprintf(", below the low threshold of %d", low)
	}
	if st.Runway != nil {
		o.message += fmt.Sprintf("; about %s at the recent rate", st.Runway.Duration)
		if r := fs.STXReserve(); r > 0 {
			o.message += fmt.Sprintf(" before the reserve of %s STX (spec.budget.reserve)", formatSTXExact(r))
		}
	}
	return o
}

// redactURL drops the userinfo (a basic-auth password) from a node URL for
// messages.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(invalid URL)"
	}
	u.User = nil
	return u.String()
}

// redactURLs is redactURL of each, comma-separated.
func redactURLs(urls []string) string {
	out := make([]string, len(urls))
	for i, u := range urls {
		out[i] = redactURL(u)
	}
	return strings.Join(out, ", ")
}

// fundingStatusOf is status.funding for a successful read.
func fundingStatusOf(fs *faucetv1alpha1.FaucetServer, res fundingResult) *faucetv1alpha1.FundingStatus {
	cost := dripCost(fs)
	st := &faucetv1alpha1.FundingStatus{LastChecked: ptr.To(metav1.NewTime(res.checked.Truncate(time.Second)))}
	var total, drips uint64
	for i, addr := range res.target.addresses {
		bal := res.balances[i]
		d := bal / cost
		st.Keys = append(st.Keys, faucetv1alpha1.KeyFunding{Address: addr, BalanceUSTX: clampInt64(bal), DripsLeft: clampInt64(d)})
		total += bal
		drips += d
	}
	st.TotalUSTX, st.DripsLeft, st.BalanceSTX = clampInt64(total), clampInt64(drips), formatSTX(total)
	// The reserve of spec.budget is never paid out: it is no runway. The
	// samples still measure the spending of the whole balance.
	if d, ok := runway(res.samples, total-min(total, fs.STXReserve())); ok {
		st.Runway = &metav1.Duration{Duration: d}
	}
	if res.target.treasury != "" {
		st.Treasury = &faucetv1alpha1.AccountFunding{Address: res.target.treasury, BalanceUSTX: clampInt64(res.treasury)}
	}
	st.Assets = assetFundingsOf(fs, res)
	st.AssetsSummary = assetsSummary(st.Assets)
	return st
}

// nodesStatusOf is status.nodes and status.nodesSummary from the pool's
// view of the nodes: a node is reachable while it is in rotation, with its
// tip and lag behind the best of those; one out of rotation says why (it
// did not answer, lags the best tip, is of another chain).
func nodesStatusOf(nodes []nodeReading) ([]faucetv1alpha1.NodeHealth, string) {
	if len(nodes) == 0 {
		return nil, ""
	}
	var best uint64
	for _, n := range nodes {
		if n.out == "" {
			best = max(best, n.tip)
		}
	}
	out := make([]faucetv1alpha1.NodeHealth, len(nodes))
	up := 0
	for i, n := range nodes {
		out[i] = faucetv1alpha1.NodeHealth{URL: redactURL(n.url), Reachable: n.out == ""}
		if n.out != "" {
			out[i].Message = truncate(n.out, maxConditionMessage)
			continue
		}
		up++
		out[i].TipHeight = ptr.To(int64(n.tip))        //nolint:gosec // a block height
		out[i].LagBlocks = ptr.To(int64(best - n.tip)) //nolint:gosec // at most the height
	}
	return out, fmt.Sprintf("%d/%d", up, len(nodes))
}
