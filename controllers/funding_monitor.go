package controllers

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/event"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
	"github.com/stxfaucet/faucet-operator/server/chain/btcnode"
	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/nodepool"
	"github.com/stxfaucet/faucet-operator/server/chain/rpcclient"
)

// Defaults of the FundingMonitor.
const (
	DefaultFundingInterval = time.Minute
	DefaultFundingWorkers  = 8
	// DefaultFundingCallTimeout caps each call to a node, whatever
	// spec.node.timeout says: a check must not hold a worker for long.
	DefaultFundingCallTimeout = 10 * time.Second
	// DefaultBTCBalanceTimeout bounds the read of a BTC balance. Bitcoin
	// Core answers it by scanning its whole UTXO set (scantxoutset), which
	// on testnet takes tens of seconds; btcd pages through its address
	// index.
	DefaultBTCBalanceTimeout = time.Minute
	// fundingHistory is how many samples of the total balance are kept
	// per FaucetServer for the runway: about a quarter of an hour at the
	// default interval.
	fundingHistory = 16
)

// fundingTarget is what to read for one FaucetServer: addresses only,
// derived by Reconcile from the keys it parsed. No key leaves the Secret.
type fundingTarget struct {
	nodeURLs  []string    // the nodes, in the order of preference among equals
	headers   nodeHeaders // sent to the nodes (spec.node.headersSecretRef); zero without it
	timeout   time.Duration
	addresses []string
	treasury  string        // "" without spec.treasury
	tokens    []tokenTarget // the tokens of spec.assets, in order
	btc       btcTarget     // zero without a btc entry in spec.assets
}

// btcTarget is the Bitcoin address to read, on which node. The credentials
// come from the FaucetServer's credentials Secret and only ever reach the
// node, as HTTP Basic auth.
type btcTarget struct {
	rpcURLs     []string // the nodes, in the order of preference among equals
	credentials rpcCredentials
	network     string
	address     string // "" for none
}

func (t fundingTarget) equal(o fundingTarget) bool {
	return slices.Equal(t.nodeURLs, o.nodeURLs) && t.headers == o.headers && t.timeout == o.timeout && t.treasury == o.treasury &&
		t.btc.equal(o.btc) && slices.Equal(t.addresses, o.addresses) && slices.Equal(t.tokens, o.tokens)
}

func (t btcTarget) equal(o btcTarget) bool {
	return slices.Equal(t.rpcURLs, o.rpcURLs) && t.credentials == o.credentials && t.network == o.network && t.address == o.address
}

// fundingEntry is the monitor's state for one FaucetServer.
type fundingEntry struct {
	target   fundingTarget
	next     time.Time // when the next read is due
	inFlight bool
	result   fundingResult // result.target is the target it was read for
}

// FundingMonitor reads the balances of every FaucetServer's keys from its
// node, outside Reconcile: a manager Runnable with a bounded pool of
// workers, each node call bounded by a timeout, so a slow or dead node
// delays nothing but its own FaucetServer's next read. Results go into a
// mutex-guarded map; each new result sends a GenericEvent on a channel the
// controller watches, and Reconcile copies the latest result into the
// status. Reconcile registers what to read with Track and drops it with
// Forget when the FaucetServer is gone.
type FundingMonitor struct {
	// Interval between two reads of a FaucetServer, ±10 % jitter.
	// DefaultFundingInterval when zero.
	Interval time.Duration
	// Workers bounds the reads in flight. DefaultFundingWorkers when zero.
	Workers int
	// CallTimeout caps the timeout of each node call.
	// DefaultFundingCallTimeout when zero.
	CallTimeout time.Duration
	// BTCTimeout bounds the read of a BTC balance from a Bitcoin node.
	// DefaultBTCBalanceTimeout when zero.
	BTCTimeout time.Duration
	// HTTPClient is shared by all node clients; a pooled client when nil.
	HTTPClient *http.Client
	// Clock schedules the reads; the real clock when nil.
	Clock clock.WithTicker

	initOnce sync.Once
	mu       sync.Mutex
	entries  map[types.NamespacedName]*fundingEntry
	events   chan event.GenericEvent
	kick     chan struct{}
}

func (m *FundingMonitor) init() {
	m.initOnce.Do(func() {
		m.entries = map[types.NamespacedName]*fundingEntry{}
		m.events = make(chan event.GenericEvent, 1024)
		m.kick = make(chan struct{}, 1)
		if m.HTTPClient == nil {
			t := http.DefaultTransport.(*http.Transport).Clone()
			t.MaxIdleConnsPerHost = 4
			t.IdleConnTimeout = 90 * time.Second
			m.HTTPClient = &http.Client{Transport: t}
		}
	})
}

