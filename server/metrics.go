package server

import (
	"errors"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/stxfaucet/faucet-operator/server/btcfaucet"
	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/faucet"
	"github.com/stxfaucet/faucet-operator/server/guard"
	"github.com/stxfaucet/faucet-operator/server/settings"
)

// Metrics holds the faucet's Prometheus metrics. One Metrics may back several
// handlers built by New (tests do that); every collector is registered once,
// in NewMetrics, so that never double-registers.
type Metrics struct {
	gatherer prometheus.Gatherer

	drips     *prometheus.CounterVec
	dispensed *prometheus.CounterVec
	// dispensedToken counts token base units sent, by asset.
	dispensedToken *prometheus.CounterVec
	nodeCalls      *prometheus.HistogramVec
	httpReqs       *prometheus.HistogramVec
	keys           *keyCollector
	// dispensedBTC counts sats sent by BTC drips, by size.
	dispensedBTC *prometheus.CounterVec
	// rejections counts drips refused by an abuse check, by check.
	rejections *prometheus.CounterVec
	// tokenFailures counts wrong API tokens, each a step towards its
	// client's lock-out.
	tokenFailures prometheus.Counter
	guard         *guardCollector
	// suspended is 1 for each served asset the operator suspended.
	suspended *prometheus.GaugeVec
	nodes     *nodeCollector
	btcNodes  *nodeCollector
	treasury  *treasuryCollector
}

// Drip outcomes and the reasons of requests refused before reaching the engine.
// Every label value is a constant, so the series count stays bounded.
const (
	outcomeSuccess = "success"
	outcomeError   = "error"

	reasonInvalidRequest = "invalid_request" // any 400
	reasonInternal       = "internal"        // an error the engine did not classify
	reasonRateLimited    = "rate_limited"    // a rate limit refused the drip
	reasonNotConfigured  = "not_configured"  // BTC drips with no Bitcoin node configured
	// reasonRejectedByCheck: an abuse check refused the drip; which one is
	// in faucet_check_rejections_total.
	reasonRejectedByCheck = "check_rejected"
)

// NewMetrics registers the faucet's metrics, plus the Go runtime and process
// collectors, with reg. A nil reg gets a fresh private registry. /metrics
// serves what reg gathers when reg is also a Gatherer (a *prometheus.Registry
// is), else the default gatherer.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m := &Metrics{
		drips: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "faucet_drips_total",
			Help: "Drip requests by asset (stx, each configured token, btc) and outcome; reason is the failure class (empty on success).",
		}, []string{"asset", "outcome", "reason"}),
		dispensedToken: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "faucet_dispensed_token_total",
			Help: "Token base units sent in accepted drip transactions, by asset (each configured token).",
		}, []string{"asset"}),
		dispensed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "faucet_dispensed_ustx_total",
			Help: "µSTX sent in accepted drip transactions, by tier (fees excluded).",
		}, []string{"tier"}),
		nodeCalls: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "faucet_node_rpc_duration_seconds",
			Help:    "Duration of Stacks node RPC calls.",
			Buckets: prometheus.DefBuckets,
		}, []string{"call", "result"}),
		httpReqs: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "faucet_http_request_duration_seconds",
			Help: "Duration of HTTP requests by route pattern, method and status code.",
			// Drips wait for the node's mempool, so the tail reaches tens of seconds.
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"route", "method", "code"}),
		keys: newKeyCollector(), treasury: newTreasuryCollector(),
		nodes: newNodeCollector("stacks", "Stacks"), btcNodes: newNodeCollector("bitcoin", "Bitcoin"),
		dispensedBTC: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "faucet_dispensed_btc_sats_total",
			Help: "Satoshis sent by accepted BTC drips (payout fees excluded).",
		}, nil),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "faucet_check_rejections_total",
			Help: "Drip requests refused by an abuse check (ip_deny, token_lockout, api_token, proof_of_work, balance_cap).",
		}, []string{"check"}),
		tokenFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "faucet_api_token_failures_total",
			Help: "Drip requests whose Bearer API token was wrong (401); enough from one client address lock it out (token_lockout).",
		}),
		suspended: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "faucet_asset_suspended",
			Help: "1 for an asset whose drips the operator suspended (--suspend, --suspend-asset), 0 for the other assets the faucet drips.",
		}, []string{"asset"}),
		guard: &guardCollector{
			difficulty: prometheus.NewDesc("faucet_pow_difficulty", "Proof-of-work difficulty (leading zero bits) of challenges issued now; 0 when none is required.", nil, nil),
			tokens:     prometheus.NewDesc("faucet_api_tokens", "API tokens loaded.", nil, nil),
		},
	}
	for _, c := range guard.CheckNames {
		m.rejections.WithLabelValues(c)
	}
	// Start the known series at zero so rate() and alerts work before the
	// first occurrence; the other assets' start when they are registered.
	m.startAsset(faucet.AssetSTX)
	m.dispensed.WithLabelValues("default")
	m.dispensed.WithLabelValues("stacking")
	for _, c := range []prometheus.Collector{m.drips, m.dispensed, m.dispensedToken, m.dispensedBTC, m.nodeCalls, m.httpReqs, m.keys, m.rejections, m.tokenFailures, m.guard, m.suspended, m.nodes, m.btcNodes, m.treasury} {
		reg.MustRegister(c)
	}
	// The default registry already has these; that is fine.
	for _, c := range []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				panic(err)
			}
		}
	}
	if g, ok := reg.(prometheus.Gatherer); ok {
		m.gatherer = g
	} else {
		m.gatherer = prometheus.DefaultGatherer
	}
	return m
}

