package btcfaucet

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
	"github.com/stxfaucet/faucet-operator/server/chain/btcnode"
	"github.com/stxfaucet/faucet-operator/server/journal"
	"github.com/stxfaucet/faucet-operator/server/settings"
)

// The BTC faucet: the Payer and Batcher behind one service with a
// background loop, which is what the HTTP layer and `faucet serve` use.
// The loop resumes the key's journal (sending its payouts again byte for
// byte), then follows the chain, forgets confirmed payouts, resends those
// in doubt and fee-bumps stuck ones (run.go).

// The incumbent's three drip sizes (0.0001, 0.01 and 0.5 BTC) and the fee
// rate defaults, sat/vB: package settings' (the flags and the operator
// share them).
const (
	DefaultAmount          = settings.BTCAmount
	DefaultLargeAmount     = settings.BTCLargeAmount
	DefaultXLargeAmount    = settings.BTCXLargeAmount
	DefaultFallbackFeeRate = settings.BTCFallbackFeeRate
	DefaultMaxFeeRate      = settings.BTCMaxFeeRate
)

// Defaults of the service's timing.
const (
	DefaultPollInterval = time.Second
	// DefaultBatchMax and DefaultBatchWindow: drips arriving within a
	// quarter second share a transaction, so a burst is paid in a few
	// transactions instead of one chain of 25.
	DefaultBatchMax    = settings.BTCBatchMax
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
	BlockHeight(ctx context.Context, hash string) (int64, error)
}

var _ FaucetNode = (*btcnode.Client)(nil)

// Config configures a Faucet.
type Config struct {
	Key  *bitcoin.PrivateKey // required; its network is the faucet's
	Node FaucetNode          // required
	// Journal keeps the key's payouts until they confirm (nil: in memory,
	// lost at exit). Shared: replicas share it, and a journal.Owner decides
	// whether this one pays, through Acquired, Releasing and Lost; the
	// faucet starts standing by. Otherwise the key is this process's.
	Journal journal.Store
	Shared  bool
	Fees    Fees
	Amounts Amounts // zero fields take the defaults
	// StartHeight is the first block scanned for the key's coins.
	StartHeight  int64
	BatchMax     int           // 1 pays every drip alone; 0 = DefaultBatchMax
	BatchWindow  time.Duration // 0 = DefaultBatchWindow
	PollInterval time.Duration // 0 = DefaultPollInterval
	BumpAfter    time.Duration // 0 = DefaultBumpAfter
	Logger       *slog.Logger
	// Clock is the clock of every decision (fee bumps, the balance cache)
	// and of every wait (the poll, the batch window); nil is the real
	// clock.
	Clock clock.WithTickerAndDelayedExecution
}

// ErrStarting (with ErrNotReady): this replica holds the key and is
// resuming its journal, with no node error so far: ready in a moment.
var ErrStarting = errors.New("the BTC faucet is starting")

// ErrStandby: another replica holds the BTC key and pays BTC drips; this
// one takes over if that one goes.
var ErrStandby = errors.New("another replica holds the BTC key")

// engine is the payer of a held key: replaced when the key is lost and
// taken again (the new payer resumes what the journal holds).
type engine struct {
	payer   *Payer
	batcher *Batcher
}

