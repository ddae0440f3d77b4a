package faucet

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/stxfaucet/faucet-operator/server/chain/devnode"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/settings"
)

// tUSD is a second token of the tests: 6 decimals, its own contract.
const tUSD Asset = "tusd"

func tusdAsset(t testing.TB) stacks.AssetInfo {
	t.Helper()
	a, err := stacks.ParseAssetID("ST2CY5V39NHDPWSXMW9QDT3HC3GD6Q6XX4CFRK9AG.tusd-token::tusd")
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// newTwoTokenEnv deploys sBTC and tUSD, mints each key perKey of each,
// and turns both on.
func newTwoTokenEnv(t *testing.T, perKey map[Asset]uint64, dcfg devnode.Config, fcfg Config) (*env, map[Asset]stacks.AssetInfo) {
	t.Helper()
	ids := map[Asset]stacks.AssetInfo{tSBTC: sbtcAsset(t), tUSD: tusdAsset(t)}
	dcfg.Tokens = []devnode.TokenSpec{devnode.SBTCToken(ids[tSBTC], nil),
		{Asset: ids[tUSD], Name: "Test USD", Symbol: "tUSD", Decimals: 6}}
	fcfg.Tokens = append(fcfg.Tokens, Token{Name: tSBTC, Asset: ids[tSBTC], Amount: tokenDrip},
		Token{Name: tUSD, Asset: ids[tUSD], Amount: 5_000_000})
	e := newEnv(t, 2, 100_000_000_000, dcfg, fcfg)
	for _, k := range e.keys {
		for name, n := range perKey {
			e.dn.FundAsset(ids[name], k.TestnetAddress(), n)
		}
	}
	if err := e.f.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	return e, ids
}

// Two tokens beside STX: each is dripped from its own contract, each key's
// balance of each is kept apart, and running out of one stops its drips
// only; its metadata is read from the contract.
func TestTwoTokensAreKeptApart(t *testing.T) {
	e, ids := newTwoTokenEnv(t, map[Asset]uint64{tSBTC: 2 * tokenDrip, tUSD: 100_000_000}, devnode.Config{}, Config{})
	ctx := context.Background()
	to := recipient(t)
	for _, name := range []Asset{tSBTC, tUSD, tSBTC, tUSD} {
		res, err := e.f.Drip(ctx, Request{Recipient: to, Asset: name})
		if err != nil || res.Asset != name {
			t.Fatalf("%s drip: %+v, %v", name, res, err)
		}
	}
	// Each key held 2 sBTC drips: 4 in all, 2 spent; the third and fourth
	// fit, the fifth does not. tUSD goes on.
	for range 2 {
		if _, err := e.f.Drip(ctx, Request{Recipient: to, Asset: tSBTC}); err != nil {
			t.Fatalf("sBTC drip within the funds: %v", err)
		}
	}
	if _, err := e.f.Drip(ctx, Request{Recipient: to, Asset: tSBTC}); ReasonOf(err) != ReasonExhausted {
		t.Fatalf("sBTC drip past the funds: %v, want exhausted", err)
	}
	if _, err := e.f.Drip(ctx, Request{Recipient: to, Asset: tUSD}); err != nil {
		t.Fatalf("tUSD drip while sBTC is out: %v", err)
	}
	if _, err := e.f.Drip(ctx, Request{Recipient: to, Asset: "nope"}); ReasonOf(err) != ReasonRejected {
		t.Fatalf("unknown asset: %v", err)
	}
	for e.dn.MempoolSize() > 0 {
		e.mine()
	}
	if got := e.dn.AssetBalance(ids[tSBTC], to); got != 4*tokenDrip {
		t.Errorf("recipient holds %d sBTC, want %d", got, 4*tokenDrip)
	}
	if got := e.dn.AssetBalance(ids[tUSD], to); got != 3*5_000_000 {
		t.Errorf("recipient holds %d tUSD, want %d", got, 3*5_000_000)
	}
	sbtc, _ := e.f.TokenFunding(tSBTC)
	tusd, _ := e.f.TokenFunding(tUSD)
	if sbtc.DripsLeft != 0 || tusd.DripsLeft != 2*(100_000_000/5_000_000)-3 || tusd.Available != 2*100_000_000-3*5_000_000 {
		t.Errorf("funding after the drips: sBTC %+v, tUSD %+v", sbtc, tusd)
	}
	infos := e.f.Tokens()
	if len(infos) != 2 || infos[0].Name != tSBTC || infos[1].Name != tUSD {
		t.Fatalf("tokens %+v", infos)
	}
	if m := infos[1].Metadata; m == nil || m.Decimals != 6 || m.Symbol != "tUSD" || m.Name != "Test USD" {
		t.Errorf("tUSD metadata %+v", m)
	}
}

// sBTC without a contract is the one the node names in /v2/pox
// (pox_5_sbtc_contract), found at the first poll and said in Tokens.
func TestSBTCFoundOnTheNode(t *testing.T) {
	id := sbtcAsset(t)
	e := newEnv(t, 1, 100_000_000_000,
		devnode.Config{Tokens: []devnode.TokenSpec{devnode.SBTCToken(id, nil)}, PoXSBTCContract: id.Contract},
		Config{Tokens: []Token{{Name: tSBTC, Asset: stacks.AssetInfo{Name: id.Name}, FromPoX: true, Amount: tokenDrip}}})
	e.dn.FundAsset(id, e.keys[0].TestnetAddress(), 10*tokenDrip)
	e.mine()
	info := e.f.Tokens()[0]
	if info.Err != nil || info.Asset != id || !info.FromPoX || info.Source != settings.SourcePoX {
		t.Fatalf("token %+v, want %s found on the node", info, id)
	}
	to := recipient(t)
	if _, err := e.f.Drip(context.Background(), Request{Recipient: to, Asset: tSBTC}); err != nil {
		t.Fatal(err)
	}
	e.mine()
	if got := e.dn.AssetBalance(id, to); got != tokenDrip {
		t.Fatalf("recipient holds %d, want %d", got, tokenDrip)
	}
}

// A node that names no sBTC contract (before Epoch 4.0) and none
// configured: sBTC is the testnet default, settings.SBTCTestnet, and says
// so in Tokens.
func TestSBTCDefaultWhenTheNodeNamesNone(t *testing.T) {
	id := sbtcAsset(t)
	e := newEnv(t, 1, 100_000_000_000, devnode.Config{Tokens: []devnode.TokenSpec{devnode.SBTCToken(id, nil)}},
		Config{Tokens: []Token{{Name: tSBTC, Asset: stacks.AssetInfo{Name: id.Name}, FromPoX: true, Amount: tokenDrip}}})
	e.dn.FundAsset(id, e.keys[0].TestnetAddress(), 10*tokenDrip)
	e.mine()
	if info := e.f.Tokens()[0]; info.Err != nil || info.Asset != id || info.Source != settings.SourceDefault {
		t.Fatalf("token %+v, want the default %s", info, id)
	}
	to := recipient(t)
	if _, err := e.f.Drip(context.Background(), Request{Recipient: to, Asset: tSBTC}); err != nil {
		t.Fatal(err)
	}
	e.mine()
	if got := e.dn.AssetBalance(id, to); got != tokenDrip {
		t.Fatalf("recipient holds %d, want %d", got, tokenDrip)
	}
}

// A node that names a contract that is not a testnet one, and none
// configured: no default stands in; sBTC says why it is not available,
// logged once, and the others still drip.
func TestSBTCNotOnTheNode(t *testing.T) {
	logs := &countingHandler{}
	mainnet, err := stacks.ParseContractID("SM3VDXK3WZZSA84XXFKAFAF15NNZX32CTSG82JFQ4.sbtc-token")
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, 1, 100_000_000_000, devnode.Config{PoXSBTCContract: mainnet}, Config{Logger: slog.New(logs),
		Tokens: []Token{{Name: tSBTC, Asset: stacks.AssetInfo{Name: "sbtc-token"}, FromPoX: true, Amount: tokenDrip}}})
	for range 3 {
		e.mine()
	}
	_, err = e.f.Drip(context.Background(), Request{Recipient: recipient(t), Asset: tSBTC})
	if ReasonOf(err) != ReasonDisabled || !strings.Contains(err.Error(), "pox_5_sbtc_contract") {
		t.Fatalf("sBTC drip: %v, want disabled naming pox_5_sbtc_contract", err)
	}
	if info := e.f.Tokens()[0]; info.Err == nil || !info.Asset.IsZero() {
		t.Fatalf("token %+v", info)
	}
	if n := logs.count("token not available"); n != 1 {
		t.Fatalf("%d warnings over 4 polls, want 1", n)
	}
	if _, err := e.f.Drip(context.Background(), Request{Recipient: recipient(t)}); err != nil {
		t.Fatalf("STX drip: %v", err)
	}
}

func TestTokenConfigErrors(t *testing.T) {
	id := sbtcAsset(t)
	for _, tc := range []struct {
		tok  Token
		want string
	}{
		{Token{Name: "SBTC", Asset: id, Amount: 1}, "lower-case"},
		{Token{Name: "stx", Asset: id, Amount: 1}, "STX's"},
		{Token{Name: "sbtc", Asset: id}, "amount per drip"},
		{Token{Name: "sbtc", Amount: 1}, "no asset identifier"},
		{Token{Name: "sbtc", Asset: stacks.AssetInfo{Name: "x"}, Amount: 1}, "no contract"},
		{Token{Name: "sbtc", Asset: id, FromPoX: true, Amount: 1}, "also to be found"},
	} {
		_, err := newTokens([]Token{tc.tok}, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.tok, err, tc.want)
		}
	}
	if _, err := newTokens([]Token{{Name: "a", Asset: id, Amount: 1}, {Name: "a", Asset: id, Amount: 1}}, nil); err == nil {
		t.Error("a name configured twice was taken")
	}
}
