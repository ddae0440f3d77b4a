package btcfaucet

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
	"github.com/stxfaucet/faucet-operator/server/chain/btcnode"
)

// The BTC faucet: the Payer and Batcher behind one service with a
// background loop, which is what the HTTP layer and `faucet serve` use.
// The loop resumes the ledger's payouts (sending them again byte for byte),
// then follows the chain, forgets confirmed payouts, resends those in doubt
// and fee-bumps stuck ones.

// The incumbent's three drip sizes: 0.0001, 0.01 and 0.5 BTC.
const (
	DefaultAmount       int64 = 10_000
	DefaultLargeAmount  int64 = 1_000_000
	DefaultXLargeAmount int64 = 50_000_000
)

// Fee rate defaults, sat/vB: the rate when the node has no estimate (btcd
// never has one; a young regtest Core neither), and the cap on any rate.
const (
	DefaultFallbackFeeRate int64 = 2
	DefaultMaxFeeRate      int64 = 100
)

// Defaults of the service's timing.
const (
	DefaultPollInterval = time.Second
	// DefaultBatchMax and DefaultBatchWindow: drips arriving within a
	// quarter second share a transaction, so a burst is paid in a few
	// transactions instead of one chain of 25.
	DefaultBatchMax    = 100
	DefaultBatchWindow = 250 * time.Millisecond
	// DefaultBumpAfter is how long a payout may wait for a block before its
	// fee is raised to the node's current estimate.
	DefaultBumpAfter = 20 * time.Minute
)

// Size is which of the three amounts a drip asks for.
type Size uint8

const (
	SizeDefault Size = iota
	SizeLarge
	SizeXLarge
)

// Amounts are the sats of each drip size.
type Amounts struct {
	Default, Large, XLarge int64
}

// Of returns the amount of size s.
func (a Amounts) Of(s Size) int64 {
	switch s {
	case SizeLarge:
		return a.Large
	case SizeXLarge:
		return a.XLarge
	default:
		return a.Default
	}
}

// ErrNotReady: the faucet has not yet read its coins from the node (it is
// starting, or the node has been unreachable since it started).
var ErrNotReady = errors.New("the BTC faucet has not read its coins from the node yet")

// FaucetNode is the node RPC the service uses; *btcnode.Client has it.
type FaucetNode interface {
	Node
	RequireTestChain(ctx context.Context) (btcnode.Chain, error)
	RawTransaction(ctx context.Context, txid string) (*btcnode.Tx, error)
}

var _ FaucetNode = (*btcnode.Client)(nil)

// Config configures a Faucet.
type Config struct {
	Key  *bitcoin.PrivateKey // required; its network is the faucet's
	Node FaucetNode          // required
	// Owner holds the key's ledger, fenced where replicas share a store
	// (store.Postgres.BTCOwner); nil keeps payouts in memory, lost at exit.
	Owner   Owner
	Fees    Fees
	Amounts Amounts // zero fields take the defaults
	// StartHeight is the first block scanned for the key's coins.
	StartHeight  int64
	BatchMax     int           // 1 pays every drip alone; 0 = DefaultBatchMax
	BatchWindow  time.Duration // 0 = DefaultBatchWindow
	PollInterval time.Duration // 0 = DefaultPollInterval
	BumpAfter    time.Duration // 0 = DefaultBumpAfter
	// RenewEvery is how often the hold on the key is checked, and a
	// standby replica tries to take it; 0 = DefaultRenewEvery.
	RenewEvery time.Duration
	Logger     *slog.Logger
}

// DefaultRenewEvery: a replica that lost the key stops paying within this
// (its ledger writes fail at once anyway: they are fenced).
const DefaultRenewEvery = 5 * time.Second

// ErrStandby: another replica holds the BTC key and pays BTC drips; this
// one takes over if that one goes.
var ErrStandby = errors.New("another replica holds the BTC key")

