package stacks

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
)

// Clarity values and their consensus serialisation (SIP-005). Validation is
// in clarity_validate.go, decoding in clarity_decode.go.

// ClarityType is the type-prefix byte of a serialised Clarity value
// (clarity/src/vm/types/serialization.rs TypePrefix; SIP-005).
type ClarityType byte

const (
	ClarityInt               ClarityType = 0x00
	ClarityUInt              ClarityType = 0x01
	ClarityBuffer            ClarityType = 0x02
	ClarityBoolTrue          ClarityType = 0x03
	ClarityBoolFalse         ClarityType = 0x04
	ClarityPrincipalStandard ClarityType = 0x05
	ClarityPrincipalContract ClarityType = 0x06
	ClarityResponseOk        ClarityType = 0x07
	ClarityResponseErr       ClarityType = 0x08
	ClarityOptionalNone      ClarityType = 0x09
	ClarityOptionalSome      ClarityType = 0x0a
	ClarityList              ClarityType = 0x0b
	ClarityTuple             ClarityType = 0x0c
	ClarityStringASCII       ClarityType = 0x0d
	ClarityStringUTF8        ClarityType = 0x0e
)

// Limits from Clarity (clarity/src/vm/types/mod.rs, representations.rs).
const (
	// MaxClarityValueSize is MAX_VALUE_SIZE: the longest buffer, string,
	// list or tuple, 1 MiB.
	MaxClarityValueSize = 1 << 20
	// MaxClarityDepth is MAX_TYPE_DEPTH: a value nested deeper is refused.
	MaxClarityDepth = 32
	// maxClaritySerialized is BOUND_VALUE_SERIALIZATION_BYTES: the most
	// bytes one value's serialisation may span.
	maxClaritySerialized = 2 * MaxClarityValueSize
	// maxClarityNameLen is MAX_STRING_LEN for tuple keys and function names.
	maxClarityNameLen = 128
)

// ErrMalformedClarityValue is wrapped by every Clarity decode and validation error.
var ErrMalformedClarityValue = errors.New("malformed Clarity value")

// ClarityValue is a Clarity value with its consensus serialisation. The
// concrete types are UInt, Int, Bool, Buffer, Principal, Optional, Response,
// List, Tuple, StringASCII and StringUTF8.
type ClarityValue interface {
	// ClarityType is the value's type-prefix byte.
	ClarityType() ClarityType
	// AppendClarity appends the consensus serialisation to b.
	AppendClarity(b []byte) []byte
	// ClarityLen is the length of the consensus serialisation in bytes.
	ClarityLen() int
}

// SerializeClarityValue returns the consensus serialisation of v.
func SerializeClarityValue(v ClarityValue) []byte {
	return v.AppendClarity(make([]byte, 0, v.ClarityLen()))
}

// ---------------------------------------------------------------- integers

// UInt is a Clarity uint (u128), as two 64-bit halves.
type UInt struct{ Hi, Lo uint64 }

// NewUInt is the uint v.
func NewUInt(v uint64) UInt { return UInt{Lo: v} }

var (
	bigU128Limit = new(big.Int).Lsh(big.NewInt(1), 128) // 2^128
	bigI128Min   = new(big.Int).Neg(new(big.Int).Lsh(big.NewInt(1), 127))
	bigI128Limit = new(big.Int).Lsh(big.NewInt(1), 127) // 2^127
)

// UIntFromBig converts 0 ≤ x < 2^128.
func UIntFromBig(x *big.Int) (UInt, error) {
	if x.Sign() < 0 || x.Cmp(bigU128Limit) >= 0 {
		return UInt{}, fmt.Errorf("%w: uint %s out of range 0..2^128-1", ErrMalformedClarityValue, x)
	}
	var b [16]byte
	x.FillBytes(b[:])
	return UInt{Hi: binary.BigEndian.Uint64(b[:8]), Lo: binary.BigEndian.Uint64(b[8:])}, nil
}

// Big returns u as a big.Int.
func (u UInt) Big() *big.Int {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], u.Hi)
	binary.BigEndian.PutUint64(b[8:], u.Lo)
	return new(big.Int).SetBytes(b[:])
}

// Uint64 returns u and whether it fits in 64 bits.
func (u UInt) Uint64() (uint64, bool) { return u.Lo, u.Hi == 0 }

// String is the Clarity literal, e.g. "u42".
func (u UInt) String() string {
	if u.Hi == 0 {
		return "u" + strconv.FormatUint(u.Lo, 10)
	}
	return "u" + u.Big().String()
}

func (UInt) ClarityType() ClarityType        { return ClarityUInt }
func (UInt) ClarityLen() int                 { return 17 }
func (u UInt) AppendClarity(b []byte) []byte { return append128(b, ClarityUInt, u.Hi, u.Lo) }

