package stacks

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

// testToken is a testnet SIP-010 asset identifier (sBTC's) for the vectors.
const testToken = "ST1F7QA2MDF17S807EPA36TSS8AMEFY4KA9TVGWXT.sbtc-token::sbtc-token"

// An sBTC transfer built with stacks.js 7.6.0 makeContractCall (goldenKey,
// 100000 of testToken to goldenRecipient, no memo, nonce 12, fee 2500,
// Pc.principal(sender).willSendEq(100000).ft(…)); the same as GOLDEN_SIP010
// in hack/conformance/check-golden.mjs.
const (
	goldenSIP010TxRaw = "80800000000400164247d6f2b425ac5771423ae6c80c754f7172b0000000000000000c00000000000009c4" +
		"0000fe38c9f5e5cff848b10adc5c7fae12d43cd38b27ab5d4f6b4e4cbd72b7fe4dee1df952c61bcf73402568a1000db7e54f4a2dee53c4717a6aed9d814ceff2e1b8" +
		"030200000001" +
		"01021a164247d6f2b425ac5771423ae6c80c754f7172b01a5e7ba8546bc27ca0077594336b3942a8e7f893520a736274632d746f6b656e0a736274632d746f6b656e0100000000000186a0" +
		"021a5e7ba8546bc27ca0077594336b3942a8e7f893520a736274632d746f6b656e087472616e73666572000000040100000000000000000000000000" +
		"0186a0051a164247d6f2b425ac5771423ae6c80c754f7172b0051ab52c45b1a7977204f17ac0b6f48306aea2dbb8e909"
	goldenSIP010TxID = "0x85f6a4c77aa7db84e13bc7311e500f321449b6b5767e890a2d3a962adf8a1684"
)

