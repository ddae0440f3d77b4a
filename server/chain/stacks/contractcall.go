package stacks

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
)

// Contract-call and post-condition wire constants (stacks-core
// chainstate/stacks/mod.rs; stacks.js constants.ts).
const (
	PayloadContractCall byte = 0x02

	// PostConditionTypeSTX and PostConditionTypeFungible are the
	// post-condition types this package builds and decodes (non-fungible
	// 0x02 and the others are reported as unsupported).
	PostConditionTypeSTX      byte = 0x00
	PostConditionTypeFungible byte = 0x01

	PostConditionPrincipalOrigin   byte = 0x01
	PostConditionPrincipalStandard byte = 0x02
	PostConditionPrincipalContract byte = 0x03
)

// ConditionCode is a fungible post-condition's comparison: the amount the
// principal sends, compared with the post-condition's amount.
type ConditionCode byte

const (
	ConditionEq   ConditionCode = 0x01 // sends exactly
	ConditionGt   ConditionCode = 0x02 // sends more than
	ConditionGtEq ConditionCode = 0x03 // sends at least
	ConditionLt   ConditionCode = 0x04 // sends less than
	ConditionLtEq ConditionCode = 0x05 // sends at most
)

// PostCondition is an STX or fungible-token post-condition: the principal
// must send Amount µSTX (or Amount of the token Asset names), compared by
// Code, or the transaction aborts.
type PostCondition struct {
	// Origin selects principal type 0x01, "the transaction's origin"
	// (stacks.js Pc.origin()); Principal is then ignored. Otherwise
	// Principal is encoded as type 0x02 (standard) or 0x03 (contract),
	// like stacks.js Pc.principal(addr).
	Origin    bool
	Principal Principal
	Code      ConditionCode
	Amount    uint64
	// Asset is the fungible token the condition is on (type 0x01, stacks.js
	// Pc….ft(contract, name)); the zero value means STX (type 0x00).
	Asset AssetInfo
}

// OriginSendsExactly is Pc.origin().willSendEq(amount).ustx().
func OriginSendsExactly(amount uint64) PostCondition {
	return PostCondition{Origin: true, Code: ConditionEq, Amount: amount}
}

// PrincipalSendsExactly is Pc.principal(p).willSendEq(amount).ustx().
func PrincipalSendsExactly(p Principal, amount uint64) PostCondition {
	return PostCondition{Principal: p, Code: ConditionEq, Amount: amount}
}

// PrincipalSendsExactlyFT is
// Pc.principal(p).willSendEq(amount).ft(asset.Contract, asset.Name).
func PrincipalSendsExactlyFT(p Principal, asset AssetInfo, amount uint64) PostCondition {
	return PostCondition{Principal: p, Code: ConditionEq, Amount: amount, Asset: asset}
}

// IsFungible is true for a fungible-token post-condition.
func (pc PostCondition) IsFungible() bool { return !pc.Asset.IsZero() }

func (pc PostCondition) encodedLen() int {
	n := 1 + 1 + 1 + 8 // type, principal type, code, amount
	if pc.IsFungible() {
		n += pc.Asset.encodedLen()
	}
	if !pc.Origin {
		n += 21
		if pc.Principal.IsContract() {
			n += 1 + len(pc.Principal.ContractName)
		}
	}
	return n
}

func (pc PostCondition) appendTo(b []byte) []byte {
	if pc.IsFungible() {
		b = append(b, PostConditionTypeFungible)
	} else {
		b = append(b, PostConditionTypeSTX)
	}
	switch {
	case pc.Origin:
		b = append(b, PostConditionPrincipalOrigin)
	case pc.Principal.IsContract():
		b = append(b, PostConditionPrincipalContract, pc.Principal.Address.Version)
		b = append(b, pc.Principal.Address.Hash160[:]...)
		b = append(b, byte(len(pc.Principal.ContractName)))
		b = append(b, pc.Principal.ContractName...)
	default:
		b = append(b, PostConditionPrincipalStandard, pc.Principal.Address.Version)
		b = append(b, pc.Principal.Address.Hash160[:]...)
	}
	if pc.IsFungible() {
		b = pc.Asset.appendTo(b)
	}
	b = append(b, byte(pc.Code))
	return binary.BigEndian.AppendUint64(b, pc.Amount)
}

func (pc PostCondition) validate() error {
	if pc.Code < ConditionEq || pc.Code > ConditionLtEq {
		return fmt.Errorf("post-condition code 0x%02x, must be 0x01 to 0x05", byte(pc.Code))
	}
	if pc.IsFungible() {
		if err := pc.Asset.Validate(); err != nil {
			return fmt.Errorf("post-condition asset: %w", err)
		}
	}
	if pc.Origin {
		return nil
	}
	if err := validateCV(pc.Principal, 1); err != nil {
		return fmt.Errorf("post-condition principal: %w", err)
	}
	return nil
}

// ContractID names a deployed contract: deployer address and contract name.
type ContractID struct {
	Address Address
	Name    string
}

