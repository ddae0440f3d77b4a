package devnode

import (
	"reflect"
	"strings"
	"testing"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/settings"
)

// multiFixture is a node with two tokens from two deployers: sBTC, and a
// 6-decimal test stablecoin whose token name differs from its contract's.
// alice holds tokGenesis of each; everyone holds STX for fees.
type multiFixture struct {
	*harness
	sbtcDeployer, usdDeployer, alice, bob wallet
	sbtc, usd                             stacks.AssetInfo
}

func newMultiFixture(t *testing.T) *multiFixture {
	t.Helper()
	f := &multiFixture{sbtcDeployer: newWallet(t), usdDeployer: newWallet(t), alice: newWallet(t), bob: newWallet(t)}
	f.sbtc = mustAsset(t, f.sbtcDeployer.addr.String()+".sbtc-token::"+TokenName)
	f.usd = mustAsset(t, f.usdDeployer.addr.String()+".tusd-token::tusd")
	genesis := map[stacks.Address]uint64{}
	for _, w := range []wallet{f.sbtcDeployer, f.usdDeployer, f.alice, f.bob} {
		genesis[w.addr] = tokGenesisSTX
	}
	f.harness = newHarness(t, Config{
		Genesis: genesis,
		Tokens: []TokenSpec{
			SBTCToken(f.sbtc, map[stacks.Address]uint64{f.alice.addr: tokGenesis}),
			{Asset: f.usd, Name: "Test USD", Symbol: "tUSD", Decimals: 6, Genesis: map[stacks.Address]uint64{f.alice.addr: tokGenesis}},
		},
	})
	return f
}

func (f *multiFixture) call(t *testing.T, from wallet, asset stacks.AssetInfo, function string, args []stacks.ClarityValue, nonce uint64, pcs ...stacks.PostCondition) stacks.TxID {
	t.Helper()
	tx, err := stacks.NewContractCall(stacks.ContractCallParams{
		Contract: asset.Contract, Function: function, Args: args, Nonce: nonce, Fee: tokFee,
		PostConditionMode: stacks.PostConditionModeDeny, PostConditions: pcs,
	}, from.key)
	if err != nil {
		t.Fatal(err)
	}
	txid := f.mustAccept(tx)
	mineOne(t, f.harness, txid)
	return txid
}

func (f *multiFixture) balances(t *testing.T, asset stacks.AssetInfo, alice, bob uint64) {
	t.Helper()
	if a, b := f.n.AssetBalance(asset, f.alice.principal()), f.n.AssetBalance(asset, f.bob.principal()); a != alice || b != bob {
		t.Errorf("%s: alice %d bob %d, want %d %d", asset.Name, a, b, alice, bob)
	}
}

// Each token answers its own metadata and balances through call-read.
func TestSeveralTokensCallRead(t *testing.T) {
	f := newMultiFixture(t)
	f.n.FundAsset(f.usd, f.bob.addr, 42)
	a := f.alice.principal()
	for _, tc := range []struct {
		asset               stacks.AssetInfo
		name, symbol        string
		decimals, bob, supp uint64
	}{
		{f.sbtc, "sBTC", "sBTC", 8, 0, tokGenesis},
		{f.usd, "Test USD", "tUSD", 6, 42, tokGenesis + 42},
	} {
		contract := tc.asset.Contract.String()
		for fn, want := range map[string]stacks.ClarityValue{
			fnGetName:        stacks.ResponseOk(stacks.StringASCII(tc.name)),
			fnGetSymbol:      stacks.ResponseOk(stacks.StringASCII(tc.symbol)),
			fnGetDecimals:    stacks.ResponseOk(stacks.NewUInt(tc.decimals)),
			fnGetTokenURI:    stacks.ResponseOk(stacks.None),
			fnGetTotalSupply: stacks.ResponseOk(stacks.NewUInt(tc.supp)),
		} {
			if got := f.callRead(t, contract, fn, a); got != okHex(want) {
				t.Errorf("%s %s: %+v, want %+v", contract, fn, got, okHex(want))
			}
		}
		if got, want := f.callRead(t, contract, fnGetBalance, a, f.bob.principal()), okHex(stacks.ResponseOk(stacks.NewUInt(tc.bob))); got != want {
			t.Errorf("%s bob: %+v, want %+v", contract, got, want)
		}
		// mint by someone other than this contract's deployer.
		if got, want := f.callRead(t, contract, fnMint, a, stacks.NewUInt(1), a), okHex(stacks.ResponseErr(stacks.NewUInt(tokenErrNotDeployer))); got != want {
			t.Errorf("%s mint: %+v, want %+v", contract, got, want)
		}
	}
}