// Handler serves the metrics in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.gatherer, promhttp.HandlerOpts{})
}

// registerFaucet makes the per-key and funding gauges report f, with the
// server's low-funds and stall thresholds. It can be called again (the
// last faucet wins); nothing is registered twice.
func (m *Metrics) registerFaucet(f Reporter, lowDrips func(faucet.Asset) int, stallAfter time.Duration) {
	m.keys.set(f, lowDrips, stallAfter)
	for _, t := range f.Tokens() {
		m.startAsset(t.Name)
		m.dispensedToken.WithLabelValues(string(t.Name))
	}
}

// setSuspended reports which of assets are suspended.
func (m *Metrics) setSuspended(assets []string, suspended func(faucet.Asset) bool) {
	for _, a := range assets {
		m.suspended.WithLabelValues(a).Set(b2f(suspended(faucet.Asset(a))))
	}
}

// registerBTC makes the BTC gauges report b (nil: BTC is off).
func (m *Metrics) registerBTC(b BTCFaucet) {
	m.keys.mu.Lock()
	m.keys.btc = b
	m.keys.mu.Unlock()
	if b != nil {
		m.startAsset(assetBTC)
		m.dispensedBTC.WithLabelValues()
	}
}

// startAsset starts an asset's drip series at zero.
func (m *Metrics) startAsset(a faucet.Asset) {
	m.drips.WithLabelValues(string(a), outcomeSuccess, "")
	for _, r := range []string{
		string(faucet.ReasonExhausted), string(faucet.ReasonBusy), string(faucet.ReasonNodeUnavailable),
		string(faucet.ReasonRejected), string(faucet.ReasonStackingUnavailable), reasonRateLimited,
		string(faucet.ReasonDisabled), string(faucet.ReasonStoreUnavailable), reasonInvalidRequest, reasonInternal,
		reasonRejectedByCheck,
	} {
		if a != faucet.AssetSTX && r == string(faucet.ReasonStackingUnavailable) {
			continue // stacking drips are STX only
		}
		m.drips.WithLabelValues(string(a), outcomeError, r)
	}
}

