package options

import (
	"errors"
	"fmt"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/settings"
)

// Amounts are what an STX drip pays.
type Amounts struct {
	Default uint64 // µSTX per default drip
	// Stacking is a fixed µSTX per stacking drip; 0 is PoX's minimum
	// plus StackingPadding percent.
	Stacking        uint64
	StackingPadding uint64
	Memo            string
}

func defaultAmounts() Amounts {
	return Amounts{Default: settings.STXAmount, StackingPadding: settings.StackingPadding, Memo: settings.Memo}
}

// BindFlags binds --amount, --stacking-amount, --stacking-padding-percent
// and --memo.
func (o *Amounts) BindFlags(fs *Flags) {
	fs.Uint64(&o.Default, "amount", "µSTX per default drip")
	fs.Uint64(&o.Stacking, "stacking-amount", "fixed µSTX per stacking drip (0 = PoX min_amount_ustx plus padding)")
	fs.Uint64(&o.StackingPadding, "stacking-padding-percent", "percent added to PoX min_amount_ustx for stacking drips")
	fs.String(&o.Memo, "memo", "memo of faucet transfers (at most 34 bytes)")
}

func (o *Amounts) validate() error {
	// The engine reads 0 as "use the default"; on the command line it
	// would silently mean 500 STX.
	if o.Default == 0 {
		return errors.New("--amount must be positive")
	}
	if _, err := stacks.NewMemo(o.Memo); err != nil {
		return fmt.Errorf("--memo: %w", err)
	}
	return nil
}

// Fees price a Stacks transaction, in µSTX.
type Fees struct {
	Min, Max, Fallback, Reserve uint64
}

func defaultFees() Fees {
	return Fees{Min: settings.FeeMin, Max: settings.FeeMax, Fallback: settings.FeeFallback}
}

// BindFlags binds --fee-min, --fee-max, --fee-fallback and --fee-reserve.
func (o *Fees) BindFlags(fs *Flags) {
	fs.Uint64(&o.Min, "fee-min", "minimum fee in µSTX")
	fs.Uint64(&o.Max, "fee-max", "maximum fee in µSTX")
	fs.Uint64(&o.Fallback, "fee-fallback", "fee in µSTX when the node cannot estimate")
	fs.Uint64(&o.Reserve, "fee-reserve", "µSTX each key keeps back beyond in-flight spends")
}

// Sending bounds how the engine sends and waits.
type Sending struct {
	MaxInFlight int
	BusyWait    time.Duration
	StuckBlocks uint64
}

func defaultSending() Sending {
	return Sending{MaxInFlight: settings.MaxInFlight, BusyWait: settings.BusyWait, StuckBlocks: settings.StuckBlocks}
}

// BindFlags binds --max-in-flight, --busy-wait and --stuck-blocks.
func (o *Sending) BindFlags(fs *Flags) {
	fs.Int(&o.MaxInFlight, "max-in-flight", "unconfirmed transactions per key (the node's chaining limit is 25)")
	fs.Duration(&o.BusyWait, "busy-wait", "how long a drip waits for a free in-flight slot before answering busy")
	fs.Uint64(&o.StuckBlocks, "stuck-blocks", "blocks without nonce progress before a stuck nonce is repaired")
}

// Batching gathers default drips into send-many calls.
type Batching struct {
	Max      int
	Window   time.Duration
	Contract string
}

func defaultBatching() Batching {
	return Batching{Max: settings.BatchMax, Contract: stacks.SendManyMemoTestnet}
}

// BindFlags binds --batch-max, --batch-window and --batch-contract.
func (o *Batching) BindFlags(fs *Flags) {
	fs.Int(&o.Max, "batch-max", "most default drips one send-many contract call pays (2..200; 0 or 1 = off, every drip a transfer of its own): drips that find in-flight slots scarce gather into one call, so a key pays far more than the node's 25 transactions per block")
	fs.Duration(&o.Window, "batch-window", "gather each batch for this long from its first drip (a full batch leaves at once); 0 is adaptive: a drip leaves at once, alone, while slots are plentiful and none waits; once a fifth of each key's slots is left, drips wait and leave together the moment a block frees a slot")
	fs.String(&o.Contract, "batch-contract", "with --batch-max: the send-many-memo contract id (ADDR.name) batches call")
}

func (o *Batching) validate() error {
	if o.Window < 0 {
		return fmt.Errorf("--batch-window must be positive, or 0 for adaptive; got %s", o.Window)
	}
	if o.Max < 0 || o.Max > settings.BatchMax {
		return fmt.Errorf("--batch-max %d out of range (2..%d, or 0 or 1 for off)", o.Max, settings.BatchMax)
	}
	id, err := o.ContractID()
	if err != nil {
		return err
	}
	if id.Address.IsMainnet() {
		return fmt.Errorf("--batch-contract %s is on mainnet; the faucet is testnet only", id)
	}
	return nil
}

// ContractID is --batch-contract parsed.
func (o *Batching) ContractID() (stacks.ContractID, error) {
	id, err := stacks.ParseContractID(o.Contract)
	if err != nil {
		return stacks.ContractID{}, fmt.Errorf("--batch-contract: %w", err)
	}
	return id, nil
}