// clk is Clock, or the real clock when it is nil.
func (m *FundingMonitor) clk() clock.WithTicker {
	if m.Clock != nil {
		return m.Clock
	}
	return clock.RealClock{}
}

func (m *FundingMonitor) now() time.Time { return m.clk().Now() }

func (m *FundingMonitor) interval() time.Duration {
	if m.Interval > 0 {
		return m.Interval
	}
	return DefaultFundingInterval
}

// Events is the channel of FaucetServers with a new result, for a
// source.Channel.
func (m *FundingMonitor) Events() <-chan event.GenericEvent {
	m.init()
	return m.events
}

// Track makes sure key's accounts are read as described. A new or changed
// target is read right away; its history starts over.
func (m *FundingMonitor) Track(key types.NamespacedName, t fundingTarget) {
	m.init()
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.entries[key]; ok && e.target.equal(t) {
		return
	}
	m.entries[key] = &fundingEntry{target: t, next: m.now()}
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// Forget drops key's state: its FaucetServer is gone or has no usable keys.
func (m *FundingMonitor) Forget(key types.NamespacedName) {
	m.init()
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.entries, key)
}

// Result is the latest result for key, if one exists for target.
func (m *FundingMonitor) Result(key types.NamespacedName, t fundingTarget) (fundingResult, bool) {
	m.init()
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[key]
	if !ok || !e.result.target.equal(t) || (!e.result.ok && e.result.err == nil) {
		return fundingResult{}, false
	}
	r := e.result
	r.samples = slices.Clone(r.samples)
	r.balances = slices.Clone(r.balances)
	r.tokens = slices.Clone(r.tokens) // each one's balances are replaced, never written to
	return r, true
}

// Tracking reports whether key's accounts are being read.
func (m *FundingMonitor) Tracking(key types.NamespacedName) bool {
	m.init()
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.entries[key]
	return ok
}

// NeedLeaderElection: only the leader reads, as only it reconciles.
func (m *FundingMonitor) NeedLeaderElection() bool { return true }

// Start runs the scheduler and the workers until ctx ends.
func (m *FundingMonitor) Start(ctx context.Context) error {
	m.init()
	workers := m.Workers
	if workers <= 0 {
		workers = DefaultFundingWorkers
	}
	work := make(chan types.NamespacedName)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case key := <-work:
					m.check(ctx, key)
				}
			}
		})
	}
	defer wg.Wait()

	// The scheduler wakes up often enough for the jitter to matter, and
	// at once when Track adds a target.
	tick := min(max(m.interval()/20, 10*time.Millisecond), time.Second)
	ticker := m.clk().NewTicker(tick)
	defer ticker.Stop()
	for {
		for _, key := range m.due() {
			select {
			case work <- key: // blocks while every worker is busy: only the scheduler waits
			case <-ctx.Done():
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C():
		case <-m.kick:
		}
	}
}

// due marks the targets whose read is due as in flight and returns them,
// most overdue first.
func (m *FundingMonitor) due() []types.NamespacedName {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	var keys []types.NamespacedName
	for key, e := range m.entries {
		if !e.inFlight && !e.next.After(now) {
			e.inFlight = true
			keys = append(keys, key)
		}
	}
	slices.SortFunc(keys, func(a, b types.NamespacedName) int {
		return m.entries[a].next.Compare(m.entries[b].next)
	})
	return keys
}

