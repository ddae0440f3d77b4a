package stacks

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

// A send-many call built with stacks.js 7.6.0 makeContractCall (goldenKey,
// nonce 7, fee 3000, testnet, post-condition mode Deny,
// Pc.principal(sender).willSendEq(1000001).ustx()).
const (
	goldenCallTxRaw = "80800000000400164247d6f2b425ac5771423ae6c80c754f7172b000000000000000070000000000000bb8" +
		"0001d55802ea247131f4790479074241a96a80bfbf4b8aa378d1ef401aa055250b3f3ecc01fe0a11b41603a30ce47d3c6d2301853a31d94fe8c68dda3f73e96020670" +
		"3020000000100021a164247d6f2b425ac5771423ae6c80c754f7172b00100000000000f4241" +
		"021ade1e92f0d8b34475a937485a1b1abf66a0dbf2ff0e73656e642d6d616e792d6d656d6f0973656e642d6d616e79000000010b00000002" +
		"0c00000003046d656d6f020000000666617563657402746f051ab52c45b1a7977204f17ac0b6f48306aea2dbb8e9047573747801000000000000000000000000000f4240" +
		"0c00000003046d656d6f020000000002746f061ab52c45b1a7977204f17ac0b6f48306aea2dbb8e90b6d792d636f6e747261637404757374780100000000000000000000000000000001"
	goldenCallTxID = "0x9e02e3088da376c0d7f1f3966bd5b856e7a430b06e09a3b8dd609625c1cf3bde"
)

func goldenSendMany(t testing.TB) []SendManyEntry {
	return []SendManyEntry{
		{To: mustPrincipal(t, goldenRecipient), Amount: 1_000_000, Memo: []byte("faucet")},
		{To: mustPrincipal(t, goldenRecipient+".my-contract"), Amount: 1},
	}
}

func TestGoldenSendMany(t *testing.T) {
	key, err := ParsePrivateKey(goldenKey)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := NewSendMany(SendManyParams{Recipients: goldenSendMany(t), Nonce: 7, Fee: 3000}, key)
	if err != nil {
		t.Fatal(err)
	}
	raw := tx.Serialize()
	if got := hex.EncodeToString(raw); got != goldenCallTxRaw {
		t.Fatalf("txRaw\n got %s\nwant %s", got, goldenCallTxRaw)
	}
	if got := tx.TxID().Hex0x(); got != goldenCallTxID {
		t.Errorf("txid %s, want %s", got, goldenCallTxID)
	}
	if tx.EncodedLen() != len(raw) {
		t.Errorf("EncodedLen %d, serialised %d", tx.EncodedLen(), len(raw))
	}
	if tx.PayloadType() != PayloadContractCall {
		t.Errorf("payload type %d", tx.PayloadType())
	}
	if err := tx.Verify(); err != nil {
		t.Fatal(err)
	}

	back, err := DecodeTransaction(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back.Serialize(), raw) {
		t.Fatal("re-encoding differs")
	}
	cc := back.ContractCall
	if cc == nil || cc.Contract.String() != SendManyMemoTestnet || cc.Function != "send-many" || len(cc.Args) != 1 {
		t.Fatalf("decoded call %+v", cc)
	}
	want := PrincipalSendsExactly(Principal{Address: key.TestnetAddress()}, 1_000_001)
	if back.PostConditionMode != PostConditionModeDeny || len(back.PostConditions) != 1 || back.PostConditions[0] != want {
		t.Errorf("post-conditions %v %+v", back.PostConditionMode, back.PostConditions)
	}
	list, ok := cc.Args[0].(List)
	if !ok || len(list) != 2 {
		t.Fatalf("argument %#v", cc.Args[0])
	}
	first := list[0].(Tuple)
	if to, _ := first.Get("to"); to != mustPrincipal(t, goldenRecipient) {
		t.Errorf("to = %v", to)
	}
	if ustx, _ := first.Get("ustx"); ustx != NewUInt(1_000_000) {
		t.Errorf("ustx = %v", ustx)
	}
	if memo, _ := first.Get("memo"); !bytes.Equal(memo.(Buffer), []byte("faucet")) {
		t.Errorf("memo = %v", memo)
	}
	if err := back.Verify(); err != nil {
		t.Fatal(err)
	}
	// Tampering with an argument breaks the signature.
	list[1].(Tuple)[2].Value = NewUInt(2)
	if err := back.Verify(); !errors.Is(err, ErrBadSignature) {
		t.Errorf("tampered amount: %v", err)
	}
}

