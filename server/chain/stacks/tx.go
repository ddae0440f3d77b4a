package stacks

import (
	"crypto/sha512"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Wire constants (stacks-codec transaction.rs).
const (
	TxVersionMainnet byte = 0x00
	TxVersionTestnet byte = 0x80

	ChainIDMainnet uint32 = 0x00000001
	ChainIDTestnet uint32 = 0x80000000

	AuthTypeStandard  byte = 0x04
	AuthTypeSponsored byte = 0x05

	HashModeP2PKH byte = 0x00 // single-sig, the only mode this package signs

	AnchorModeOnChainOnly  byte = 0x01
	AnchorModeOffChainOnly byte = 0x02
	AnchorModeAny          byte = 0x03

	PostConditionModeAllow byte = 0x01
	PostConditionModeDeny  byte = 0x02

	PayloadTokenTransfer byte = 0x00

	principalStandard byte = 0x05
	principalContract byte = 0x06

	// MemoLen is the fixed memo size of a token transfer.
	MemoLen = 34
	// SignatureLen is a recoverable signature: recovery id, r, s.
	SignatureLen = 65
)

// KeyEncoding is the public-key encoding byte of a single-sig spending condition.
type KeyEncoding byte

const (
	KeyEncodingCompressed   KeyEncoding = 0x00
	KeyEncodingUncompressed KeyEncoding = 0x01
)

// ErrMalformedTx is wrapped by every decode error.
var ErrMalformedTx = errors.New("malformed transaction")

// Memo is the fixed 34-byte memo field, zero-padded on the right.
type Memo [MemoLen]byte

// NewMemo stores s as UTF-8, failing when it exceeds 34 bytes.
func NewMemo(s string) (Memo, error) {
	var m Memo
	if len(s) > MemoLen {
		return m, fmt.Errorf("memo is %d bytes, at most %d", len(s), MemoLen)
	}
	copy(m[:], s)
	return m, nil
}

// String returns the memo without its zero padding.
func (m Memo) String() string {
	n := len(m)
	for n > 0 && m[n-1] == 0 {
		n--
	}
	if !utf8.Valid(m[:n]) {
		return hex.EncodeToString(m[:n])
	}
	return string(m[:n])
}

// SpendingCondition is a standard single-sig P2PKH spending condition.
type SpendingCondition struct {
	HashMode    byte
	Signer      [20]byte // hash160 of the public key
	Nonce       uint64
	Fee         uint64
	KeyEncoding KeyEncoding
	Signature   [SignatureLen]byte
}

// TokenTransfer is the STX token-transfer payload.
type TokenTransfer struct {
	Recipient Principal
	Amount    uint64 // µSTX
	Memo      Memo
}

// Transaction is a standard-auth, single-sig transaction: an STX token
// transfer, or a contract call (such as send-many) with STX post-conditions.
type Transaction struct {
	Version           byte
	ChainID           uint32
	Auth              SpendingCondition
	AnchorMode        byte
	PostConditionMode byte
	PostConditions    []PostCondition
	// Payload is the token-transfer payload; it is unused (and zero after
	// decoding) when ContractCall is set.
	Payload TokenTransfer
	// ContractCall, when non-nil, is the payload instead of Payload.
	ContractCall *ContractCall
}

// PayloadType is PayloadContractCall when ContractCall is set, else
// PayloadTokenTransfer.
func (tx *Transaction) PayloadType() byte {
	if tx.ContractCall != nil {
		return PayloadContractCall
	}
	return PayloadTokenTransfer
}

// TxID is SHA-512/256 of the serialised transaction.
type TxID [32]byte

// String is the lower-case hex form without "0x", as the node reports it.
func (id TxID) String() string { return hex.EncodeToString(id[:]) }

// ParseTxID reads a txid as 64 hex digits, with or without a 0x prefix.
func ParseTxID(s string) (TxID, error) {
	var id TxID
	h := strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X")
	if len(h) != 2*len(id) {
		return id, fmt.Errorf("txid must be 64 hex digits, got %d characters", len(h))
	}
	if _, err := hex.Decode(id[:], []byte(h)); err != nil {
		return id, fmt.Errorf("txid is not hex: %w", err)
	}
	return id, nil
}

// Hex0x is the "0x"-prefixed form the Hiro API uses.
func (id TxID) Hex0x() string { return "0x" + id.String() }

// TransferParams are the caller's choices for a new token transfer.
type TransferParams struct {
	Recipient Principal
	Amount    uint64
	Nonce     uint64
	Fee       uint64
	Memo      Memo
	ChainID   uint32 // 0 means ChainIDTestnet
}

// NewTokenTransfer builds and signs a testnet token transfer with the same
// defaults as stacks.js makeSTXTokenTransfer (anchor mode Any, post-condition
// mode Deny, no post-conditions).
func NewTokenTransfer(p TransferParams, key *PrivateKey) (*Transaction, error) {
	tx := testnetTx(p.ChainID, p.Nonce, p.Fee, PostConditionModeDeny)
	tx.Payload = TokenTransfer{Recipient: p.Recipient, Amount: p.Amount, Memo: p.Memo}
	if err := tx.Sign(key); err != nil {
		return nil, err
	}
	return tx, nil
}

// testnetTx is the unsigned frame every transaction the faucet builds shares:
// testnet version, a single-signature origin, anchor mode Any. A zero chainID
// means ChainIDTestnet.
func testnetTx(chainID uint32, nonce, fee uint64, mode byte) *Transaction {
	if chainID == 0 {
		chainID = ChainIDTestnet
	}
	return &Transaction{
		Version:           TxVersionTestnet,
		ChainID:           chainID,
		Auth:              SpendingCondition{HashMode: HashModeP2PKH, Nonce: nonce, Fee: fee},
		AnchorMode:        AnchorModeAny,
		PostConditionMode: mode,
	}
}

// SenderAddress is the origin's address on the transaction's network.
func (tx *Transaction) SenderAddress() Address {
	v := AddressVersionTestnetSingleSig
	if tx.Version == TxVersionMainnet {
		v = AddressVersionMainnetSingleSig
	}
	return Address{Version: v, Hash160: tx.Auth.Signer}
}

// EncodedLen is the serialised size in bytes, which the node's minimum fee is based on.
func (tx *Transaction) EncodedLen() int {
	n := 1 + 4 + 1 + 1 + 20 + 8 + 8 + 1 + SignatureLen + 1 + 1 + 4
	for _, pc := range tx.PostConditions {
		n += pc.encodedLen()
	}
	if tx.ContractCall != nil {
		return n + tx.ContractCall.encodedLen()
	}
	return n + 1 + tx.Payload.Recipient.ClarityLen() + 8 + MemoLen
}

// PayloadBytes is the serialised payload alone, from its type byte to the
// end: what the node's fee estimator (POST /v2/fees/transaction) prices.
func (tx *Transaction) PayloadBytes() []byte {
	raw := tx.Serialize()
	var n int
	if tx.ContractCall != nil {
		n = tx.ContractCall.encodedLen()
	} else {
		n = 1 + tx.Payload.Recipient.ClarityLen() + 8 + MemoLen // type, recipient, amount, memo
	}
	return raw[len(raw)-n:]
}

// Serialize returns the consensus serialisation.
func (tx *Transaction) Serialize() []byte {
	return tx.appendTo(make([]byte, 0, tx.EncodedLen()))
}

func (tx *Transaction) appendTo(b []byte) []byte {
	b = append(b, tx.Version)
	b = binary.BigEndian.AppendUint32(b, tx.ChainID)
	b = append(b, AuthTypeStandard, tx.Auth.HashMode)
	b = append(b, tx.Auth.Signer[:]...)
	b = binary.BigEndian.AppendUint64(b, tx.Auth.Nonce)
	b = binary.BigEndian.AppendUint64(b, tx.Auth.Fee)
	b = append(b, byte(tx.Auth.KeyEncoding))
	b = append(b, tx.Auth.Signature[:]...)
	b = append(b, tx.AnchorMode, tx.PostConditionMode)
	b = binary.BigEndian.AppendUint32(b, uint32(len(tx.PostConditions)))
	for _, pc := range tx.PostConditions {
		b = pc.appendTo(b)
	}
	if tx.ContractCall != nil {
		return tx.ContractCall.appendTo(b)
	}
	b = append(b, PayloadTokenTransfer)
	b = tx.Payload.Recipient.AppendClarity(b)
	b = binary.BigEndian.AppendUint64(b, tx.Payload.Amount)
	return append(b, tx.Payload.Memo[:]...)
}

// TxID hashes the serialised transaction.
func (tx *Transaction) TxID() TxID { return sha512.Sum512_256(tx.Serialize()) }

// DecodeTransaction parses a serialised token transfer or contract call
// strictly: unknown type bytes, truncation, trailing bytes and malformed
// Clarity arguments are errors. Transactions this package cannot represent
// (sponsored, multi-sig, non-fungible post-conditions, other payloads) are
// reported as unsupported.
func DecodeTransaction(b []byte) (*Transaction, error) {
	d := decoder{buf: b}
	tx := &Transaction{}
	tx.Version = d.byte("version")
	if d.err == nil && tx.Version != TxVersionMainnet && tx.Version != TxVersionTestnet {
		d.fail("unknown transaction version 0x%02x", tx.Version)
	}
	tx.ChainID = d.u32("chain id")
	switch at := d.byte("auth type"); {
	case d.err != nil:
	case at == AuthTypeSponsored:
		d.fail("sponsored transactions are not supported")
	case at != AuthTypeStandard:
		d.fail("unknown auth type 0x%02x", at)
	}
	tx.Auth.HashMode = d.byte("hash mode")
	if d.err == nil && tx.Auth.HashMode != HashModeP2PKH {
		d.fail("hash mode 0x%02x is not supported (only single-sig P2PKH)", tx.Auth.HashMode)
	}
	d.copy("signer", tx.Auth.Signer[:])
	tx.Auth.Nonce = d.u64("nonce")
	tx.Auth.Fee = d.u64("fee")
	tx.Auth.KeyEncoding = KeyEncoding(d.byte("key encoding"))
	if d.err == nil && tx.Auth.KeyEncoding != KeyEncodingCompressed && tx.Auth.KeyEncoding != KeyEncodingUncompressed {
		d.fail("unknown key encoding 0x%02x", byte(tx.Auth.KeyEncoding))
	}
	d.copy("signature", tx.Auth.Signature[:])
	tx.AnchorMode = d.byte("anchor mode")
	if d.err == nil && (tx.AnchorMode < AnchorModeOnChainOnly || tx.AnchorMode > AnchorModeAny) {
		d.fail("unknown anchor mode 0x%02x", tx.AnchorMode)
	}
	tx.PostConditionMode = d.byte("post-condition mode")
	if d.err == nil && tx.PostConditionMode != PostConditionModeAllow && tx.PostConditionMode != PostConditionModeDeny {
		d.fail("unknown post-condition mode 0x%02x", tx.PostConditionMode)
	}
	tx.PostConditions = d.postConditions()
	switch pt := d.byte("payload type"); {
	case d.err != nil:
	case pt == PayloadTokenTransfer:
		tx.Payload.Recipient = d.principal()
		tx.Payload.Amount = d.u64("amount")
		d.copy("memo", tx.Payload.Memo[:])
	case pt == PayloadContractCall:
		tx.ContractCall = d.contractCall()
	default:
		d.off--
		d.fail("payload type 0x%02x is not supported (only token transfer and contract call)", pt)
	}
	if d.err == nil && d.off != len(b) {
		d.fail("%d trailing bytes", len(b)-d.off)
	}
	if d.err != nil {
		return nil, d.err
	}
	return tx, nil
}

// postConditions reads the length-prefixed list of STX and fungible-token
// post-conditions.
func (d *decoder) postConditions() []PostCondition {
	n := d.u32("post-condition count")
	if d.err != nil || n == 0 {
		return nil
	}
	// Each post-condition takes at least 11 bytes: never allocate for more.
	pcs := make([]PostCondition, 0, min(int(n), (len(d.buf)-d.off)/11))
	for range n {
		var pc PostCondition
		t := d.byte("post-condition type")
		if d.err == nil && t != PostConditionTypeSTX && t != PostConditionTypeFungible {
			d.off--
			d.fail("post-condition type 0x%02x is not supported (only STX and fungible)", t)
		}
		switch kind := d.byte("post-condition principal type"); {
		case d.err != nil:
		case kind == PostConditionPrincipalOrigin:
			pc.Origin = true
		case kind == PostConditionPrincipalStandard:
			pc.Principal = d.principalBody(principalStandard)
		case kind == PostConditionPrincipalContract:
			pc.Principal = d.principalBody(principalContract)
		default:
			d.off--
			d.fail("unknown post-condition principal type 0x%02x", kind)
		}
		if t == PostConditionTypeFungible {
			pc.Asset = d.assetInfo()
		}
		pc.Code = ConditionCode(d.byte("post-condition code"))
		if d.err == nil && (pc.Code < ConditionEq || pc.Code > ConditionLtEq) {
			d.off--
			d.fail("unknown fungible condition code 0x%02x", byte(pc.Code))
		}
		pc.Amount = d.u64("post-condition amount")
		if d.err != nil {
			return nil
		}
		pcs = append(pcs, pc)
	}
	return pcs
}

// assetInfo reads a fungible post-condition's asset: the contract's address
// and name, then the token's Clarity name.
func (d *decoder) assetInfo() AssetInfo {
	var a AssetInfo
	a.Contract.Address = d.address("asset contract address")
	a.Contract.Name = d.contractName("asset contract name")
	a.Name = d.clarityName("asset name")
	return a
}

// contractCall reads a contract-call payload after its type byte.
func (d *decoder) contractCall() *ContractCall {
	cc := &ContractCall{}
	cc.Contract.Address = d.address("contract address")
	cc.Contract.Name = d.contractName("contract name")
	cc.Function = d.clarityName("function name")
	n := d.u32("argument count")
	if d.err != nil {
		return nil
	}
	// Each argument takes at least one byte.
	cc.Args = make([]ClarityValue, 0, min(int(n), len(d.buf)-d.off))
	for range n {
		v := d.clarityValue()
		if d.err != nil {
			return nil
		}
		cc.Args = append(cc.Args, v)
	}
	return cc
}

// decoder reads fields in order, remembering the first error so call sites
// stay linear; every read after an error is a no-op.
type decoder struct {
	buf      []byte
	off      int
	err      error
	sentinel error // wrapped by every error; nil means ErrMalformedTx
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		sentinel := d.sentinel
		if sentinel == nil {
			sentinel = ErrMalformedTx
		}
		d.err = fmt.Errorf("%w: at byte %d: %s", sentinel, d.off, fmt.Sprintf(format, args...))
	}
}

