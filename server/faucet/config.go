package faucet

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/utils/clock"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/journal"
	"github.com/stxfaucet/faucet-operator/server/settings"
)

// NodeClient is the node RPC the engine needs; *node.Client implements it.
type NodeClient interface {
	Info(ctx context.Context) (*node.Info, error)
	PoX(ctx context.Context) (*node.PoXInfo, error)
	Account(ctx context.Context, principal string) (*node.Account, error)
	Broadcast(ctx context.Context, rawTx []byte) (string, error)
	TransferFeeRate(ctx context.Context) (uint64, error)
	TransactionFeeEstimate(ctx context.Context, payload []byte, estimatedLen uint64) (*node.FeeEstimate, error)
	// TokenBalance is a SIP-010 token's confirmed balance of owner.
	TokenBalance(ctx context.Context, token stacks.ContractID, owner stacks.Principal) (uint64, error)
	// TokenMetadata reads a SIP-010 token's decimals, symbol and name.
	TokenMetadata(ctx context.Context, token stacks.ContractID) (node.TokenMetadata, error)
}

// Defaults of the engine's settings. Those the serve flags and the
// operator's CRD share are package settings' (the one definition); the
// rest are the engine's own.
const (
	DefaultAmount          = settings.STXAmount
	DefaultStackingPadding = settings.StackingPadding
	DefaultMemo            = settings.Memo
	DefaultMaxInFlight     = settings.MaxInFlight
	DefaultFeeMin          = settings.FeeMin
	DefaultFeeMax          = settings.FeeMax
	DefaultFeeFallback     = settings.FeeFallback
	DefaultStuckBlocks     = settings.StuckBlocks
	DefaultMaxAttempts     = 4
	// DefaultBusyWait is how long `faucet serve` lets a drip wait for a
	// free in-flight slot. The engine's zero Timing.BusyWait fails at once.
	DefaultBusyWait     = settings.BusyWait
	DefaultPollInterval = settings.PollInterval
	// DefaultBusyPollInterval is the tip poll's cadence while transactions
	// are in flight: one /v2/info read, then the senders' account reads at
	// once.
	DefaultBusyPollInterval   = settings.BusyPollInterval
	DefaultChainCheckInterval = 30 * time.Second
	DefaultCacheTTL           = 10 * time.Second
)

// Config configures an engine, grouped as the FaucetServer's spec groups
// it. Zero values take the defaults above, except where a field says what
// its zero means.
type Config struct {
	Keys []*stacks.PrivateKey
	Node NodeClient
	// ChainID, when set, refuses a node reporting another chain id.
	ChainID uint32

	Amounts Amounts
	// Tokens are the SIP-010 tokens the faucet drips beside STX, in the
	// order they are listed everywhere.
	Tokens   []Token
	Fees     Fees
	Batching Batching
	Refills  Refills
	State    State
	Timing   Timing

	Logger *slog.Logger
	// Clock is the engine's one clock: every part reads the time, waits
	// and ticks on it (nil: the real clock). Tests step a fake one.
	Clock clock.WithTickerAndDelayedExecution
}

// Amounts are what a drip pays (spec.amounts, spec.memo).
type Amounts struct {
	Default  uint64 // µSTX per default drip
	Stacking uint64 // fixed µSTX per stacking drip; 0 = PoX min_amount_ustx plus padding
	// StackingPaddingPercent is added to min_amount_ustx; nil is
	// DefaultStackingPadding, 0 pays min_amount_ustx exactly.
	StackingPaddingPercent *uint64
	Memo                   string
}

// Token is a SIP-010 fungible token the faucet drips (an entry of
// spec.assets): Amount base units per drip, paid by a transfer call of the
// token's contract from any key holding enough of it and of STX for the
// fee. With a treasury, a key whose available balance of it falls below
// RefillBelow gets RefillAmount from it (defaults: DefaultRefillBelowDrips
// drips and DefaultRefillAmountFactor × RefillBelow).
type Token struct {
	// Name is the asset's name: its path segment
	// (/extended/v1/faucets/{name}), metrics label and history rows.
	Name Asset
	// Asset is the token's identifier, ADDR.contract::token. With
	// FromPoX its contract is left zero: it is the contract the node names
	// in /v2/pox (Epoch 4.0, see node.PoXInfo.Token), and Asset.Name the
	// token's name in it.
	Asset   stacks.AssetInfo
	FromPoX bool
	Amount  uint64
	// RefillBelow and RefillAmount are in the token's base units.
	RefillBelow  uint64
	RefillAmount uint64
}

