package stacks

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"strconv"
	"testing"
)

// vector is one record written by hack/conformance (stacks.js).
type vector struct {
	SenderKey     string `json:"senderKey"`
	Recipient     string `json:"recipient"`
	Amount        string `json:"amount"`
	Nonce         string `json:"nonce"`
	Fee           string `json:"fee"`
	Memo          string `json:"memo"`
	ChainID       uint32 `json:"chainId"`
	TxRaw         string `json:"txRaw"`
	TxID          string `json:"txId"`
	SenderAddress string `json:"senderAddress"`
}

// defaultVectors is a small stacks.js-generated set kept in the repository so
// a plain `go test` checks conformance without npm; `make test` points
// STACKS_VECTORS at a fresh set of ≥1,000 every run.
const defaultVectors = "testdata/stacksjs-vectors.json"

func TestConformance(t *testing.T) {
	path := os.Getenv("STACKS_VECTORS")
	if path == "" {
		path = defaultVectors
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read vectors: %v", err)
	}
	var vectors []vector
	if err := json.Unmarshal(data, &vectors); err != nil {
		t.Fatalf("parse vectors %s: %v", path, err)
	}
	if len(vectors) == 0 {
		t.Fatalf("%s holds no vectors; an empty set proves nothing", path)
	}
	mismatches := 0
	for i, v := range vectors {
		if msg := checkVector(v); msg != "" {
			mismatches++
			if mismatches <= 20 {
				t.Errorf("vector %d (recipient %s): %s", i, v.Recipient, msg)
			}
		}
	}
	t.Logf("conformance: %d stacks.js vectors from %s, %d mismatches", len(vectors), path, mismatches)
	if mismatches > 0 {
		t.Fatalf("%d of %d vectors differ from stacks.js", mismatches, len(vectors))
	}
}

// checkVector returns "" when every property holds, else what failed.
func checkVector(v vector) string {
	key, err := ParsePrivateKey(v.SenderKey)
	if err != nil {
		return "key: " + err.Error()
	}
	if got := key.TestnetAddress().String(); got != v.SenderAddress {
		return "sender address " + got + ", want " + v.SenderAddress
	}
	rcpt, err := ParsePrincipal(v.Recipient)
	if err != nil {
		return "recipient: " + err.Error()
	}
	memo, err := NewMemo(v.Memo)
	if err != nil {
		return "memo: " + err.Error()
	}
	var nums [3]uint64
	for i, s := range []string{v.Amount, v.Nonce, v.Fee} {
		if nums[i], err = strconv.ParseUint(s, 10, 64); err != nil {
			return "number: " + err.Error()
		}
	}
	tx, err := NewTokenTransfer(TransferParams{
		Recipient: rcpt, Amount: nums[0], Nonce: nums[1], Fee: nums[2], Memo: memo, ChainID: v.ChainID,
	}, key)
	if err != nil {
		return "sign: " + err.Error()
	}
	raw := tx.Serialize()
	if got := hex.EncodeToString(raw); got != v.TxRaw {
		return "txRaw\n got " + got + "\nwant " + v.TxRaw
	}
	if got := tx.TxID().Hex0x(); got != v.TxID {
		return "txId " + got + ", want " + v.TxID
	}
	want, err := hex.DecodeString(v.TxRaw)
	if err != nil {
		return "txRaw hex: " + err.Error()
	}
	decoded, err := DecodeTransaction(want)
	if err != nil {
		return "decode: " + err.Error()
	}
	if !bytes.Equal(decoded.Serialize(), want) {
		return "decode/encode round trip differs"
	}
	if err := decoded.Verify(); err != nil {
		return "verify: " + err.Error()
	}
	if decoded.SenderAddress().String() != v.SenderAddress {
		return "decoded sender " + decoded.SenderAddress().String()
	}
	return ""
}
