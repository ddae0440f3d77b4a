package devnode

import (
	_ "embed" // the token contract's Clarity template
	"errors"
	"fmt"
	"math"
	"strings"
	"text/template"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// tokenTemplateSource is the Clarity source of the SIP-010 token contract,
// as a text/template holding only {{.Field}} substitutions of tokenFields.
// The devnode does not interpret the rendered contract: this file implements
// its rules in Go, and hack/clarity renders and runs the same template in
// the real Clarity VM to check that the two agree.
//
//go:embed contracts/token.clar.tmpl
var tokenTemplateSource string

// tokenTemplate executes on a tokenFields struct, so a field the template
// names but the struct lacks fails the render instead of leaving a gap.
var tokenTemplate = template.Must(template.New("token.clar").Parse(tokenTemplateSource))

// tokenFields are the template's substitutions.
type tokenFields struct {
	TokenName string
	Name      string
	Symbol    string
	Decimals  uint8
}

// TokenName is sBTC's fungible token (define-fungible-token sbtc-token),
// the part of settings.SBTCTestnet after "::", and the token name
// Config.TokenAsset must carry. Other tokens may have any name.
const TokenName = "sbtc-token"

// The metadata of the default sBTC token (SBTCToken), as sBTC's
// get-name, get-symbol and get-decimals answer.
const (
	SBTCDisplayName = "sBTC"
	SBTCSymbol      = "sBTC"
	SBTCDecimals    = 8
)

// maxTokenText is the SIP-010 trait's (string-ascii 32) for get-name and
// get-symbol.
const maxTokenText = 32

// TokenSpec is a SIP-010 token contract deployed at genesis: the template
// rendered with the spec (TokenContractSource), deployed by
// Asset.Contract's address under Asset.Contract's name.
type TokenSpec struct {
	// Asset is the contract id and the token it defines
	// (define-fungible-token Asset.Name).
	Asset stacks.AssetInfo
	// Name, Symbol and Decimals are what get-name, get-symbol and
	// get-decimals answer. Name and Symbol are 1 to 32 printable ASCII
	// characters other than '"' and '\'.
	Name     string
	Symbol   string
	Decimals uint8
	// Genesis holds token balances minted at genesis.
	Genesis map[stacks.Address]uint64
}

// SBTCToken is the spec of an sBTC-like token at asset (e.g. settings.SBTCTestnet
// parsed): sBTC's name, symbol and 8 decimals, with genesis minted.
func SBTCToken(asset stacks.AssetInfo, genesis map[stacks.Address]uint64) TokenSpec {
	return TokenSpec{Asset: asset, Name: SBTCDisplayName, Symbol: SBTCSymbol, Decimals: SBTCDecimals, Genesis: genesis}
}

// ContractSource is the Clarity source deployed for the spec.
func (s TokenSpec) ContractSource() (string, error) {
	return TokenContractSource(s.Asset.Name, s.Name, s.Symbol, s.Decimals)
}

// validate checks what the template and a real deploy need: a valid asset
// identifier whose token name does not clash with the contract's own
// definitions, and metadata the SIP-010 trait's (string-ascii 32) admits
// without escaping in a Clarity string literal.
func (s TokenSpec) validate() error {
	if err := s.Asset.Validate(); err != nil {
		return fmt.Errorf("asset %s: %w", s.Asset, err)
	}
	_, err := TokenContractSource(s.Asset.Name, s.Name, s.Symbol, s.Decimals)
	return err
}

// templateNames are the names token.clar.tmpl defines or binds: a token of
// the same name would fail the real deploy (NameAlreadyUsed). Names Clarity
// itself reserves (native functions and variables) are not checked.
var templateNames = map[string]bool{
	"ERR_NOT_OWNER": true, "ERR_NOT_DEPLOYER": true, "DEPLOYER": true,
	fnTransfer: true, fnMint: true, fnGetName: true, fnGetSymbol: true, fnGetDecimals: true,
	fnGetBalance: true, fnGetTotalSupply: true, fnGetTokenURI: true,
	"amount": true, "sender": true, "recipient": true, "memo": true, "who": true, "to-print": true,
}

// TokenContractSource renders the token contract for a token named
// tokenName whose get-name, get-symbol and get-decimals answer name, symbol
// and decimals. It refuses a tokenName that is not a Clarity name or that
// the contract itself uses, and a name or symbol that is empty, longer than
// 32 characters, or holds anything but printable ASCII other than '"' and
// '\'.
func TokenContractSource(tokenName, name, symbol string, decimals uint8) (string, error) {
	if err := stacks.ValidateClarityName(tokenName); err != nil {
		return "", fmt.Errorf("token name: %w", err)
	}
	if templateNames[tokenName] {
		return "", fmt.Errorf("token name %q: the contract already defines or binds it", tokenName)
	}
	if err := checkTokenText(name); err != nil {
		return "", fmt.Errorf("token display name: %w", err)
	}
	if err := checkTokenText(symbol); err != nil {
		return "", fmt.Errorf("token symbol: %w", err)
	}
	var b strings.Builder
	if err := tokenTemplate.Execute(&b, tokenFields{TokenName: tokenName, Name: name, Symbol: symbol, Decimals: decimals}); err != nil {
		return "", fmt.Errorf("rendering the token contract: %w", err)
	}
	return b.String(), nil
}

// checkTokenText accepts what a (string-ascii 32) literal holds unescaped.
func checkTokenText(s string) error {
	if s == "" || len(s) > maxTokenText {
		return fmt.Errorf("%q: want 1 to %d characters", s, maxTokenText)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return fmt.Errorf("%q: character %q is not printable ASCII or needs escaping", s, c)
		}
	}
	return nil
}