// validate says why t cannot be dripped, or nil.
func (t Token) validate() error {
	switch {
	case !settings.ValidAssetName(string(t.Name)):
		return fmt.Errorf("token name %q: want 1 to 32 lower-case letters, digits or '-', starting with a letter", t.Name)
	case t.Name == AssetSTX:
		return fmt.Errorf("token name %q is STX's", t.Name)
	case t.Amount == 0:
		return fmt.Errorf("token %s: the amount per drip must be positive", t.Name)
	case t.Asset.Name == "":
		return fmt.Errorf("token %s: no asset identifier (ADDR.contract::token)", t.Name)
	case t.FromPoX && t.Asset.Contract != (stacks.ContractID{}):
		return fmt.Errorf("token %s: a contract is given and also to be found on the node", t.Name)
	case !t.FromPoX && t.Asset.Contract == (stacks.ContractID{}):
		return fmt.Errorf("token %s: no contract", t.Name)
	case !t.FromPoX && t.Asset.Contract.Address.IsMainnet():
		return fmt.Errorf("token %s: %s is a mainnet contract; the faucet is testnet only", t.Name, t.Asset)
	}
	return nil
}

// Fees price a transaction: the node's rate × its length, clamped to
// [Min, Max]; Fallback when the node has no rate (spec.fee).
type Fees struct {
	Min, Max, Fallback uint64
	Reserve            uint64 // µSTX a key keeps back beyond in-flight spends; 0 = none
}

// Batching gathers default drips into send-many calls (spec.batching).
type Batching struct {
	// Max, from 2 to MaxBatch, is the most recipients per call; 0 or 1 is
	// off.
	Max int
	// Window is the longest a drip waits for others (default
	// DefaultBatchWindow).
	Window time.Duration
	// Contract is the send-many-memo contract (zero =
	// stacks.SendManyMemoTestnet).
	Contract stacks.ContractID
}

// Refills configure the treasury (spec.treasury): when Treasury is set it
// funds the distributor keys and never pays drips; a distributor whose
// available balance falls below Below µSTX gets Amount µSTX from it (see
// treasury.go). Below defaults to DefaultRefillBelowDrips drips' worth,
// Amount to DefaultRefillAmountFactor × Below; Amount must be at least
// Below.
type Refills struct {
	Treasury *stacks.PrivateKey
	Below    uint64
	Amount   uint64
}

// State is where the engine keeps what must survive it (spec.store): nil
// Journal and History keep it in memory.
type State struct {
	Journal journal.Store
	History History
	// Shared: several replicas share the store, and a journal.Owner
	// decides which keys this one may use, through the engine's Acquired,
	// Releasing and Lost; the engine starts owning none. Otherwise every
	// key is this process's from the start.
	Shared bool
}

// Timing bounds the engine's waits and loops.
type Timing struct {
	MaxInFlight int    // unconfirmed transactions per key
	MaxAttempts int    // node submissions per transaction
	StuckBlocks uint64 // blocks without nonce progress before repair
	// BusyWait is how long a drip may wait for a key's in-flight slot to
	// free up (at the next block) before failing with ReasonBusy; 0 fails
	// at once.
	BusyWait     time.Duration
	PollInterval time.Duration // tip polling for syncs and repairs while idle
	// BusyPollInterval is the tip polling while any key has a transaction
	// in flight or drips wait for a slot (default DefaultBusyPollInterval,
	// never slower than PollInterval).
	BusyPollInterval   time.Duration
	ChainCheckInterval time.Duration // how long a chain-id check is trusted
	CacheTTL           time.Duration // PoX and fee-rate cache
}

func (c *Config) setDefaults() {
	a, fe, t := &c.Amounts, &c.Fees, &c.Timing
	a.Default = settings.OrDefault(a.Default, DefaultAmount)
	if a.StackingPaddingPercent == nil {
		p := DefaultStackingPadding
		a.StackingPaddingPercent = &p
	}
	a.Memo = cmp.Or(a.Memo, DefaultMemo)
	fe.Min = settings.OrDefault(fe.Min, DefaultFeeMin)
	if fe.Max == 0 {
		fe.Max = max(DefaultFeeMax, fe.Min)
	}
	fe.Fallback = settings.OrDefault(fe.Fallback, DefaultFeeFallback)
	t.MaxInFlight = settings.OrDefault(t.MaxInFlight, DefaultMaxInFlight)
	t.MaxAttempts = settings.OrDefault(t.MaxAttempts, DefaultMaxAttempts)
	t.StuckBlocks = settings.OrDefault(t.StuckBlocks, DefaultStuckBlocks)
	t.PollInterval = settings.OrDefault(t.PollInterval, DefaultPollInterval)
	t.BusyPollInterval = settings.OrDefault(t.BusyPollInterval, DefaultBusyPollInterval)
	t.BusyPollInterval = min(t.BusyPollInterval, t.PollInterval)
	t.ChainCheckInterval = settings.OrDefault(t.ChainCheckInterval, DefaultChainCheckInterval)
	t.CacheTTL = settings.OrDefault(t.CacheTTL, DefaultCacheTTL)
	if c.State.Journal == nil {
		c.State.Journal = journal.NewMemoryStore()
	}
	if c.State.History == nil {
		c.State.History = NewMemoryHistory(DefaultMemoryHistorySize)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
}
