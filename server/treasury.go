package server

import (
	"context"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/stxfaucet/faucet-operator/server/faucet"
	"github.com/stxfaucet/faucet-operator/server/guard"
	"github.com/stxfaucet/faucet-operator/server/identity"
)

// The treasury's view, for the info document, the page and the metrics:
// what is left of each asset's budget (read from the store, shared by the
// replicas) and the runway — how long the spendable balance lasts at the
// outflow of the last hour. Each replica measures its own outflow against
// its own keys' balance: with replicas sharing the traffic, each sees
// about the faucet's runway.

// treasury decides how much a drip pays (the tier's amount, the reserve
// and target, the budget's pool: budget.go) and reports what is left of
// the budgets and how long the balance lasts. It owns the outflow it
// measures and its cache of budget reads; the server embeds it.
type treasury struct {
	limits *guard.RateLimits
	tiers  *identity.Tiers // nil: one anonymous tier
	engine Reporter        // read before the first block poll
	labels *catalogue
	clock  clock.PassiveClock
	log    *slog.Logger
	// signInOffered: the budget's refusal may point at sign-in.
	signInOffered bool

	outflow *outflow
	cache   budgetCache
}

func newTreasury(cfg *Config, labels *catalogue, log *slog.Logger) treasury {
	return treasury{limits: cfg.Limits, tiers: cfg.Tiers, engine: cfg.Faucet, labels: labels, clock: cfg.Clock, log: log,
		signInOffered: cfg.SignIn != nil, outflow: newOutflow(), cache: budgetCache{entries: map[faucet.Asset]budgetRead{}}}
}

// outflowWindow is the outflow the runway is measured over.
const outflowWindow = time.Hour

// outflow sums what each asset paid per minute over the last hour.
type outflow struct {
	mu     sync.Mutex
	assets map[faucet.Asset]*[60]minuteSum
}

type minuteSum struct {
	minute int64 // Unix minute
	amount uint64
}

func newOutflow() *outflow { return &outflow{assets: map[faucet.Asset]*[60]minuteSum{}} }

// add counts a paid drip of amount.
func (o *outflow) add(asset faucet.Asset, amount uint64, now time.Time) {
	m := now.Unix() / 60
	o.mu.Lock()
	defer o.mu.Unlock()
	ring := o.assets[asset]
	if ring == nil {
		ring = new([60]minuteSum)
		o.assets[asset] = ring
	}
	slot := &ring[m%60]
	if slot.minute != m {
		*slot = minuteSum{minute: m}
	}
	slot.amount += amount
}

// lastHour is what asset paid in the hour before now.
func (o *outflow) lastHour(asset faucet.Asset, now time.Time) uint64 {
	m := now.Unix() / 60
	o.mu.Lock()
	defer o.mu.Unlock()
	ring := o.assets[asset]
	if ring == nil {
		return 0
	}
	var sum uint64
	for _, s := range ring {
		if s.minute > m-60 && s.minute <= m {
			sum += s.amount
		}
	}
	return sum
}

// runway is how long asset's spendable balance above its reserve lasts at
// the last hour's outflow; ok is false when nothing flowed out (or the
// balance is unknown).
func (t *treasury) runway(asset faucet.Asset) (d time.Duration, ok bool) {
	out := t.outflow.lastHour(asset, t.clock.Now())
	if out == 0 {
		return 0, false
	}
	avail, share, known := t.spendable(asset)
	if !known {
		return 0, false
	}
	spare := float64(avail) - float64(t.budgetOf(asset).Reserve)*min(share, 1)
	if spare <= 0 {
		return 0, true
	}
	secs := spare / float64(out) * outflowWindow.Seconds()
	const maxRunway = 10 * 365 * 24 * time.Hour
	if secs >= maxRunway.Seconds() {
		return maxRunway, true
	}
	return time.Duration(secs * float64(time.Second)).Round(time.Second), true
}

// budgetCache keeps the last read of each asset's budget for a moment:
// the page polls the info document, and a store read per poll is waste.
type budgetCache struct {
	mu      sync.Mutex
	entries map[faucet.Asset]budgetRead
}