func (d *decoder) take(field string, n int) []byte {
	if d.err != nil {
		return nil
	}
	if len(d.buf)-d.off < n {
		d.fail("truncated %s: need %d bytes, have %d", field, n, len(d.buf)-d.off)
		return nil
	}
	s := d.buf[d.off : d.off+n]
	d.off += n
	return s
}

func (d *decoder) byte(field string) byte {
	if s := d.take(field, 1); s != nil {
		return s[0]
	}
	return 0
}

func (d *decoder) u32(field string) uint32 {
	if s := d.take(field, 4); s != nil {
		return binary.BigEndian.Uint32(s)
	}
	return 0
}

func (d *decoder) u64(field string) uint64 {
	if s := d.take(field, 8); s != nil {
		return binary.BigEndian.Uint64(s)
	}
	return 0
}

func (d *decoder) copy(field string, dst []byte) {
	if s := d.take(field, len(dst)); s != nil {
		copy(dst, s)
	}
}

func (d *decoder) principal() Principal {
	kind := d.byte("recipient type")
	if d.err == nil && kind != principalStandard && kind != principalContract {
		d.fail("unknown principal type 0x%02x", kind)
	}
	return d.principalBody(kind)
}

// principalBody reads a principal's address and, for a contract, its name.
func (d *decoder) principalBody(kind byte) Principal {
	var p Principal
	p.Address = d.address("principal")
	if kind == principalContract {
		p.ContractName = d.contractName("contract name")
	}
	return p
}

// address reads a version byte and a hash160.
func (d *decoder) address(field string) Address {
	var a Address
	a.Version = d.byte(field + " version")
	if d.err == nil && a.Version >= 32 {
		d.off--
		d.fail("%s: address version %d out of range", field, a.Version)
	}
	d.copy(field+" hash", a.Hash160[:])
	return a
}

// contractName reads a length-prefixed contract name.
func (d *decoder) contractName(field string) string {
	return d.name(field, minContractNameLen, maxContractNameLen, ValidateContractName)
}

// name reads a name behind a one-byte length, which must be lo to hi, and
// checks it with valid. Like stacks-core's ContractName codec, it checks
// the length prefix before reading the name.
func (d *decoder) name(field string, lo, hi int, valid func(string) error) string {
	n := int(d.byte(field + " length"))
	if d.err == nil && (n < lo || n > hi) {
		d.off--
		d.fail("%s length %d, must be %d to %d", field, n, lo, hi)
	}
	name := d.take(field, n)
	if d.err != nil {
		return ""
	}
	if err := valid(string(name)); err != nil {
		d.off -= n // report the name's first byte
		d.fail("%s: %v", field, err)
		return ""
	}
	return string(name)
}