// A call of one token moves only that token, checks its post-conditions by
// asset, and mint is each contract's own deployer's.
func TestSeveralTokensMined(t *testing.T) {
	f := newMultiFixture(t)
	a, b := f.alice.principal(), f.bob.principal()

	txid := f.call(t, f.alice, f.usd, fnTransfer, transferArgs(300, a, b, nil), 0, stacks.PrincipalSendsExactlyFT(a, f.usd, 300))
	checkMined(t, f.harness, txid, "(ok true)", false)
	f.balances(t, f.usd, tokGenesis-300, 300)
	f.balances(t, f.sbtc, tokGenesis, 0)
	want := []TxEvent{{Type: EventFTTransfer, AssetID: f.usd.String(), Sender: f.alice.addr.String(), Recipient: f.bob.addr.String(), Amount: 300}}
	if got, _ := f.n.TxEvents(txid); !reflect.DeepEqual(got, want) {
		t.Errorf("events %+v, want %+v", got, want)
	}

	// Deny mode: a condition on the other token does not cover this one.
	txid = f.call(t, f.alice, f.sbtc, fnTransfer, transferArgs(5, a, b, nil), 1, stacks.PrincipalSendsExactlyFT(a, f.usd, 0))
	checkMined(t, f.harness, txid, "(ok true)", true)
	if got, want := f.n.TxPostConditionFailure(txid), "Post-condition check failure: Fungible asset "+f.sbtc.String()+" was moved by "+a.String()+" but not checked"; got != want {
		t.Errorf("failure %q, want %q", got, want)
	}
	// Both named: holds.
	txid = f.call(t, f.alice, f.sbtc, fnTransfer, transferArgs(5, a, b, nil), 2,
		stacks.PrincipalSendsExactlyFT(a, f.sbtc, 5), stacks.PrincipalSendsExactlyFT(a, f.usd, 0))
	checkMined(t, f.harness, txid, "(ok true)", false)
	f.balances(t, f.sbtc, tokGenesis-5, 5)
	f.balances(t, f.usd, tokGenesis-300, 300)

	// The sBTC deployer may not mint tUSD, its own deployer may.
	checkMined(t, f.harness, f.call(t, f.sbtcDeployer, f.usd, fnMint, []stacks.ClarityValue{stacks.NewUInt(7), b}, 0), "(err u5)", true)
	checkMined(t, f.harness, f.call(t, f.usdDeployer, f.usd, fnMint, []stacks.ClarityValue{stacks.NewUInt(7), b}, 0), "(ok true)", false)
	f.balances(t, f.usd, tokGenesis-300, 307)
}

// Admission checks the called token's contract: its functions and
// arguments, and nothing at a contract no token was deployed at.
func TestSeveralTokensAdmission(t *testing.T) {
	f := newMultiFixture(t)
	a, b := f.alice.principal(), f.bob.principal()
	for _, tc := range []struct {
		name, contract, fn string
		args               []stacks.ClarityValue
		reason             string
	}{
		{"the sBTC name at the tUSD deployer", f.usdDeployer.addr.String() + ".sbtc-token", fnTransfer, transferArgs(1, a, b, nil), node.ReasonNoSuchContract},
		{"a getter of tUSD", f.usd.Contract.String(), fnGetDecimals, nil, node.ReasonNoSuchPublicFunction},
		{"bad memo to tUSD", f.usd.Contract.String(), fnTransfer, transferArgs(1, a, b, make([]byte, 35)), node.ReasonBadFunctionArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if rej := rejectionOf(t, f.harness, rawCall(t, f.alice, tc.contract, tc.fn, tc.args, 0, tokFee)); rej.Reason != tc.reason {
				t.Errorf("reason %q, want %q", rej.Reason, tc.reason)
			}
		})
	}
}