// SendManyMemoTestnet is the send-many-memo contract on testnet.
const SendManyMemoTestnet = "ST3F1X4QGV2SM8XD96X45M6RTQXKA1PZJZZCQAB4B.send-many-memo"

// ParseContractID parses "ADDR.contract-name".
func ParseContractID(s string) (ContractID, error) {
	p, err := ParsePrincipal(s)
	if err != nil {
		return ContractID{}, err
	}
	if !p.IsContract() {
		return ContractID{}, fmt.Errorf("contract id %q: %w: missing \".name\"", truncate(s), ErrBadContractName)
	}
	return ContractID{Address: p.Address, Name: p.ContractName}, nil
}

// String renders "ADDR.name".
func (c ContractID) String() string { return c.Principal().String() }

// Principal is the contract as a principal.
func (c ContractID) Principal() Principal {
	return Principal{Address: c.Address, ContractName: c.Name}
}

// ContractCall is the contract-call payload (type 0x02).
type ContractCall struct {
	Contract ContractID
	Function string
	Args     []ClarityValue
}

func (cc *ContractCall) encodedLen() int {
	n := 1 + 1 + 20 + 1 + len(cc.Contract.Name) + 1 + len(cc.Function) + 4
	for _, a := range cc.Args {
		n += a.ClarityLen()
	}
	return n
}

func (cc *ContractCall) appendTo(b []byte) []byte {
	b = append(b, PayloadContractCall, cc.Contract.Address.Version)
	b = append(b, cc.Contract.Address.Hash160[:]...)
	b = append(b, byte(len(cc.Contract.Name)))
	b = append(b, cc.Contract.Name...)
	b = append(b, byte(len(cc.Function)))
	b = append(b, cc.Function...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(cc.Args)))
	for _, a := range cc.Args {
		b = a.AppendClarity(b)
	}
	return b
}

// Validate checks the contract id, the function name and every argument.
func (cc *ContractCall) Validate() error {
	if cc.Contract.Address.Version >= 32 {
		return fmt.Errorf("contract address version %d out of range", cc.Contract.Address.Version)
	}
	if err := ValidateContractName(cc.Contract.Name); err != nil {
		return err
	}
	if err := ValidateClarityName(cc.Function); err != nil {
		return fmt.Errorf("function name: %w", err)
	}
	for i, a := range cc.Args {
		if err := ValidateClarityValue(a); err != nil {
			return fmt.Errorf("argument %d: %w", i, err)
		}
	}
	return nil
}

// ContractCallParams are the caller's choices for a new contract call.
type ContractCallParams struct {
	Contract ContractID
	Function string
	Args     []ClarityValue
	Nonce    uint64
	Fee      uint64
	ChainID  uint32 // 0 means ChainIDTestnet
	// PostConditionMode is PostConditionModeAllow or PostConditionModeDeny;
	// 0 means Deny, the stacks.js default.
	PostConditionMode byte
	PostConditions    []PostCondition
}

// NewContractCall builds and signs a testnet contract call the way stacks.js
// makeContractCall does (anchor mode Any, single-sig standard auth). The
// arguments and post-conditions are validated first, so the result always
// decodes.
func NewContractCall(p ContractCallParams, key *PrivateKey) (*Transaction, error) {
	tx, err := unsignedContractCall(p)
	if err != nil {
		return nil, err
	}
	if err := tx.Sign(key); err != nil {
		return nil, err
	}
	return tx, nil
}

func unsignedContractCall(p ContractCallParams) (*Transaction, error) {
	mode := p.PostConditionMode
	if mode == 0 {
		mode = PostConditionModeDeny
	}
	if mode != PostConditionModeAllow && mode != PostConditionModeDeny {
		return nil, fmt.Errorf("contract call: unknown post-condition mode 0x%02x", mode)
	}
	cc := &ContractCall{Contract: p.Contract, Function: p.Function, Args: p.Args}
	if err := cc.Validate(); err != nil {
		return nil, fmt.Errorf("contract call %s::%s: %w", p.Contract, truncate(p.Function), err)
	}
	for i, pc := range p.PostConditions {
		if err := pc.validate(); err != nil {
			return nil, fmt.Errorf("contract call: post-condition %d: %w", i, err)
		}
	}
	tx := testnetTx(p.ChainID, p.Nonce, p.Fee, mode)
	tx.PostConditions = p.PostConditions
	tx.ContractCall = cc
	return tx, nil
}

// ---------------------------------------------------------------- send-many

// send-many-memo's (send-many (recipients (list 200 {to: principal, ustx: uint, memo: (buff 34)}))).
const (
	SendManyFunction      = "send-many"
	SendManyMaxRecipients = 200
	SendManyMaxMemo       = 34
)

// SendManyEntry is one recipient of a send-many call.
type SendManyEntry struct {
	To     Principal
	Amount uint64 // µSTX
	Memo   []byte // at most 34 bytes
}

// ErrSendMany is wrapped by send-many validation errors.
var ErrSendMany = errors.New("bad send-many")

