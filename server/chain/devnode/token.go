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
// the part of stacks.SBTCTestnet after "::", and the token name
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

// SBTCToken is the spec of an sBTC-like token at asset (e.g. stacks.SBTCTestnet
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

// Expected argument types as a BadFunctionArgument message prints them.
const (
	typeOptionalMemo = `OptionalType(SequenceType(BufferType(BufferLength(34))))`
	typeMemoBuffer   = `SequenceType(BufferType(BufferLength(34)))`
)

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

// deployTokens deploys specs at genesis: one contract each, none at the
// send-many contract's id. When legacy, the last spec is Config.TokenAsset's.
// New panics on its error.
func (n *Node) deployTokens(specs []TokenSpec, legacy bool) error {
	for i, s := range specs {
		field := fmt.Sprintf("Config.Tokens[%d]", i)
		if legacy && i == len(specs)-1 {
			field = "Config.TokenAsset"
		}
		if err := s.validate(); err != nil {
			return fmt.Errorf("%s: %w", field, err)
		}
		id := s.Asset.Contract
		if n.tokens[id] != nil {
			return fmt.Errorf("%s: a second token at contract %s", field, id)
		}
		if n.sendMany != nil && *n.sendMany == id {
			return fmt.Errorf("%s and Config.SendManyContract name the same contract %s", field, id)
		}
		t := &tokenContract{spec: s, deployer: id.Address.String(), balances: make(map[string]uint64)}
		t.spec.Genesis = nil
		for addr, amount := range s.Genesis {
			t.mint(addr.String(), amount)
		}
		n.tokens[id] = t
	}
	return nil
}

// mint adds amount to principal and to the supply, saturating at 2^64-1
// (the devnode keeps token amounts in 64 bits where Clarity has 128).
func (t *tokenContract) mint(principal string, amount uint64) {
	t.balances[principal] = addSat(t.balances[principal], amount)
	t.supply = addSat(t.supply, amount)
}

// tokenOf returns the deployed token defining asset, or nil. Callers hold
// n.mu.
func (n *Node) tokenOf(asset stacks.AssetInfo) *tokenContract {
	if t := n.tokens[asset.Contract]; t != nil && t.spec.Asset == asset {
		return t
	}
	return nil
}

// AssetBalance is p's confirmed balance of the token asset (0 when no such
// token is deployed).
func (n *Node) AssetBalance(asset stacks.AssetInfo, p stacks.Principal) uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	if t := n.tokenOf(asset); t != nil {
		return t.balances[p.String()]
	}
	return 0
}

// FundAsset mints amount of the token asset to addr immediately, outside
// any block, like Fund for STX. It panics when no such token is deployed, a
// mistake in the caller's setup.
func (n *Node) FundAsset(asset stacks.AssetInfo, addr stacks.Address, amount uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	t := n.tokenOf(asset)
	if t == nil {
		panic("devnode: FundAsset of " + asset.String() + ", which is not deployed")
	}
	t.mint(addr.String(), amount)
}

// onlyToken is the one deployed token for the single-token shorthands, nil
// when there is none; it panics when there are several. Callers hold n.mu.
func (n *Node) onlyToken(caller string) *tokenContract {
	if len(n.tokens) > 1 {
		panic("devnode: " + caller + " with several tokens deployed: name one (AssetBalance, FundAsset)")
	}
	for _, t := range n.tokens {
		return t
	}
	return nil
}

// TokenBalance is AssetBalance for a node with at most one token: p's
// confirmed balance of it, 0 when none is deployed. It panics when several
// are.
func (n *Node) TokenBalance(p stacks.Principal) uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	if t := n.onlyToken("TokenBalance"); t != nil {
		return t.balances[p.String()]
	}
	return 0
}

// FundToken is FundAsset for a node with exactly one token. It panics when
// none or several are deployed.
func (n *Node) FundToken(addr stacks.Address, amount uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	t := n.onlyToken("FundToken")
	if t == nil {
		panic("devnode: FundToken without a token deployed (Config.Tokens or Config.TokenAsset)")
	}
	t.mint(addr.String(), amount)
}

// TxEvents returns a mined tx's events (see TxEvent for what is modelled),
// and false when txid is not mined. Like stacks-core's event dispatcher,
// which sends no events for a tx aborted by its post-conditions, a
// rolled-back call has none.
func (n *Node) TxEvents(txid stacks.TxID) ([]TxEvent, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	m, ok := n.confirmed[txid]
	return append([]TxEvent(nil), m.events...), ok
}