// check reads key's accounts, stores the result and reports it.
func (m *FundingMonitor) check(ctx context.Context, key types.NamespacedName) {
	m.mu.Lock()
	e, ok := m.entries[key]
	if !ok {
		m.mu.Unlock()
		return
	}
	t := e.target
	m.mu.Unlock()

	rd, err := m.read(ctx, t)
	if ctx.Err() != nil {
		return
	}
	now := m.now()

	m.mu.Lock()
	cur, ok := m.entries[key]
	if !ok || cur != e {
		// Forgotten, or re-tracked with another target meanwhile (a new
		// entry, read right away): this result is stale.
		m.mu.Unlock()
		return
	}
	e.inFlight = false
	iv := m.interval()
	e.next = now.Add(time.Duration(float64(iv) * (0.9 + 0.2*rand.Float64())))
	r := &e.result
	r.target = t
	r.err = err
	if rd.btcNodes != nil {
		r.btcNodes = rd.btcNodes
	}
	if rd.nodes != nil {
		r.nodes = rd.nodes
	}
	// The BTC balance comes from another node: it is kept, or fails, on
	// its own.
	r.btcErr = rd.btcErr
	if t.btc.address != "" && rd.btcErr == nil {
		r.btcOK, r.btc, r.btcChecked = true, rd.btc, now
	}
	if err == nil {
		var total uint64
		for _, b := range rd.balances {
			total += b
		}
		r.ok, r.checked = true, now
		r.balances, r.treasury = rd.balances, rd.treasury
		r.tokens = mergeTokens(r.tokens, rd.tokens, now)
		r.samples = append(r.samples, fundingSample{at: now, total: total})
		if n := len(r.samples); n > fundingHistory {
			r.samples = slices.Delete(r.samples, 0, n-fundingHistory)
		}
	}
	m.mu.Unlock()

	if err != nil {
		ctrl.LoggerFrom(ctx).V(1).Info("failed to read faucet balances", "faucetserver", key, "node", redactURLs(t.nodeURLs), "error", err.Error())
	}
	if rd.btcErr != nil {
		ctrl.LoggerFrom(ctx).V(1).Info("failed to read the faucet's BTC balance", "faucetserver", key, "node", redactURLs(t.btc.rpcURLs), "error", rd.btcErr.Error())
	}
	fs := &faucetv1alpha1.FaucetServer{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	select {
	case m.events <- event.GenericEvent{Object: fs}:
	case <-ctx.Done():
	}
}

// reading is one read of a target's accounts.
type reading struct {
	balances []uint64 // µSTX, aligned with target.addresses
	treasury uint64
	tokens   []tokenReading // aligned with target.tokens
	btc      uint64         // sats of target.btc.address
	btcErr   error          // the BTC read's error; nil if it succeeded or there is none
	nodes    []nodeReading  // the Stacks nodes as the read left them, aligned with target.nodeURLs
	btcNodes []nodeReading  // the Bitcoin nodes', aligned with target.btc.rpcURLs
}

// read fetches the STX balances of t's addresses and treasury, then each
// token's, one after another, each call bounded by the call timeout, and the
// BTC balance of t's Bitcoin address from its own nodes. A failed call for
// the STX balances fails the read (a status mixing two reads would not add
// up) and is returned; a token's read fails on its own, in its
// tokenReading, and the BTC read in btcErr.
func (m *FundingMonitor) read(ctx context.Context, t fundingTarget) (reading, error) {
	rd, err := m.readStacks(ctx, t)
	if t.btc.address != "" {
		rd.btc, rd.btcNodes, rd.btcErr = m.readBTC(ctx, t.btc)
	}
	return rd, err
}

// The pools below live for one read: built, probed once, read through and
// dropped. Without Run a pool starts no goroutine of its own, and a read
// cancels the calls it hedged before it returns, so nothing outlives the
// read. They get no Logger: a pool's "left the rotation" lines describe a
// long-lived pool, and one built per read would repeat them for a down
// node at every read; status.nodes says the same once.

// readStacks reads the Stacks node's part of t through a pool of t's
// nodes, probed first, so that the operator reads from the node the faucet
// would: the healthy node at the highest tip, the next when one does not
// answer or is slow to (a hedged call).
func (m *FundingMonitor) readStacks(ctx context.Context, t fundingTarget) (reading, error) {
	timeout := m.CallTimeout
	if timeout <= 0 {
		timeout = DefaultFundingCallTimeout
	}
	if t.timeout > 0 && t.timeout < timeout {
		timeout = t.timeout
	}
	if len(t.nodeURLs) == 0 {
		return reading{}, errors.New("no Stacks node")
	}
	opts := []rpcclient.Option{rpcclient.WithHTTPClient(m.HTTPClient), rpcclient.WithTimeout(timeout),
		rpcclient.WithUserAgent("faucet-operator-funding/1")}
	header, err := t.headers.header()
	if err != nil {
		// Checked when the Secret was read: not reached.
		return reading{}, fmt.Errorf("the Stacks node headers: %w", err)
	}
	if header != nil {
		opts = append(opts, rpcclient.WithHeader(header))
	}
	clients := make([]*node.Client, len(t.nodeURLs))
	for i, u := range t.nodeURLs {
		c, err := node.New(u, opts...)
		if err != nil {
			return reading{}, fmt.Errorf("the Stacks node URL %s: %w", redactURL(u), err)
		}
		clients[i] = c
	}
	// The probe gets the calls' timeout, not the pool's shorter default:
	// status.nodes has always called a node that answers within the
	// timeout reachable.
	pool, err := nodepool.New(nodepool.Config{Clients: clients, ProbeTimeout: timeout, Clock: m.clk()})
	if err != nil {
		return reading{}, fmt.Errorf("the Stacks nodes: %w", err)
	}
	pool.Probe(ctx)
	rd, err := readStacksFrom(ctx, pool, t)
	rd.nodes = nodeReadings(pool.Nodes())
	return rd, err
}

// readBTC reads the confirmed balance of t's address through a pool of
// t's nodes, probed first (getblockchaininfo, and the genesis block once),
// as readStacks does.
func (m *FundingMonitor) readBTC(ctx context.Context, t btcTarget) (uint64, []nodeReading, error) {
	timeout := m.BTCTimeout
	if timeout <= 0 {
		timeout = DefaultBTCBalanceTimeout
	}
	callTimeout := m.CallTimeout
	if callTimeout <= 0 {
		callTimeout = DefaultFundingCallTimeout
	}
	if len(t.rpcURLs) == 0 {
		return 0, nil, errors.New("no Bitcoin node")
	}
	clients := make([]*btcnode.Client, len(t.rpcURLs))
	for i, u := range t.rpcURLs {
		c, err := m.btcClient(u, t, timeout)
		if err != nil {
			return 0, nil, err
		}
		clients[i] = c
	}
	// BTCTimeout is for the balance's scan of the UTXO set; the probe is
	// a call like any other.
	pool, err := nodepool.NewBTC(nodepool.BTCConfig{Clients: clients, Chains: btcChains(t.network),
		ProbeTimeout: min(callTimeout, timeout), Clock: m.clk()})
	if err != nil {
		return 0, nil, fmt.Errorf("the Bitcoin nodes: %w", err)
	}
	pool.Probe(ctx)
	sats, err := pool.AddressBalance(ctx, t.address)
	nodes := nodeReadings(pool.Nodes())
	if err != nil {
		return 0, nodes, fmt.Errorf("BTC balance of %s: %w", t.address, err)
	}
	return uint64(max(sats, 0)), nodes, nil
}

// btcChains are the chains a node may report for the btc entry's network,
// as the faucet's --btc-network allows them; nil (any test chain) for a
// network the CRD would not have let through.
func btcChains(network string) []btcnode.Chain {
	switch network {
	case "regtest":
		return []btcnode.Chain{btcnode.ChainRegtest}
	case "signet":
		return []btcnode.Chain{btcnode.ChainSignet}
	case "testnet":
		return []btcnode.Chain{btcnode.ChainTestnet3, btcnode.ChainTestnet4}
	}
	return nil
}

// btcClient is a client of the node at rpcURL with t's credentials.
func (m *FundingMonitor) btcClient(rpcURL string, t btcTarget, timeout time.Duration) (*btcnode.Client, error) {
	if !t.credentials.isZero() {
		// btcnode sends a URL's userinfo as Basic auth and never repeats
		// it in errors or URL().
		u, err := url.Parse(rpcURL)
		if err != nil {
			return nil, fmt.Errorf("the Bitcoin node URL: %w", err)
		}
		u.User = url.UserPassword(t.credentials.get())
		rpcURL = u.String()
	}
	return btcnode.New(rpcURL, rpcclient.WithHTTPClient(m.HTTPClient), rpcclient.WithTimeout(timeout),
		rpcclient.WithUserAgent("faucet-operator-funding/1"))
}

// nodeReading is one node as the operator's pool last judged it.
type nodeReading struct {
	url string // without credentials
	tip uint64
	// out says why the node serves no read (it did not answer, lags the
	// best tip, is of another chain); "" while it is in rotation.
	out string
}

// nodeReadings are a pool's nodes, in its order. A node still unknown
// was not probed: the read was cancelled first.
func nodeReadings(nodes []nodepool.NodeStatus) []nodeReading {
	out := make([]nodeReading, len(nodes))
	for i, n := range nodes {
		out[i] = nodeReading{url: n.URL, tip: n.Tip}
		switch {
		case n.State == "ready":
		case n.Reason != "":
			out[i].out = n.Reason
		default:
			out[i].out = "not probed"
		}
	}
	return out
}

// readStacksFrom reads the balances of t through p.
func readStacksFrom(ctx context.Context, p *nodepool.Pool, t fundingTarget) (reading, error) {
	var rd reading
	rd.balances = make([]uint64, len(t.addresses))
	for i, addr := range t.addresses {
		acct, err := p.Account(ctx, addr)
		if err != nil {
			return reading{}, err
		}
		rd.balances[i] = acct.Balance
	}
	if t.treasury != "" {
		acct, err := p.Account(ctx, t.treasury)
		if err != nil {
			return reading{}, fmt.Errorf("treasury: %w", err)
		}
		rd.treasury = acct.Balance
	}
	rd.tokens = readTokens(ctx, p, t)
	return rd, nil
}