// Post-condition encodings: origin (0x01), standard (0x02) and contract (0x03).
func TestPostConditionEncoding(t *testing.T) {
	p := mustPrincipal(t, goldenRecipient)
	c := mustPrincipal(t, goldenRecipient+".c")
	hash := "b52c45b1a7977204f17ac0b6f48306aea2dbb8e9"
	tests := []struct {
		pc   PostCondition
		want string
	}{
		{OriginSendsExactly(5), "00" + "01" + "01" + "0000000000000005"},
		{PrincipalSendsExactly(p, 256), "00" + "02" + "1a" + hash + "01" + "0000000000000100"},
		{PostCondition{Principal: c, Code: ConditionLtEq, Amount: 1}, "00" + "03" + "1a" + hash + "0163" + "05" + "0000000000000001"},
	}
	for _, tt := range tests {
		got := hex.EncodeToString(tt.pc.appendTo(nil))
		if got != tt.want || tt.pc.encodedLen() != len(got)/2 {
			t.Errorf("%+v:\n got %s\nwant %s", tt.pc, got, tt.want)
		}
	}
}

func TestContractCallRoundTrip(t *testing.T) {
	key, _ := ParsePrivateKey(goldenKey[:64]) // uncompressed
	contract, err := ParseContractID(goldenRecipient + ".my-contract")
	if err != nil {
		t.Fatal(err)
	}
	tu := mustTuple(t, TupleEntry{"k", StringASCII("v")}, TupleEntry{"n", NewInt(-5)})
	args := []ClarityValue{tu, List{None, Some(NewUInt(3))}, ResponseErr(Bool(false)), StringUTF8("héllo"), Buffer{1, 2}}
	tx, err := NewContractCall(ContractCallParams{
		Contract: contract, Function: "do-it!", Args: args, Nonce: 1, Fee: 2, ChainID: 0x87654321,
		PostConditionMode: PostConditionModeAllow,
		PostConditions: []PostCondition{
			OriginSendsExactly(1),
			{Principal: mustPrincipal(t, goldenSender), Code: ConditionGt, Amount: 9},
			{Principal: contract.Principal(), Code: ConditionLt, Amount: 10},
		},
	}, key)
	if err != nil {
		t.Fatal(err)
	}
	raw := tx.Serialize()
	if tx.EncodedLen() != len(raw) {
		t.Errorf("EncodedLen %d, serialised %d", tx.EncodedLen(), len(raw))
	}
	back, err := DecodeTransaction(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back.Serialize(), raw) || back.ChainID != 0x87654321 || back.PostConditionMode != PostConditionModeAllow || len(back.PostConditions) != 3 {
		t.Fatalf("round trip: %+v", back)
	}
	if err := back.Verify(); err != nil {
		t.Fatal(err)
	}
	// A contract call's token-transfer payload stays zero.
	if back.Payload != (TokenTransfer{}) {
		t.Errorf("payload %+v", back.Payload)
	}
}