// append128 appends a uint or int value: its type byte and its 128 bits,
// big-endian.
func append128(b []byte, t ClarityType, hi, lo uint64) []byte {
	b = append(b, byte(t))
	b = binary.BigEndian.AppendUint64(b, hi)
	return binary.BigEndian.AppendUint64(b, lo)
}

// Int is a Clarity int (i128) in two's complement, as two 64-bit halves.
type Int struct{ Hi, Lo uint64 }

// NewInt is the int v.
func NewInt(v int64) Int { return Int{Hi: uint64(v >> 63), Lo: uint64(v)} }

// IntFromBig converts -2^127 ≤ x < 2^127.
func IntFromBig(x *big.Int) (Int, error) {
	if x.Cmp(bigI128Min) < 0 || x.Cmp(bigI128Limit) >= 0 {
		return Int{}, fmt.Errorf("%w: int %s out of range -2^127..2^127-1", ErrMalformedClarityValue, x)
	}
	y := new(big.Int).Set(x)
	if y.Sign() < 0 {
		y.Add(y, bigU128Limit)
	}
	u, _ := UIntFromBig(y)
	return Int(u), nil
}

// Big returns i as a big.Int.
func (i Int) Big() *big.Int {
	x := UInt(i).Big()
	if int64(i.Hi) < 0 {
		x.Sub(x, bigU128Limit)
	}
	return x
}

// String is the Clarity literal, e.g. "-7".
func (i Int) String() string { return i.Big().String() }

func (Int) ClarityType() ClarityType        { return ClarityInt }
func (Int) ClarityLen() int                 { return 17 }
func (i Int) AppendClarity(b []byte) []byte { return append128(b, ClarityInt, i.Hi, i.Lo) }

// ---------------------------------------------------------------- bool, buffer, strings

// Bool is a Clarity bool; true and false have their own type bytes.
type Bool bool

func (v Bool) ClarityType() ClarityType {
	if v {
		return ClarityBoolTrue
	}
	return ClarityBoolFalse
}
func (Bool) ClarityLen() int                 { return 1 }
func (v Bool) AppendClarity(b []byte) []byte { return append(b, byte(v.ClarityType())) }
func (v Bool) String() string                { return strconv.FormatBool(bool(v)) }

// Buffer is a Clarity buff, at most MaxClarityValueSize bytes.
type Buffer []byte

func (Buffer) ClarityType() ClarityType        { return ClarityBuffer }
func (v Buffer) ClarityLen() int               { return 5 + len(v) }
func (v Buffer) AppendClarity(b []byte) []byte { return appendSized(b, ClarityBuffer, v) }

// StringASCII is a Clarity string-ascii: printable ASCII plus \t \n \f \r.
type StringASCII string

func (StringASCII) ClarityType() ClarityType        { return ClarityStringASCII }
func (v StringASCII) ClarityLen() int               { return 5 + len(v) }
func (v StringASCII) AppendClarity(b []byte) []byte { return appendSized(b, ClarityStringASCII, v) }

// StringUTF8 is a Clarity string-utf8, serialised as its UTF-8 bytes.
type StringUTF8 string

func (StringUTF8) ClarityType() ClarityType        { return ClarityStringUTF8 }
func (v StringUTF8) ClarityLen() int               { return 5 + len(v) }
func (v StringUTF8) AppendClarity(b []byte) []byte { return appendSized(b, ClarityStringUTF8, v) }

// appendSized appends a buff or string value: its type byte, its length
// as a big-endian u32 and its bytes.
func appendSized[S ~[]byte | ~string](b []byte, t ClarityType, v S) []byte {
	b = append(b, byte(t))
	b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
	return append(b, v...)
}

// ---------------------------------------------------------------- principal

// ClarityType makes Principal a Clarity principal value: 0x05 for a
// standard principal, 0x06 for a contract.
func (p Principal) ClarityType() ClarityType {
	if p.IsContract() {
		return ClarityPrincipalContract
	}
	return ClarityPrincipalStandard
}

// ClarityLen is the serialised length: type, version, hash160, and for a
// contract a length-prefixed name.
func (p Principal) ClarityLen() int {
	if p.IsContract() {
		return 1 + 1 + 20 + 1 + len(p.ContractName)
	}
	return 1 + 1 + 20
}

// AppendClarity appends the principal as a Clarity value; it is also the
// recipient encoding of a token transfer.
func (p Principal) AppendClarity(b []byte) []byte {
	b = append(b, byte(p.ClarityType()), p.Address.Version)
	b = append(b, p.Address.Hash160[:]...)
	if p.IsContract() {
		b = append(b, byte(len(p.ContractName)))
		b = append(b, p.ContractName...)
	}
	return b
}