// ObserveNodeCall records one node RPC. Its signature matches
// rpcclient.WithObserver, so it can be passed there directly. A call the
// node rate-limited (429), or that was held back while its wait lasted,
// is "throttled", apart from the errors: it calls for slower polling or a
// higher plan, not for a look at the node.
func (m *Metrics) ObserveNodeCall(call string, d time.Duration, err error) {
	result := "ok"
	switch {
	case err == nil:
	case node.IsThrottled(err):
		result = "throttled"
	default:
		result = "error"
	}
	m.nodeCalls.WithLabelValues(call, result).Observe(d.Seconds())
}

// RegisterGuard makes the proof-of-work gauges report c (nil clears it).
func (m *Metrics) RegisterGuard(c *guard.Chain) {
	m.guard.mu.Lock()
	m.guard.c = c
	m.guard.mu.Unlock()
}

func (m *Metrics) observeRejection(asset faucet.Asset, rej *guard.Rejection) {
	m.rejections.WithLabelValues(rej.Check).Inc()
	if rej.Check == guard.CheckAPIToken && rej.Reason != guard.ReasonTokenNotActive { // a wrong token, not a right one out of its window
		m.tokenFailures.Inc()
	}
	m.drips.WithLabelValues(string(asset.OrSTX()), outcomeError, reasonRejectedByCheck).Inc()
}

// observeDrip counts a drip of asset that failed for reason.
func (m *Metrics) observeDrip(asset faucet.Asset, reason string) {
	m.drips.WithLabelValues(string(asset.OrSTX()), outcomeError, reason).Inc()
}

// observePaid counts a paid drip and what it paid.
func (m *Metrics) observePaid(a *asset, o dripOptions, amount uint64) {
	m.drips.WithLabelValues(string(a.name), outcomeSuccess, "").Inc()
	a.dispensed(m, o, amount)
}

func (m *Metrics) observeHTTP(route, method string, code int, d time.Duration) {
	m.httpReqs.WithLabelValues(route, method, strconv.Itoa(code)).Observe(d.Seconds())
}

// keyCollector reads the faucet's key states at scrape time, so the gauges
// are never stale and no background loop is needed.
type keyCollector struct {
	mu sync.RWMutex
	f  Reporter

	balance, available, nonce, inFlight, synced, dry, owned *prometheus.Desc
	// Faucet-wide funding and node health, for alerts; drips left and the
	// low threshold per asset.
	dripsLeft, fundsAvailable, lowDrips, nodeUp *prometheus.Desc
	low                                         func(faucet.Asset) int
	// The Stacks tip's age and the stall threshold, side by side so an
	// alert compares them without repeating --stall-after.
	tipAge, stallAfter *prometheus.Desc
	stall              time.Duration
	// Which assets are on, and the token's balances.
	assetEnabled, keyToken, keyTokenAvailable, tokenFunds, treasuryToken *prometheus.Desc
	// The treasury, reported by the replica that writes for it.
	treasuryBalance, treasuryAvailable, treasuryInFlight, refills *prometheus.Desc
	// Send-many batching, when on.
	batchTxs, batchedDrips, batchSplits, batchFallbacks *prometheus.Desc
	// The BTC faucet, when on; its drips left, low threshold and enabled
	// flag are the series above with asset="btc".
	btc                                                       BTCFaucet
	btcBalance, btcImmature, btcInFlight, btcNodeUp, btcReady *prometheus.Desc
	// off reports an asset the operator turned off: not enabled,
	// whatever its configuration.
	off func(faucet.Asset) bool
}

