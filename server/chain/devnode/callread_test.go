package devnode

import (
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// callReadBodyJSON is the body the node client sends.
func callReadBodyJSON(t testing.TB, sender stacks.Principal, args ...stacks.ClarityValue) []byte {
	t.Helper()
	hexArgs := make([]string, len(args))
	for i, a := range args {
		hexArgs[i] = "0x" + hex.EncodeToString(stacks.SerializeClarityValue(a))
	}
	b, err := json.Marshal(map[string]any{"sender": sender.String(), "arguments": hexArgs})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// callRead posts a read-only call and decodes a 200 answer strictly.
func (h *harness) callRead(t testing.TB, contract, function string, sender stacks.Principal, args ...stacks.ClarityValue) CallReadResponse {
	t.Helper()
	addr, name, _ := strings.Cut(contract, ".")
	r := h.do(http.MethodPost, "/v2/contracts/call-read/"+addr+"/"+name+"/"+function, "application/json", callReadBodyJSON(t, sender, args...))
	if r.status != http.StatusOK || r.contentType != "application/json" {
		t.Fatalf("call-read %s: %d %s %s", function, r.status, r.contentType, r.body)
	}
	var resp CallReadResponse
	dec := json.NewDecoder(strings.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&resp); err != nil {
		t.Fatalf("call-read %s: %v in %s", function, err, r.body)
	}
	// Exactly one of result and cause, as serde skips the None one.
	if (resp.Okay && (resp.Result == "" || strings.Contains(r.body, "cause"))) || (!resp.Okay && (resp.Cause == "" || strings.Contains(r.body, "result"))) {
		t.Errorf("call-read %s: malformed answer %s", function, r.body)
	}
	return resp
}

func okHex(v stacks.ClarityValue) CallReadResponse {
	return CallReadResponse{Okay: true, Result: "0x" + hex.EncodeToString(stacks.SerializeClarityValue(v))}
}

func TestCallReadTokenGetters(t *testing.T) {
	f := newTokenFixture(t)
	token := f.asset.Contract.String()
	a := f.alice.principal()
	for _, tc := range []struct {
		fn   string
		args []stacks.ClarityValue
		want stacks.ClarityValue
	}{
		{fnGetName, nil, stacks.ResponseOk(stacks.StringASCII("sBTC"))},
		{fnGetSymbol, nil, stacks.ResponseOk(stacks.StringASCII("sBTC"))},
		{fnGetDecimals, nil, stacks.ResponseOk(stacks.NewUInt(8))},
		{fnGetTokenURI, nil, stacks.ResponseOk(stacks.None)},
		{fnGetTotalSupply, nil, stacks.ResponseOk(stacks.NewUInt(tokGenesis))},
		{fnGetBalance, []stacks.ClarityValue{a}, stacks.ResponseOk(stacks.NewUInt(tokGenesis))},
		{fnGetBalance, []stacks.ClarityValue{f.bob.principal()}, stacks.ResponseOk(stacks.NewUInt(0))},
		{fnGetBalance, []stacks.ClarityValue{f.asset.Contract.Principal()}, stacks.ResponseOk(stacks.NewUInt(0))},
	} {
		if got := f.callRead(t, token, tc.fn, a, tc.args...); got != okHex(tc.want) {
			t.Errorf("%s: %+v, want %+v", tc.fn, got, okHex(tc.want))
		}
	}
	// The exact bytes of a get-balance answer, as the lead's client parses them.
	r := f.do(http.MethodPost, "/v2/contracts/call-read/"+f.deployer.addr.String()+"/sbtc-token/get-balance", "application/json",
		[]byte(`{"sender":"`+a.String()+`","arguments":["0x`+hex.EncodeToString(stacks.SerializeClarityValue(a))+`"]}`))
	if want := `{"okay":true,"result":"0x070100000000000000000000000000` + "00c350" + `"}`; r.status != http.StatusOK || r.body != want {
		t.Errorf("get-balance: %d %s, want 200 %s", r.status, r.body, want)
	}
}

// get-balance reads the confirmed balance at the tip: a pending transfer
// does not count until it is mined.
func TestCallReadBalanceAtTip(t *testing.T) {
	f := newTokenFixture(t)
	token, a, b := f.asset.Contract.String(), f.alice.principal(), f.bob.principal()
	tx, err := stacks.NewSIP010Transfer(stacks.SIP010TransferParams{Asset: f.asset, Recipient: b, Amount: 40, Fee: tokFee}, f.alice.key)
	if err != nil {
		t.Fatal(err)
	}
	txid := f.mustAccept(tx)
	if got := f.callRead(t, token, fnGetBalance, a, b); got != okHex(stacks.ResponseOk(stacks.NewUInt(0))) {
		t.Errorf("pending: bob %+v", got)
	}
	mineOne(t, f.harness, txid)
	if got := f.callRead(t, token, fnGetBalance, a, b); got != okHex(stacks.ResponseOk(stacks.NewUInt(40))) {
		t.Errorf("mined: bob %+v", got)
	}
	if got := f.callRead(t, token, fnGetBalance, b, a); got != okHex(stacks.ResponseOk(stacks.NewUInt(tokGenesis-40))) {
		t.Errorf("mined: alice %+v", got)
	}
	// ?tip= is accepted and ignored, like the devnode's other reads.
	r := f.do(http.MethodPost, "/v2/contracts/call-read/"+f.deployer.addr.String()+"/sbtc-token/get-decimals?tip=latest", "application/json", callReadBodyJSON(t, a))
	if r.status != http.StatusOK || !strings.Contains(r.body, `"okay":true`) {
		t.Errorf("?tip=: %d %s", r.status, r.body)
	}
}

// Runtime failures are 200 with okay:false and the VM error's text.
func TestCallReadFailures(t *testing.T) {
	f := newTokenFixture(t)
	token := f.asset.Contract.String()
	a, b := f.alice.principal(), f.bob.principal()
	std := "StandardPrincipalData(" + f.alice.addr.String() + ")"
	for _, tc := range []struct {
		name, contract, fn string
		sender             stacks.Principal
		args               []stacks.ClarityValue
		want               CallReadResponse
	}{
		{"no such contract", f.deployer.addr.String() + ".nope", fnGetName, a, nil,
			CallReadResponse{Cause: `RuntimeCheck(NoSuchContract("` + f.deployer.addr.String() + `.nope"))`}},
		{"undefined function", token, "get-owner", a, nil, CallReadResponse{Cause: `RuntimeCheck(UndefinedFunction("get-owner"))`}},
		{"no argument", token, fnGetBalance, a, nil, CallReadResponse{Cause: "RuntimeCheck(IncorrectArgumentCount(1, 0))"}},
		{"an argument too many", token, fnGetName, a, []stacks.ClarityValue{a}, CallReadResponse{Cause: "RuntimeCheck(IncorrectArgumentCount(0, 1))"}},
		{"uint for a principal", token, fnGetBalance, a, []stacks.ClarityValue{stacks.NewUInt(1)},
			CallReadResponse{Cause: `RuntimeCheck(TypeValueError(PrincipalType, "UInt(1)"))`}},
		{"int amount", token, fnTransfer, a, []stacks.ClarityValue{stacks.NewInt(-1), a, b, stacks.None},
			CallReadResponse{Cause: `RuntimeCheck(TypeValueError(UIntType, "Int(-1)"))`}},
		{"memo too long", token, fnTransfer, a, transferArgs(1, a, b, make([]byte, 35)),
			CallReadResponse{Cause: `RuntimeCheck(TypeValueError(OptionalType(SequenceType(BufferType(BufferLength(34)))), "Optional(OptionalData { data: Some(Sequence(Buffer(` + strings.Repeat("00", 35) + `))) })"))`}},
		{"principal for an amount", token, fnTransfer, a, []stacks.ClarityValue{a, a, b, stacks.None},
			CallReadResponse{Cause: `RuntimeCheck(TypeValueError(UIntType, "Principal(Standard(` + std + `))"))`}},
		{"string for a principal", token, fnGetBalance, a, []stacks.ClarityValue{stacks.StringASCII(`say "hi"`)},
			CallReadResponse{Cause: `RuntimeCheck(TypeValueError(PrincipalType, "Sequence(String(\"say \\\"hi\\\"\"))"))`}},
		// transfer may be called: past its assertion it would write.
		{"transfer, not the owner", token, fnTransfer, b, transferArgs(1, a, b, nil), okHex(stacks.ResponseErr(stacks.NewUInt(4)))},
		{"transfer by the owner", token, fnTransfer, a, transferArgs(1, a, b, nil), CallReadResponse{Cause: "NotReadOnly"}},
		{"transfer of nothing by the owner", token, fnTransfer, a, transferArgs(0, a, a, nil), CallReadResponse{Cause: "NotReadOnly"}},
		{"mint, not the deployer", token, fnMint, a, []stacks.ClarityValue{stacks.NewUInt(1), a}, okHex(stacks.ResponseErr(stacks.NewUInt(5)))},
		{"mint by the deployer", token, fnMint, f.deployer.principal(), []stacks.ClarityValue{stacks.NewUInt(1), a}, CallReadResponse{Cause: "NotReadOnly"}},
		{"send-many private function", stacks.SendManyMemoTestnet, "send-stx", a, nil,
			CallReadResponse{Cause: `RuntimeCheck(NoSuchPublicFunction("` + stacks.SendManyMemoTestnet + `", "send-stx"))`}},
		{"send-many unknown function", stacks.SendManyMemoTestnet, fnGetName, a, nil, CallReadResponse{Cause: `RuntimeCheck(UndefinedFunction("get-name"))`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := f.callRead(t, tc.contract, tc.fn, tc.sender, tc.args...); got != tc.want {
				t.Errorf("\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
	f.checkToken(t, map[string]uint64{"alice": tokGenesis}) // nothing moved

	// Without a token contract, its address is just another missing contract.
	h := newHarness(t, Config{})
	if got := h.callRead(t, token, fnGetName, a); got.Okay || !strings.Contains(got.Cause, "NoSuchContract") {
		t.Errorf("no token deployed: %+v", got)
	}
}

// Request errors are answered before anything runs, in try_parse_request's
// order, as 400 text/plain.
func TestCallReadRequestErrors(t *testing.T) {
	f := newTokenFixture(t)
	a := f.alice.principal()
	path := "/v2/contracts/call-read/" + f.deployer.addr.String() + "/sbtc-token/get-balance"
	good := callReadBodyJSON(t, a, a)
	badAddr := "ST000000000000000000000000000000000" // matches the route, fails the checksum
	for _, tc := range []struct {
		name, path, ct string
		body           []byte
		status         int
		want           string
	}{
		{"no body", path, "application/json", nil, 400, "Failed to decode: Invalid Http request: invalid body length for CallReadOnly (0)"},
		{"no content type", path, "", good, 400, "Failed to decode: Invalid content-type: expected application/json"},
		{"text body", path, "text/plain", good, 400, "Failed to decode: Invalid content-type: expected application/json"},
		{"bad address", "/v2/contracts/call-read/" + badAddr + "/sbtc-token/get-balance", "application/json", good, 400, "Failed to decode `address`"},
		{"function starting with a digit", "/v2/contracts/call-read/" + f.deployer.addr.String() + "/sbtc-token/1get", "application/json", good, 400, "Failed to decode `function`"},
		{"not JSON", path, "application/json", []byte("sender=x"), 400, "Failed to decode: Failed to parse JSON body"},
		{"no arguments", path, "application/json", []byte(`{"sender":"` + a.String() + `"}`), 400, "Failed to decode: Failed to parse JSON body"},
		{"null arguments", path, "application/json", []byte(`{"sender":"` + a.String() + `","arguments":null}`), 400, "Failed to decode: Failed to parse JSON body"},
		{"a null argument", path, "application/json", []byte(`{"sender":"` + a.String() + `","arguments":[null]}`), 400, "Failed to decode: Failed to parse JSON body"},
		{"field names are case-sensitive", path, "application/json", []byte(`{"Sender":"` + a.String() + `","arguments":[]}`), 400, "Failed to decode: Failed to parse JSON body"},
		{"duplicate sender", path, "application/json", []byte(`{"sender":"` + a.String() + `","sender":"x","arguments":[]}`), 400, "Failed to decode: Failed to parse JSON body"},
		{"trailing data", path, "application/json", append(append([]byte(nil), good...), '{'), 400, "Failed to decode: Failed to parse JSON body"},
		{"bad sender", path, "application/json", []byte(`{"sender":"alice","arguments":[]}`), 400, "Failed to decode: Failed to parse sender principal"},
		{"bad sponsor", path, "application/json", []byte(`{"sender":"` + a.String() + `","sponsor":"bob","arguments":[]}`), 400, "Failed to decode: Failed to parse sponsor principal"},
		{"odd hex", path, "application/json", []byte(`{"sender":"` + a.String() + `","arguments":["0x0"]}`), 400, "Failed to decode: Failed to deserialize argument value"},
		{"not a value", path, "application/json", []byte(`{"sender":"` + a.String() + `","arguments":["0xff"]}`), 400, "Failed to decode: Failed to deserialize argument value"},
		{"empty argument", path, "application/json", []byte(`{"sender":"` + a.String() + `","arguments":[""]}`), 400, "Failed to decode: Failed to deserialize argument value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := f.do(http.MethodPost, tc.path, tc.ct, tc.body)
			if r.status != tc.status || r.body != tc.want || r.contentType != "text/plain" {
				t.Errorf("got %d %s %q, want %d text/plain %q", r.status, r.contentType, r.body, tc.status, tc.want)
			}
		})
	}

	// What serde accepts: no 0x prefix, a null sponsor, unknown fields, a
	// charset parameter.
	for _, body := range []string{
		`{"sender":"` + a.String() + `","arguments":["` + hex.EncodeToString(stacks.SerializeClarityValue(a)) + `"]}`,
		`{"sender":"` + a.String() + `","sponsor":null,"arguments":["0x` + hex.EncodeToString(stacks.SerializeClarityValue(a)) + `"],"extra":[1]}`,
		`{"arguments":["0x` + hex.EncodeToString(stacks.SerializeClarityValue(a)) + `"],"sponsor":"` + f.bob.addr.String() + `","sender":"` + f.asset.Contract.String() + `"}`,
	} {
		r := f.do(http.MethodPost, path, "application/json; charset=utf-8", []byte(body))
		if r.status != http.StatusOK || !strings.Contains(r.body, `"okay":true`) {
			t.Errorf("%s: %d %s", body, r.status, r.body)
		}
	}

	// The route is POST only, and its path segments must match the regexes.
	for _, tc := range []struct{ method, path string }{
		{http.MethodGet, path},
		{http.MethodPost, "/v2/contracts/call-read/" + f.deployer.addr.String() + "/sbtc-token"},
		{http.MethodPost, "/v2/contracts/call-read/" + f.deployer.addr.String() + "/1token/get-balance"},
		{http.MethodPost, "/v2/contracts/call-read/st1lower/sbtc-token/get-balance"},
	} {
		if r := f.do(tc.method, tc.path, "application/json", good); r.status != http.StatusNotFound || r.body != msgNoSuchPath {
			t.Errorf("%s %s: %d %s, want 404", tc.method, tc.path, r.status, r.body)
		}
	}
}

func TestValueDebug(t *testing.T) {
	p, err := stacks.ParsePrincipal("ST1PQHQKV0RJXZFY1DGX8MNSNYVE3VGZJSRTPGZGM.sbtc-token")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		v    stacks.ClarityValue
		want string
	}{
		{stacks.NewInt(-7), "Int(-7)"},
		{stacks.UInt{Hi: 1}, "UInt(18446744073709551616)"},
		{stacks.Bool(false), "Bool(false)"},
		{stacks.Buffer{}, "Sequence(Buffer())"},
		{stacks.StringASCII("a\tb"), `Sequence(String("a\tb"))`},
		{stacks.StringUTF8("é!"), `Sequence(String(u"\u{c3a9}!"))`},
		{p, `Principal(Contract(QualifiedContractIdentifier { issuer: StandardPrincipalData(ST1PQHQKV0RJXZFY1DGX8MNSNYVE3VGZJSRTPGZGM), name: ContractName("sbtc-token") }))`},
		{stacks.None, "Optional(OptionalData { data: None })"},
		{stacks.ResponseErr(stacks.NewUInt(4)), "Response(ResponseData { committed: false, data: UInt(4) })"},
		{stacks.List{stacks.NewUInt(1), stacks.NewUInt(2)}, "Sequence(List(ListData { data: [UInt(1), UInt(2)], type_signature: ListTypeData { max_len: 2, entry_type: UIntType } }))"},
	} {
		if got := valueDebug(tc.v); got != tc.want {
			t.Errorf("valueDebug(%v)\n got %s\nwant %s", tc.v, got, tc.want)
		}
	}
	long := valueErrorString(stacks.Buffer(make([]byte, 400)))
	if len(long) != maxErrorValueLen+3 || !strings.HasSuffix(long, "...") {
		t.Errorf("long value: %d bytes, want %d ending in ...", len(long), maxErrorValueLen+3)
	}
}
