package devnode

import (
	"math/bits"

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
const typeSendManyList = `SequenceType(ListType(ListTypeData { max_len: 200, entry_type: TupleType(TupleTypeSignature { "memo": (buff 34), "to": principal, "ustx": uint,}) }))`

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

// sendManyParams are send-many-memo's public functions' parameters.
var sendManyParams = map[string][]param{
	stacks.SendManyFunction: {{typeSendManyList, func(v stacks.ClarityValue) bool { _, ok := sendManyTransfers(v); return ok }, nil}},
	fnSendStxWithMemo:       {paramUInt, paramPrincipal, bufferParam(stacks.SendManyMaxMemo)},
}

// checkSendManyCall checks a call of send-many-memo's functions and
// arguments, and returns the transfers it will attempt.
func checkSendManyCall(cc *stacks.ContractCall) ([]transfer, string, map[string]any) {
	params, ok := sendManyParams[cc.Function]
	if !ok { // send-stx and check-err are private
		return nil, node.ReasonNoSuchPublicFunction, nil
	}
	if reason, data := checkArgs(params, cc.Args); reason != "" {
		return nil, reason, data
	}
	if cc.Function == stacks.SendManyFunction {
		ts, _ := sendManyTransfers(cc.Args[0])
		return ts, "", nil
	}
	return []transfer{{to: cc.Args[1].(stacks.Principal).String(), amount: cc.Args[0].(stacks.UInt)}}, "", nil
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

// runContractCall executes a send-many (or send-stx-with-memo) whose fee
// has already been debited, as stacks-core does since epoch 2.1: the
// transfers run in order against the sender's balance; the first failing
// stx-transfer? becomes the call's (err uN) result and rolls everything
// back. Post-conditions are then checked against what the sender actually
// sent (nothing, after a rollback); a failure rolls back too but keeps the
// would-have-been result. Callers hold the state lock.
func (c *contracts) runContractCall(e *poolEntry, from *account) callOutcome {
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
	moved := assetMap{}
	if sent := outflow(e.call); sent > 0 {
		moved.add(e.sender, stxAssetID, sent)
	}
	out := c.settle(e, errCode, moved, nil)
	if out.aborted {
		return out
	}
	from.balance = bal
	for _, t := range e.call {
		a, _ := t.amount.Uint64()
		c.stx.credit(t.to, a)
	}
	return out
}