func TestNewContractCallRejects(t *testing.T) {
	key, _ := ParsePrivateKey(goldenKey)
	contract, _ := ParseContractID(SendManyMemoTestnet)
	base := ContractCallParams{Contract: contract, Function: "f", Args: []ClarityValue{NewUInt(1)}}
	tests := []struct {
		name string
		mod  func(*ContractCallParams)
		want string
	}{
		{"function", func(p *ContractCallParams) { p.Function = "9f" }, "function name"},
		{"contract", func(p *ContractCallParams) { p.Contract.Name = "" }, "bad contract name"},
		{"nil arg", func(p *ContractCallParams) { p.Args = []ClarityValue{nil} }, "argument 0"},
		{"mode", func(p *ContractCallParams) { p.PostConditionMode = 3 }, "post-condition mode"},
		{"code", func(p *ContractCallParams) { p.PostConditions = []PostCondition{{Origin: true, Code: 6}} }, "post-condition 0"},
		{"pc principal", func(p *ContractCallParams) {
			p.PostConditions = []PostCondition{{Principal: Principal{Address: Address{Version: 40}}, Code: ConditionEq}}
		}, "post-condition principal"},
	}
	for _, tt := range tests {
		p := base
		tt.mod(&p)
		if _, err := NewContractCall(p, key); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
	if _, err := NewContractCall(base, nil); err == nil {
		t.Error("nil key accepted")
	}
}

func TestSendManyArgs(t *testing.T) {
	to := mustPrincipal(t, goldenRecipient)
	entries := make([]SendManyEntry, SendManyMaxRecipients+1)
	for i := range entries {
		entries[i] = SendManyEntry{To: to, Amount: uint64(i + 1)}
	}
	if _, err := SendManyArgs(entries); !errors.Is(err, ErrSendMany) {
		t.Errorf("201 recipients: %v", err)
	}
	if _, err := SendManyArgs(nil); !errors.Is(err, ErrSendMany) {
		t.Errorf("no recipients: %v", err)
	}
	args, err := SendManyArgs(entries[:SendManyMaxRecipients])
	if err != nil || len(args) != 1 || len(args[0].(List)) != SendManyMaxRecipients {
		t.Fatalf("200 recipients: %v", err)
	}
	long := []SendManyEntry{{To: to, Amount: 1, Memo: make([]byte, 35)}}
	if _, err := SendManyArgs(long); !errors.Is(err, ErrSendMany) || !strings.Contains(err.Error(), "memo is 35 bytes") {
		t.Errorf("35-byte memo: %v", err)
	}
	long[0].Memo = long[0].Memo[:34]
	if _, err := SendManyArgs(long); err != nil {
		t.Errorf("34-byte memo: %v", err)
	}
	bad := []SendManyEntry{{To: Principal{Address: Address{Version: 26}, ContractName: "-x"}, Amount: 1}}
	if _, err := SendManyArgs(bad); !errors.Is(err, ErrSendMany) {
		t.Errorf("bad principal: %v", err)
	}
	if _, err := SendManyTotal([]SendManyEntry{{Amount: ^uint64(0)}, {Amount: 1}}); !errors.Is(err, ErrSendMany) {
		t.Errorf("overflow: %v", err)
	}
	if n, err := SendManyTotal([]SendManyEntry{{Amount: ^uint64(0) - 1}, {Amount: 1}}); err != nil || n != ^uint64(0) {
		t.Errorf("u64 max total: %d %v", n, err)
	}
}

func TestNewSendManyRejects(t *testing.T) {
	key, _ := ParsePrivateKey(goldenKey)
	self := Principal{Address: key.TestnetAddress()}
	to := mustPrincipal(t, goldenRecipient)
	for name, rs := range map[string][]SendManyEntry{
		"zero amount": {{To: to, Amount: 0}},
		"to sender":   {{To: self, Amount: 1}},
		"overflow":    {{To: to, Amount: ^uint64(0)}, {To: to, Amount: 1}},
		"empty":       nil,
	} {
		if _, err := NewSendMany(SendManyParams{Recipients: rs}, key); !errors.Is(err, ErrSendMany) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// The sender's own contract is a different principal.
	if _, err := NewSendMany(SendManyParams{Recipients: []SendManyEntry{{To: Principal{Address: self.Address, ContractName: "c"}, Amount: 1}}}, key); err != nil {
		t.Errorf("sender's contract: %v", err)
	}
}

// A draft has the signed call's payload and length, for both key
// encodings, and is refused for what NewSendMany refuses.
func TestSendManyDraftMatchesTheSignedCall(t *testing.T) {
	compressed, _ := ParsePrivateKey(goldenKey)
	uncompressed, _ := ParsePrivateKey(goldenKey[:64])
	to := mustPrincipal(t, goldenRecipient)
	p := SendManyParams{Recipients: []SendManyEntry{{To: to, Amount: 5, Memo: []byte("m")}, {To: to, Amount: 7}}, Nonce: 9, Fee: 300}
	for _, key := range []*PrivateKey{compressed, uncompressed} {
		signed, err := NewSendMany(p, key)
		if err != nil {
			t.Fatal(err)
		}
		draft, err := SendManyDraft(p, key)
		if err != nil {
			t.Fatal(err)
		}
		if draft.EncodedLen() != signed.EncodedLen() || !bytes.Equal(draft.PayloadBytes(), signed.PayloadBytes()) {
			t.Errorf("compressed=%v: draft %d bytes, signed %d; payloads equal: %v", key.Compressed(),
				draft.EncodedLen(), signed.EncodedLen(), bytes.Equal(draft.PayloadBytes(), signed.PayloadBytes()))
		}
		if draft.Verify() == nil {
			t.Error("an unsigned draft verifies")
		}
	}
	if _, err := SendManyDraft(SendManyParams{Recipients: []SendManyEntry{{To: to}}}, compressed); !errors.Is(err, ErrSendMany) {
		t.Errorf("zero amount: %v", err)
	}
}

func TestParseContractID(t *testing.T) {
	c, err := ParseContractID(SendManyMemoTestnet)
	if err != nil || c.String() != SendManyMemoTestnet || c.Name != "send-many-memo" {
		t.Fatalf("%v %v", c, err)
	}
	for _, bad := range []string{goldenRecipient, goldenRecipient + ".", goldenRecipient + ".9a", "x.y"} {
		if _, err := ParseContractID(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestDecodeContractCallRejects(t *testing.T) {
	raw, _ := hex.DecodeString(goldenCallTxRaw)
	// Offsets: header 111 bytes, post-condition count 4, one standard
	// post-condition 32 (its code at 138), payload type at 147, address 148..168, contract
	// name length at 169 (14), function name length at 184 (9), argument
	// count at 194, the list at 198.
	mut := func(off int, b byte) []byte {
		c := bytes.Clone(raw)
		c[off] = b
		return c
	}
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"truncated", raw[:len(raw)-1], "truncated integer"},
		{"trailing", append(bytes.Clone(raw), 0), "1 trailing bytes"},
		{"pc principal type", mut(116, 0x04), "unknown post-condition principal type 0x04"},
		{"pc code", mut(138, 0x06), "unknown fungible condition code 0x06"},
		{"contract address version", mut(148, 0x20), "address version 32 out of range"},
		{"contract name", mut(170, '-'), "bad contract name"},
		{"function name", mut(185, '9'), "function name"},
		{"function name length", mut(184, 0), "function name length 0"},
		{"arg count", mut(197, 2), "truncated Clarity type"},
		{"arg type", mut(198, 0x10), "unknown Clarity type 0x10"},
		{"list length", mut(199, 0xff), "list length"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeTransaction(tt.in)
			if err == nil || !errors.Is(err, ErrMalformedTx) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want ErrMalformedTx containing %q", err, tt.want)
			}
		})
	}
}

// PayloadBytes is the tail of the serialisation that starts at the payload
// type byte: what POST /v2/fees/transaction prices.
func TestPayloadBytes(t *testing.T) {
	key, err := GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	to, _ := GeneratePrivateKey()
	transfer, err := NewTokenTransfer(TransferParams{Recipient: Principal{Address: to.TestnetAddress(), ContractName: "a-contract"}, Amount: 7, Fee: 180}, key)
	if err != nil {
		t.Fatal(err)
	}
	many, err := NewSendMany(SendManyParams{Recipients: []SendManyEntry{
		{To: Principal{Address: to.TestnetAddress()}, Amount: 1, Memo: []byte("m")},
		{To: Principal{Address: to.TestnetAddress(), ContractName: "c"}, Amount: 2},
	}, Fee: 1000}, key)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		tx       *Transaction
		typeByte byte
		overhead int // everything before the payload
	}{
		{transfer, PayloadTokenTransfer, 115},
		{many, PayloadContractCall, 115 + many.PostConditions[0].encodedLen()},
	} {
		raw, p := c.tx.Serialize(), c.tx.PayloadBytes()
		if p[0] != c.typeByte || len(p) != len(raw)-c.overhead || !bytes.Equal(p, raw[c.overhead:]) {
			t.Errorf("payload type %#x len %d of a %d-byte tx, want type %#x after %d bytes", p[0], len(p), len(raw), c.typeByte, c.overhead)
		}
	}
}