func mustAsset(t testing.TB, s string) AssetInfo {
	t.Helper()
	a, err := ParseAssetID(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestGoldenSIP010Transfer(t *testing.T) {
	key, err := ParsePrivateKey(goldenKey)
	if err != nil {
		t.Fatal(err)
	}
	sbtc := mustAsset(t, testToken)
	tx, err := NewSIP010Transfer(SIP010TransferParams{
		Asset: sbtc, Recipient: mustPrincipal(t, goldenRecipient), Amount: 100_000, Nonce: 12, Fee: 2500,
	}, key)
	if err != nil {
		t.Fatal(err)
	}
	raw := tx.Serialize()
	if got := hex.EncodeToString(raw); got != goldenSIP010TxRaw {
		t.Fatalf("txRaw\n got %s\nwant %s", got, goldenSIP010TxRaw)
	}
	if got := tx.TxID().Hex0x(); got != goldenSIP010TxID {
		t.Errorf("txid %s, want %s", got, goldenSIP010TxID)
	}
	if tx.EncodedLen() != len(raw) {
		t.Errorf("EncodedLen %d, serialised %d", tx.EncodedLen(), len(raw))
	}
	if tx.SenderAddress().String() != goldenSender {
		t.Errorf("sender %s", tx.SenderAddress())
	}

	back, err := DecodeTransaction(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back.Serialize(), raw) {
		t.Fatal("re-encoding differs")
	}
	sender := Principal{Address: key.TestnetAddress()}
	want := PrincipalSendsExactlyFT(sender, sbtc, 100_000)
	if back.PostConditionMode != PostConditionModeDeny || len(back.PostConditions) != 1 || back.PostConditions[0] != want {
		t.Fatalf("post-conditions %#x %+v", back.PostConditionMode, back.PostConditions)
	}
	if !back.PostConditions[0].IsFungible() || back.PostConditions[0].Asset.String() != testToken {
		t.Errorf("post-condition asset %v", back.PostConditions[0].Asset)
	}
	got, ok := ParseSIP010Transfer(back.ContractCall)
	if !ok {
		t.Fatalf("not a SIP-010 transfer: %+v", back.ContractCall)
	}
	if got.Contract != sbtc.Contract || got.Amount != 100_000 || got.Sender != sender ||
		got.Recipient != mustPrincipal(t, goldenRecipient) || got.Memo != nil {
		t.Errorf("parsed %+v", got)
	}
	if err := back.Verify(); err != nil {
		t.Fatal(err)
	}
	// The post-condition is signed too.
	back.PostConditions[0].Amount++
	if err := back.Verify(); !errors.Is(err, ErrBadSignature) {
		t.Errorf("tampered post-condition: %v", err)
	}
}

// The fungible post-condition encoding, field by field, for each principal
// type.
func TestFungiblePostConditionEncoding(t *testing.T) {
	p := mustPrincipal(t, goldenRecipient)
	c := mustPrincipal(t, goldenRecipient+".c")
	asset := mustAsset(t, goldenSender+".tok::t<=")
	hash := "b52c45b1a7977204f17ac0b6f48306aea2dbb8e9"
	assetHex := "1a" + "164247d6f2b425ac5771423ae6c80c754f7172b0" + "03746f6b" + "03743c3d"
	tests := []struct {
		pc   PostCondition
		want string
	}{
		{PostCondition{Origin: true, Code: ConditionGt, Amount: 5, Asset: asset}, "01" + "01" + assetHex + "02" + "0000000000000005"},
		{PrincipalSendsExactlyFT(p, asset, 256), "01" + "02" + "1a" + hash + assetHex + "01" + "0000000000000100"},
		{PostCondition{Principal: c, Code: ConditionLtEq, Amount: ^uint64(0), Asset: asset},
			"01" + "03" + "1a" + hash + "0163" + assetHex + "05" + "ffffffffffffffff"},
	}
	for _, tt := range tests {
		got := hex.EncodeToString(tt.pc.appendTo(nil))
		if got != tt.want || tt.pc.encodedLen() != len(got)/2 {
			t.Errorf("%+v:\n got %s (encodedLen %d)\nwant %s", tt.pc, got, tt.pc.encodedLen(), tt.want)
		}
		if !tt.pc.IsFungible() {
			t.Errorf("%+v: not fungible", tt.pc)
		}
	}
	if (PostCondition{Origin: true, Code: ConditionEq}).IsFungible() {
		t.Error("STX post-condition reported fungible")
	}
}

// An asset identifier only names a token, so ParseAssetID accepts a deployer
// on any network; which network a token must live on is the caller's rule.
func TestParseAssetID(t *testing.T) {
	a, err := ParseAssetID(testToken)
	if err != nil {
		t.Fatal(err)
	}
	if a.Contract.String() != "ST1F7QA2MDF17S807EPA36TSS8AMEFY4KA9TVGWXT.sbtc-token" || a.Name != "sbtc-token" ||
		a.Contract.Address.Version != AddressVersionTestnetSingleSig || a.IsZero() {
		t.Errorf("sBTC: %+v", a)
	}
	// Today's testnet sBTC has a testnet multisig (SN, version 21) deployer.
	sn := mustAsset(t, "SN3VMHXEN64ZZF71JQ5VESXDWTR301XTTXGF4J8F1.sbtc-token::sbtc-token")
	if sn.Contract.Address.Version != AddressVersionTestnetMultiSig || !sn.Contract.Address.IsTestnet() {
		t.Errorf("SN deployer read as version %d", sn.Contract.Address.Version)
	}
	if _, err := ParseTestnetPrincipal(sn.Contract.String()); err != nil {
		t.Errorf("%s is no testnet principal: %v", sn.Contract, err)
	}
	for _, s := range []string{
		testToken,
		"SM3VDXK3WZZSA84XXFKAFAF15NNZX32CTSG82JFQ4.sbtc-token::sbtc-token", // mainnet deployer
		goldenRecipient + ".a::b",
		goldenRecipient + "." + strings.Repeat("c", 40) + "::" + "T" + strings.Repeat("-", 127),
		goldenRecipient + ".c::a-_!?+<>=/*09",
		goldenRecipient + ".c::<=",
		goldenRecipient + ".c::*",
	} {
		a, err := ParseAssetID(s)
		if err != nil {
			t.Errorf("%q: %v", s, err)
			continue
		}
		if a.String() != s {
			t.Errorf("%q renders as %q", s, a.String())
		}
		if err := a.Validate(); err != nil {
			t.Errorf("%q: parsed asset fails Validate: %v", s, err)
		}
	}
	if a := mustAsset(t, "SM3VDXK3WZZSA84XXFKAFAF15NNZX32CTSG82JFQ4.sbtc-token::sbtc-token"); !a.Contract.Address.IsMainnet() {
		t.Errorf("mainnet deployer read as version %d", a.Contract.Address.Version)
	}

	for _, tt := range []struct {
		in, want string
	}{
		{"", "want ADDR.contract::token"},
		{"::", "too short"},
		{goldenRecipient + ".sbtc-token", "want ADDR.contract::token"},
		{goldenRecipient + ".sbtc-token:sbtc", "want ADDR.contract::token"},
		{"::sbtc-token", "too short"},
		{goldenRecipient + "::t", `missing ".name"`},
		{goldenRecipient + ".::t", "length 0"},
		{goldenRecipient + ".9c::t", "must start with a letter"},
		{goldenRecipient + "." + strings.Repeat("c", 41) + "::t", "length 41"},
		{goldenRecipient + ".c::", "token name"},
		{goldenRecipient + ".c::9t", "must start with a letter"},
		{goldenRecipient + ".c::t.u", `character '.' not allowed`},
		{goldenRecipient + ".c::a::b", `character ':' not allowed`},
		{goldenRecipient + ".c::t u", `character ' ' not allowed`},
		{goldenRecipient + ".c::" + strings.Repeat("t", 129), "length 129"},
		{goldenRecipient + ".c::<<", "must start with a letter"}, // only <= and >= are longer operator names
		{"SX2TJRHDHMYBQ417HFB0BDX430TQA5PXRX6495G1V.c::t", "address"},
	} {
		_, err := ParseAssetID(tt.in)
		if !errors.Is(err, ErrBadAssetID) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want ErrBadAssetID containing %q", tt.in, err, tt.want)
		}
	}
	if (AssetInfo{}).Validate() == nil {
		t.Error("zero AssetInfo validates")
	}
	bad := AssetInfo{Contract: ContractID{Address: Address{Version: 32}, Name: "c"}, Name: "t"}
	if err := bad.Validate(); !errors.Is(err, ErrBadAssetID) || !strings.Contains(err.Error(), "version 32") {
		t.Errorf("version 32: %v", err)
	}
}

func TestNewSIP010Transfer(t *testing.T) {
	key, _ := ParsePrivateKey(goldenKey)
	sbtc := mustAsset(t, testToken)
	to := mustPrincipal(t, goldenRecipient)
	base := SIP010TransferParams{Asset: sbtc, Recipient: to, Amount: 1, Fee: 300}
	build := func(mod func(*SIP010TransferParams)) (*Transaction, error) {
		p := base
		mod(&p)
		return NewSIP010Transfer(p, key)
	}

	// Refusals: what the contract would refuse, or what cannot be encoded.
	self := Principal{Address: key.TestnetAddress()}
	for _, tt := range []struct {
		name string
		mod  func(*SIP010TransferParams)
		is   error
		want string
	}{
		{"zero amount", func(p *SIP010TransferParams) { p.Amount = 0 }, ErrTokenTransfer, "amount is 0"},
		{"to sender", func(p *SIP010TransferParams) { p.Recipient = self }, ErrTokenTransfer, "recipient is the sender"},
		{"long memo", func(p *SIP010TransferParams) { p.Memo = make([]byte, 35) }, ErrTokenTransfer, "memo is 35 bytes, at most 34"},
		{"bad recipient", func(p *SIP010TransferParams) { p.Recipient.ContractName = "-x" }, ErrTokenTransfer, "recipient"},
		{"no asset", func(p *SIP010TransferParams) { p.Asset = AssetInfo{} }, ErrBadAssetID, "token transfer"},
		{"bad token name", func(p *SIP010TransferParams) { p.Asset.Name = "9" }, ErrBadAssetID, "token name"},
	} {
		if _, err := build(tt.mod); !errors.Is(err, tt.is) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %v containing %q", tt.name, err, tt.is, tt.want)
		}
	}
	if _, err := NewSIP010Transfer(base, nil); err == nil || !strings.Contains(err.Error(), "no key") {
		t.Errorf("nil key: %v", err)
	}

	// Accepted: the sender's own contract (another principal), a 34-byte
	// memo, u64 max, another chain id.
	for name, mod := range map[string]func(*SIP010TransferParams){
		"sender's contract": func(p *SIP010TransferParams) { p.Recipient = Principal{Address: self.Address, ContractName: "vault"} },
		"34-byte memo":      func(p *SIP010TransferParams) { p.Memo = bytes.Repeat([]byte{0xff}, 34) },
		"u64 max":           func(p *SIP010TransferParams) { p.Amount = ^uint64(0) },
		"chain id":          func(p *SIP010TransferParams) { p.ChainID = 0x87654321 },
	} {
		tx, err := build(mod)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if err := tx.Verify(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}

	// A nil memo sends none (0x09); an empty one sends (some 0x) (0a 02 00000000).
	for _, tt := range []struct {
		memo []byte
		tail string
	}{
		{nil, "09"},
		{[]byte{}, "0a0200000000"},
		{[]byte("hi"), "0a02000000026869"},
	} {
		tx, err := build(func(p *SIP010TransferParams) { p.Memo = tt.memo })
		if err != nil {
			t.Fatal(err)
		}
		if got := hex.EncodeToString(tx.Serialize()); !strings.HasSuffix(got, tt.tail) {
			t.Errorf("memo %q: ends %s, want …%s", tt.memo, got[len(got)-len(tt.tail):], tt.tail)
		}
		if tx.ChainID != ChainIDTestnet || tx.Version != TxVersionTestnet {
			t.Errorf("chain %#x version %#x", tx.ChainID, tx.Version)
		}
	}
}

func TestParseSIP010Transfer(t *testing.T) {
	key, _ := ParsePrivateKey(goldenKey)
	sender := Principal{Address: key.TestnetAddress()}
	to := mustPrincipal(t, goldenRecipient+".vault")
	asset := mustAsset(t, goldenRecipient+".my-token::tok")

	// Round trip through the wire, memo none, empty and full.
	for _, memo := range [][]byte{nil, {}, bytes.Repeat([]byte{7}, 34)} {
		tx, err := NewSIP010Transfer(SIP010TransferParams{Asset: asset, Recipient: to, Amount: 1 << 63, Memo: memo}, key)
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeTransaction(tx.Serialize())
		if err != nil {
			t.Fatal(err)
		}
		got, ok := ParseSIP010Transfer(back.ContractCall)
		if !ok || got.Contract != asset.Contract || got.Amount != 1<<63 || got.Sender != sender || got.Recipient != to ||
			!bytes.Equal(got.Memo, memo) || (got.Memo == nil) != (memo == nil) {
			t.Errorf("memo %x: %+v %v", memo, got, ok)
		}
	}

	good := func() *ContractCall {
		return &ContractCall{Contract: asset.Contract, Function: "transfer",
			Args: []ClarityValue{NewUInt(5), sender, to, Some(Buffer("m"))}}
	}
	if got, ok := ParseSIP010Transfer(good()); !ok || got.Amount != 5 || string(got.Memo) != "m" {
		t.Fatalf("good call: %+v %v", got, ok)
	}
	for _, tt := range []struct {
		name string
		mod  func(*ContractCall)
	}{
		{"send-many", func(c *ContractCall) { c.Function = SendManyFunction }},
		{"three arguments", func(c *ContractCall) { c.Args = c.Args[:3] }},
		{"five arguments", func(c *ContractCall) { c.Args = append(c.Args, None) }},
		{"int amount", func(c *ContractCall) { c.Args[0] = NewInt(5) }},
		{"amount over u64", func(c *ContractCall) { c.Args[0] = UInt{Hi: 1} }},
		{"sender not a principal", func(c *ContractCall) { c.Args[1] = StringASCII(goldenSender) }},
		{"recipient not a principal", func(c *ContractCall) { c.Args[2] = Buffer{} }},
		{"memo not optional", func(c *ContractCall) { c.Args[3] = Buffer("m") }},
		{"memo a string", func(c *ContractCall) { c.Args[3] = Some(StringASCII("m")) }},
		{"memo 35 bytes", func(c *ContractCall) { c.Args[3] = Some(Buffer(make([]byte, 35))) }},
	} {
		c := good()
		tt.mod(c)
		if got, ok := ParseSIP010Transfer(c); ok {
			t.Errorf("%s: accepted as %+v", tt.name, got)
		}
	}
	if _, ok := ParseSIP010Transfer(nil); ok {
		t.Error("nil call accepted")
	}
}

func TestDecodeFungiblePostConditionRejects(t *testing.T) {
	raw, _ := hex.DecodeString(goldenSIP010TxRaw)
	// Offsets in the golden sBTC transfer: post-condition type at 115,
	// principal type 116, principal 117..137, asset address version 138,
	// hash 139..158, contract name length 159 (10) and name 160..169, token
	// name length 170 (10) and name 171..180, code 181, amount 182..189,
	// payload type 190.
	mut := func(off int, b byte) []byte {
		c := bytes.Clone(raw)
		c[off] = b
		return c
	}
	if raw[115] != PostConditionTypeFungible || raw[181] != byte(ConditionEq) || raw[190] != PayloadContractCall {
		t.Fatal("offsets in this test are stale")
	}
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"truncated asset address", raw[:150], "at byte 139: truncated asset contract address hash: need 20 bytes, have 11"},
		{"truncated asset contract name", raw[:165], "at byte 160: truncated asset contract name: need 10 bytes, have 5"},
		{"truncated token name", raw[:175], "at byte 171: truncated asset name: need 10 bytes, have 4"},
		{"no token name", raw[:170], "at byte 170: truncated asset name length"},
		{"asset address version", mut(138, 0x20), "at byte 138: asset contract address: address version 32 out of range"},
		{"asset contract name", mut(160, '-'), "at byte 160: asset contract name: bad contract name"},
		{"asset contract name length", mut(159, 41), "at byte 159: asset contract name length 41, must be 1 to 40"},
		{"token name first byte", mut(171, '9'), "at byte 171: asset name: malformed Clarity value: Clarity name \"9btc-token\" must start with a letter"},
		{"token name character", mut(175, ':'), "at byte 171: asset name: malformed Clarity value: Clarity name \"sbtc:token\": character ':' not allowed"},
		{"token name length 0", mut(170, 0), "at byte 170: asset name length 0, must be 1 to 128"},
		{"token name length 129", mut(170, 129), "at byte 170: asset name length 129, must be 1 to 128"},
		{"code 0", mut(181, 0x00), "at byte 181: unknown fungible condition code 0x00"},
		{"code 6", mut(181, 0x06), "at byte 181: unknown fungible condition code 0x06"},
		{"non-fungible", mut(115, 0x02), "at byte 115: post-condition type 0x02 is not supported"},
		{"truncated amount", raw[:185], "truncated post-condition amount"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeTransaction(tt.in)
			if !errors.Is(err, ErrMalformedTx) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want ErrMalformedTx containing %q", err, tt.want)
			}
		})
	}
	// Every condition code decodes and re-encodes.
	for code := ConditionEq; code <= ConditionLtEq; code++ {
		tx, err := DecodeTransaction(mut(181, byte(code)))
		if err != nil || tx.PostConditions[0].Code != code {
			t.Errorf("code %d: %v", code, err)
		}
	}
}
