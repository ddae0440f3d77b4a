package stacks

import (
	"errors"
	"fmt"
	"strings"
)

// AssetInfo names a fungible token: the contract that defines it and the
// token's name inside that contract. Its text form is Clarity's asset
// identifier, "ADDR.contract::token".
type AssetInfo struct {
	Contract ContractID
	Name     string
}

// ErrBadAssetID is wrapped by asset identifier parse errors.
var ErrBadAssetID = errors.New("bad asset identifier")

// ParseAssetID parses "ADDR.contract::token". The deployer may be an address
// of either network: an asset identifier only names a token, and whether it
// may be used on the faucet's network is the caller's rule, not the syntax's.
func ParseAssetID(s string) (AssetInfo, error) {
	contract, name, ok := strings.Cut(s, "::")
	if !ok {
		return AssetInfo{}, fmt.Errorf("%w %q: want ADDR.contract::token", ErrBadAssetID, truncate(s))
	}
	id, err := ParseContractID(contract)
	if err != nil {
		return AssetInfo{}, fmt.Errorf("%w %q: %w", ErrBadAssetID, truncate(s), err)
	}
	a := AssetInfo{Contract: id, Name: name}
	if err := a.Validate(); err != nil {
		return AssetInfo{}, err
	}
	return a, nil
}

// String renders "ADDR.contract::token".
func (a AssetInfo) String() string { return a.Contract.String() + "::" + a.Name }

// IsZero is true for the zero AssetInfo, which post-conditions read as STX.
func (a AssetInfo) IsZero() bool { return a == AssetInfo{} }

// Validate checks the contract id and the token's Clarity name.
func (a AssetInfo) Validate() error {
	if a.Contract.Address.Version >= 32 {
		return fmt.Errorf("%w: contract address version %d out of range", ErrBadAssetID, a.Contract.Address.Version)
	}
	if err := ValidateContractName(a.Contract.Name); err != nil {
		return fmt.Errorf("%w: %w", ErrBadAssetID, err)
	}
	if err := ValidateClarityName(a.Name); err != nil {
		return fmt.Errorf("%w: token name: %w", ErrBadAssetID, err)
	}
	return nil
}

func (a AssetInfo) encodedLen() int { return 1 + 20 + 1 + len(a.Contract.Name) + 1 + len(a.Name) }

// appendTo writes the post-condition encoding: address, length-prefixed
// contract name, length-prefixed token name.
func (a AssetInfo) appendTo(b []byte) []byte {
	b = append(b, a.Contract.Address.Version)
	b = append(b, a.Contract.Address.Hash160[:]...)
	b = append(b, byte(len(a.Contract.Name)))
	b = append(b, a.Contract.Name...)
	b = append(b, byte(len(a.Name)))
	return append(b, a.Name...)
}

// ---------------------------------------------------------------- SIP-010

// SIP-010's (transfer (amount uint) (sender principal) (recipient principal)
// (memo (optional (buff 34)))).
const (
	SIP010TransferFunction = "transfer"
	SIP010MaxMemo          = 34
)

// ErrTokenTransfer is wrapped by SIP-010 transfer validation errors.
var ErrTokenTransfer = errors.New("bad token transfer")

// SIP010TransferParams are the caller's choices for a SIP-010 transfer.
type SIP010TransferParams struct {
	Asset     AssetInfo
	Recipient Principal
	Amount    uint64
	// Memo is the optional memo argument: nil sends none, anything else
	// (up to 34 bytes, even empty) sends (some memo).
	Memo    []byte
	Nonce   uint64
	Fee     uint64
	ChainID uint32 // 0 means ChainIDTestnet
}

// SIP010TransferArgs are transfer's four arguments, sender being the
// transaction's own (the contract asserts sender = tx-sender).
func SIP010TransferArgs(sender, recipient Principal, amount uint64, memo []byte) ([]ClarityValue, error) {
	if len(memo) > SIP010MaxMemo {
		return nil, fmt.Errorf("%w: memo is %d bytes, at most %d", ErrTokenTransfer, len(memo), SIP010MaxMemo)
	}
	m := None
	if memo != nil {
		m = Some(Buffer(memo))
	}
	return []ClarityValue{NewUInt(amount), sender, recipient, m}, nil
}

// NewSIP010Transfer builds and signs a call of the token contract's
// transfer with post-condition mode Deny and one post-condition, "the sender
// sends exactly amount of the token" (stacks.js
// Pc.principal(sender).willSendEq(amount).ft(contract, token)). It refuses
// what the contract would refuse anyway (a zero amount, the sender as the
// recipient) so that no fee is spent on a transfer that must fail.
func NewSIP010Transfer(p SIP010TransferParams, key *PrivateKey) (*Transaction, error) {
	if key == nil {
		return nil, errors.New("token transfer: no key")
	}
	if err := p.Asset.Validate(); err != nil {
		return nil, fmt.Errorf("token transfer: %w", err)
	}
	sender := Principal{Address: key.TestnetAddress()}
	if p.Amount == 0 {
		return nil, fmt.Errorf("%w: amount is 0", ErrTokenTransfer)
	}
	if p.Recipient == sender {
		return nil, fmt.Errorf("%w: the recipient is the sender", ErrTokenTransfer)
	}
	if err := validateCV(p.Recipient, 1); err != nil {
		return nil, fmt.Errorf("%w: recipient: %w", ErrTokenTransfer, err)
	}
	args, err := SIP010TransferArgs(sender, p.Recipient, p.Amount, p.Memo)
	if err != nil {
		return nil, err
	}
	return NewContractCall(ContractCallParams{
		Contract:          p.Asset.Contract,
		Function:          SIP010TransferFunction,
		Args:              args,
		Nonce:             p.Nonce,
		Fee:               p.Fee,
		ChainID:           p.ChainID,
		PostConditionMode: PostConditionModeDeny,
		PostConditions:    []PostCondition{PrincipalSendsExactlyFT(sender, p.Asset, p.Amount)},
	}, key)
}

// SIP010Transfer is a decoded SIP-010 transfer call.
type SIP010Transfer struct {
	Contract  ContractID
	Amount    uint64
	Sender    Principal
	Recipient Principal
	Memo      []byte // nil when none
}

// ParseSIP010Transfer reads a contract call's arguments as SIP-010's
// transfer; false when the call is not one (another function, other
// argument types, an amount beyond 64 bits).
func ParseSIP010Transfer(cc *ContractCall) (SIP010Transfer, bool) {
	if cc == nil || cc.Function != SIP010TransferFunction || len(cc.Args) != 4 {
		return SIP010Transfer{}, false
	}
	amount, ok := cc.Args[0].(UInt)
	if !ok {
		return SIP010Transfer{}, false
	}
	amt, fits := amount.Uint64()
	sender, ok1 := cc.Args[1].(Principal)
	recipient, ok2 := cc.Args[2].(Principal)
	memo, ok3 := cc.Args[3].(Optional)
	if !fits || !ok1 || !ok2 || !ok3 {
		return SIP010Transfer{}, false
	}
	t := SIP010Transfer{Contract: cc.Contract, Amount: amt, Sender: sender, Recipient: recipient}
	if memo.Value != nil {
		b, ok := memo.Value.(Buffer)
		if !ok || len(b) > SIP010MaxMemo {
			return SIP010Transfer{}, false
		}
		t.Memo = []byte(b)
		if t.Memo == nil {
			t.Memo = []byte{}
		}
	}
	return t, true
}