// ---------------------------------------------------------------- optional, response

// Optional is a Clarity optional: none when Value is nil, else (some Value).
type Optional struct{ Value ClarityValue }

// None is the Clarity value none.
var None = Optional{}

// Some wraps v as (some v).
func Some(v ClarityValue) Optional { return Optional{Value: v} }

func (o Optional) ClarityType() ClarityType {
	if o.Value == nil {
		return ClarityOptionalNone
	}
	return ClarityOptionalSome
}
func (o Optional) ClarityLen() int {
	if o.Value == nil {
		return 1
	}
	return 1 + o.Value.ClarityLen()
}
func (o Optional) AppendClarity(b []byte) []byte {
	b = append(b, byte(o.ClarityType()))
	if o.Value != nil {
		b = o.Value.AppendClarity(b)
	}
	return b
}

// Response is a Clarity response: (ok Value) when Ok, else (err Value).
type Response struct {
	Ok    bool
	Value ClarityValue
}

// ResponseOk is (ok v).
func ResponseOk(v ClarityValue) Response { return Response{Ok: true, Value: v} }

// ResponseErr is (err v).
func ResponseErr(v ClarityValue) Response { return Response{Ok: false, Value: v} }

func (r Response) ClarityType() ClarityType {
	if r.Ok {
		return ClarityResponseOk
	}
	return ClarityResponseErr
}
func (r Response) ClarityLen() int { return 1 + r.Value.ClarityLen() }
func (r Response) AppendClarity(b []byte) []byte {
	return r.Value.AppendClarity(append(b, byte(r.ClarityType())))
}

// ---------------------------------------------------------------- list, tuple

// List is a Clarity list. Clarity also requires the items to share a type;
// that is not checked here.
type List []ClarityValue

func (List) ClarityType() ClarityType { return ClarityList }
func (l List) ClarityLen() int {
	n := 5
	for _, v := range l {
		n += v.ClarityLen()
	}
	return n
}
func (l List) AppendClarity(b []byte) []byte {
	b = append(b, byte(ClarityList))
	b = binary.BigEndian.AppendUint32(b, uint32(len(l)))
	for _, v := range l {
		b = v.AppendClarity(b)
	}
	return b
}

// TupleEntry is one named field of a tuple.
type TupleEntry struct {
	Name  string
	Value ClarityValue
}

// Tuple is a Clarity tuple, serialised in slice order. NewTuple puts the
// entries in Clarity's canonical order (ascending bytes of the names, the
// order of stacks-core's BTreeMap). stacks.js sorts with localeCompare, which
// agrees for names of lower-case letters and digits (such as send-many's
// memo, to, ustx) but not always for upper case or punctuation. The node
// accepts either order; it refuses duplicate and empty tuples.
type Tuple []TupleEntry

// NewTuple validates the names, refuses duplicates and an empty tuple, and
// returns the entries in canonical order (the argument is not modified).
func NewTuple(entries ...TupleEntry) (Tuple, error) {
	t := slices.Clone(Tuple(entries))
	slices.SortFunc(t, func(a, b TupleEntry) int { return strings.Compare(a.Name, b.Name) })
	if len(t) == 0 {
		return nil, fmt.Errorf("%w: empty tuple", ErrMalformedClarityValue)
	}
	for i, e := range t {
		if err := ValidateClarityName(e.Name); err != nil {
			return nil, err
		}
		if i > 0 && t[i-1].Name == e.Name {
			return nil, fmt.Errorf("%w: duplicate tuple key %q", ErrMalformedClarityValue, e.Name)
		}
		if e.Value == nil {
			return nil, fmt.Errorf("%w: tuple key %q has no value", ErrMalformedClarityValue, e.Name)
		}
	}
	return t, nil
}

// Get returns the value of the named field.
func (t Tuple) Get(name string) (ClarityValue, bool) {
	for _, e := range t {
		if e.Name == name {
			return e.Value, true
		}
	}
	return nil, false
}

func (Tuple) ClarityType() ClarityType { return ClarityTuple }
func (t Tuple) ClarityLen() int {
	n := 5
	for _, e := range t {
		n += 1 + len(e.Name) + e.Value.ClarityLen()
	}
	return n
}
func (t Tuple) AppendClarity(b []byte) []byte {
	b = append(b, byte(ClarityTuple))
	b = binary.BigEndian.AppendUint32(b, uint32(len(t)))
	for _, e := range t {
		b = append(b, byte(len(e.Name)))
		b = append(b, e.Name...)
		b = e.Value.AppendClarity(b)
	}
	return b
}