func newKeyCollector() *keyCollector {
	addr := []string{"address"}
	return &keyCollector{
		balance:   prometheus.NewDesc("faucet_key_balance_ustx", "Confirmed balance of a sending key, in µSTX.", addr, nil),
		available: prometheus.NewDesc("faucet_key_available_ustx", "Balance of a sending key minus in-flight spends and the fee reserve, in µSTX.", addr, nil),
		nonce:     prometheus.NewDesc("faucet_key_nonce", "Nonce of a sending key: confirmed (the node's) or next (the one the faucet will use).", []string{"address", "kind"}, nil),
		inFlight:  prometheus.NewDesc("faucet_key_in_flight", "Transactions of a sending key that are allocated or pending.", addr, nil),
		synced:    prometheus.NewDesc("faucet_key_synced", "1 when the key's account has been read from the node.", addr, nil),
		dry:       prometheus.NewDesc("faucet_key_dry", "1 when the node reported the key cannot pay.", addr, nil),
		owned:     prometheus.NewDesc("faucet_key_owned", "1 when this replica sends with the key (always 1 without a shared store).", addr, nil),
		dripsLeft: prometheus.NewDesc("faucet_drips_left", "Default drips of an asset the keys this replica sends with can still pay (STX: amount plus a typical fee; a token: its amount, on keys that can pay the fee).", []string{"asset"}, nil),
		fundsAvailable: prometheus.NewDesc("faucet_funds_available_ustx",
			"µSTX the keys this replica sends with can still spend beyond what is in flight.", nil, nil),
		lowDrips:     prometheus.NewDesc("faucet_low_drips_threshold", "Drips left of an asset below which the faucet reports itself low (--low-drips).", []string{"asset"}, nil),
		assetEnabled: prometheus.NewDesc("faucet_asset_enabled", "1 for each asset the faucet drips (stx, each configured token that can be dripped, btc when configured), 0 for an asset its operator turned off, for a configured token it cannot drip now (its contract unknown) and for the incumbent's token and BTC routes when not configured.", []string{"asset"}, nil),
		keyToken: prometheus.NewDesc("faucet_key_token_balance", "Confirmed token balance of a sending key, in the token's base units.",
			[]string{"asset", "address"}, nil),
		keyTokenAvailable: prometheus.NewDesc("faucet_key_token_available",
			"Token balance of a sending key minus its in-flight token transfers, in base units.", []string{"asset", "address"}, nil),
		tokenFunds: prometheus.NewDesc("faucet_token_funds_available",
			"Token base units the keys this replica sends with can still send beyond what is in flight.", []string{"asset"}, nil),
		treasuryToken: prometheus.NewDesc("faucet_treasury_token_balance",
			"Confirmed token balance of the treasury key, in base units (reported by the replica that owns it).", []string{"asset", "address"}, nil),
		nodeUp: prometheus.NewDesc("faucet_node_up", "1 when the engine's last read of the Stacks node's tip succeeded.", nil, nil),
		tipAge: prometheus.NewDesc("faucet_stacks_tip_age_seconds",
			"Seconds since the engine last saw the Stacks tip rise (since its first read of the tip while it has not risen); it keeps growing while the node is unreachable (see faucet_node_up).", nil, nil),
		stallAfter: prometheus.NewDesc("faucet_stacks_stall_after_seconds",
			"Tip age at which the faucet reports the Stacks chain stalled (--stall-after); 0 when it never does.", nil, nil),
		treasuryBalance: prometheus.NewDesc("faucet_treasury_balance_ustx",
			"Confirmed balance of the treasury key that refills the sending keys, in µSTX (reported by the replica that owns it).", addr, nil),
		treasuryAvailable: prometheus.NewDesc("faucet_treasury_available_ustx",
			"Treasury balance minus its in-flight refills, in µSTX.", addr, nil),
		treasuryInFlight: prometheus.NewDesc("faucet_treasury_refills_in_flight", "Refills sent by the treasury and not yet confirmed.", addr, nil),
		refills: prometheus.NewDesc("faucet_refills_total",
			"Refills of sending keys by the treasury since start, by outcome (sent: accepted or in doubt; failed: nothing left in flight).", []string{"outcome"}, nil),
		batchTxs: prometheus.NewDesc("faucet_batch_txs_total",
			"Send-many calls sent (accepted or in doubt) since start; with faucet_batched_drips_total, the mean batch size.", nil, nil),
		batchedDrips:   prometheus.NewDesc("faucet_batched_drips_total", "Drips paid by send-many calls since start.", nil, nil),
		batchSplits:    prometheus.NewDesc("faucet_batch_splits_total", "Send-many batches the node refused that were retried as two halves.", nil, nil),
		batchFallbacks: prometheus.NewDesc("faucet_batch_fallbacks_total", "Batched drips sent as plain transfers because the send-many contract was missing.", nil, nil),
		btcBalance:     prometheus.NewDesc("faucet_btc_balance_sats", "Satoshis the BTC faucet's key can spend on new payouts: mature coins no payout in flight spends, plus in-flight change.", addr, nil),
		btcImmature:    prometheus.NewDesc("faucet_btc_immature_sats", "Coinbase satoshis of the BTC key still short of 100 confirmations.", addr, nil),
		btcInFlight:    prometheus.NewDesc("faucet_btc_payouts_in_flight", "BTC payout transactions sent and not yet confirmed.", addr, nil),
		btcNodeUp:      prometheus.NewDesc("faucet_btc_node_up", "1 when the BTC faucet's last read of the Bitcoin node succeeded.", nil, nil),
		btcReady:       prometheus.NewDesc("faucet_btc_ready", "1 once the BTC faucet has resumed its payouts and read its coins from the chain, and while the node's chain is not behind its view (a node restarted empty).", nil, nil),
	}
}