// TxPostConditionFailure returns stacks-core's reason when a mined contract
// call was aborted by its post-conditions (the receipt's vm_error, e.g.
// "Post-condition check failure on fungible asset … owned by …: 5 SentEq
// 0"), else "". With TxAborted it tells a post-condition abort from an
// (err …) result, which the API calls abort_by_post_condition and
// abort_by_response.
func (n *Node) TxPostConditionFailure(txid stacks.TxID) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.confirmed[txid].pcFailure
}

// checkTokenCall is can_include_tx's payload check for a call of token
// contract t: only transfer and mint are public (the getters are read-only,
// which a transaction cannot call: NoSuchPublicFunction), and the arguments
// must type-check in order, the first mismatch being reported.
func checkTokenCall(t *tokenContract, cc *stacks.ContractCall) (*tokenCall, string, map[string]any) {
	badArg := func(msg string) (*tokenCall, string, map[string]any) {
		return nil, node.ReasonBadFunctionArgument, map[string]any{"message": msg}
	}
	typeErr := func(want string, got stacks.ClarityValue) (*tokenCall, string, map[string]any) {
		return badArg(fmt.Sprintf("TypeError(%s, %s)", want, typeDebug(got)))
	}
	want := 0
	switch cc.Function {
	case fnTransfer:
		want = 4
	case fnMint:
		want = 2
	default:
		return nil, node.ReasonNoSuchPublicFunction, nil
	}
	if len(cc.Args) != want {
		return badArg(fmt.Sprintf("IncorrectArgumentCount(%d, %d)", want, len(cc.Args)))
	}
	amount, ok := cc.Args[0].(stacks.UInt)
	if !ok {
		return typeErr("UIntType", cc.Args[0])
	}
	if cc.Function == fnMint {
		to, ok := cc.Args[1].(stacks.Principal)
		if !ok {
			return typeErr("PrincipalType", cc.Args[1])
		}
		return &tokenCall{token: t, function: fnMint, amount: amount, recipient: to.String()}, "", nil
	}
	from, ok := cc.Args[1].(stacks.Principal)
	if !ok {
		return typeErr("PrincipalType", cc.Args[1])
	}
	to, ok := cc.Args[2].(stacks.Principal)
	if !ok {
		return typeErr("PrincipalType", cc.Args[2])
	}
	memo, ok := cc.Args[3].(stacks.Optional)
	if !ok {
		return typeErr(typeOptionalMemo, cc.Args[3])
	}
	// The Clarity 2 checker recurses into the optional, so a bad memo is
	// reported as the inner types.
	if memo.Value != nil {
		if b, ok := memo.Value.(stacks.Buffer); !ok || len(b) > stacks.SIP010MaxMemo {
			return typeErr(typeMemoBuffer, memo.Value)
		}
	}
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
// Callers hold n.mu.
func (n *Node) runTokenCall(e *poolEntry) callOutcome {
	c := e.token
	t := c.token
	amount, fits := c.amount.Uint64()
	zero := c.amount == (stacks.UInt{})
	assetID := t.spec.Asset.String()
	moved := assetMap{}
	var events []TxEvent
	errCode := 0
	switch c.function {
	case fnTransfer:
		switch {
		case c.sender != e.sender:
			errCode = tokenErrNotOwner
		case zero:
			errCode = ftErrNonPositiveAmount
		case c.sender == c.recipient:
			errCode = ftErrSenderIsRecipient
		case !fits || amount > t.balances[c.sender]:
			errCode = ftErrNotEnoughBalance
		default:
			moved.add(c.sender, assetID, amount)
			events = append(events, TxEvent{Type: EventFTTransfer, AssetID: assetID, Sender: c.sender, Recipient: c.recipient, Amount: amount})
			if c.memo.Value != nil {
				events = append(events, TxEvent{Type: EventPrint, Contract: t.spec.Asset.Contract.String(), Value: c.memo.Value})
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
				n.log.Warn("devnode: minted amount beyond 64 bits saturates", "txid", e.txid.Hex0x())
				amount = math.MaxUint64
			}
			events = append(events, TxEvent{Type: EventFTMint, AssetID: assetID, Recipient: c.recipient, Amount: amount})
		}
	}
	out := callOutcome{result: resultTransferOK, events: events}
	if errCode != 0 {
		out = callOutcome{result: fmt.Sprintf("(err u%d)", errCode), aborted: true}
		moved = assetMap{}
	}
	if reason := postConditionFailure(e.tx, e.sender, moved); reason != "" {
		n.log.Info("devnode: contract call aborted by post-condition", "txid", e.txid.Hex0x(), "reason", reason)
		out.aborted, out.pcFailure, out.events = true, reason, nil
	}
	if out.aborted {
		return out
	}
	switch c.function {
	case fnTransfer:
		t.balances[c.sender] -= amount
		t.balances[c.recipient] = addSat(t.balances[c.recipient], amount)
	case fnMint:
		t.mint(c.recipient, amount)
	}
	return out
}