// Faucet pays BTC drips from one key. Safe for concurrent use.
type Faucet struct {
	cfg Config
	log *slog.Logger
	// cur is the engine while this process holds the key and has resumed
	// its journal; nil before, and while another replica holds it.
	cur atomic.Pointer[engine]
	// last is the engine of the previous hold: a new one starts once its
	// payouts under way are done. Only Run's goroutine uses it.
	last *engine
	// hold guards held and cur's transitions: a lost key never gets an
	// engine stored after the loss.
	hold sync.Mutex
	held atomic.Bool // this replica owns the key (always, unless Shared)
	// wake asks Run to start at once: the key was acquired.
	wake chan struct{}
	// chain is the chain view, kept across payers (only Run's goroutine
	// builds payers, so it needs no lock of its own).
	chain *chainFollower
	bal   balances
	// funds is the last figures read under the payer's lock, so Status
	// (metrics, the page) never waits behind a payout's node calls.
	funds atomic.Pointer[Status]

	nodeUp atomic.Bool
	seen   atomic.Bool // the node was asked at least once
	// behind: the last sync found the node's chain behind the view
	// (ErrNodeBehind); drips are refused until it catches up.
	behind atomic.Bool
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
	if cfg.BatchMax == 0 { // a negative one is refused below
		cfg.BatchMax = DefaultBatchMax
	}
	if cfg.BatchWindow == 0 { // a negative one is NewBatcher's to refuse
		cfg.BatchWindow = DefaultBatchWindow
	}
	cfg.PollInterval = settings.OrDefault(cfg.PollInterval, DefaultPollInterval)
	cfg.BumpAfter = settings.OrDefault(cfg.BumpAfter, DefaultBumpAfter)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Journal == nil {
		cfg.Journal = journal.NewMemoryStore()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.BatchMax < 1 || cfg.BatchMax > MaxBatch {
		return nil, fmt.Errorf("btc faucet: at most %d drips per payout, got %d", MaxBatch, cfg.BatchMax)
	}
	f := &Faucet{cfg: cfg, log: cfg.Logger, wake: make(chan struct{}, 1)}
	f.held.Store(!cfg.Shared)
	return f, nil
}

// Address is the faucet's address: where its operator sends coins.
func (f *Faucet) Address() bitcoin.Address { return f.cfg.Key.Address() }

// Network is the network the faucet pays on.
func (f *Faucet) Network() bitcoin.Network { return f.cfg.Key.Network() }

// Amounts are the three drip sizes.
func (f *Faucet) Amounts() Amounts { return f.cfg.Amounts }

// Service is what the HTTP layer and the other replicas ask of a BTC
// faucet; *Faucet has it.
type Service interface {
	// DripAmount pays amount satoshis to addr.
	DripAmount(ctx context.Context, addr bitcoin.Address, amount int64) (*Drip, error)
	Balance(ctx context.Context, addr bitcoin.Address) (int64, error)
	Payout(ctx context.Context, txid string) (PayoutStatus, bool, error)
	Status() Status
	Amounts() Amounts
	Network() bitcoin.Network
}

var _ Service = (*Faucet)(nil)

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
	return f.DripAmount(ctx, addr, f.cfg.Amounts.Of(size))
}

// DripAmount is Drip of amount satoshis (the HTTP layer's budget may scale
// a drip, a sign-in tier multiply it).
func (f *Faucet) DripAmount(ctx context.Context, addr bitcoin.Address, amount int64) (*Drip, error) {
	if amount <= 0 {
		return nil, fmt.Errorf("btc faucet: a drip of %d sats", amount)
	}
	e := f.cur.Load()
	if e == nil {
		if !f.held.Load() {
			return nil, fmt.Errorf("btc faucet: %w", ErrStandby)
		}
		f.mu.Lock()
		cause := f.lastErr
		f.mu.Unlock()
		if cause != nil {
			return nil, fmt.Errorf("btc faucet: %w: %w", ErrNotReady, cause)
		}
		return nil, fmt.Errorf("btc faucet: %w: %w", ErrNotReady, ErrStarting)
	}
	if f.behind.Load() {
		// Its coins may not exist on the node's chain: a payout would be
		// refused, or worse, wait for inputs that never come.
		return nil, fmt.Errorf("btc faucet: %w", ErrNodeBehind)
	}
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

// DeriveSecret returns a 32-byte secret for purpose derived one-way from
// the faucet's key: every replica holds the key, so they agree on it
// without another Secret to distribute, and the key cannot be recovered
// from it.
func (f *Faucet) DeriveSecret(purpose string) []byte {
	ikm := sha256.Sum256([]byte(f.cfg.Key.Hex()))
	mac := hmac.New(sha256.New, ikm[:])
	mac.Write([]byte("faucet-operator btc derived secret v1\x00" + purpose))
	return mac.Sum(nil)
}