type budgetRead struct {
	at  time.Time
	use []guard.BudgetUse
}

const budgetCacheTTL = 2 * time.Second

// budgetLeft reads what is left of asset's budget: its total, then each
// tier's share that is smaller than the whole. nil without a budget or
// when the store cannot be read (logged).
func (t *treasury) budgetLeft(ctx context.Context, asset faucet.Asset) []guard.BudgetUse {
	if !t.budgetOf(asset).On() {
		return nil
	}
	now := t.clock.Now()
	t.cache.mu.Lock()
	if e, ok := t.cache.entries[asset]; ok && now.Sub(e.at) < budgetCacheTTL {
		t.cache.mu.Unlock()
		return e.use
	}
	t.cache.mu.Unlock()
	use, err := t.limits.Budgets(ctx, string(asset.OrSTX()), t.shares())
	if err != nil {
		t.log.Warn("reading the budget failed", "asset", string(asset), "err", err)
		return nil
	}
	t.cache.mu.Lock()
	t.cache.entries[asset] = budgetRead{at: now, use: use}
	t.cache.mu.Unlock()
	return use
}

// forget drops asset's cached budget read: a drip just drew from it.
func (c *budgetCache) forget(asset faucet.Asset) {
	c.mu.Lock()
	delete(c.entries, asset)
	c.mu.Unlock()
}

// shares are the tiers whose budget share is a pool of its own (not the
// anonymous tier's when anonymous drips are off: nobody draws from it).
func (t *treasury) shares() []guard.TierShare {
	if t.tiers == nil {
		return nil
	}
	var out []guard.TierShare
	for i, tier := range t.tiers.All() {
		if i == 0 && t.tiers.AnonymousOff {
			continue
		}
		if tier.Share() < 100 {
			out = append(out, guard.TierShare{Tier: tier.Name, Percent: tier.Share()})
		}
	}
	return out
}

// infoBudget is an asset's budget in the info document, in its base
// units: the total per period, what is left of it now, and each tier's
// share with its own rest.
type infoBudget struct {
	Amount            uint64      `json:"amount"`
	PeriodSeconds     int64       `json:"period_seconds"`
	Left              uint64      `json:"left"`
	ScaleBelowPercent int         `json:"scale_below_percent"`
	FloorPercent      int         `json:"floor_percent"`
	Shares            []infoShare `json:"shares,omitempty"`
	// StackingShare is what stacking drips may take of an STX budget
	// together, and its rest (absent when they have no share of their
	// own).
	StackingShare *infoStackingShare `json:"stacking_share,omitempty"`
	Reserve       uint64             `json:"reserve,omitempty"`
	Target        uint64             `json:"target,omitempty"`
}

type infoStackingShare struct {
	Percent int    `json:"percent"`
	Amount  uint64 `json:"amount"`
	Left    uint64 `json:"left"`
}

type infoShare struct {
	Tier    string `json:"tier"`
	Percent int    `json:"percent"`
	Amount  uint64 `json:"amount"`
	Left    uint64 `json:"left"`
}

// budgetInfo is asset's budget for the info document (nil: none).
func (t *treasury) budgetInfo(ctx context.Context, asset faucet.Asset) *infoBudget {
	b := t.budgetOf(asset)
	if !b.On() {
		if b.Reserve > 0 || b.Target > 0 {
			return &infoBudget{Reserve: b.Reserve, Target: b.Target}
		}
		return nil
	}
	out := &infoBudget{Amount: b.Amount, PeriodSeconds: int64(b.Per / time.Second), Left: b.Amount,
		ScaleBelowPercent: b.ScaleBelow(), FloorPercent: b.Floor(), Reserve: b.Reserve, Target: b.Target}
	use := t.budgetLeft(ctx, asset)
	if len(use) > 0 {
		out.Left = use[0].Left
	}
	shares := t.shares()
	for i, sh := range shares {
		is := infoShare{Tier: sh.Tier, Percent: sh.Percent, Amount: guard.PercentOf(b.Amount, sh.Percent)}
		is.Left = is.Amount
		if i+1 < len(use) {
			is.Left = use[i+1].Left
		}
		out.Shares = append(out.Shares, is)
	}
	if asset.OrSTX() == faucet.AssetSTX && b.Stacking() < 100 {
		ss := &infoStackingShare{Percent: b.Stacking(), Amount: guard.PercentOf(b.Amount, b.Stacking())}
		ss.Left = ss.Amount
		if i := len(shares) + 1; i < len(use) {
			ss.Left = use[i].Left
		}
		out.StackingShare = ss
	}
	return out
}