func (c *keyCollector) set(f Reporter, lowDrips func(faucet.Asset) int, stallAfter time.Duration) {
	c.mu.Lock()
	c.f, c.low, c.stall = f, lowDrips, max(stallAfter, 0)
	c.mu.Unlock()
}

func (c *keyCollector) setOff(off func(faucet.Asset) bool) {
	c.mu.Lock()
	c.off = off
	c.mu.Unlock()
}

// enabled is the faucet_asset_enabled value of an asset its configuration
// says is on (or not), with the operator's switch applied.
func (c *keyCollector) enabled(asset string, on bool) float64 {
	c.mu.RLock()
	off := c.off
	c.mu.RUnlock()
	return b2f(on && (off == nil || !off(faucet.Asset(asset))))
}

func (c *keyCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.balance, c.available, c.nonce, c.inFlight, c.synced, c.dry, c.owned, c.dripsLeft, c.fundsAvailable, c.lowDrips, c.nodeUp,
		c.tipAge, c.stallAfter,
		c.treasuryBalance, c.treasuryAvailable, c.treasuryInFlight, c.refills,
		c.batchTxs, c.batchedDrips, c.batchSplits, c.batchFallbacks,
		c.assetEnabled, c.keyToken, c.keyTokenAvailable, c.tokenFunds, c.treasuryToken,
		c.btcBalance, c.btcImmature, c.btcInFlight, c.btcNodeUp, c.btcReady} {
		ch <- d
	}
}

