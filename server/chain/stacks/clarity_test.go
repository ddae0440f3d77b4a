package stacks

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math/big"
	"strings"
	"testing"
)

func mustPrincipal(t testing.TB, s string) Principal {
	t.Helper()
	p, err := ParsePrincipal(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func mustTuple(t testing.TB, entries ...TupleEntry) Tuple {
	t.Helper()
	tu, err := NewTuple(entries...)
	if err != nil {
		t.Fatal(err)
	}
	return tu
}

// Hand-checked serialisations (SIP-005); each also matches stacks.js
// serializeCV 7.6.0.
func TestClarityVectors(t *testing.T) {
	z := func(n int) string { return strings.Repeat("00", n) }
	minI128, _ := new(big.Int).SetString("-170141183460469231731687303715884105728", 10)
	maxU128, _ := new(big.Int).SetString("340282366920938463463374607431768211455", 10)
	i128Min, err := IntFromBig(minI128)
	if err != nil {
		t.Fatal(err)
	}
	u128Max, err := UIntFromBig(maxU128)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		v    ClarityValue
		want string
	}{
		{"u0", NewUInt(0), "01" + z(16)},
		{"u1", NewUInt(1), "01" + z(15) + "01"},
		{"u64 max", NewUInt(^uint64(0)), "01" + z(8) + strings.Repeat("ff", 8)},
		{"u128 max", u128Max, "01" + strings.Repeat("ff", 16)},
		{"int 100", NewInt(100), "00" + z(15) + "64"},
		{"int -1", NewInt(-1), "00" + strings.Repeat("ff", 16)},
		{"int min", i128Min, "0080" + z(15)},
		{"true", Bool(true), "03"},
		{"false", Bool(false), "04"},
		{"buff", Buffer{0xde, 0xad, 0xbe, 0xef}, "0200000004deadbeef"},
		{"empty buff", Buffer(nil), "0200000000"},
		{"none", None, "09"},
		{"some false", Some(Bool(false)), "0a04"},
		{"ok ascii", ResponseOk(StringASCII("hi")), "070d000000026869"},
		{"err utf8", ResponseErr(StringUTF8("€")), "080e00000003e282ac"},
		{"standard principal", mustPrincipal(t, goldenRecipient), "051ab52c45b1a7977204f17ac0b6f48306aea2dbb8e9"},
		{"contract principal", mustPrincipal(t, goldenRecipient+".my-contract"),
			"061ab52c45b1a7977204f17ac0b6f48306aea2dbb8e9" + "0b" + hex.EncodeToString([]byte("my-contract"))},
		{"list", List{NewUInt(1), None, Some(Bool(false))}, "0b00000003" + "01" + z(15) + "01" + "09" + "0a04"},
		{"empty list", List{}, "0b00000000"},
		// NewTuple sorts: {b: u2, a: true} is written a, then b.
		{"tuple", mustTuple(t, TupleEntry{"b", NewUInt(2)}, TupleEntry{"a", Bool(true)}),
			"0c00000002" + "0161" + "03" + "0162" + "01" + z(15) + "02"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := SerializeClarityValue(tt.v)
			if hex.EncodeToString(got) != tt.want {
				t.Fatalf("got  %x\nwant %s", got, tt.want)
			}
			if tt.v.ClarityLen() != len(got) {
				t.Errorf("ClarityLen %d, serialised %d", tt.v.ClarityLen(), len(got))
			}
			if err := ValidateClarityValue(tt.v); err != nil {
				t.Errorf("validate: %v", err)
			}
			back, err := DecodeClarityValue(got)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if !bytes.Equal(SerializeClarityValue(back), got) {
				t.Errorf("round trip: %x", SerializeClarityValue(back))
			}
		})
	}
}

