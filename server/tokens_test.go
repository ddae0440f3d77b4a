package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/devnode"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/faucet"
	"github.com/stxfaucet/faucet-operator/server/guard"
	"github.com/stxfaucet/faucet-operator/server/settings"
)

// testTUSD is a token of the tests beside sBTC: 6 decimals, its own
// contract and name.
const (
	testTUSD       = "ST2CY5V39NHDPWSXMW9QDT3HC3GD6Q6XX4CFRK9AG.tusd-token::tusd"
	testTUSDAmount = 5_000_000
)

// twoTokenHarness drips STX, sBTC and tUSD; tUSD is limited to one drip
// per address an hour, sBTC has the default limits. suspended are
// suspended by the operator.
func twoTokenHarness(t *testing.T, suspended ...faucet.Asset) *harness {
	t.Helper()
	tusd, err := stacks.ParseAssetID(testTUSD)
	if err != nil {
		t.Fatal(err)
	}
	lim := guard.DefaultLimits().With("sbtc", guard.DefaultAssetLimits()).
		With("tusd", guard.AssetLimits{PerAddress: guard.Limit{Requests: 1, Window: time.Hour}})
	h := sbtcHarness(t, options{keys: 2, limits: lim, suspendedAssets: suspended,
		devnode: devnode.Config{Tokens: []devnode.TokenSpec{{Asset: tusd, Name: "Test USD", Symbol: "tUSD", Decimals: 6}}},
		faucetCfg: func(c *faucet.Config) {
			c.Tokens = append(c.Tokens, faucet.Token{Name: "tusd", Asset: tusd, Amount: testTUSDAmount})
		}})
	for _, k := range h.keys {
		h.dn.FundAsset(tusd, k.TestnetAddress(), 100*testTUSDAmount)
	}
	if err := h.f.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	return h
}