func (c *keyCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.RLock()
	f, low, btc, stall := c.f, c.low, c.btc, c.stall
	c.mu.RUnlock()
	if f == nil {
		return
	}
	c.collectBTC(ch, btc, low)
	fund := f.Funding()
	stx := string(faucet.AssetSTX)
	ch <- prometheus.MustNewConstMetric(c.dripsLeft, prometheus.GaugeValue, float64(fund.DripsLeft), stx)
	ch <- prometheus.MustNewConstMetric(c.fundsAvailable, prometheus.GaugeValue, float64(fund.Available))
	ch <- prometheus.MustNewConstMetric(c.lowDrips, prometheus.GaugeValue, float64(low(faucet.AssetSTX)), stx)
	ch <- prometheus.MustNewConstMetric(c.assetEnabled, prometheus.GaugeValue, c.enabled(stx, true), stx)
	tokens := f.Tokens()
	for _, name := range settings.IncumbentAssets {
		// The incumbent's routes answer 403 while not configured: off.
		configured := name == string(assetBTC) && btc != nil ||
			slices.ContainsFunc(tokens, func(t faucet.TokenInfo) bool { return string(t.Name) == name })
		if !configured {
			ch <- prometheus.MustNewConstMetric(c.assetEnabled, prometheus.GaugeValue, 0, name)
		}
	}
	for _, t := range tokens {
		name := string(t.Name)
		ch <- prometheus.MustNewConstMetric(c.assetEnabled, prometheus.GaugeValue, c.enabled(name, t.Err == nil), name)
		if tf, _ := f.TokenFunding(t.Name); t.Err == nil {
			ch <- prometheus.MustNewConstMetric(c.dripsLeft, prometheus.GaugeValue, float64(tf.DripsLeft), name)
			ch <- prometheus.MustNewConstMetric(c.lowDrips, prometheus.GaugeValue, float64(low(t.Name)), name)
			ch <- prometheus.MustNewConstMetric(c.tokenFunds, prometheus.GaugeValue, float64(tf.Available), name)
		}
	}
	ch <- prometheus.MustNewConstMetric(c.nodeUp, prometheus.GaugeValue, b2f(f.NodeUp()))
	ch <- prometheus.MustNewConstMetric(c.stallAfter, prometheus.GaugeValue, stall.Seconds())
	// No age before the first read of the tip: a 0 would claim a fresh one.
	if age, ok := f.TipAge(); ok {
		ch <- prometheus.MustNewConstMetric(c.tipAge, prometheus.GaugeValue, age.Seconds())
	}
	// Only the treasury's writer knows its in-flight refills; elsewhere its
	// numbers would be stale, so other replicas report nothing.
	if ts, ok := f.Treasury(); ok && ts.Owned {
		ch <- prometheus.MustNewConstMetric(c.treasuryBalance, prometheus.GaugeValue, float64(ts.Balance), ts.Address)
		ch <- prometheus.MustNewConstMetric(c.treasuryAvailable, prometheus.GaugeValue, float64(ts.Available), ts.Address)
		ch <- prometheus.MustNewConstMetric(c.treasuryInFlight, prometheus.GaugeValue, float64(ts.InFlightRefills), ts.Address)
		ch <- prometheus.MustNewConstMetric(c.refills, prometheus.CounterValue, float64(ts.RefillsSent), "sent")
		ch <- prometheus.MustNewConstMetric(c.refills, prometheus.CounterValue, float64(ts.RefillsFailed), "failed")
		for _, tt := range ts.Tokens {
			if tt.Known {
				ch <- prometheus.MustNewConstMetric(c.treasuryToken, prometheus.GaugeValue, float64(tt.Balance), string(tt.Name), ts.Address)
			}
		}
	}
	if bs := f.BatchStats(); bs.Enabled {
		ch <- prometheus.MustNewConstMetric(c.batchTxs, prometheus.CounterValue, float64(bs.Txs))
		ch <- prometheus.MustNewConstMetric(c.batchedDrips, prometheus.CounterValue, float64(bs.Drips))
		ch <- prometheus.MustNewConstMetric(c.batchSplits, prometheus.CounterValue, float64(bs.Splits))
		ch <- prometheus.MustNewConstMetric(c.batchFallbacks, prometheus.CounterValue, float64(bs.Fallbacks))
	}
	for _, k := range f.Keys() {
		// µSTX fit a float64 exactly up to 2^53, far above the total supply.
		ch <- prometheus.MustNewConstMetric(c.balance, prometheus.GaugeValue, float64(k.Balance), k.Address)
		ch <- prometheus.MustNewConstMetric(c.available, prometheus.GaugeValue, float64(k.Available), k.Address)
		ch <- prometheus.MustNewConstMetric(c.nonce, prometheus.GaugeValue, float64(k.ConfirmedNonce), k.Address, "confirmed")
		ch <- prometheus.MustNewConstMetric(c.nonce, prometheus.GaugeValue, float64(k.NextNonce), k.Address, "next")
		ch <- prometheus.MustNewConstMetric(c.inFlight, prometheus.GaugeValue, float64(k.InFlight), k.Address)
		ch <- prometheus.MustNewConstMetric(c.synced, prometheus.GaugeValue, b2f(k.Synced), k.Address)
		ch <- prometheus.MustNewConstMetric(c.dry, prometheus.GaugeValue, b2f(k.Dry), k.Address)
		ch <- prometheus.MustNewConstMetric(c.owned, prometheus.GaugeValue, b2f(k.Owned), k.Address)
		for _, t := range tokens {
			if b := k.Tokens[t.Name]; b.Known {
				ch <- prometheus.MustNewConstMetric(c.keyToken, prometheus.GaugeValue, float64(b.Balance), string(t.Name), k.Address)
				ch <- prometheus.MustNewConstMetric(c.keyTokenAvailable, prometheus.GaugeValue, float64(b.Available), string(t.Name), k.Address)
			}
		}
	}
}