// infoRunway is the runway of an asset in the info document.
type infoRunway struct {
	// Seconds is how long the spendable balance above the reserve lasts
	// at OutflowLastHour; null when nothing flowed out.
	Seconds         *int64 `json:"seconds"`
	OutflowLastHour uint64 `json:"outflow_last_hour"`
}

func (t *treasury) runwayInfo(asset faucet.Asset) *infoRunway {
	r := &infoRunway{OutflowLastHour: t.outflow.lastHour(asset, t.clock.Now())}
	if d, ok := t.runway(asset); ok {
		secs := int64(d / time.Second)
		r.Seconds = &secs
	}
	return r
}

// treasuryCollector exports each asset's runway, outflow and budget.
type treasuryCollector struct {
	mu                         sync.Mutex
	s                          *server // nil until New
	runway, outflow, remaining *prometheus.Desc
	amount                     *prometheus.Desc
}

func newTreasuryCollector() *treasuryCollector {
	return &treasuryCollector{
		runway: prometheus.NewDesc("faucet_runway_seconds",
			"How long the spendable balance above the reserve lasts at the last hour's outflow (+Inf when nothing flowed out), by asset, as this replica sees its keys.", []string{"asset"}, nil),
		outflow: prometheus.NewDesc("faucet_outflow_last_hour",
			"Base units (µSTX, satoshis, a token's) this replica paid in drips over the last hour, by asset.", []string{"asset"}, nil),
		remaining: prometheus.NewDesc("faucet_budget_remaining",
			"Base units left of an asset's budget in its current window, by pool (total, or a tier's share).", []string{"asset", "pool"}, nil),
		amount: prometheus.NewDesc("faucet_budget_amount",
			"An asset's budget per window, in base units (absent: no budget).", []string{"asset"}, nil),
	}
}

func (c *treasuryCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.runway
	ch <- c.outflow
	ch <- c.remaining
	ch <- c.amount
}

func (c *treasuryCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	s := c.s
	c.mu.Unlock()
	if s == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	for _, name := range s.assetNames() {
		a := faucet.Asset(name)
		rw := math.Inf(1)
		if d, ok := s.runway(a); ok {
			rw = d.Seconds()
		}
		ch <- prometheus.MustNewConstMetric(c.runway, prometheus.GaugeValue, rw, name)
		ch <- prometheus.MustNewConstMetric(c.outflow, prometheus.GaugeValue, float64(s.outflow.lastHour(a, s.cfg.Clock.Now())), name)
		b := s.budgetOf(a)
		if !b.On() {
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.amount, prometheus.GaugeValue, float64(b.Amount), name)
		use := s.budgetLeft(ctx, a)
		// The stacking share, last when there is one, is "+stacking": no
		// tier can be named so.
		pools := append(append([]string{"total"}, tierNames(s.shares())...), guard.StackingPool)
		for i, u := range use {
			if i < len(pools) {
				ch <- prometheus.MustNewConstMetric(c.remaining, prometheus.GaugeValue, float64(u.Left), name, pools[i])
			}
		}
	}
}

func tierNames(shares []guard.TierShare) []string {
	out := make([]string, len(shares))
	for i, sh := range shares {
		out[i] = sh.Tier
	}
	return out
}

// set makes the collector report s.
func (c *treasuryCollector) set(s *server) {
	c.mu.Lock()
	c.s = s
	c.mu.Unlock()
}
