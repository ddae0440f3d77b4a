package devnode

import (
	"fmt"
	"math/bits"
	"strings"
	"unicode/utf8"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// Besides the token contracts (token.go), the devnode can deploy
// send-many-memo:
//
//	(define-public (send-stx-with-memo (ustx uint) (to principal) (memo (buff 34)))
//	  (let ((transfer-ok (try! (stx-transfer? ustx tx-sender to))))
//	    (print memo) (ok transfer-ok)))
//	(define-public (send-many (recipients (list 200 { to: principal, ustx: uint, memo: (buff 34) })))
//	  (fold check-err (map send-stx recipients) (ok true)))
//
// check-err keeps the first (err uN), so one failed stx-transfer? makes
// send-many return it and everything the call did is rolled back.
const fnSendStxWithMemo = "send-stx-with-memo"

// Expected argument types as stacks-core prints them in a
// BadFunctionArgument message (StaticCheckErrorKind's Debug form).
const (
	typeSendManyList = `SequenceType(ListType(ListTypeData { max_len: 200, entry_type: TupleType(TupleTypeSignature { "memo": (buff 34), "to": principal, "ustx": uint,}) }))`
	typeMemo         = `SequenceType(BufferType(BufferLength(34)))`
)

// stx-transfer? error codes (clarity vm/functions/assets.rs StxErrorCodes).
const (
	stxErrNotEnoughBalance  = 1
	stxErrSenderIsRecipient = 2
	stxErrNonPositiveAmount = 3
)

// transfer is one stx-transfer? of a send-many call.
type transfer struct {
	to     string // principal
	amount stacks.UInt
}

// checkContractCall is can_include_tx's payload check for a contract call:
// the contract must exist, the function must be public, the arguments must
// type-check. It returns the transfers a send-many call will attempt, or
// the checked call of a token contract. Callers hold n.mu.
func (n *Node) checkContractCall(cc *stacks.ContractCall) ([]transfer, *tokenCall, string, map[string]any) {
	if !validAddressVersion(n.mainnet, cc.Contract.Address.Version) {
		return nil, nil, node.ReasonBadAddressVersionByte, nil
	}
	if t := n.tokens[cc.Contract]; t != nil {
		tc, reason, data := checkTokenCall(t, cc)
		return nil, tc, reason, data
	}
	if n.sendMany == nil || cc.Contract != *n.sendMany {
		return nil, nil, node.ReasonNoSuchContract, nil
	}
	ts, reason, data := checkSendManyCall(cc)
	return ts, nil, reason, data
}

// checkSendManyCall checks a call of send-many-memo's functions and
// arguments.
func checkSendManyCall(cc *stacks.ContractCall) ([]transfer, string, map[string]any) {
	badArg := func(msg string) ([]transfer, string, map[string]any) {
		return nil, node.ReasonBadFunctionArgument, map[string]any{"message": msg}
	}
	argCount := func(want int) string {
		return fmt.Sprintf("IncorrectArgumentCount(%d, %d)", want, len(cc.Args))
	}
	typeErr := func(want string, got stacks.ClarityValue) string {
		return fmt.Sprintf("TypeError(%s, %s)", want, typeDebug(got))
	}
	switch cc.Function {
	case stacks.SendManyFunction:
		if len(cc.Args) != 1 {
			return badArg(argCount(1))
		}
		ts, ok := sendManyTransfers(cc.Args[0])
		if !ok {
			return badArg(typeErr(typeSendManyList, cc.Args[0]))
		}
		return ts, "", nil
	case fnSendStxWithMemo:
		if len(cc.Args) != 3 {
			return badArg(argCount(3))
		}
		amount, ok := cc.Args[0].(stacks.UInt)
		if !ok {
			return badArg(typeErr("UIntType", cc.Args[0]))
		}
		to, ok := cc.Args[1].(stacks.Principal)
		if !ok {
			return badArg(typeErr("PrincipalType", cc.Args[1]))
		}
		if m, ok := cc.Args[2].(stacks.Buffer); !ok || len(m) > stacks.SendManyMaxMemo {
			return badArg(typeErr(typeMemo, cc.Args[2]))
		}
		return []transfer{{to: to.String(), amount: amount}}, "", nil
	default: // send-stx and check-err are private
		return nil, node.ReasonNoSuchPublicFunction, nil
	}
}

// sendManyTransfers type-checks send-many's argument as Clarity's admits
// does: a list of at most 200 tuples with exactly the keys memo (a buffer
// of at most 34 bytes), to (a principal) and ustx (a uint).
func sendManyTransfers(v stacks.ClarityValue) ([]transfer, bool) {
	list, ok := v.(stacks.List)
	if !ok || len(list) > stacks.SendManyMaxRecipients {
		return nil, false
	}
	ts := make([]transfer, 0, len(list))
	for _, e := range list {
		t, ok := e.(stacks.Tuple)
		if !ok || len(t) != 3 {
			return nil, false
		}
		memo, _ := t.Get("memo")
		toV, _ := t.Get("to")
		ustx, _ := t.Get("ustx")
		m, okM := memo.(stacks.Buffer)
		to, okT := toV.(stacks.Principal)
		amount, okU := ustx.(stacks.UInt)
		if !okM || !okT || !okU || len(m) > stacks.SendManyMaxMemo {
			return nil, false
		}
		ts = append(ts, transfer{to: to.String(), amount: amount})
	}
	return ts, true
}

// outflow is the sum of the transfers' amounts, saturating at 2^64-1 (no
// balance can cover more).
func outflow(ts []transfer) uint64 {
	var total uint64
	for _, t := range ts {
		a, fits := t.amount.Uint64()
		var carry uint64
		total, carry = bits.Add64(total, a, 0)
		if !fits || carry != 0 {
			return ^uint64(0)
		}
	}
	return total
}

// callOutcome is what executing an admitted contract call produced.
type callOutcome struct {
	result  string // the receipt's result, as /v3/transaction reports it
	aborted bool   // rolled back: an (err …) result or a failed post-condition
	// pcFailure is stacks-core's reason when the post-conditions aborted the
	// call (the receipt's vm_error), else "".
	pcFailure string
	events    []TxEvent // the receipt's events; none once rolled back
}

// runContractCall executes a send-many (or send-stx-with-memo) whose fee
// has already been debited, as stacks-core does since epoch 2.1: the
// transfers run in order against the sender's balance; the first failing
// stx-transfer? becomes the call's (err uN) result and rolls everything
// back. Post-conditions are then checked against what the sender actually
// sent (nothing, after a rollback); a failure rolls back too but keeps the
// would-have-been result. Callers hold n.mu.
func (n *Node) runContractCall(e *poolEntry, from *account) callOutcome {
	bal := from.balance
	errCode := 0
	for _, t := range e.call {
		a, fits := t.amount.Uint64()
		var code int
		switch {
		case t.amount == (stacks.UInt{}):
			code = stxErrNonPositiveAmount
		case t.to == e.sender:
			code = stxErrSenderIsRecipient
		case !fits || a > bal:
			code = stxErrNotEnoughBalance
		default:
			bal -= a
		}
		if code != 0 && errCode == 0 {
			errCode = code
		}
	}
	out := callOutcome{result: resultTransferOK}
	sent := outflow(e.call)
	if errCode != 0 {
		out = callOutcome{result: fmt.Sprintf("(err u%d)", errCode), aborted: true}
		sent = 0
	}
	moved := assetMap{}
	if sent > 0 {
		moved.add(e.sender, stxAssetID, sent)
	}
	if reason := postConditionFailure(e.tx, e.sender, moved); reason != "" {
		n.log.Info("devnode: contract call aborted by post-condition", "txid", e.txid.Hex0x(), "reason", reason)
		out.aborted, out.pcFailure = true, reason
	}
	if out.aborted {
		return out
	}
	from.balance = bal
	for _, t := range e.call {
		a, _ := t.amount.Uint64()
		n.credit(t.to, a)
	}
	return out
}

// typeDebug approximates the Debug form of TypeSignature::type_of(v) that
// stacks-core prints in a TypeError (a list's entry type is its first
// element's, not the least supertype of all of them).
func typeDebug(v stacks.ClarityValue) string {
	switch v := v.(type) {
	case stacks.Int:
		return "IntType"
	case stacks.UInt:
		return "UIntType"
	case stacks.Bool:
		return "BoolType"
	case stacks.Principal:
		return "PrincipalType"
	case stacks.Buffer:
		return fmt.Sprintf("SequenceType(BufferType(BufferLength(%d)))", len(v))
	case stacks.StringASCII:
		return fmt.Sprintf("SequenceType(StringType(ASCII(BufferLength(%d))))", len(v))
	case stacks.StringUTF8:
		return fmt.Sprintf("SequenceType(StringType(UTF8(StringUTF8Length(%d))))", 4*utf8.RuneCountInString(string(v)))
	case stacks.Optional:
		if v.Value == nil {
			return "OptionalType(NoType)"
		}
		return "OptionalType(" + typeDebug(v.Value) + ")"
	case stacks.Response:
		if v.Ok {
			return "ResponseType((" + typeDebug(v.Value) + ", NoType))"
		}
		return "ResponseType((NoType, " + typeDebug(v.Value) + "))"
	case stacks.List:
		entry := "NoType"
		if len(v) > 0 {
			entry = typeDebug(v[0])
		}
		return fmt.Sprintf("SequenceType(ListType(ListTypeData { max_len: %d, entry_type: %s }))", len(v), entry)
	case stacks.Tuple:
		var b strings.Builder
		b.WriteString("TupleType(TupleTypeSignature {")
		for _, e := range v {
			fmt.Fprintf(&b, " %q: %s,", e.Name, typeDisplay(e.Value))
		}
		b.WriteString("})")
		return b.String()
	}
	return "NoType"
}

// typeDisplay approximates TypeSignature's Display (Clarity syntax).
func typeDisplay(v stacks.ClarityValue) string {
	switch v := v.(type) {
	case stacks.Int:
		return "int"
	case stacks.UInt:
		return "uint"
	case stacks.Bool:
		return "bool"
	case stacks.Principal:
		return "principal"
	case stacks.Buffer:
		return fmt.Sprintf("(buff %d)", len(v))
	case stacks.StringASCII:
		return fmt.Sprintf("(string-ascii %d)", len(v))
	case stacks.StringUTF8:
		return fmt.Sprintf("(string-utf8 %d)", 4*utf8.RuneCountInString(string(v)))
	case stacks.Optional:
		if v.Value == nil {
			return "(optional UnknownType)"
		}
		return "(optional " + typeDisplay(v.Value) + ")"
	case stacks.Response:
		if v.Ok {
			return "(response " + typeDisplay(v.Value) + " UnknownType)"
		}
		return "(response UnknownType " + typeDisplay(v.Value) + ")"
	case stacks.List:
		entry := "UnknownType"
		if len(v) > 0 {
			entry = typeDisplay(v[0])
		}
		return fmt.Sprintf("(list %d %s)", len(v), entry)
	case stacks.Tuple:
		var b strings.Builder
		b.WriteString("(tuple")
		for _, e := range v {
			fmt.Fprintf(&b, " (%s %s)", e.Name, typeDisplay(e.Value))
		}
		b.WriteString(")")
		return b.String()
	}
	return "UnknownType"
}