// A second token is served like sBTC: its own v1 and v3 routes, v3's
// amount named for it, its own limits, its entry in /faucet/v1/info with
// the metadata its contract answers, and its metrics.
func TestSecondTokenIsServed(t *testing.T) {
	h := twoTokenHarness(t)
	tusd, _ := stacks.ParseAssetID(testTUSD)
	to := newRecipient(t)
	if w := h.do(http.MethodPost, "/extended/v1/faucets/tusd?address="+to, nil, nil); w.Code != http.StatusOK {
		t.Fatalf("v1 tUSD drip: %d %s", w.Code, w.Body)
	}
	w := h.do(http.MethodPost, "/extended/v1/faucets/tusd?address="+to, nil, nil)
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("second v1 tUSD drip to one address: %d %s, want tUSD's own limit", w.Code, w.Body)
	}
	if w := h.dripSBTC(to); w.Code != http.StatusOK {
		t.Fatalf("sBTC drip after tUSD's limit: %d %s", w.Code, w.Body)
	}
	other := newRecipient(t)
	w = h.do(http.MethodPost, "/extended/v3/faucets/tusd", strings.NewReader(`{"address":"`+other+`"}`),
		map[string]string{"Content-Type": "application/json"})
	var v3 struct {
		Amount map[string]string `json:"amount"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &v3); w.Code != http.StatusOK || err != nil || len(v3.Amount) != 1 || v3.Amount["tusd"] != "5000000" {
		t.Fatalf("v3 tUSD drip: %d %s", w.Code, w.Body)
	}
	h.dn.Mine()
	for _, a := range []string{to, other} {
		p, err := stacks.ParsePrincipal(a)
		if err != nil {
			t.Fatal(err)
		}
		if got := h.dn.AssetBalance(tusd, p); got != testTUSDAmount {
			t.Fatalf("%s holds %d tUSD, want one drip", a, got)
		}
	}

	assets := getInfo(t, h)["assets"].([]any)
	var names []string
	for _, a := range assets {
		names = append(names, a.(map[string]any)["asset"].(string))
	}
	if strings.Join(names, ",") != "stx,sbtc,tusd" {
		t.Fatalf("info lists %v", names)
	}
	tu := assets[2].(map[string]any)
	if tu["name"] != "tUSD" || tu["decimals"] != float64(6) || tu["asset_identifier"] != testTUSD || tu["asset_source"] != "configured" ||
		tu["amount"] != float64(testTUSDAmount) || tu["endpoints"].(map[string]any)["v3"] != "/extended/v3/faucets/tusd" ||
		tu["limits"].(map[string]any)["address"].(map[string]any)["window_seconds"] != float64(3600) {
		t.Fatalf("tUSD in info: %v", tu)
	}
	for name, labels := range map[string]map[string]string{
		"faucet_asset_enabled":         {"asset": "tusd"},
		"faucet_dispensed_token_total": {"asset": "tusd"},
		"faucet_drips_total":           {"asset": "tusd", "outcome": "success", "reason": ""},
	} {
		if got := counterValue(t, h.reg, name, labels); got == 0 {
			t.Errorf("%s%v = 0", name, labels)
		}
	}
}

// An asset the faucet does not drip is a 404 naming the ones it does;
// the incumbent's sBTC and BTC routes answer 403 when not configured.
func TestUnknownAsset(t *testing.T) {
	h := newHarness(t, options{})
	w := h.do(http.MethodPost, "/extended/v3/faucets/doge", strings.NewReader(`{"address":"`+newRecipient(t)+`"}`),
		map[string]string{"Content-Type": "application/json"})
	body := assertError(t, w, http.StatusNotFound, "does not drip doge; it drips stx")
	if body["reason"] != "unknown_asset" {
		t.Fatalf("reason %v", body["reason"])
	}
	assertError(t, h.do(http.MethodPost, "/extended/v1/faucets/sbtc?address="+newRecipient(t), nil, nil),
		http.StatusForbidden, "sBTC faucet is not available")
}

// sBTC to be found on a node that names a contract that is no testnet
// one: its info says why it is unavailable, its drips answer 403 with the
// reason, and STX drips go on.
func TestTokenNotOnTheNode(t *testing.T) {
	mainnet, err := stacks.ParseContractID("SM3VDXK3WZZSA84XXFKAFAF15NNZX32CTSG82JFQ4.sbtc-token")
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, options{devnode: devnode.Config{PoXSBTCContract: mainnet}, faucetCfg: func(c *faucet.Config) {
		c.Tokens = []faucet.Token{{Name: "sbtc", Asset: stacks.AssetInfo{Name: "sbtc-token"}, FromPoX: true, Amount: 1000}}
	}})
	if err := h.f.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	sb := getInfo(t, h)["assets"].([]any)[1].(map[string]any)
	if sb["state"] != stateUnavailable || !strings.Contains(sb["state_message"].(string), "pox_5_sbtc_contract") ||
		sb["asset_identifier"] != nil || sb["asset_source"] != "pox_5_sbtc_contract" {
		t.Fatalf("sBTC in info: %v", sb)
	}
	w := h.do(http.MethodPost, "/extended/v1/faucets/sbtc?address="+newRecipient(t), nil, nil)
	body := assertError(t, w, http.StatusForbidden, "not available")
	if !strings.Contains(body["detail"].(string), "pox_5_sbtc_contract") {
		t.Fatalf("detail %v", body["detail"])
	}
	if w := h.drip("address=" + newRecipient(t)); w.Code != http.StatusOK {
		t.Fatalf("STX drip: %d %s", w.Code, w.Body)
	}
}

// sBTC to be found on a node that names none (before Epoch 4.0): its info
// shows the testnet default, from asset_source "default".
func TestTokenDefaultWhenTheNodeNamesNone(t *testing.T) {
	h := newHarness(t, options{sbtc: &sbtcOptions{funding: 1_000_000, amount: 1000}, faucetCfg: func(c *faucet.Config) {
		c.Tokens = []faucet.Token{{Name: "sbtc", Asset: stacks.AssetInfo{Name: "sbtc-token"}, FromPoX: true, Amount: 1000}}
	}})
	if err := h.f.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	sb := getInfo(t, h)["assets"].([]any)[1].(map[string]any)
	if sb["asset_identifier"] != settings.SBTCTestnet || sb["asset_source"] != settings.SourceDefault {
		t.Fatalf("sBTC in info: %v", sb)
	}
}

// An asset the operator suspends answers 403 on v1 and v3 and says so in
// /faucet/v1/info and the metrics, with its funding still shown; the
// other assets serve as before.
func TestSuspendedAsset(t *testing.T) {
	h := twoTokenHarness(t, "tusd", "stx")
	to := newRecipient(t)
	body := assertError(t, h.do(http.MethodPost, "/extended/v1/faucets/tusd?address="+to, nil, nil), http.StatusForbidden, "Faucet is not available")
	if body["reason"] != string(faucet.ReasonDisabled) || body["detail"] != "the tUSD faucet is suspended" {
		t.Errorf("v1 tUSD while suspended: %v", body)
	}
	w := h.do(http.MethodPost, "/extended/v3/faucets/tusd", strings.NewReader(`{"address":"`+to+`"}`),
		map[string]string{"Content-Type": "application/json"})
	if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "tUSD faucet is not available") {
		t.Errorf("v3 tUSD while suspended: %d %s", w.Code, w.Body)
	}
	assertError(t, h.do(http.MethodPost, "/extended/v1/faucets/stx?address="+to, nil, nil), http.StatusForbidden, "Faucet is not available")
	if w := h.dripSBTC(to); w.Code != http.StatusOK {
		t.Fatalf("sBTC beside suspended STX and tUSD: %d %s", w.Code, w.Body)
	}
	h.dn.Mine()
	if err := h.f.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}

	info := getInfo(t, h)
	if info["state"] != stateSuspended || info["state_message"] != "The STX faucet is suspended by its operator." {
		t.Errorf("info's top-level (STX) state: %v %q", info["state"], info["state_message"])
	}
	for _, a := range info["assets"].([]any) {
		a := a.(map[string]any)
		want := map[string]string{"stx": stateSuspended, "sbtc": stateReady, "tusd": stateSuspended}[a["asset"].(string)]
		if a["state"] != want || a["funding"] == nil {
			t.Errorf("info %s: state %v (want %s), funding %v", a["asset"], a["state"], want, a["funding"])
		}
		if a["asset"] == "tusd" && a["state_message"] != "The tUSD faucet is suspended by its operator." {
			t.Errorf("tUSD's message: %q", a["state_message"])
		}
		if got := counterValue(t, h.reg, "faucet_asset_suspended", map[string]string{"asset": a["asset"].(string)}); got != map[string]float64{stateSuspended: 1, stateReady: 0}[want] {
			t.Errorf("faucet_asset_suspended{%s} = %v", a["asset"], got)
		}
	}
	if got := counterValue(t, h.reg, "faucet_drips_total", map[string]string{"asset": "tusd", "outcome": "error", "reason": string(faucet.ReasonDisabled)}); got != 2 {
		t.Errorf("tUSD's refused drips counted %v, want 2", got)
	}
}
