package faucet

import (
	"context"
	"log/slog"
	"time"

	"github.com/stxfaucet/faucet-operator/server/node"
	"github.com/stxfaucet/faucet-operator/server/stacks"
)

// NodeClient is the node RPC the engine needs; *node.Client implements it.
type NodeClient interface {
	Info(ctx context.Context) (*node.Info, error)
	PoX(ctx context.Context) (*node.PoXInfo, error)
	Account(ctx context.Context, principal string) (*node.Account, error)
	Broadcast(ctx context.Context, rawTx []byte) (string, error)
	TransferFeeRate(ctx context.Context) (uint64, error)
	TransactionFeeEstimate(ctx context.Context, payload []byte, estimatedLen uint64) (*node.FeeEstimate, error)
}

// Defaults for Config fields left zero.
const (
	DefaultAmount          uint64 = 500_000_000 // 500 STX
	DefaultStackingPadding uint64 = 20          // percent above PoX min_amount_ustx
	DefaultMemo                   = "faucet"
	DefaultMaxInFlight            = 25 // the node's mempool chaining limit
	DefaultFeeMin          uint64 = 180
	DefaultFeeMax          uint64 = 100_000
	DefaultFeeFallback     uint64 = 1_000
	DefaultStuckBlocks     uint64 = 3
	DefaultMaxAttempts            = 4
)

// Config configures an engine. Zero values take the defaults above.
type Config struct {
	Keys []*stacks.PrivateKey
	Node NodeClient

	DefaultAmount          uint64 // µSTX per default drip
	StackingAmount         uint64 // fixed stacking drip; 0 = from PoX
	StackingPaddingPercent uint64 // added to min_amount_ustx; 0 = DefaultStackingPadding
	NoStackingPadding      bool   // use min_amount_ustx exactly
	Memo                   string

	FeeMin, FeeMax, FeeFallback uint64 // fee = node rate × length, clamped to [FeeMin, FeeMax]
	FeeReserve                  uint64 // µSTX a key keeps back beyond in-flight spends

	ChainID     uint32 // when set, refuse a node reporting another chain id
	MaxInFlight int    // per key
	MaxAttempts int    // node submissions per drip
	StuckBlocks uint64 // blocks without nonce progress before repair

	// BusyWait is how long a drip may wait for a key's in-flight slot to free
	// up (at the next block) before failing with ReasonBusy; 0 fails at once.
	BusyWait time.Duration

	PollInterval       time.Duration // tip polling for syncs and repairs; default 1s
	ChainCheckInterval time.Duration // how long a chain-id check is trusted; default 30s
	CacheTTL           time.Duration // PoX and fee-rate cache; default 10s

	// Ledger and History hold the engine's state; nil keeps it in
	// memory. Owner, when set, decides which keys this process may use
	// (several replicas on one shared store); nil owns every key.
	Ledger  Ledger
	History History
	Owner   KeyOwner

	// Treasury, when set, funds the distributor keys (Keys) and never pays
	// drips: a distributor whose available balance falls below RefillBelow
	// µSTX gets RefillAmount µSTX from it (see treasury.go). RefillBelow
	// defaults to DefaultRefillBelowDrips × (DefaultAmount+FeeFallback),
	// RefillAmount to DefaultRefillAmountFactor × RefillBelow; RefillAmount
	// must be at least RefillBelow.
	Treasury     *stacks.PrivateKey
	RefillBelow  uint64
	RefillAmount uint64

	// BatchMax, from 2 to MaxBatch, gathers default drips into send-many
	// calls of up to that many recipients (batch.go); 0 or 1 is off.
	// BatchWindow is the longest a drip waits for others (default
	// DefaultBatchWindow); BatchContract the send-many-memo contract
	// (zero = stacks.SendManyMemoTestnet).
	BatchMax      int
	BatchWindow   time.Duration
	BatchContract stacks.ContractID

	Logger *slog.Logger
	Now    func() time.Time
}

func (c *Config) setDefaults() {
	if c.DefaultAmount == 0 {
		c.DefaultAmount = DefaultAmount
	}
	if c.StackingPaddingPercent == 0 && !c.NoStackingPadding {
		c.StackingPaddingPercent = DefaultStackingPadding
	}
	if c.Memo == "" {
		c.Memo = DefaultMemo
	}
	if c.FeeMin == 0 {
		c.FeeMin = DefaultFeeMin
	}
	if c.FeeMax == 0 {
		c.FeeMax = max(DefaultFeeMax, c.FeeMin)
	}
	if c.FeeFallback == 0 {
		c.FeeFallback = DefaultFeeFallback
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.StuckBlocks == 0 {
		c.StuckBlocks = DefaultStuckBlocks
	}
	if c.PollInterval <= 0 {
		c.PollInterval = time.Second
	}
	if c.ChainCheckInterval <= 0 {
		c.ChainCheckInterval = 30 * time.Second
	}
	if c.CacheTTL <= 0 {
		c.CacheTTL = 10 * time.Second
	}
	if c.BatchWindow <= 0 {
		c.BatchWindow = DefaultBatchWindow
	}
	if c.Ledger == nil {
		c.Ledger = NewMemoryLedger()
	}
	if c.History == nil {
		c.History = NewMemoryHistory(DefaultMemoryHistorySize)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}