// The token contract's functions.
const (
	fnTransfer       = stacks.SIP010TransferFunction
	fnMint           = "mint"
	fnGetName        = "get-name"
	fnGetSymbol      = "get-symbol"
	fnGetDecimals    = "get-decimals"
	fnGetBalance     = "get-balance"
	fnGetTotalSupply = "get-total-supply"
	fnGetTokenURI    = "get-token-uri"
)

// The contract's own errors: ERR_NOT_OWNER is sBTC's (err u4) for moving a
// token one does not own; ERR_NOT_DEPLOYER guards mint.
const (
	tokenErrNotOwner    = 4
	tokenErrNotDeployer = 5
)

// ft-transfer? and ft-mint? error codes (clarity vm/functions/assets.rs
// TransferTokenErrorCodes, MintTokenErrorCodes).
const (
	ftErrNotEnoughBalance  = 1
	ftErrSenderIsRecipient = 2
	ftErrNonPositiveAmount = 3
	ftMintErrNonPositive   = 1
)

// tokenParams lists the token contract's functions (token.clar.tmpl), public
// and read-only, by name.
var tokenParams = map[string][]param{
	fnTransfer:       {paramUInt, paramPrincipal, paramPrincipal, paramMemo},
	fnMint:           {paramUInt, paramPrincipal},
	fnGetName:        nil,
	fnGetSymbol:      nil,
	fnGetDecimals:    nil,
	fnGetBalance:     {paramPrincipal},
	fnGetTotalSupply: nil,
	fnGetTokenURI:    nil,
}

// Event types, as stacks-core's StacksTransactionEvent serialises them for
// event observers.
const (
	EventFTTransfer = "ft_transfer_event"
	EventFTMint     = "ft_mint_event"
	EventPrint      = "contract_event" // a print, topic "print"
)

// TxEvent is one event of a mined tx's receipt. Only the token contract's
// events are modelled; STX transfers (plain or through send-many) and
// send-many's prints report none. The real node does not serve events over
// RPC (they go to event observers), so they are available from Go only.
type TxEvent struct {
	Type      string // EventFTTransfer, EventFTMint or EventPrint
	AssetID   string // ft events: "ADDR.contract::token"
	Sender    string // ft_transfer_event
	Recipient string // ft events
	Amount    uint64 // ft events
	Contract  string // contract_event: the contract that printed
	Value     stacks.ClarityValue
}

// tokenContract is a deployed token's state.
type tokenContract struct {
	spec     TokenSpec // Genesis is not kept
	deployer string    // the contract's address: tx-sender when it was deployed
	balances map[string]uint64
	supply   uint64
}

// tokenCall is a token-contract call checked at admission.
type tokenCall struct {
	token     *tokenContract // the called contract
	function  string         // fnTransfer or fnMint
	amount    stacks.UInt
	sender    string           // transfer's sender argument
	recipient string           // principal
	memo      *stacks.Optional // transfer's memo argument
}

// legacyTokenSpec is the spec Config.TokenAsset and Config.TokenGenesis
// stand for, ok false when they are unset; New panics on its error.
func legacyTokenSpec(cfg *Config) (TokenSpec, bool, error) {
	if cfg.TokenAsset == "" {
		if len(cfg.TokenGenesis) > 0 {
			return TokenSpec{}, false, errors.New("Config.TokenGenesis without Config.TokenAsset")
		}
		return TokenSpec{}, false, nil
	}
	a, err := stacks.ParseAssetID(cfg.TokenAsset)
	if err != nil {
		return TokenSpec{}, false, fmt.Errorf("Config.TokenAsset: %w", err)
	}
	// The shorthand deploys sBTC, so it keeps sBTC's token name.
	if a.Name != TokenName {
		return TokenSpec{}, false, fmt.Errorf("Config.TokenAsset: the sBTC token defines %s, not %q (Config.Tokens takes any name)", TokenName, a.Name)
	}
	return SBTCToken(a, cfg.TokenGenesis), true, nil
}

