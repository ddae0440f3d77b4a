package node

import (
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Chain ids as reported in /v2/info network_id (and signed into every tx).
// A private non-mainnet node may be configured with any other value.
const (
	ChainIDMainnet uint32 = 1
	ChainIDTestnet uint32 = 0x80000000
)

// MaxMempoolTxChaining is the node's MAXIMUM_MEMPOOL_TX_CHAINING: nonces up
// to account_nonce+1+25 are admitted, higher ones get TooMuchChaining.
const MaxMempoolTxChaining = 25

// Info is the body of GET /v2/info. Field order and tags follow the node's
// RPCPeerInfoData so that marshalling yields what a real node serves.
// Pointers mark fields that old nodes omit or that the node sends as null.
type Info struct {
	PeerVersion            uint32 `json:"peer_version"`
	PoxConsensus           string `json:"pox_consensus"`
	BurnBlockHeight        uint64 `json:"burn_block_height"`
	StablePoxConsensus     string `json:"stable_pox_consensus"`
	StableBurnBlockHeight  uint64 `json:"stable_burn_block_height"`
	ServerVersion          string `json:"server_version"`
	NetworkID              uint32 `json:"network_id"` // the chain id, see ChainIDMainnet/ChainIDTestnet
	ParentNetworkID        uint32 `json:"parent_network_id"`
	StacksTipHeight        uint64 `json:"stacks_tip_height"`
	StacksTip              string `json:"stacks_tip"` // block header hash, not the index block hash
	StacksTipConsensusHash string `json:"stacks_tip_consensus_hash"`
	GenesisChainstateHash  string `json:"genesis_chainstate_hash"`
	// UnanchoredTip/UnanchoredSeq are always sent, as null unless there is
	// unconfirmed microblock state (never in Nakamoto).
	UnanchoredTip *string `json:"unanchored_tip"`
	UnanchoredSeq *uint16 `json:"unanchored_seq"`
	// TenureHeight is the coinbase height; absent before 3.0.
	TenureHeight      *uint64 `json:"tenure_height,omitempty"`
	ExitAtBlockHeight *uint64 `json:"exit_at_block_height"`
	// IsFullySynced is absent on nodes older than mid-2024. It can be true
	// while Stacks blocks are still downloading (stacks-core#4847).
	IsFullySynced     *bool          `json:"is_fully_synced,omitempty"`
	NodePublicKey     string         `json:"node_public_key,omitempty"`
	NodePublicKeyHash string         `json:"node_public_key_hash,omitempty"`
	LastPoxAnchor     *LastPoxAnchor `json:"last_pox_anchor,omitempty"`
	// StackerDBs uses omitzero so that a sent [] survives a round trip.
	StackerDBs []string `json:"stackerdbs,omitzero"`
}

// LastPoxAnchor is the optional last_pox_anchor object of /v2/info.
type LastPoxAnchor struct {
	AnchorBlockHash string `json:"anchor_block_hash"`
	AnchorBlockTxID string `json:"anchor_block_txid"`
}

// IndexBlockHash returns the tip's index block hash (StacksBlockId), the
// value to pass as ?tip= to pin reads to this tip.
func (i *Info) IndexBlockHash() (string, error) {
	return ComputeIndexBlockHash(i.StacksTip, i.StacksTipConsensusHash)
}

// ComputeIndexBlockHash returns hex(SHA-512/256(blockHash ‖ consensusHash)),
// the node's StacksBlockId. Inputs are plain hex of 32 and 20 bytes. The
// order (block hash first) and SHA-512/256 (not truncated SHA-512) matter.
func ComputeIndexBlockHash(blockHash, consensusHash string) (string, error) {
	bh, err := hex.DecodeString(blockHash)
	if err != nil || len(bh) != 32 {
		return "", fmt.Errorf("node: block hash must be 32 bytes of hex, got %q", excerpt([]byte(blockHash)))
	}
	ch, err := hex.DecodeString(consensusHash)
	if err != nil || len(ch) != 20 {
		return "", fmt.Errorf("node: consensus hash must be 20 bytes of hex, got %q", excerpt([]byte(consensusHash)))
	}
	sum := sha512.Sum512_256(append(bh, ch...))
	return hex.EncodeToString(sum[:]), nil
}

// PoXInfo is the body of GET /v2/pox, in the node's RPCPoxInfoData order.
// Fields that 2.0-era nodes lack are omitted when empty; fields the node
// sends as null are pointers without omitempty.
type PoXInfo struct {
	ContractID                  string           `json:"contract_id"`
	PoxActivationThresholdUstx  uint64           `json:"pox_activation_threshold_ustx"`
	FirstBurnchainBlockHeight   uint64           `json:"first_burnchain_block_height"`
	CurrentBurnchainBlockHeight uint64           `json:"current_burnchain_block_height"`
	PreparePhaseBlockLength     uint64           `json:"prepare_phase_block_length"`
	RewardPhaseBlockLength      uint64           `json:"reward_phase_block_length"`
	RewardSlots                 uint64           `json:"reward_slots"`
	RejectionFraction           *uint64          `json:"rejection_fraction"` // null under pox-4
	TotalLiquidSupplyUstx       uint64           `json:"total_liquid_supply_ustx"`
	CurrentCycle                CurrentCycleInfo `json:"current_cycle"`
	NextCycle                   NextCycleInfo    `json:"next_cycle"`
	Epochs                      []Epoch          `json:"epochs,omitzero"`
	CurrentEpoch                string           `json:"current_epoch,omitempty"`
	// Backwards-compatibility fields; MinAmountUstx = NextCycle.MinThresholdUstx.
	MinAmountUstx              uint64            `json:"min_amount_ustx"`
	PrepareCycleLength         uint64            `json:"prepare_cycle_length"`
	RewardCycleID              uint64            `json:"reward_cycle_id"`
	RewardCycleLength          uint64            `json:"reward_cycle_length"`
	RejectionVotesLeftRequired *uint64           `json:"rejection_votes_left_required"`
	NextRewardCycleIn          uint64            `json:"next_reward_cycle_in"`
	ContractVersions           []ContractVersion `json:"contract_versions,omitzero"`
	// The sBTC token and registry contracts ("ADDR.name") PoX-5 uses. Every
	// 4.x node sends both, even before Epoch 4.0 (on mainnet the fixed
	// SM3VDXK3….sbtc-token and .sbtc-registry, elsewhere its configuration);
	// 3.x nodes omit them, so "" means a node older than 4.0.
	Pox5SBTCContract         string `json:"pox_5_sbtc_contract,omitempty"`
	Pox5SBTCRegistryContract string `json:"pox_5_sbtc_registry_contract,omitempty"`
}

// CurrentCycleInfo is /v2/pox current_cycle.
type CurrentCycleInfo struct {
	ID               uint64 `json:"id"`
	MinThresholdUstx uint64 `json:"min_threshold_ustx"`
	StackedUstx      uint64 `json:"stacked_ustx"`
	IsPoxActive      bool   `json:"is_pox_active"`
}

// NextCycleInfo is /v2/pox next_cycle.
type NextCycleInfo struct {
	ID                           uint64  `json:"id"`
	MinThresholdUstx             uint64  `json:"min_threshold_ustx"`
	MinIncrementUstx             uint64  `json:"min_increment_ustx"`
	StackedUstx                  uint64  `json:"stacked_ustx"`
	PreparePhaseStartBlockHeight uint64  `json:"prepare_phase_start_block_height"`
	BlocksUntilPreparePhase      int64   `json:"blocks_until_prepare_phase"` // negative inside the prepare phase
	RewardPhaseStartBlockHeight  uint64  `json:"reward_phase_start_block_height"`
	BlocksUntilRewardPhase       uint64  `json:"blocks_until_reward_phase"`
	UstxUntilPoxRejection        *uint64 `json:"ustx_until_pox_rejection"` // null under pox-4
}

// Epoch is one entry of /v2/pox epochs. Heights are burnchain heights;
// the last epoch ends at i64::MAX.
type Epoch struct {
	EpochID      string        `json:"epoch_id"` // e.g. "Epoch30"
	StartHeight  uint64        `json:"start_height"`
	EndHeight    uint64        `json:"end_height"`
	BlockLimit   ExecutionCost `json:"block_limit"`
	NetworkEpoch uint8         `json:"network_epoch"`
}

// ExecutionCost is a Clarity cost vector (an epoch's block limit, or a
// fee estimate's estimated_cost), in the node's JSON field order.
type ExecutionCost struct {
	WriteLength uint64 `json:"write_length"`
	WriteCount  uint64 `json:"write_count"`
	ReadLength  uint64 `json:"read_length"`
	ReadCount   uint64 `json:"read_count"`
	Runtime     uint64 `json:"runtime"`
}

// ContractVersion is one entry of /v2/pox contract_versions.
type ContractVersion struct {
	ContractID                     string `json:"contract_id"`
	ActivationBurnchainBlockHeight uint64 `json:"activation_burnchain_block_height"`
	FirstRewardCycleID             uint64 `json:"first_reward_cycle_id"`
}

// EpochStart returns the burn height where epochID (e.g. "Epoch30") starts.
func (p *PoXInfo) EpochStart(epochID string) (uint64, bool) {
	for _, e := range p.Epochs {
		if e.EpochID == epochID {
			return e.StartHeight, true
		}
	}
	return 0, false
}

// EpochAt returns the epoch containing burn height h (start <= h < end).
func (p *PoXInfo) EpochAt(h uint64) (Epoch, bool) {
	for _, e := range p.Epochs {
		if e.StartHeight <= h && h < e.EndHeight {
			return e, true
		}
	}
	return Epoch{}, false
}

// Account is the body of GET /v2/accounts/{principal}?proof=0. The node
// encodes the amounts as u128 hex strings; they are held as uint64 µSTX
// because the total STX supply fits comfortably.
type Account struct {
	// Balance is the spendable (unlocked) balance, not the total.
	Balance uint64
	// Locked is the stacked amount; total = Balance + Locked.
	Locked       uint64
	UnlockHeight uint64
	// Nonce is the next nonce per confirmed state; mempool txs are not counted.
	Nonce uint64
}

type accountWire struct {
	Balance      *string `json:"balance"`
	Locked       *string `json:"locked"`
	UnlockHeight uint64  `json:"unlock_height"`
	Nonce        uint64  `json:"nonce"`
}

// MarshalJSON writes the node's format:
// {"balance":"0x…","locked":"0x…","unlock_height":N,"nonce":N}.
func (a Account) MarshalJSON() ([]byte, error) {
	bal, locked := FormatU128(a.Balance), FormatU128(a.Locked)
	return json.Marshal(accountWire{Balance: &bal, Locked: &locked, UnlockHeight: a.UnlockHeight, Nonce: a.Nonce})
}

// UnmarshalJSON parses the node's format; balance and locked are required.
// Proof fields, if the node sent them, are ignored.
func (a *Account) UnmarshalJSON(b []byte) error {
	var w accountWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	if w.Balance == nil || w.Locked == nil {
		return errors.New("account: balance and locked are required")
	}
	bal, err := ParseU128(*w.Balance)
	if err != nil {
		return fmt.Errorf("account balance: %w", err)
	}
	locked, err := ParseU128(*w.Locked)
	if err != nil {
		return fmt.Errorf("account locked: %w", err)
	}
	*a = Account{Balance: bal, Locked: locked, UnlockHeight: w.UnlockHeight, Nonce: w.Nonce}
	return nil
}

// ErrU128Overflow is returned (wrapped) by ParseU128 for values above 2^64-1.
var ErrU128Overflow = errors.New("u128 value exceeds uint64 range")

// FormatU128 renders v the way the node renders u128 amounts: "0x" plus 32
// zero-padded lowercase hex digits, big-endian.
func FormatU128(v uint64) string {
	return fmt.Sprintf("0x%032x", v)
}

// ParseU128 parses a node u128 hex string ("0x" + up to 32 hex digits; the
// node always pads to 32) into a uint64.
func ParseU128(s string) (uint64, error) {
	digits, ok := strings.CutPrefix(s, "0x")
	if !ok {
		return 0, fmt.Errorf("u128 %q: missing 0x prefix", excerpt([]byte(s)))
	}
	if digits == "" || len(digits) > 32 || !isHex(digits) {
		return 0, fmt.Errorf("u128 %q: want 1 to 32 hex digits", excerpt([]byte(s)))
	}
	trimmed := strings.TrimLeft(digits, "0")
	if len(trimmed) > 16 {
		return 0, fmt.Errorf("%w: %s", ErrU128Overflow, s)
	}
	if trimmed == "" {
		return 0, nil
	}
	v, err := strconv.ParseUint(trimmed, 16, 64)
	if err != nil { // unreachable after the checks above; kept for safety
		return 0, fmt.Errorf("u128 %q: %w", s, err)
	}
	return v, nil
}
