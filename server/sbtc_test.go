package server

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/devnode"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/faucet"
	"github.com/stxfaucet/faucet-operator/server/guard"
	"github.com/stxfaucet/faucet-operator/server/settings"
)

const testSBTCAmount = 100_000 // satoshis per drip

func sbtcHarness(t *testing.T, o options) *harness {
	t.Helper()
	if o.sbtc == nil {
		o.sbtc = &sbtcOptions{funding: 1_000 * testSBTCAmount, amount: testSBTCAmount}
	}
	if _, set := o.limits.Assets["sbtc"]; !set && o.limits.PerAddress.Requests > 0 {
		// As serve does: a token configured without limits has the
		// default ones.
		o.limits = o.limits.With("sbtc", guard.DefaultAssetLimits())
	}
	return newHarness(t, o)
}

func (h *harness) dripSBTC(addr string) *httptest.ResponseRecorder {
	h.t.Helper()
	return h.do(http.MethodPost, "/extended/v1/faucets/sbtc?address="+addr, nil, nil)
}

func (h *harness) dripSBTCv3(body string) *httptest.ResponseRecorder {
	h.t.Helper()
	return h.do(http.MethodPost, "/extended/v3/faucets/sbtc", strings.NewReader(body), map[string]string{"Content-Type": "application/json"})
}