// engine is the payer of a held key: replaced when the hold is lost and
// taken again (the new payer resumes what the ledger holds).
type engine struct {
	payer   *Payer
	batcher *Batcher
}

// Faucet pays BTC drips from one key. Safe for concurrent use.
type Faucet struct {
	cfg Config
	log *slog.Logger
	// cur is the engine while this process holds the key and has resumed
	// its ledger; nil before, and while another replica holds it.
	cur atomic.Pointer[engine]
	// chain is the chain view, kept across payers (only Run's goroutine
	// builds payers, so it needs no lock of its own).
	chain *chainFollower
	bal   balances
	// funds is the last figures read under the payer's lock, so Status
	// (metrics, the page) never waits behind a payout's node calls.
	funds atomic.Pointer[Status]

	standby atomic.Bool // another replica holds the key
	nodeUp  atomic.Bool
	seen    atomic.Bool // the node was asked at least once
	// lastErr is the node error that keeps it not ready, for readiness.
	mu      sync.Mutex
	lastErr error
}

// New checks cfg and builds the faucet; Run starts it.
func New(cfg Config) (*Faucet, error) {
	if cfg.Key == nil {
		return nil, errors.New("btc faucet: a key is required")
	}
	if cfg.Node == nil {
		return nil, errors.New("btc faucet: a node is required")
	}
	def := Amounts{DefaultAmount, DefaultLargeAmount, DefaultXLargeAmount}
	if cfg.Amounts.Default == 0 {
		cfg.Amounts.Default = def.Default
	}
	if cfg.Amounts.Large == 0 {
		cfg.Amounts.Large = def.Large
	}
	if cfg.Amounts.XLarge == 0 {
		cfg.Amounts.XLarge = def.XLarge
	}
	// Dust is judged against the costliest output the faucet pays, P2PKH
	// (a 25-byte script, not a witness program): 546 sats. An amount
	// below it could not pay every address type.
	dust := bitcoin.DustThreshold(make([]byte, 25))
	for _, a := range []struct {
		name string
		v    int64
	}{{"default", cfg.Amounts.Default}, {"large", cfg.Amounts.Large}, {"xlarge", cfg.Amounts.XLarge}} {
		if a.v < dust {
			return nil, fmt.Errorf("btc faucet: the %s amount %d sats is below the dust limit (%d sats)", a.name, a.v, dust)
		}
	}
	if cfg.StartHeight < 0 {
		return nil, fmt.Errorf("btc faucet: start height %d is negative", cfg.StartHeight)
	}
	if cfg.Fees.Min < 0 || cfg.Fees.Max < 0 || cfg.Fees.Fallback < 0 {
		return nil, errors.New("btc faucet: fee rates must not be negative")
	}
	if cfg.Fees.Max != 0 && cfg.Fees.Min > cfg.Fees.Max {
		return nil, fmt.Errorf("btc faucet: the minimum fee rate %d sat/vB is above the maximum %d", cfg.Fees.Min, cfg.Fees.Max)
	}
	if cfg.Fees.Min == 0 {
		cfg.Fees.Min = bitcoin.MinFeeRate
	}
	if cfg.Fees.Max == 0 {
		cfg.Fees.Max = max(DefaultMaxFeeRate, cfg.Fees.Min)
	}
	if cfg.Fees.Fallback == 0 {
		cfg.Fees.Fallback = min(max(DefaultFallbackFeeRate, cfg.Fees.Min), cfg.Fees.Max)
	}
	if cfg.BatchMax == 0 {
		cfg.BatchMax = DefaultBatchMax
	}
	if cfg.BatchWindow == 0 {
		cfg.BatchWindow = DefaultBatchWindow
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.BumpAfter <= 0 {
		cfg.BumpAfter = DefaultBumpAfter
	}
	if cfg.RenewEvery <= 0 {
		cfg.RenewEvery = DefaultRenewEvery
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Owner == nil {
		cfg.Owner = SoleOwner(NewMemoryLedger())
	}
	if cfg.BatchMax < 1 || cfg.BatchMax > MaxBatch {
		return nil, fmt.Errorf("btc faucet: at most %d drips per payout, got %d", MaxBatch, cfg.BatchMax)
	}
	return &Faucet{cfg: cfg, log: cfg.Logger}, nil
}

// Address is the faucet's address: where its operator sends coins.
func (f *Faucet) Address() bitcoin.Address { return f.cfg.Key.Address() }

// Network is the network the faucet pays on.
func (f *Faucet) Network() bitcoin.Network { return f.cfg.Key.Network() }

// Amounts are the three drip sizes.
func (f *Faucet) Amounts() Amounts { return f.cfg.Amounts }

// Run checks the node's chain, takes the key (or waits while another
// replica holds it), resumes the ledger's payouts and then follows the
// chain every PollInterval, renewing the hold and raising the fee of stuck
// payouts, until ctx ends; then it gives the key up. It retries an
// unreachable node for as long as it takes; it fails only when the node is
// on another network than the key (a configuration error no retry cures).
func (f *Faucet) Run(ctx context.Context) error {
	defer func() {
		f.cur.Store(nil)
		if err := f.cfg.Owner.Release(context.WithoutCancel(ctx)); err != nil {
			f.log.Warn("btc faucet: releasing the key failed", "err", err)
		}
	}()
	tick := time.NewTicker(f.cfg.PollInterval)
	defer tick.Stop()
	var lastRenew, lastBump, lastTry time.Time
	for {
		// A standby tries to take the key every RenewEvery, not every poll:
		// each try is a connection to the store.
		if f.cur.Load() == nil && (!f.standby.Load() || time.Since(lastTry) >= f.cfg.RenewEvery) {
			lastTry = time.Now()
			err := f.start(ctx)
			switch {
			case errors.Is(err, errWrongChain):
				return err
			case errors.Is(err, ErrStandby):
				f.observe(nil)
			case err != nil:
				f.observe(err)
				f.log.Warn("btc faucet: cannot start yet; retrying", "err", err)
			default:
				f.observe(nil)
				e := f.cur.Load()
				f.log.Info("btc faucet ready", "address", f.Address().String(), "network", f.Network().String(),
					"tip", e.payer.chain.Tip(), "in_flight", e.payer.InFlight())
				lastRenew, lastBump = time.Now(), time.Now()
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		e := f.cur.Load()
		if e == nil {
			continue
		}
		if time.Since(lastRenew) >= f.cfg.RenewEvery {
			lastRenew = time.Now()
			if err := f.cfg.Owner.Renew(ctx); err != nil {
				// Lost (or unprovable: the store is down, and the ledger's
				// fenced writes would fail anyway): stop paying; take the
				// key again, and resume a fresh payer, when it is free.
				f.log.Warn("btc faucet: lost the BTC key; no more BTC payouts from this replica until it is taken again", "err", err)
				f.cur.Store(nil)
				// Let a payout under way finish (its fenced write fails, or
				// it was recorded in time for the next holder to resume)
				// before a new payer may start.
				e.payer.waitIdle()
				continue
			}
		}
		err := e.payer.Sync(ctx)
		if errors.Is(err, ErrReorgTooDeep) {
			return fmt.Errorf("btc faucet: %w; restart to rescan from the start height", err)
		}
		f.observe(err)
		if err != nil {
			continue
		}
		f.refresh(e)
		if time.Since(lastBump) >= f.cfg.BumpAfter/10 {
			lastBump = time.Now()
			f.bump(ctx, e)
		}
	}
}

var errWrongChain = errors.New("the node is on another network than the faucet's key")

// start checks the chain, takes the key and resumes the ledger.
func (f *Faucet) start(ctx context.Context) error {
	chain, err := f.cfg.Node.RequireTestChain(ctx)
	if err != nil {
		if errors.Is(err, btcnode.ErrMainChain) {
			return fmt.Errorf("btc faucet: %w: %w", errWrongChain, err)
		}
		return fmt.Errorf("btc faucet: read the node's chain: %w", err)
	}
	if !chainMatches(chain, f.Network()) {
		return fmt.Errorf("btc faucet: %w: the node runs %s, the key is for %s", errWrongChain, chain, f.Network())
	}
	held, err := f.cfg.Owner.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("btc faucet: take the key: %w", err)
	}
	if was := f.standby.Swap(!held); was != !held {
		if held {
			f.log.Info("btc faucet: took the BTC key")
		} else {
			f.log.Info("btc faucet: another replica holds the BTC key; this one stands by")
		}
	}
	if !held {
		return ErrStandby
	}
	if f.chain == nil {
		f.chain = newChainFollower(f.cfg.Node, f.cfg.Key.Address().PkScript(), f.cfg.StartHeight, 0)
	}
	payer := newPayer(f.cfg.Key, f.cfg.Node, f.cfg.Owner.Ledger(), f.cfg.Fees, f.chain)
	payer.SetLogger(f.log)
	batcher, err := NewBatcher(payer, f.cfg.BatchMax, f.cfg.BatchWindow)
	if err != nil {
		return fmt.Errorf("btc faucet: %w", err)
	}
	if err := payer.Resume(ctx); err != nil {
		return err
	}
	e := &engine{payer: payer, batcher: batcher}
	f.refresh(e)
	f.cur.Store(e)
	return nil
}

// bump raises the fee of payouts waiting longer than BumpAfter.
func (f *Faucet) bump(ctx context.Context, e *engine) {
	n, err := e.payer.BumpStuck(ctx, f.cfg.BumpAfter)
	if err != nil {
		f.log.Warn("btc faucet: fee bump failed", "err", err)
	}
	if n > 0 {
		f.log.Info("btc faucet: raised the fee of stuck payouts", "payouts", n)
	}
}

func chainMatches(c btcnode.Chain, n bitcoin.Network) bool {
	switch n {
	case bitcoin.Regtest:
		return c == btcnode.ChainRegtest
	case bitcoin.Signet:
		return c == btcnode.ChainSignet
	case bitcoin.Testnet:
		// testnet4 uses testnet3's address formats.
		return c == btcnode.ChainTestnet3 || c == btcnode.ChainTestnet4
	}
	return false
}

// observe records whether the node answered the last loop step.
func (f *Faucet) observe(err error) {
	up := err == nil || !btcnode.IsUnavailable(err) && !neverSent(err)
	if was := f.nodeUp.Swap(up); f.seen.Swap(true) && was != up {
		if up {
			f.log.Info("btc node reachable again")
		} else {
			f.log.Warn("btc node unreachable", "err", err)
		}
	}
	f.mu.Lock()
	f.lastErr = err
	f.mu.Unlock()
	if err != nil && up {
		f.log.Warn("btc faucet: following the chain failed", "err", err)
	}
}

// Drip is a paid BTC drip.
type Drip struct {
	TxID   string // the payout's txid, as the node prints it
	Raw    []byte
	Amount int64 // sats to the recipient
	// Batch is how many drips the payout pays (1 when alone).
	Batch int
	Fee   int64 // the whole payout's fee, sats
}

// Drip pays size to addr. It answers once the node holds the payout (or
// may hold it: a lost answer is success, since the recorded bytes are sent
// again until a block confirms them).
func (f *Faucet) Drip(ctx context.Context, addr bitcoin.Address, size Size) (*Drip, error) {
	e := f.cur.Load()
	if e == nil {
		if f.standby.Load() {
			return nil, fmt.Errorf("btc faucet: %w", ErrStandby)
		}
		f.mu.Lock()
		cause := f.lastErr
		f.mu.Unlock()
		if cause != nil {
			return nil, fmt.Errorf("btc faucet: %w: %w", ErrNotReady, cause)
		}
		return nil, fmt.Errorf("btc faucet: %w", ErrNotReady)
	}
	amount := f.cfg.Amounts.Of(size)
	rec, err := e.batcher.Pay(ctx, bitcoin.Payout{Address: addr, Amount: amount})
	if err != nil {
		if errors.Is(err, ErrNodeDown) {
			f.nodeUp.Store(false)
		}
		return nil, err
	}
	f.nodeUp.Store(true)
	f.refresh(e)
	return &Drip{TxID: rec.TxID, Raw: rec.Raw, Amount: amount, Batch: len(rec.Outputs), Fee: rec.Fee}, nil
}

// Status is what the faucet knows of its funds and its node.
type Status struct {
	Address string
	Network string
	Ready   bool // holds the key, resumed and following the chain
	Standby bool // another replica holds the key
	NodeUp  bool
	Tip     int64
	// Balance is what new payouts can spend: mature coins no payout in
	// flight spends, plus the change of payouts in flight.
	Balance int64
	// Immature is coinbase value still short of 100 confirmations.
	Immature int64
	InFlight int // payouts not yet in a block
}

// Status reports the faucet's funds as its own chain view had them after
// the last block it read or payout it made.
func (f *Faucet) Status() Status {
	e := f.cur.Load()
	st := Status{Address: f.Address().String(), Network: f.Network().String(),
		Ready: e != nil, Standby: e == nil && f.standby.Load(), NodeUp: f.nodeUp.Load()}
	if e == nil {
		return st
	}
	if snap := f.funds.Load(); snap != nil {
		st.Tip, st.Balance, st.Immature, st.InFlight = snap.Tip, snap.Balance, snap.Immature, snap.InFlight
	}
	return st
}

// refresh stores e's funds for Status.
func (f *Faucet) refresh(e *engine) {
	p := e.payer
	p.mu.Lock()
	var st Status
	st.Tip = p.chain.Tip()
	for _, r := range p.inflight {
		if r.MinedAt == 0 {
			st.InFlight++
		}
	}
	st.Balance, st.Immature = p.funds()
	p.mu.Unlock()
	f.funds.Store(&st)
}

// PayoutStatus is what became of a payout the faucet sent.
type PayoutStatus struct {
	TxID          string
	Outputs       []Output
	Confirmations int64 // 0 while in the mempool
	BlockHash     string
	InFlight      bool // the faucet holds it as unconfirmed
}

// Payout looks up a payout by txid: the faucet's in-flight records first,
// then the node (which needs a transaction index for confirmed ones). ok is
// false for a txid that is not a payout of this faucet.
func (f *Faucet) Payout(ctx context.Context, txid string) (PayoutStatus, bool, error) {
	e := f.cur.Load()
	if e == nil {
		return PayoutStatus{}, false, nil
	}
	e.payer.mu.Lock()
	r, inflight := e.payer.inflight[txid]
	var st PayoutStatus
	if inflight {
		// The ledger and the chain view answer for a payout still held
		// (the page polls this every few seconds): no node round trip.
		st = PayoutStatus{TxID: txid, Outputs: append([]Output(nil), r.Outputs...), InFlight: true}
		if r.MinedAt != 0 {
			st.Confirmations = e.payer.chain.Tip() - r.MinedAt + 1
		}
	}
	e.payer.mu.Unlock()
	if inflight {
		return st, true, nil
	}
	tx, err := f.cfg.Node.RawTransaction(ctx, txid)
	switch {
	case err == nil:
	case errors.Is(err, btcnode.ErrTxNotFound), errors.Is(err, btcnode.ErrTxIndexDisabled):
		return PayoutStatus{}, false, nil
	default:
		return PayoutStatus{}, false, fmt.Errorf("btc faucet: look up %s: %w", txid, err)
	}
	// Ours only if it spends the faucet's script: the follower saw it.
	if !spendsOurs(e.payer.chain, tx) {
		return PayoutStatus{}, false, nil
	}
	st = PayoutStatus{TxID: txid}
	script := hex.EncodeToString(f.Address().PkScript())
	for _, o := range tx.Vout {
		if o.ScriptPubKey == script {
			continue // change
		}
		st.Outputs = append(st.Outputs, Output{Address: o.Address, Amount: o.Value})
	}
	st.Confirmations, st.BlockHash = tx.Confirmations, tx.BlockHash
	return st, true, nil
}

// spendsOurs reports whether the main chain shows tx spending a coin of the
// faucet.
func spendsOurs(chain *chainFollower, tx *btcnode.Tx) bool {
	for _, in := range tx.Vin {
		op, err := outPoint(in.TxID, in.Vout)
		if err != nil {
			continue
		}
		if c, ok := chain.Coin(op); ok && c.SpentBy == tx.TxID {
			return true
		}
	}
	return false
}

// ErrNoAddressIndex: the node cannot report an address's balance (btcd
// without --addrindex, or a node with neither scantxoutset nor an index).
var ErrNoAddressIndex = btcnode.ErrNoAddressIndex

// AddressBalancer reads any address's confirmed balance; *btcnode.Client
// does, through scantxoutset (Core) or searchrawtransactions (btcd with
// --addrindex).
type AddressBalancer interface {
	AddressBalance(ctx context.Context, address string) (int64, error)
}

// BalanceTTL is how long one node read answers the balance of an address:
// a scan of the UTXO set (Core) or of an address's history (btcd) is
// costly, and the endpoint is public.
const BalanceTTL = 10 * time.Second

// maxBalanceEntries bounds the balance cache.
const maxBalanceEntries = 4096

// ErrBalanceBusy: the node is already scanning for another balance.
var ErrBalanceBusy = errors.New("the node is busy with another balance lookup")

type balanceEntry struct {
	sats int64
	at   time.Time
}

// balances caches address balances and lets one node scan run at a time:
// Bitcoin Core runs one scantxoutset per node and refuses others.
type balances struct {
	mu      sync.Mutex
	entries map[string]balanceEntry
	scan    chan struct{} // a token: held while a scan runs
}

// Balance is addr's confirmed balance in sats, as the node reports it,
// cached BalanceTTL per address; lookups queue for the one scan at a
// time until ctx ends (then ErrBalanceBusy).
func (f *Faucet) Balance(ctx context.Context, addr bitcoin.Address) (int64, error) {
	ab, ok := f.cfg.Node.(AddressBalancer)
	if !ok {
		return 0, fmt.Errorf("btc faucet: %w", ErrNoAddressIndex)
	}
	b := &f.bal
	key := addr.String()
	b.mu.Lock()
	if b.entries == nil {
		b.entries, b.scan = map[string]balanceEntry{}, make(chan struct{}, 1)
	}
	e, hit := b.entries[key]
	scan := b.scan
	b.mu.Unlock()
	if hit && time.Since(e.at) < BalanceTTL {
		return e.sats, nil
	}
	select {
	case scan <- struct{}{}:
	case <-ctx.Done():
		return 0, fmt.Errorf("btc faucet: balance of %s: %w", addr, ErrBalanceBusy)
	}
	defer func() { <-scan }()
	// Another request may have read it while this one queued.
	b.mu.Lock()
	e, hit = b.entries[key]
	b.mu.Unlock()
	if hit && time.Since(e.at) < BalanceTTL {
		return e.sats, nil
	}
	sats, err := ab.AddressBalance(ctx, key)
	if btcnode.IsScanInProgress(err) {
		return 0, fmt.Errorf("btc faucet: balance of %s: %w: %w", addr, ErrBalanceBusy, err)
	}
	if err != nil {
		return 0, fmt.Errorf("btc faucet: balance of %s: %w", addr, err)
	}
	b.mu.Lock()
	if len(b.entries) >= maxBalanceEntries {
		clear(b.entries) // crude but bounded; entries live seconds anyway
	}
	b.entries[key] = balanceEntry{sats: sats, at: time.Now()}
	b.mu.Unlock()
	return sats, nil
}