// guardCollector reads the abuse checks' state at scrape time.
type guardCollector struct {
	mu                 sync.RWMutex
	c                  *guard.Chain
	difficulty, tokens *prometheus.Desc
}

func (g *guardCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- g.difficulty
	ch <- g.tokens
}

func (g *guardCollector) Collect(ch chan<- prometheus.Metric) {
	g.mu.RLock()
	c := g.c
	g.mu.RUnlock()
	var difficulty, tokens float64
	if c != nil {
		if c.Required() {
			difficulty = float64(c.Difficulty())
		}
		tokens = float64(c.TokenCount())
	}
	ch <- prometheus.MustNewConstMetric(g.difficulty, prometheus.GaugeValue, difficulty)
	ch <- prometheus.MustNewConstMetric(g.tokens, prometheus.GaugeValue, tokens)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// collectBTC reports the BTC faucet b (nil: off).
func (c *keyCollector) collectBTC(ch chan<- prometheus.Metric, b BTCFaucet, low func(faucet.Asset) int) {
	asset := string(assetBTC)
	if b == nil {
		return // off, as Collect says of the incumbent's routes
	}
	st := b.Status()
	ch <- prometheus.MustNewConstMetric(c.assetEnabled, prometheus.GaugeValue, c.enabled(asset, true), asset)
	ch <- prometheus.MustNewConstMetric(c.btcNodeUp, prometheus.GaugeValue, b2f(st.NodeUp))
	ch <- prometheus.MustNewConstMetric(c.btcReady, prometheus.GaugeValue, b2f(st.Ready && !st.Behind))
	if !st.Ready {
		return // no chain view yet: zeros would fire the funding alerts
	}
	ch <- prometheus.MustNewConstMetric(c.dripsLeft, prometheus.GaugeValue, float64(btcDripsLeft(st, b.Amounts())), asset)
	ch <- prometheus.MustNewConstMetric(c.lowDrips, prometheus.GaugeValue, float64(low(assetBTC)), asset)
	ch <- prometheus.MustNewConstMetric(c.btcBalance, prometheus.GaugeValue, float64(st.Balance), st.Address)
	ch <- prometheus.MustNewConstMetric(c.btcImmature, prometheus.GaugeValue, float64(st.Immature), st.Address)
	ch <- prometheus.MustNewConstMetric(c.btcInFlight, prometheus.GaugeValue, float64(st.InFlight), st.Address)
}

// btcDripsLeft is how many default drips the spendable balance pays, fees
// aside (a batched output costs ~31 vbytes, far below one drip).
func btcDripsLeft(st btcfaucet.Status, a btcfaucet.Amounts) int64 {
	if a.Default <= 0 {
		return 0
	}
	return st.Balance / a.Default
}
