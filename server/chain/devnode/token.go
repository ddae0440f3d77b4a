package devnode

import (
	_ "embed" // the token contract's Clarity source
	"fmt"
	"math"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// TokenContractSource is the Clarity source of the SIP-010 token contract the
// devnode deploys at Config.TokenAsset. The devnode does not interpret it:
// this file implements its rules in Go, and hack/clarity runs the same
// source in the real Clarity VM to check that the two agree.
//
//go:embed contracts/token.clar
var TokenContractSource string

// TokenName is the fungible token the contract defines
// (define-fungible-token sbtc-token), the part of Config.TokenAsset after
// "::". It is sBTC's, so stacks.SBTCTestnet can be deployed as it is.
const TokenName = "sbtc-token"

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

// The token's metadata, as the contract's read-only functions return it.
const (
	tokenDisplayName = "sBTC"
	tokenSymbol      = "sBTC"
	tokenDecimals    = 8
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

// tokenContract is the deployed token's state.
type tokenContract struct {
	asset    stacks.AssetInfo
	deployer string // the contract's address: tx-sender when it was deployed
	balances map[string]uint64
	supply   uint64
}

// tokenCall is a token-contract call checked at admission.
type tokenCall struct {
	function  string // fnTransfer or fnMint
	amount    stacks.UInt
	sender    string           // transfer's sender argument
	recipient string           // principal
	memo      *stacks.Optional // transfer's memo argument
}

// newTokenContract parses Config.TokenAsset; New panics on its error.
func newTokenContract(assetID string) (*tokenContract, error) {
	a, err := stacks.ParseAssetID(assetID)
	if err != nil {
		return nil, err
	}
	if a.Name != TokenName {
		return nil, fmt.Errorf("the devnode's token contract defines %s, not %q", TokenName, a.Name)
	}
	return &tokenContract{
		asset:    a,
		deployer: a.Contract.Address.String(),
		balances: make(map[string]uint64),
	}, nil
}

// mint adds amount to principal and to the supply, saturating at 2^64-1
// (the devnode keeps token amounts in 64 bits where Clarity has 128).
func (t *tokenContract) mint(principal string, amount uint64) {
	t.balances[principal] = addSat(t.balances[principal], amount)
	t.supply = addSat(t.supply, amount)
}

// TokenBalance is p's confirmed balance of the token at Config.TokenAsset
// (0 when none is deployed).
func (n *Node) TokenBalance(p stacks.Principal) uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.token == nil {
		return 0
	}
	return n.token.balances[p.String()]
}

// FundToken mints amount of the token to addr immediately, outside any
// block, like Fund for STX. It panics when no token is deployed
// (Config.TokenAsset is ""), a mistake in the caller's setup.
func (n *Node) FundToken(addr stacks.Address, amount uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.token == nil {
		panic("devnode: FundToken without Config.TokenAsset")
	}
	n.token.mint(addr.String(), amount)
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

// checkTokenCall is can_include_tx's payload check for a call of the token
// contract: only transfer and mint are public (the getters are read-only,
// which a transaction cannot call: NoSuchPublicFunction), and the arguments
// must type-check in order, the first mismatch being reported.
func checkTokenCall(cc *stacks.ContractCall) (*tokenCall, string, map[string]any) {
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
		return &tokenCall{function: fnMint, amount: amount, recipient: to.String()}, "", nil
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
	return &tokenCall{function: fnTransfer, amount: amount, sender: from.String(), recipient: to.String(), memo: &memo}, "", nil
}

// runTokenCall executes an admitted token-contract call whose fee has been
// paid, as the contract does (token.clar): transfer asserts that its sender
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
	t, c := n.token, e.token
	amount, fits := c.amount.Uint64()
	zero := c.amount == (stacks.UInt{})
	assetID := t.asset.String()
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
				events = append(events, TxEvent{Type: EventPrint, Contract: t.asset.Contract.String(), Value: c.memo.Value})
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
