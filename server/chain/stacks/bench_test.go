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

// sendManyBenchEntries is a full batch: 200 recipients, every other one a
// contract, each with a 34-byte memo.
func sendManyBenchEntries(b *testing.B) []SendManyEntry {
	std, _ := ParseTestnetPrincipal(goldenRecipient)
	ctr, _ := ParseTestnetPrincipal(goldenRecipient + ".some-contract-name")
	entries := make([]SendManyEntry, SendManyMaxRecipients)
	for i := range entries {
		to := std
		if i%2 == 1 {
			to = ctr
		}
		entries[i] = SendManyEntry{To: to, Amount: uint64(1_000_000 + i), Memo: []byte("faucet drip 0123456789abcdefghijkl")}
	}
	return entries
}

// BenchmarkSendManySerialize builds the 200-recipient argument and
// serialises an already signed call.
func BenchmarkSendManySerialize(b *testing.B) {
	key, _ := ParsePrivateKey(goldenKey)
	entries := sendManyBenchEntries(b)
	tx, err := NewSendMany(SendManyParams{Recipients: entries, Nonce: 1, Fee: 10_000}, key)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := SendManyArgs(entries); err != nil {
			b.Fatal(err)
		}
		_ = tx.Serialize()
	}
	b.ReportMetric(float64(tx.EncodedLen()), "tx-bytes")
}

// BenchmarkSendManySign is NewSendMany end to end: validate, build, sign
// (which serialises twice for the sighash) and serialise.
func BenchmarkSendManySign(b *testing.B) {
	key, _ := ParsePrivateKey(goldenKey)
	entries := sendManyBenchEntries(b)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		tx, err := NewSendMany(SendManyParams{Recipients: entries, Nonce: uint64(i), Fee: 10_000}, key)
		if err != nil {
			b.Fatal(err)
		}
		_ = tx.Serialize()
	}
}

func BenchmarkSendManyDecode(b *testing.B) {
	key, _ := ParsePrivateKey(goldenKey)
	tx, err := NewSendMany(SendManyParams{Recipients: sendManyBenchEntries(b), Nonce: 1, Fee: 10_000}, key)
	if err != nil {
		b.Fatal(err)
	}
	raw := tx.Serialize()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeTransaction(raw); err != nil {
			b.Fatal(err)
		}
	}
}
