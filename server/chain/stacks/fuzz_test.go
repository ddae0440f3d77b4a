package stacks

import (
	"bytes"
	"encoding/hex"
	"testing"
)

// FuzzParsePrincipal: no input panics, and anything accepted re-encodes to a
// string that parses to the same principal.
func FuzzParsePrincipal(f *testing.F) {
	for _, s := range []string{
		goldenRecipient, goldenSender, goldenRecipient + ".contract", "SP000000000000000000002Q6VF78",
		"", "S", "ST", "sT000", "ST000000000000000000002AMW42H.a-b_c", "STOOOOIL", "S\xff\xfe",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePrincipal(s)
		if err != nil {
			return
		}
		again, err := ParsePrincipal(p.String())
		if err != nil || again != p {
			t.Fatalf("%q → %q → %v %v", s, p.String(), again, err)
		}
	})
}

// FuzzC32 checks C32Decode against C32Encode on arbitrary strings.
func FuzzC32(f *testing.F) {
	f.Add("0")
	f.Add("00A")
	f.Add("zzzz")
	f.Fuzz(func(t *testing.T, s string) {
		b, err := C32Decode(s)
		if err != nil {
			return
		}
		back, err := C32Decode(C32Encode(b))
		if err != nil || !bytes.Equal(back, b) {
			t.Fatalf("%q: %x → %q → %x", s, b, C32Encode(b), back)
		}
	})
}

// FuzzDecodeTransaction: no input panics, and whatever decodes re-encodes to
// exactly the input bytes.
func FuzzDecodeTransaction(f *testing.F) {
	raw, _ := hex.DecodeString(goldenTxRaw)
	f.Add(raw)
	key, _ := ParsePrivateKey(goldenKey[:64])
	p, _ := ParsePrincipal(goldenRecipient + ".c1")
	tx, _ := NewTokenTransfer(TransferParams{Recipient: p, Amount: 5, Fee: 300}, key)
	f.Add(tx.Serialize())
	f.Add([]byte{})
	f.Add([]byte{0x80})
	call, _ := hex.DecodeString(goldenCallTxRaw)
	f.Add(call)
	sip010, _ := hex.DecodeString(goldenSIP010TxRaw)
	f.Add(sip010)
	// A SIP-010 transfer with a memo and STX and fungible post-conditions of
	// every principal type, so mutations reach each branch of the decoder.
	asset, _ := ParseAssetID(goldenRecipient + ".tok::t<=")
	sender := Principal{Address: key.TestnetAddress()}
	args, _ := SIP010TransferArgs(sender, p, 1<<40, []byte("memo"))
	mixed, err := NewContractCall(ContractCallParams{
		Contract: asset.Contract, Function: SIP010TransferFunction, Args: args, Fee: 1,
		PostConditions: []PostCondition{
			PrincipalSendsExactlyFT(sender, asset, 1<<40),
			{Origin: true, Code: ConditionGt, Amount: 0, Asset: asset},
			{Principal: p, Code: ConditionLtEq, Amount: ^uint64(0), Asset: asset},
			OriginSendsExactly(7),
		},
	}, key)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(mixed.Serialize())
	f.Fuzz(func(t *testing.T, b []byte) {
		tx, err := DecodeTransaction(b)
		if err != nil {
			return
		}
		if !bytes.Equal(tx.Serialize(), b) {
			t.Fatalf("re-encoding differs:\n in %x\nout %x", b, tx.Serialize())
		}
		if tx.EncodedLen() != len(b) {
			t.Fatalf("EncodedLen %d != %d", tx.EncodedLen(), len(b))
		}
		_ = tx.Verify() // must not panic on arbitrary signatures
	})
}

// FuzzDecodeClarityValue: no input panics, whatever decodes re-encodes to
// exactly the input bytes with a matching ClarityLen, and passes validation.
func FuzzDecodeClarityValue(f *testing.F) {
	for _, s := range []string{
		"0100000000000000000000000000000001", "00ffffffffffffffffffffffffffffffff", "03", "04", "09", "0a03",
		"070d000000026869", "080e00000003e282ac", "0200000004deadbeef",
		"051ab52c45b1a7977204f17ac0b6f48306aea2dbb8e9",
		"061ab52c45b1a7977204f17ac0b6f48306aea2dbb8e90b6d792d636f6e7472616374",
		"0b000000030100000000000000000000000000000001090a04",
		"0c0000000201610301620100000000000000000000000000000002",
		"0c00000002016203016104", "0c00000002016103016104", "0c00000000", "0bffffffff", "",
	} {
		b, _ := hex.DecodeString(s)
		f.Add(b)
	}
	raw, _ := hex.DecodeString(goldenCallTxRaw)
	f.Add(raw[198:]) // the send-many list
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := DecodeClarityValue(b)
		if err != nil {
			return
		}
		if got := SerializeClarityValue(v); !bytes.Equal(got, b) {
			t.Fatalf("re-encoding differs:\n in %x\nout %x", b, got)
		}
		if v.ClarityLen() != len(b) {
			t.Fatalf("ClarityLen %d != %d", v.ClarityLen(), len(b))
		}
		if err := ValidateClarityValue(v); err != nil {
			t.Fatalf("decoded value fails validation: %v", err)
		}
	})
}

// FuzzParseAssetID: no input panics, and an accepted identifier renders to a
// string that parses to the same asset, validates, and survives the
// post-condition encoding and decoding.
func FuzzParseAssetID(f *testing.F) {
	for _, s := range []string{
		testToken, "SM3VDXK3WZZSA84XXFKAFAF15NNZX32CTSG82JFQ4.sbtc-token::sbtc-token",
		goldenRecipient + ".c::<=", goldenRecipient + ".c::a-_!?+<>=/*9", goldenRecipient + ".c::a::b",
		"", "::", "::t", goldenRecipient + ".c::", goldenRecipient + "::t", "st2tjrhdhmybq417hfb0bdx430tqa5pxrx6495g1v.c::t",
		"St2tjrhdhmybq417hfb0bdx430tqa5pxrx6495g1v.c::t", // normalised: String differs from the input
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAssetID(s)
		if err != nil {
			return
		}
		if err := a.Validate(); err != nil {
			t.Fatalf("%q parsed but fails Validate: %v", s, err)
		}
		again, err := ParseAssetID(a.String())
		if err != nil || again != a {
			t.Fatalf("%q → %q → %+v %v", s, a.String(), again, err)
		}
		enc := a.appendTo(nil)
		if len(enc) != a.encodedLen() {
			t.Fatalf("%q: encodedLen %d, encoded %d bytes", s, a.encodedLen(), len(enc))
		}
		d := decoder{buf: enc}
		if back := d.assetInfo(); d.err != nil || d.off != len(enc) || back != a {
			t.Fatalf("%q: encoded %x decodes to %+v (%v, %d of %d bytes)", s, enc, back, d.err, d.off, len(enc))
		}
	})
}