func TestTokenSpecConfig(t *testing.T) {
	w := newWallet(t)
	asset := func(s string) stacks.AssetInfo { return mustAsset(t, w.addr.String()+"."+s) }
	spec := func(a stacks.AssetInfo, name, symbol string) TokenSpec {
		return TokenSpec{Asset: a, Name: name, Symbol: symbol, Decimals: 6}
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"zero asset", Config{Tokens: []TokenSpec{{Name: "x", Symbol: "x"}}}, "Config.Tokens[0]"},
		{"empty symbol", Config{Tokens: []TokenSpec{spec(asset("usd::usd"), "USD", "")}}, "token symbol"},
		{"quote in the name", Config{Tokens: []TokenSpec{spec(asset("usd::usd"), `say "hi"`, "USD")}}, "token display name"},
		{"backslash in the symbol", Config{Tokens: []TokenSpec{spec(asset("usd::usd"), "USD", `U\D`)}}, "token symbol"},
		{"non-ASCII name", Config{Tokens: []TokenSpec{spec(asset("usd::usd"), "Ünited", "USD")}}, "token display name"},
		{"33-character symbol", Config{Tokens: []TokenSpec{spec(asset("usd::usd"), "USD", strings.Repeat("U", 33))}}, "1 to 32"},
		{"token named like a function", Config{Tokens: []TokenSpec{spec(asset("usd::transfer"), "USD", "USD")}}, "already defines or binds"},
		{"token named like a parameter", Config{Tokens: []TokenSpec{spec(asset("usd::amount"), "USD", "USD")}}, "already defines or binds"},
		{"two tokens at one contract", Config{Tokens: []TokenSpec{spec(asset("usd::usd"), "USD", "USD"), spec(asset("usd::eur"), "EUR", "EUR")}}, "Config.Tokens[1]: a second token at contract"},
		{"the shorthand at a listed contract", Config{TokenAsset: settings.SBTCTestnet, Tokens: []TokenSpec{SBTCToken(mustAsset(t, settings.SBTCTestnet), nil)}}, "Config.TokenAsset: a second token at contract"},
		{"the send-many contract", Config{SendManyContract: stacks.SendManyMemoTestnet, Tokens: []TokenSpec{spec(mustAsset(t, stacks.SendManyMemoTestnet+"::usd"), "USD", "USD")}}, "same contract"},
	} {
		t.Run(tc.name, func(t *testing.T) { checkNewPanics(t, tc.cfg, tc.want) })
	}

	// The shorthand and the list together: two tokens.
	usd := asset("usd::usd")
	n := New(Config{TokenAsset: settings.SBTCTestnet, TokenGenesis: map[stacks.Address]uint64{w.addr: 7},
		Tokens: []TokenSpec{{Asset: usd, Name: "USD", Symbol: "USD", Decimals: 2, Genesis: map[stacks.Address]uint64{w.addr: 9}}}})
	if got := n.AssetBalance(mustAsset(t, settings.SBTCTestnet), w.principal()); got != 7 {
		t.Errorf("sBTC %d, want 7", got)
	}
	n.FundAsset(usd, w.addr, 1)
	if got := n.AssetBalance(usd, w.principal()); got != 10 {
		t.Errorf("USD %d, want 10", got)
	}
	other := usd
	other.Name = "eur"
	if got := n.AssetBalance(other, w.principal()); got != 0 {
		t.Errorf("an asset the contract does not define: %d", got)
	}
	for name, f := range map[string]func(){
		"TokenBalance with two tokens":     func() { n.TokenBalance(w.principal()) },
		"FundToken with two tokens":        func() { n.FundToken(w.addr, 1) },
		"FundAsset of an undeployed token": func() { n.FundAsset(other, w.addr, 1) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s did not panic", name)
				}
			}()
			f()
		}()
	}
}

func TestTokenContractSource(t *testing.T) {
	src, err := TokenContractSource("tusd", "Test USD", "tUSD", 6)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"(define-fungible-token tusd)", "(ft-transfer? tusd amount sender recipient)", "(ft-get-balance tusd who)",
		"(ft-get-supply tusd)", "(ft-mint? tusd amount recipient)", `(ok "Test USD")`, `(ok "tUSD")`, "(ok u6)",
	} {
		if !strings.Contains(src, want) {
			t.Errorf("the contract lacks %s", want)
		}
	}
	// The code, without the comments that cite sBTC's own contract.
	var code strings.Builder
	for line := range strings.Lines(src) {
		if !strings.HasPrefix(line, ";;") {
			code.WriteString(line)
		}
	}
	if c := code.String(); strings.Contains(c, "{{") || strings.Contains(c, "sbtc") || strings.Contains(c, "sBTC") {
		t.Errorf("a placeholder or the sBTC token is left:\n%s", c)
	}
	sbtc, err := SBTCToken(mustAsset(t, settings.SBTCTestnet), nil).ContractSource()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"(define-fungible-token sbtc-token)", `(ok "sBTC")`, "(ok u8)"} {
		if !strings.Contains(sbtc, want) {
			t.Errorf("the sBTC contract lacks %s", want)
		}
	}
	if _, err := TokenContractSource("not a name", "X", "X", 0); err == nil {
		t.Error("an invalid token name rendered")
	}
}