func TestClarityIntegers(t *testing.T) {
	if s := NewUInt(42).String(); s != "u42" {
		t.Errorf("u42: %s", s)
	}
	if s := NewInt(-7).String(); s != "-7" {
		t.Errorf("-7: %s", s)
	}
	big1 := new(big.Int).Lsh(big.NewInt(1), 100)
	u, err := UIntFromBig(big1)
	if err != nil || u.Big().Cmp(big1) != 0 || u.String() != "u"+big1.String() {
		t.Errorf("2^100: %v %v", u, err)
	}
	if _, ok := u.Uint64(); ok {
		t.Error("2^100 fits in 64 bits?")
	}
	neg := new(big.Int).Neg(big1)
	i, err := IntFromBig(neg)
	if err != nil || i.Big().Cmp(neg) != 0 {
		t.Errorf("-2^100: %v %v", i, err)
	}
	for _, bad := range []*big.Int{big.NewInt(-1), new(big.Int).Lsh(big.NewInt(1), 128)} {
		if _, err := UIntFromBig(bad); err == nil {
			t.Errorf("UIntFromBig(%s) accepted", bad)
		}
	}
	for _, bad := range []*big.Int{new(big.Int).Lsh(big.NewInt(1), 127), new(big.Int).Neg(new(big.Int).Add(new(big.Int).Lsh(big.NewInt(1), 127), big.NewInt(1)))} {
		if _, err := IntFromBig(bad); err == nil {
			t.Errorf("IntFromBig(%s) accepted", bad)
		}
	}
}

func TestNewTuple(t *testing.T) {
	if _, err := NewTuple(); err == nil {
		t.Error("empty tuple accepted")
	}
	if _, err := NewTuple(TupleEntry{"a", NewUInt(1)}, TupleEntry{"a", NewUInt(2)}); err == nil {
		t.Error("duplicate key accepted")
	}
	if _, err := NewTuple(TupleEntry{"1a", NewUInt(1)}); err == nil {
		t.Error("bad name accepted")
	}
	if _, err := NewTuple(TupleEntry{"a", nil}); err == nil {
		t.Error("nil value accepted")
	}
	// Byte order (stacks-core's BTreeMap): upper case before lower case.
	tu := mustTuple(t, TupleEntry{"ustx", NewUInt(1)}, TupleEntry{"to", Bool(true)}, TupleEntry{"memo", Buffer{}}, TupleEntry{"Z", None})
	var names []string
	for _, e := range tu {
		names = append(names, e.Name)
	}
	if strings.Join(names, ",") != "Z,memo,to,ustx" {
		t.Errorf("order %v", names)
	}
	if v, ok := tu.Get("to"); !ok || v != Bool(true) {
		t.Errorf("Get(to) = %v %v", v, ok)
	}
}

