package stacks

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
)

// vector is one record written by hack/conformance (stacks.js): a token
// transfer, with Kind "contract-call" a send-many contract call, with Kind
// "sip010-transfer" a SIP-010 token transfer.
type vector struct {
	Kind          string `json:"kind"` // "", "contract-call" or "sip010-transfer"
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

	// Contract calls only.
	Contract    string `json:"contract"`
	Function    string `json:"function"`
	PcPrincipal string `json:"pcPrincipal"` // "sender" or "origin"
	PcAmount    string `json:"pcAmount"`
	Recipients  []struct {
		To   string `json:"to"`
		Ustx string `json:"ustx"`
		Memo string `json:"memo"` // hex
	} `json:"recipients"`

	// SIP-010 transfers only (with Recipient and Amount above).
	Asset          string          `json:"asset"`   // ADDR.contract::token
	MemoHex        *string         `json:"memoHex"` // nil: none
	PostConditions []vectorFTCheck `json:"postConditions"`
}

// vectorFTCheck is one post-condition of a SIP-010 record.
type vectorFTCheck struct {
	Principal string  `json:"principal"` // "sender", "origin" or a principal
	Code      string  `json:"code"`      // stacks.js comparator: eq, gt, gte, lt, lte
	Amount    string  `json:"amount"`
	Asset     *string `json:"asset"` // nil: STX
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
	mismatches, calls, tokens, faucetShaped := 0, 0, 0, 0
	for i, v := range vectors {
		var msg, what string
		switch v.Kind {
		case "":
			msg, what = checkVector(v), "recipient "+v.Recipient
		case "contract-call":
			calls++
			msg, what = checkContractCallVector(v), fmt.Sprintf("contract call, %d recipients", len(v.Recipients))
		case "sip010-transfer":
			tokens++
			var viaBuilder bool
			msg, viaBuilder = checkSIP010Vector(v)
			if viaBuilder {
				faucetShaped++
			}
			what = fmt.Sprintf("SIP-010 transfer of %s, %d post-conditions", truncate(v.Asset), len(v.PostConditions))
		default:
			msg, what = "unknown kind "+v.Kind, v.Kind
		}
		if msg != "" {
			mismatches++
			if mismatches <= 20 {
				t.Errorf("vector %d (%s): %s", i, what, msg)
			}
		}
	}
	t.Logf("conformance: %d stacks.js vectors (%d token transfers, %d send-many contract calls, %d SIP-010 transfers of which %d via NewSIP010Transfer) from %s, %d mismatches",
		len(vectors), len(vectors)-calls-tokens, calls, tokens, faucetShaped, path, mismatches)
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

// checkContractCallVector rebuilds a send-many call from the record's inputs
// and compares bytes and txid, then checks the decode round trip.
func checkContractCallVector(v vector) string {
	key, err := ParsePrivateKey(v.SenderKey)
	if err != nil {
		return "key: " + err.Error()
	}
	sender := key.TestnetAddress()
	if sender.String() != v.SenderAddress {
		return "sender address " + sender.String() + ", want " + v.SenderAddress
	}
	contract, err := ParseContractID(v.Contract)
	if err != nil {
		return "contract: " + err.Error()
	}
	var nonce, fee, pcAmount uint64
	for _, f := range []struct {
		s   string
		dst *uint64
	}{{v.Nonce, &nonce}, {v.Fee, &fee}, {v.PcAmount, &pcAmount}} {
		if *f.dst, err = strconv.ParseUint(f.s, 10, 64); err != nil {
			return "number: " + err.Error()
		}
	}
	entries := make([]SendManyEntry, len(v.Recipients))
	for i, r := range v.Recipients {
		if entries[i].To, err = ParsePrincipal(r.To); err != nil {
			return fmt.Sprintf("recipient %d: %v", i, err)
		}
		if entries[i].Amount, err = strconv.ParseUint(r.Ustx, 10, 64); err != nil {
			return fmt.Sprintf("recipient %d amount: %v", i, err)
		}
		if entries[i].Memo, err = hex.DecodeString(r.Memo); err != nil {
			return fmt.Sprintf("recipient %d memo: %v", i, err)
		}
	}
	args, err := SendManyArgs(entries)
	if err != nil {
		return "send-many args: " + err.Error()
	}
	total, err := SendManyTotal(entries)
	if err != nil || total != pcAmount {
		return fmt.Sprintf("total %d (%v), want %d", total, err, pcAmount)
	}
	pc := PrincipalSendsExactly(Principal{Address: sender}, total)
	if v.PcPrincipal == "origin" {
		pc = OriginSendsExactly(total)
	}
	tx, err := NewContractCall(ContractCallParams{
		Contract: contract, Function: v.Function, Args: args, Nonce: nonce, Fee: fee, ChainID: v.ChainID,
		PostConditionMode: PostConditionModeDeny, PostConditions: []PostCondition{pc},
	}, key)
	if err != nil {
		return "sign: " + err.Error()
	}
	raw := tx.Serialize()
	if len(raw) != tx.EncodedLen() {
		return fmt.Sprintf("EncodedLen %d, serialised %d bytes", tx.EncodedLen(), len(raw))
	}
	if got := hex.EncodeToString(raw); got != v.TxRaw {
		return "txRaw\n got " + got + "\nwant " + v.TxRaw
	}
	if got := tx.TxID().Hex0x(); got != v.TxID {
		return "txId " + got + ", want " + v.TxID
	}
	decoded, err := DecodeTransaction(raw)
	if err != nil {
		return "decode: " + err.Error()
	}
	if !bytes.Equal(decoded.Serialize(), raw) {
		return "decode/encode round trip differs"
	}
	if decoded.ContractCall == nil || decoded.ContractCall.Contract != contract || decoded.ContractCall.Function != v.Function ||
		len(decoded.ContractCall.Args) != 1 || len(decoded.PostConditions) != 1 || decoded.PostConditions[0] != pc {
		return fmt.Sprintf("decoded fields differ: %+v", decoded.ContractCall)
	}
	if err := decoded.Verify(); err != nil {
		return "verify: " + err.Error()
	}
	return ""
}

// ftCodes maps stacks.js comparator names to condition codes.
var ftCodes = map[string]ConditionCode{
	"eq": ConditionEq, "gt": ConditionGt, "gte": ConditionGtEq, "lt": ConditionLt, "lte": ConditionLtEq,
}

// checkSIP010Vector rebuilds a SIP-010 transfer from the record's inputs:
// with NewSIP010Transfer when its one post-condition is the faucet's own
// (the sender sends exactly the amount of the token), else with
// NewContractCall and the record's post-conditions. It compares bytes, txid
// and sender, then decodes the stacks.js bytes and checks every field.
// viaBuilder reports which builder was used.
func checkSIP010Vector(v vector) (msg string, viaBuilder bool) {
	key, err := ParsePrivateKey(v.SenderKey)
	if err != nil {
		return "key: " + err.Error(), false
	}
	sender := Principal{Address: key.TestnetAddress()}
	if sender.String() != v.SenderAddress {
		return "sender address " + sender.String() + ", want " + v.SenderAddress, false
	}
	asset, err := ParseAssetID(v.Asset)
	if err != nil {
		return "asset: " + err.Error(), false
	}
	if asset.String() != v.Asset {
		return "asset renders as " + asset.String(), false
	}
	recipient, err := ParsePrincipal(v.Recipient)
	if err != nil {
		return "recipient: " + err.Error(), false
	}
	var nonce, fee, amount uint64
	for _, f := range []struct {
		s   string
		dst *uint64
	}{{v.Nonce, &nonce}, {v.Fee, &fee}, {v.Amount, &amount}} {
		if *f.dst, err = strconv.ParseUint(f.s, 10, 64); err != nil {
			return "number: " + err.Error(), false
		}
	}
	var memo []byte
	if v.MemoHex != nil {
		if memo, err = hex.DecodeString(*v.MemoHex); err != nil {
			return "memo: " + err.Error(), false
		}
		if memo == nil {
			memo = []byte{} // (some 0x), not none
		}
	}
	pcs := make([]PostCondition, len(v.PostConditions))
	for i, r := range v.PostConditions {
		pc := &pcs[i]
		switch r.Principal {
		case "origin":
			pc.Origin = true
		case "sender":
			pc.Principal = sender
		default:
			if pc.Principal, err = ParsePrincipal(r.Principal); err != nil {
				return fmt.Sprintf("post-condition %d principal: %v", i, err), false
			}
		}
		var ok bool
		if pc.Code, ok = ftCodes[r.Code]; !ok {
			return fmt.Sprintf("post-condition %d: unknown code %q", i, r.Code), false
		}
		if pc.Amount, err = strconv.ParseUint(r.Amount, 10, 64); err != nil {
			return fmt.Sprintf("post-condition %d amount: %v", i, err), false
		}
		if r.Asset != nil {
			if pc.Asset, err = ParseAssetID(*r.Asset); err != nil {
				return fmt.Sprintf("post-condition %d asset: %v", i, err), false
			}
		}
		if pc.IsFungible() != (r.Asset != nil) {
			return fmt.Sprintf("post-condition %d: IsFungible %v", i, pc.IsFungible()), false
		}
	}

	var tx *Transaction
	viaBuilder = len(pcs) == 1 && pcs[0] == PrincipalSendsExactlyFT(sender, asset, amount)
	if viaBuilder {
		tx, err = NewSIP010Transfer(SIP010TransferParams{
			Asset: asset, Recipient: recipient, Amount: amount, Memo: memo, Nonce: nonce, Fee: fee, ChainID: v.ChainID,
		}, key)
	} else {
		var args []ClarityValue
		if args, err = SIP010TransferArgs(sender, recipient, amount, memo); err == nil {
			tx, err = NewContractCall(ContractCallParams{
				Contract: asset.Contract, Function: SIP010TransferFunction, Args: args, Nonce: nonce, Fee: fee,
				ChainID: v.ChainID, PostConditionMode: PostConditionModeDeny, PostConditions: pcs,
			}, key)
		}
	}
	if err != nil {
		return "build: " + err.Error(), viaBuilder
	}
	raw := tx.Serialize()
	if len(raw) != tx.EncodedLen() {
		return fmt.Sprintf("EncodedLen %d, serialised %d bytes", tx.EncodedLen(), len(raw)), viaBuilder
	}
	if got := hex.EncodeToString(raw); got != v.TxRaw {
		return "txRaw\n got " + got + "\nwant " + v.TxRaw, viaBuilder
	}
	if got := tx.TxID().Hex0x(); got != v.TxID {
		return "txId " + got + ", want " + v.TxID, viaBuilder
	}

	// The stacks.js bytes, decoded on their own.
	want, err := hex.DecodeString(v.TxRaw)
	if err != nil {
		return "txRaw hex: " + err.Error(), viaBuilder
	}
	decoded, err := DecodeTransaction(want)
	if err != nil {
		return "decode: " + err.Error(), viaBuilder
	}
	if !bytes.Equal(decoded.Serialize(), want) {
		return "decode/encode round trip differs", viaBuilder
	}
	if decoded.SenderAddress().String() != v.SenderAddress {
		return "decoded sender " + decoded.SenderAddress().String(), viaBuilder
	}
	if decoded.PostConditionMode != PostConditionModeDeny || !slices.Equal(decoded.PostConditions, pcs) {
		return fmt.Sprintf("decoded post-conditions %#x %+v, want %+v", decoded.PostConditionMode, decoded.PostConditions, pcs), viaBuilder
	}
	got, ok := ParseSIP010Transfer(decoded.ContractCall)
	if !ok {
		return fmt.Sprintf("ParseSIP010Transfer refused %+v", decoded.ContractCall), viaBuilder
	}
	if got.Contract != asset.Contract || got.Amount != amount || got.Sender != sender || got.Recipient != recipient ||
		!bytes.Equal(got.Memo, memo) || (got.Memo == nil) != (memo == nil) {
		return fmt.Sprintf("ParseSIP010Transfer %+v", got), viaBuilder
	}
	if err := decoded.Verify(); err != nil {
		return "verify: " + err.Error(), viaBuilder
	}
	return "", viaBuilder
}