// mint adds amount to principal and to the supply, saturating at 2^64-1
// (the devnode keeps token amounts in 64 bits where Clarity has 128).
func (t *tokenContract) mint(principal string, amount uint64) {
	t.balances[principal] = addSat(t.balances[principal], amount)
	t.supply = addSat(t.supply, amount)
}

// balance is p's balance; a token that is not deployed (nil) has none.
func (t *tokenContract) balance(p stacks.Principal) uint64 {
	if t == nil {
		return 0
	}
	return t.balances[p.String()]
}

// checkTokenCall is can_include_tx's payload check for a call of token
// contract t: only transfer and mint are public (the getters are read-only,
// which a transaction cannot call: NoSuchPublicFunction), and the arguments
// must type-check in order, the first mismatch being reported.
func checkTokenCall(t *tokenContract, cc *stacks.ContractCall) (*tokenCall, string, map[string]any) {
	if cc.Function != fnTransfer && cc.Function != fnMint {
		return nil, node.ReasonNoSuchPublicFunction, nil
	}
	if reason, data := checkArgs(tokenParams[cc.Function], cc.Args); reason != "" {
		return nil, reason, data
	}
	amount := cc.Args[0].(stacks.UInt)
	if cc.Function == fnMint {
		return &tokenCall{token: t, function: fnMint, amount: amount, recipient: cc.Args[1].(stacks.Principal).String()}, "", nil
	}
	from, to := cc.Args[1].(stacks.Principal), cc.Args[2].(stacks.Principal)
	memo := cc.Args[3].(stacks.Optional)
	return &tokenCall{token: t, function: fnTransfer, amount: amount, sender: from.String(), recipient: to.String(), memo: &memo}, "", nil
}

// runTokenCall executes an admitted token-contract call whose fee has been
// paid, as the contract does (token.clar.tmpl): transfer asserts that its sender
// is tx-sender (for a call from a transaction contract-caller is tx-sender
// too), else (err u4); then ft-transfer? refuses a zero amount (err u3), a
// sender that is the recipient (err u2) and an amount beyond the balance
// (err u1), in that order; then the memo, if any, is printed. mint is the
// deployer's only, else (err u5), and ft-mint? refuses a zero amount (err
// u1). An (err …) result rolls back and emits nothing. Post-conditions are
// checked against what the call moved (nothing, after an err); a failure
// rolls back too, keeps the would-have-been result and drops the events.
// Callers hold the state lock.
func (c *contracts) runTokenCall(e *poolEntry) callOutcome {
	call := e.token
	t := call.token
	amount, fits := call.amount.Uint64()
	zero := call.amount == (stacks.UInt{})
	assetID := t.spec.Asset.String()
	moved := assetMap{}
	var events []TxEvent
	errCode := 0
	switch call.function {
	case fnTransfer:
		switch {
		case call.sender != e.sender:
			errCode = tokenErrNotOwner
		case zero:
			errCode = ftErrNonPositiveAmount
		case call.sender == call.recipient:
			errCode = ftErrSenderIsRecipient
		case !fits || amount > t.balances[call.sender]:
			errCode = ftErrNotEnoughBalance
		default:
			moved.add(call.sender, assetID, amount)
			events = append(events, TxEvent{Type: EventFTTransfer, AssetID: assetID, Sender: call.sender, Recipient: call.recipient, Amount: amount})
			if call.memo.Value != nil {
				events = append(events, TxEvent{Type: EventPrint, Contract: t.spec.Asset.Contract.String(), Value: call.memo.Value})
			}
		}
	case fnMint:
		switch {
		case e.sender != t.deployer:
			errCode = tokenErrNotDeployer
		case zero:
			errCode = ftMintErrNonPositive
		default:
			if !fits {
				c.log.Warn("devnode: minted amount beyond 64 bits saturates", "txid", e.txid.Hex0x())
				amount = math.MaxUint64
			}
			events = append(events, TxEvent{Type: EventFTMint, AssetID: assetID, Recipient: call.recipient, Amount: amount})
		}
	}
	out := c.settle(e, errCode, moved, events)
	if out.aborted {
		return out
	}
	switch call.function {
	case fnTransfer:
		t.balances[call.sender] -= amount
		t.balances[call.recipient] = addSat(t.balances[call.recipient], amount)
	case fnMint:
		t.mint(call.recipient, amount)
	}
	return out
}
