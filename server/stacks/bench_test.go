package stacks

import (
	"encoding/hex"
	"testing"
)

func BenchmarkSignSerialize(b *testing.B) {
	key, _ := ParsePrivateKey(goldenKey)
	rcpt, _ := ParseTestnetPrincipal(goldenRecipient)
	memo, _ := NewMemo("faucet")
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		tx, err := NewTokenTransfer(TransferParams{Recipient: rcpt, Amount: 500_000_000, Nonce: uint64(i), Fee: 180, Memo: memo}, key)
		if err != nil {
			b.Fatal(err)
		}
		_ = tx.Serialize()
	}
}

func BenchmarkDecodeVerify(b *testing.B) {
	raw, _ := hex.DecodeString(goldenTxRaw)
	b.ReportAllocs()
	for b.Loop() {
		tx, err := DecodeTransaction(raw)
		if err != nil {
			b.Fatal(err)
		}
		if err := tx.Verify(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkC32AddressEncode(b *testing.B) {
	a, _ := ParseAddress(goldenRecipient)
	b.ReportAllocs()
	for b.Loop() {
		_ = a.String()
	}
}

func BenchmarkC32AddressDecode(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseAddress(goldenRecipient); err != nil {
			b.Fatal(err)
		}
	}
}