func TestValidateClarityName(t *testing.T) {
	for _, ok := range []string{"a", "send-many", "is-owner?", "set!", "a_b", "A1", "-", "<=", ">", "*", strings.Repeat("a", 128)} {
		if err := ValidateClarityName(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "1a", "a b", "a.b", "<<", "-a", "é", strings.Repeat("a", 129)} {
		if err := ValidateClarityName(bad); !errors.Is(err, ErrMalformedClarityValue) {
			t.Errorf("%q accepted (%v)", bad, err)
		}
	}
}

func TestValidateClarityValue(t *testing.T) {
	deep := ClarityValue(NewUInt(1))
	for range MaxClarityDepth - 1 {
		deep = Some(deep)
	}
	if err := ValidateClarityValue(deep); err != nil {
		t.Errorf("depth %d refused: %v", MaxClarityDepth, err)
	}
	tests := []struct {
		name string
		v    ClarityValue
	}{
		{"nil", nil},
		{"nil in list", List{nil}},
		{"too deep", Some(deep)},
		{"big buffer", make(Buffer, MaxClarityValueSize+1)},
		{"ascii control", StringASCII("a\x00")},
		{"ascii high", StringASCII("é")},
		{"bad utf8", StringUTF8("\xff")},
		{"empty tuple", Tuple{}},
		{"duplicate", Tuple{{"a", NewUInt(1)}, {"a", NewUInt(1)}}},
		{"bad version", Principal{Address: Address{Version: 32}}},
		{"bad contract", Principal{Address: Address{Version: 26}, ContractName: "9x"}},
	}
	for _, tt := range tests {
		if err := ValidateClarityValue(tt.v); !errors.Is(err, ErrMalformedClarityValue) {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
	// The node accepts tuple keys in any order; so does validation.
	if err := ValidateClarityValue(Tuple{{"b", NewUInt(1)}, {"a", NewUInt(1)}}); err != nil {
		t.Errorf("unsorted tuple: %v", err)
	}
}

func TestDecodeClarityRejects(t *testing.T) {
	h := func(s string) []byte {
		b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	nest := func(prefix string, n int, leaf string) []byte {
		return h(strings.Repeat(prefix, n) + leaf)
	}
	u1 := "01" + strings.Repeat("00", 15) + "01"
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"empty", nil, "truncated Clarity type"},
		{"unknown type", h("0f"), "unknown Clarity type 0x0f"},
		{"unknown type ff", h("ff"), "unknown Clarity type 0xff"},
		{"truncated uint", h(u1[:20]), "truncated integer"},
		{"trailing", h(u1 + "00"), "1 trailing bytes"},
		{"truncated buffer", h("0200000004 dead"), "truncated contents"},
		{"oversize buffer", h("0200100001"), "exceeds 1048576"},
		{"oversize list", h("0b00100001"), "list length 1048577 exceeds"},
		{"list missing items", h("0b00000002" + u1), "truncated Clarity type"},
		{"huge list count", h("0bffffffff"), "exceeds"},
		{"empty tuple", h("0c00000000"), "empty tuple"},
		{"duplicate tuple key", h("0c00000002 0161 03 0161 04"), `duplicate tuple key "a"`},
		{"bad tuple key", h("0c00000001 0131 03"), "tuple key"},
		{"zero-length key", h("0c00000001 00 03"), "tuple key length 0"},
		{"bad ascii", h("0d00000001 00"), "string-ascii byte 0x00"},
		{"bad utf8", h("0e00000001 ff"), "not valid UTF-8"},
		{"principal version", h("05 20" + strings.Repeat("00", 20)), "address version 32 out of range"},
		{"contract name", h("06 1a" + strings.Repeat("00", 20) + "02 3161"), "bad contract name"},
		{"too deep", nest("0a", MaxClarityDepth, "03"), "nested deeper than 32"},
		{"too deep list", nest("0b00000001", MaxClarityDepth, "03"), "nested deeper than 32"},
		{"truncated some", h("0a"), "truncated Clarity type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := DecodeClarityValue(tt.in)
			if err == nil || !errors.Is(err, ErrMalformedClarityValue) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, %v; want ErrMalformedClarityValue containing %q", v, err, tt.want)
			}
		})
	}
	// Exactly MaxClarityDepth levels decode.
	if _, err := DecodeClarityValue(nest("0a", MaxClarityDepth-1, "03")); err != nil {
		t.Errorf("depth %d: %v", MaxClarityDepth, err)
	}
	// Unsorted tuple keys are accepted, as by the node, and keep their order.
	raw := h("0c00000002 0162 03 0161 04")
	v, err := DecodeClarityValue(raw)
	if err != nil || !bytes.Equal(SerializeClarityValue(v), raw) {
		t.Errorf("unsorted tuple: %v %v", v, err)
	}
}

// A serialisation may not span more than 2 MiB, even when every length is
// within its own limit.
func TestDecodeClaritySizeBound(t *testing.T) {
	item := make([]byte, 5+MaxClarityValueSize)
	item[0] = byte(ClarityBuffer)
	item[2] = 0x10 // length 0x00100000 = 1 MiB
	var b []byte
	b = append(b, byte(ClarityList), 0, 0, 0, 2)
	b = append(b, item...)
	b = append(b, item...)
	if _, err := DecodeClarityValue(b); err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("2 MiB + 15 bytes decoded: %v", err)
	}
	one := append([]byte{byte(ClarityList), 0, 0, 0, 1}, item...)
	if _, err := DecodeClarityValue(one); err != nil {
		t.Fatalf("1 MiB buffer: %v", err)
	}
}