func principal(t testing.TB, s string) stacks.Principal {
	t.Helper()
	p, err := stacks.ParsePrincipal(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A v1 sBTC drip answers {success, txId, txRaw}; the bytes are a SIP-010
// transfer of the configured token with its Deny-mode post-condition, and
// the recipient's get-balance, read through the node's call-read RPC, rises
// by the amount with the next block. v3 answers {transaction, amount.sbtc}.
func TestSBTCDripV1AndV3(t *testing.T) {
	h := sbtcHarness(t, options{limits: guard.DefaultLimits()})
	to := newRecipient(t)
	w := h.dripSBTC(to)
	if w.Code != http.StatusOK {
		t.Fatalf("v1: %d %s", w.Code, w.Body)
	}
	var ok dripSuccess
	if err := json.Unmarshal(w.Body.Bytes(), &ok); err != nil || !ok.Success {
		t.Fatalf("v1 body %s: %v", w.Body, err)
	}
	assertKeys(t, decodeMap(t, w.Body.Bytes()), "success", "txId", "txRaw")
	raw, err := hex.DecodeString(ok.TxRaw)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := stacks.DecodeTransaction(raw)
	if err != nil {
		t.Fatal(err)
	}
	if tx.TxID().Hex0x() != ok.TxID {
		t.Fatalf("txId %s is not the id of txRaw (%s)", ok.TxID, tx.TxID().Hex0x())
	}
	transfer, isTransfer := stacks.ParseSIP010Transfer(tx.ContractCall)
	sender := stacks.Principal{Address: h.keys[0].TestnetAddress()}
	if !isTransfer || transfer.Contract.String()+"::sbtc-token" != settings.SBTCTestnet || transfer.Amount != testSBTCAmount ||
		transfer.Recipient != principal(t, to) || transfer.Sender != sender {
		t.Fatalf("not the SIP-010 transfer of %d to %s: %+v", testSBTCAmount, to, transfer)
	}
	if tx.PostConditionMode != stacks.PostConditionModeDeny || len(tx.PostConditions) != 1 {
		t.Fatalf("post-conditions: mode %d, %d conditions", tx.PostConditionMode, len(tx.PostConditions))
	}
	if pc := tx.PostConditions[0]; pc.Asset.String() != settings.SBTCTestnet || pc.Principal != sender ||
		pc.Code != stacks.ConditionEq || pc.Amount != testSBTCAmount {
		t.Fatalf("post-condition %+v", pc)
	}

	token := tx.ContractCall.Contract
	read := func() uint64 {
		t.Helper()
		bal, err := h.client.TokenBalance(context.Background(), token, principal(t, to))
		if err != nil {
			t.Fatal(err)
		}
		return bal
	}
	if got := read(); got != 0 {
		t.Fatalf("balance before the block: %d", got)
	}
	h.dn.Mine()
	if got := read(); got != testSBTCAmount {
		t.Fatalf("get-balance after the block: %d, want %d", got, testSBTCAmount)
	}

	w = h.dripSBTCv3(`{"address":"` + to + `"}`)
	if w.Code != http.StatusOK {
		t.Fatalf("v3: %d %s", w.Code, w.Body)
	}
	var v3 struct {
		Transaction struct {
			TxID  string `json:"tx_id"`
			Chain string `json:"chain"`
		} `json:"transaction"`
		Amount map[string]string `json:"amount"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &v3); err != nil {
		t.Fatal(err)
	}
	if v3.Transaction.Chain != "stacks" || len(v3.Transaction.TxID) != 66 || len(v3.Amount) != 1 || v3.Amount["sbtc"] != "100000" {
		t.Fatalf("v3 body %s", w.Body)
	}
	h.dn.Mine()
	if got := read(); got != 2*testSBTCAmount {
		t.Fatalf("get-balance after the v3 drip: %d", got)
	}
	// Both drips came from the one key, one nonce after the other: the
	// nonce space is the key's, shared with STX.
	if w := h.drip("address=" + to); w.Code != http.StatusOK {
		t.Fatalf("STX drip: %d %s", w.Code, w.Body)
	}
	if _, nonce := h.dn.Account(h.keys[0].TestnetAddress()); nonce != 2 {
		t.Fatalf("key nonce %d after two sBTC drips, want 2", nonce)
	}
	h.dn.Mine()
	if _, nonce := h.dn.Account(h.keys[0].TestnetAddress()); nonce != 3 {
		t.Fatalf("key nonce %d after an STX drip, want 3", nonce)
	}
}

// Without an asset and an amount the sBTC endpoints answer the incumbent's
// 403, before looking at the request, and nothing is sent.
func TestSBTCOff(t *testing.T) {
	h := newHarness(t, options{})
	w := h.dripSBTC(newRecipient(t))
	body := assertError(t, w, http.StatusForbidden, "sBTC faucet is not available")
	if body["success"] != false {
		t.Fatalf("v1 403 body %v", body)
	}
	w = h.do(http.MethodPost, "/extended/v1/faucets/sbtc", nil, nil)
	assertError(t, w, http.StatusForbidden, "sBTC faucet is not available")
	w = h.dripSBTCv3(`{"address":"` + newRecipient(t) + `"}`)
	if w.Code != http.StatusForbidden || strings.TrimSpace(w.Body.String()) != `{"error":"sBTC faucet is not available"}` {
		t.Fatalf("v3: %d %s", w.Code, w.Body)
	}
	if n := h.dn.MempoolSize(); n != 0 {
		t.Fatalf("%d transactions sent by a faucet that is off", n)
	}
	m := getInfo(t, h)
	if assets := m["assets"].([]any); len(assets) != 1 || assets[0].(map[string]any)["asset"] != "stx" {
		t.Fatalf("discovery assets %v", m["assets"])
	}
	if w, _ := getStatus(t, h, "/extended/v1/status"); w.Header().Get(headerFaucets) != "stx" {
		t.Fatalf("status %s: %q", headerFaucets, w.Header().Get(headerFaucets))
	}
	if got := counterValue(t, h.reg, "faucet_asset_enabled", map[string]string{"asset": "sbtc"}); got != 0 {
		t.Fatalf("faucet_asset_enabled{asset=sbtc} = %v", got)
	}
}

// Bad requests get the STX endpoints' 400s (stacking is STX only), keys
// that hold STX but no sBTC answer 503 out of funds on both versions, and
// sBTC drips have their own rate-limit buckets.
func TestSBTCRefusals(t *testing.T) {
	t.Run("bad requests", func(t *testing.T) {
		h := sbtcHarness(t, options{})
		mainnet := newKey(t).Address(stacks.AddressVersionMainnetSingleSig).String()
		assertError(t, h.do(http.MethodPost, "/extended/v1/faucets/sbtc", nil, nil), http.StatusBadRequest, "address required")
		body := assertError(t, h.dripSBTC(mainnet), http.StatusBadRequest, "testnet sBTC")
		if body["reason"] != "mainnet_address" {
			t.Fatalf("mainnet: %v", body)
		}
		assertError(t, h.do(http.MethodPost, "/extended/v1/faucets/sbtc?stacking=true&address="+newRecipient(t), nil, nil),
			http.StatusBadRequest, "STX only")
		if w := h.dripSBTCv3(`{"address":"` + mainnet + `"}`); w.Code != http.StatusBadRequest ||
			!strings.Contains(w.Body.String(), v3InvalidAddress) {
			t.Fatalf("v3 mainnet: %d %s", w.Code, w.Body)
		}
		if w := h.do(http.MethodPost, "/extended/v3/faucets/sbtc", strings.NewReader("address="+newRecipient(t)),
			map[string]string{"Content-Type": "application/x-www-form-urlencoded"}); w.Code != http.StatusUnsupportedMediaType {
			t.Fatalf("v3 form body: %d %s", w.Code, w.Body)
		}
		if n := h.dn.MempoolSize(); n != 0 {
			t.Fatalf("%d transactions sent for bad requests", n)
		}
	})
	t.Run("out of sBTC", func(t *testing.T) {
		h := sbtcHarness(t, options{keys: 2, sbtc: &sbtcOptions{amount: testSBTCAmount}})
		w := h.dripSBTC(newRecipient(t))
		if w.Code != http.StatusServiceUnavailable || decodeMap(t, w.Body.Bytes())["reason"] != "exhausted" {
			t.Fatalf("v1: %d %s", w.Code, w.Body)
		}
		w = h.dripSBTCv3(`{"address":"` + newRecipient(t) + `"}`)
		if w.Code != http.StatusServiceUnavailable ||
			strings.TrimSpace(w.Body.String()) != `{"error":"The faucet is temporarily out of funds, please try again later"}` {
			t.Fatalf("v3: %d %s", w.Code, w.Body)
		}
		// STX is still paid.
		if w := h.drip("address=" + newRecipient(t)); w.Code != http.StatusOK {
			t.Fatalf("STX drip with no sBTC: %d %s", w.Code, w.Body)
		}
	})
	t.Run("a key with sBTC is chosen", func(t *testing.T) {
		h := sbtcHarness(t, options{keys: 3, sbtc: &sbtcOptions{amount: testSBTCAmount}})
		rich := h.keys[2].TestnetAddress()
		h.dn.FundToken(rich, 3*testSBTCAmount)
		for i := range 3 {
			w := h.dripSBTC(newRecipient(t))
			if w.Code != http.StatusOK {
				t.Fatalf("drip %d: %d %s", i, w.Code, w.Body)
			}
			var ok dripSuccess
			_ = json.Unmarshal(w.Body.Bytes(), &ok)
			raw, _ := hex.DecodeString(ok.TxRaw)
			tx, err := stacks.DecodeTransaction(raw)
			if err != nil || tx.SenderAddress() != rich {
				t.Fatalf("drip %d sent by %v (%v), want the only key holding sBTC %s", i, tx.SenderAddress(), err, rich)
			}
		}
		if w := h.dripSBTC(newRecipient(t)); w.Code != http.StatusServiceUnavailable {
			t.Fatalf("fourth drip with sBTC for three: %d %s", w.Code, w.Body)
		}
	})
	t.Run("own rate limits", func(t *testing.T) {
		lim := guard.DefaultLimits()
		lim.PerAddress = guard.Limit{Requests: 1, Window: time.Hour}
		lim = lim.With("sbtc", guard.AssetLimits{PerAddress: guard.Limit{Requests: 1, Window: time.Hour}, PerIP: guard.DefaultAssetLimits().PerIP})
		h := sbtcHarness(t, options{limits: lim})
		to := newRecipient(t)
		if w := h.drip("address=" + to); w.Code != http.StatusOK {
			t.Fatalf("STX: %d %s", w.Code, w.Body)
		}
		if w := h.dripSBTC(to); w.Code != http.StatusOK {
			t.Fatalf("sBTC after STX: %d %s", w.Code, w.Body)
		}
		w := h.dripSBTC(to)
		if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" {
			t.Fatalf("second sBTC drip: %d %s", w.Code, w.Body)
		}
		if got := counterValue(t, h.reg, "faucet_drips_total", map[string]string{"asset": "sbtc", "outcome": "error", "reason": reasonRateLimited}); got != 1 {
			t.Fatalf("sBTC rate-limited drips counted %v", got)
		}
	})
}

// Discovery, status, metrics and the drip status endpoint say sBTC is on
// and follow an sBTC drip to its block.
func TestSBTCReported(t *testing.T) {
	h := sbtcHarness(t, options{limits: guard.DefaultLimits()})
	to := newRecipient(t)
	w := h.dripSBTC(to)
	if w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	var ok dripSuccess
	_ = json.Unmarshal(w.Body.Bytes(), &ok)
	status := func() map[string]any {
		t.Helper()
		w := h.do(http.MethodGet, "/faucet/v1/drips/"+ok.TxID, nil, nil)
		if w.Code != http.StatusOK {
			t.Fatalf("drip status %d %s", w.Code, w.Body)
		}
		return decodeMap(t, w.Body.Bytes())
	}
	if s := status(); s["state"] != "pending" || s["asset"] != "sbtc" || s["amount"] != "100000" || s["amount_ustx"] != nil || s["recipient"] != to {
		t.Fatalf("pending status %v", s)
	}
	h.dn.Mine()
	if err := h.f.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	tip := h.dn.Tip().Height
	if s := status(); s["state"] != "confirmed" || s["message"] != fmt.Sprintf("Confirmed in block %d.", tip) {
		t.Fatalf("confirmed status %v", s)
	}

	m := getInfo(t, h)
	assets := m["assets"].([]any)
	if len(assets) != 2 {
		t.Fatalf("discovery assets %v", assets)
	}
	sb := assets[1].(map[string]any)
	if sb["asset"] != "sbtc" || sb["asset_identifier"] != settings.SBTCTestnet || sb["amount"] != float64(100000) || sb["decimals"] != float64(8) ||
		sb["endpoints"].(map[string]any)["v1"] != "/extended/v1/faucets/sbtc" {
		t.Fatalf("sBTC asset %v", sb)
	}
	if lim := sb["limits"].(map[string]any); lim["address"].(map[string]any)["requests"] != float64(5) || lim["stacking"] != nil {
		t.Fatalf("sBTC limits %v", lim)
	}
	if f := sb["funding"].(map[string]any); f["drips_left"] != float64(999) {
		t.Fatalf("sBTC funding %v", f)
	}
	if w, _ := getStatus(t, h, "/extended"); w.Header().Get(headerFaucets) != "stx, sbtc" {
		t.Fatalf("status %s: %q", headerFaucets, w.Header().Get(headerFaucets))
	}
	for name, labels := range map[string]map[string]string{
		"faucet_asset_enabled":         {"asset": "sbtc"},
		"faucet_drips_left":            {"asset": "sbtc"},
		"faucet_key_token_balance":     {"asset": "sbtc", "address": h.keys[0].TestnetAddress().String()},
		"faucet_dispensed_token_total": {"asset": "sbtc"},
		"faucet_drips_total":           {"asset": "sbtc", "outcome": "success", "reason": ""},
	} {
		want := map[string]float64{"faucet_asset_enabled": 1, "faucet_drips_left": 999, "faucet_key_token_balance": 999 * testSBTCAmount,
			"faucet_dispensed_token_total": testSBTCAmount, "faucet_drips_total": 1}[name]
		if got := counterValue(t, h.reg, name, labels); got != want {
			t.Errorf("%s%v = %v, want %v", name, labels, got, want)
		}
	}
}

// TestConcurrentMixedDripsSettleExactly fires 200 concurrent drips, STX and
// sBTC mixed, at 2 keys over real HTTP while blocks are mined: no (key,
// nonce) is used twice, and once mined every accepted drip is on chain with
// STX and sBTC balances exact to the unit, on the recipients and the keys.
func TestConcurrentMixedDripsSettleExactly(t *testing.T) {
	if testing.Short() {
		t.Skip("integration load test")
	}
	const drips = 200
	const funding = 1_000 * testSBTCAmount
	h := sbtcHarness(t, options{keys: 2, sbtc: &sbtcOptions{funding: funding, amount: testSBTCAmount}, faucetCfg: func(c *faucet.Config) {
		c.Timing.PollInterval = 5 * time.Millisecond
		c.Timing.BusyWait = 20 * time.Second // below the drip timeout; CI runs packages in parallel
	}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = h.f.Run(ctx) }()
	mining := h.mineEvery(ctx, 20*time.Millisecond)
	srv := httptest.NewServer(h.h)
	defer srv.Close()
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: drips}}

	type outcome struct {
		recipient stacks.Address
		sbtc      bool
		status    int
		reason    string
		tx        *stacks.Transaction
	}
	results := make([]outcome, drips)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range drips {
		to := newKey(t).TestnetAddress()
		results[i].recipient, results[i].sbtc = to, i%2 == 1
		asset := map[bool]string{false: "stx", true: "sbtc"}[results[i].sbtc]
		wg.Go(func() {
			<-start
			resp, err := client.Post(srv.URL+"/extended/v1/faucets/"+asset+"?address="+to.String(), "", nil)
			if err != nil {
				t.Errorf("drip %d: %v", i, err)
				return
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			var m struct {
				TxRaw  string `json:"txRaw"`
				Reason string `json:"reason"`
			}
			if err := json.Unmarshal(body, &m); err != nil {
				t.Errorf("drip %d: body %q: %v", i, body, err)
				return
			}
			results[i].status, results[i].reason = resp.StatusCode, m.Reason
			if resp.StatusCode == http.StatusOK {
				raw, _ := hex.DecodeString(m.TxRaw)
				tx, err := stacks.DecodeTransaction(raw)
				if err != nil {
					t.Errorf("drip %d: %v", i, err)
					return
				}
				results[i].tx = tx
			}
		})
	}
	close(start)
	wg.Wait()

	type keyNonce struct {
		key   stacks.Address
		nonce uint64
	}
	used := map[keyNonce]bool{}
	spentSTX, spentSBTC := map[stacks.Address]uint64{}, map[stacks.Address]uint64{}
	accepted := map[bool]int{}
	for i, r := range results {
		if r.status != http.StatusOK || r.tx == nil {
			t.Fatalf("drip %d (sBTC %v): %d %q", i, r.sbtc, r.status, r.reason)
		}
		kn := keyNonce{r.tx.SenderAddress(), r.tx.Auth.Nonce}
		if used[kn] {
			t.Fatalf("duplicate (key, nonce) %s/%d", kn.key, kn.nonce)
		}
		used[kn] = true
		accepted[r.sbtc]++
		spentSTX[kn.key] += r.tx.Auth.Fee
		if r.sbtc {
			tr, ok := stacks.ParseSIP010Transfer(r.tx.ContractCall)
			if !ok || tr.Recipient.Address != r.recipient || tr.Amount != testSBTCAmount {
				t.Fatalf("sBTC drip %d: %+v", i, tr)
			}
			spentSBTC[kn.key] += tr.Amount
		} else {
			if r.tx.Payload.Recipient.Address != r.recipient || r.tx.Payload.Amount != faucet.DefaultAmount {
				t.Fatalf("STX drip %d sent %d to %s", i, r.tx.Payload.Amount, r.tx.Payload.Recipient)
			}
			spentSTX[kn.key] += r.tx.Payload.Amount
		}
	}
	cancel()
	<-mining
	for i := 0; h.dn.MempoolSize() > 0; i++ {
		if i > 20 {
			t.Fatalf("mempool still holds %d txs", h.dn.MempoolSize())
		}
		h.dn.Mine()
	}
	for _, r := range results {
		if st := h.dn.TxStatus(r.tx.TxID()); st.State != devnode.TxConfirmed {
			t.Fatalf("accepted tx %s not on chain: %v", r.tx.TxID(), st.State)
		}
		if h.dn.TxAborted(r.tx.TxID()) {
			res, _ := h.dn.TxResult(r.tx.TxID())
			t.Fatalf("tx %s mined but rolled back: %s", r.tx.TxID(), res)
		}
		stx, _ := h.dn.Account(r.recipient)
		sbtc := h.dn.TokenBalance(stacks.Principal{Address: r.recipient})
		switch {
		case r.sbtc && (stx != 0 || sbtc != testSBTCAmount):
			t.Fatalf("sBTC recipient %s holds %d µSTX and %d sats", r.recipient, stx, sbtc)
		case !r.sbtc && (stx != faucet.DefaultAmount || sbtc != 0):
			t.Fatalf("STX recipient %s holds %d µSTX and %d sats", r.recipient, stx, sbtc)
		}
	}
	for _, k := range h.keys {
		a := k.TestnetAddress()
		bal, nonce := h.dn.Account(a)
		if want := testFunding - spentSTX[a]; bal != want {
			t.Errorf("key %s: %d µSTX, want %d", a, bal, want)
		}
		if got, want := h.dn.TokenBalance(stacks.Principal{Address: a}), funding-spentSBTC[a]; got != want {
			t.Errorf("key %s: %d sats, want %d", a, got, want)
		}
		n := 0
		for kn := range used {
			if kn.key == a {
				n++
			}
		}
		if nonce != uint64(n) {
			t.Errorf("key %s: nonce %d after %d transactions", a, nonce, n)
		}
	}
	t.Logf("%d drips over 2 keys: %d STX, %d sBTC, all settled exactly", drips, accepted[false], accepted[true])
	if t.Failed() {
		fmt.Println(h.logs.String())
	}
}