// SendManyArgs builds the single argument of send-many: a list of
// {memo: (buff 34), to: principal, ustx: uint} tuples, keys in canonical
// order. It checks 1 to 200 entries, valid principals and memos of at most
// 34 bytes; it does not check amounts (see NewSendMany).
func SendManyArgs(recipients []SendManyEntry) ([]ClarityValue, error) {
	if len(recipients) == 0 || len(recipients) > SendManyMaxRecipients {
		return nil, fmt.Errorf("%w: %d recipients, must be 1 to %d", ErrSendMany, len(recipients), SendManyMaxRecipients)
	}
	list := make(List, len(recipients))
	// One backing array for all tuples: three entries each.
	entries := make([]TupleEntry, 3*len(recipients))
	for i, r := range recipients {
		if len(r.Memo) > SendManyMaxMemo {
			return nil, fmt.Errorf("%w: recipient %d: memo is %d bytes, at most %d", ErrSendMany, i, len(r.Memo), SendManyMaxMemo)
		}
		if err := validateCV(r.To, 1); err != nil {
			return nil, fmt.Errorf("%w: recipient %d: %w", ErrSendMany, i, err)
		}
		memo := Buffer(r.Memo)
		if memo == nil {
			memo = Buffer{}
		}
		t := entries[3*i : 3*i+3 : 3*i+3]
		t[0] = TupleEntry{Name: "memo", Value: memo}
		t[1] = TupleEntry{Name: "to", Value: r.To}
		t[2] = TupleEntry{Name: "ustx", Value: NewUInt(r.Amount)}
		list[i] = Tuple(t)
	}
	return []ClarityValue{list}, nil
}

// SendManyTotal is the sum of the amounts, failing if it overflows a u64
// (the width of an STX post-condition's amount).
func SendManyTotal(recipients []SendManyEntry) (uint64, error) {
	var total, carry uint64
	for _, r := range recipients {
		total, carry = bits.Add64(total, r.Amount, 0)
		if carry != 0 {
			return 0, fmt.Errorf("%w: total amount overflows 64 bits", ErrSendMany)
		}
	}
	return total, nil
}

// SendManyParams are the caller's choices for a new send-many call.
type SendManyParams struct {
	Contract   ContractID // zero means SendManyMemoTestnet
	Recipients []SendManyEntry
	Nonce      uint64
	Fee        uint64
	ChainID    uint32 // 0 means ChainIDTestnet
}

// NewSendMany builds and signs a send-many call with post-condition mode
// Deny and one post-condition, "the sender sends exactly the total"
// (stacks.js Pc.principal(sender).willSendEq(total).ustx()). Besides
// SendManyArgs' checks it refuses what would make the contract's
// stx-transfer? fail and so abort the whole batch: a zero amount, or the
// sender as a recipient.
func NewSendMany(p SendManyParams, key *PrivateKey) (*Transaction, error) {
	tx, err := SendManyDraft(p, key)
	if err != nil {
		return nil, err
	}
	if err := tx.Sign(key); err != nil {
		return nil, err
	}
	return tx, nil
}

// SendManyDraft is the send-many call NewSendMany would build for key,
// left unsigned: its payload and encoded length are the signed
// transaction's, so it prices a call without the cost of a signature.
func SendManyDraft(p SendManyParams, key *PrivateKey) (*Transaction, error) {
	if key == nil {
		return nil, errors.New("send-many: no key")
	}
	call, err := sendManyCall(p, key.TestnetAddress())
	if err != nil {
		return nil, err
	}
	tx, err := unsignedContractCall(call)
	if err != nil {
		return nil, err
	}
	tx.Auth.KeyEncoding = key.KeyEncoding()
	return tx, nil
}

func sendManyCall(p SendManyParams, from Address) (ContractCallParams, error) {
	contract := p.Contract
	if contract == (ContractID{}) {
		c, err := ParseContractID(SendManyMemoTestnet)
		if err != nil {
			return ContractCallParams{}, err
		}
		contract = c
	}
	sender := Principal{Address: from}
	for i, r := range p.Recipients {
		if r.Amount == 0 {
			return ContractCallParams{}, fmt.Errorf("%w: recipient %d: amount is 0", ErrSendMany, i)
		}
		if r.To == sender {
			return ContractCallParams{}, fmt.Errorf("%w: recipient %d is the sender", ErrSendMany, i)
		}
	}
	args, err := SendManyArgs(p.Recipients)
	if err != nil {
		return ContractCallParams{}, err
	}
	total, err := SendManyTotal(p.Recipients)
	if err != nil {
		return ContractCallParams{}, err
	}
	return ContractCallParams{
		Contract:          contract,
		Function:          SendManyFunction,
		Args:              args,
		Nonce:             p.Nonce,
		Fee:               p.Fee,
		ChainID:           p.ChainID,
		PostConditionMode: PostConditionModeDeny,
		PostConditions:    []PostCondition{PrincipalSendsExactly(sender, total)},
	}, nil
}
