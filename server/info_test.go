package server

import (
	"context"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/devnode"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/faucet"
	"github.com/stxfaucet/faucet-operator/server/guard"
)

func getInfo(t *testing.T, h *harness) map[string]any {
	t.Helper()
	w := h.do(http.MethodGet, "/faucet/v1/info", nil, nil)
	if w.Code != http.StatusOK {
		t.Fatalf("info: status %d: %s", w.Code, w.Body)
	}
	// Amounts and counts are numbers, never quoted.
	if m := quotedNumber.FindString(w.Body.String()); m != "" {
		t.Errorf("info writes a number as a string: %s", m)
	}
	return decodeMap(t, w.Body.Bytes())
}

var quotedNumber = regexp.MustCompile(`"(default_ustx|stacking_ustx|balance_cap_ustx|amount|balance|drips_left|large|xlarge)":"`)

func TestInfoReady(t *testing.T) {
	h := newHarness(t, options{limits: guard.DefaultLimits()})
	m := getInfo(t, h)
	assertKeys(t, m, "network", "chain_id", "state", "state_message", "chain_tip", "amounts", "limits",
		"challenge", "explorer_tx_url", "devnet", "balance_cap_ustx", "funding", "assets", "server_version", "sign_in")
	if m["devnet"] != false {
		t.Errorf("devnet = %v on a faucet not started with --devnet", m["devnet"])
	}
	if m["network"] != "testnet" || m["state"] != stateReady {
		t.Errorf("network %v state %v (%v)", m["network"], m["state"], m["state_message"])
	}
	if m["chain_id"] != float64(stacks.ChainIDTestnet) {
		t.Errorf("chain_id = %v", m["chain_id"])
	}
	tip := m["chain_tip"].(map[string]any)
	if tip["height"] != float64(h.dn.Tip().Height) {
		t.Errorf("tip %v, node at %d", tip, h.dn.Tip().Height)
	}
	am := m["amounts"].(map[string]any)
	if am["default_ustx"] != float64(500000000) {
		t.Errorf("default_ustx = %v", am["default_ustx"])
	}
	// The devnode's PoX minimum plus 20 %.
	want := float64(devnode.DefaultMinAmountUstx * 120 / 100)
	if am["stacking_ustx"] != want {
		t.Errorf("stacking_ustx = %v, want %v", am["stacking_ustx"], want)
	}
	lim := m["limits"].(map[string]any)
	if a := lim["address"].(map[string]any); a["requests"] != float64(5) || a["window_seconds"] != float64(300) {
		t.Errorf("address limit %v", a)
	}
	if s := lim["stacking"].(map[string]any); s["requests"] != float64(1) || s["window_seconds"] != float64(172800) {
		t.Errorf("stacking limit %v", s)
	}
	ch := m["challenge"].(map[string]any)
	if ch["required"] != false || ch["difficulty"] != float64(0) || ch["endpoint"] != "/faucet/v1/challenge" {
		t.Errorf("challenge %v", ch)
	}
	if m["explorer_tx_url"] != DefaultExplorerTxURL || m["balance_cap_ustx"] != nil {
		t.Errorf("explorer %v cap %v", m["explorer_tx_url"], m["balance_cap_ustx"])
	}
	// Counts and amounts are JSON numbers, whole ones.
	n := uint64(m["funding"].(map[string]any)["drips_left"].(float64))
	if n < 1000 || n > testFunding/faucet.DefaultAmount {
		t.Errorf("drips_left = %d", n)
	}
	// balance: the keys' available µSTX, enough for every drip left.
	bal := uint64(m["funding"].(map[string]any)["balance"].(float64))
	if bal < n*faucet.DefaultAmount || bal%testFunding != 0 {
		t.Errorf("funding.balance = %d, drips_left %d", bal, n)
	}
	if f := m["assets"].([]any)[0].(map[string]any)["funding"].(map[string]any); f["balance"] != m["funding"].(map[string]any)["balance"] {
		t.Errorf("stx asset funding %v", f)
	}
	if !strings.Contains(m["server_version"].(string), "v0.1.0") {
		t.Errorf("server_version %v", m["server_version"])
	}
}

func TestInfoStates(t *testing.T) {
	t.Run("suspended", func(t *testing.T) {
		h := newHarness(t, options{disabled: true})
		if s := getInfo(t, h)["state"]; s != stateSuspended {
			t.Errorf("state %v", s)
		}
	})
	t.Run("node unreachable", func(t *testing.T) {
		h := newHarness(t, options{})
		h.dn.SetDown(true)
		m := getInfo(t, h)
		if m["state"] != stateNodeUnreachable || m["chain_tip"] != nil {
			t.Errorf("state %v tip %v", m["state"], m["chain_tip"])
		}
	})
	t.Run("empty", func(t *testing.T) {
		h := newHarness(t, options{unfunded: true})
		if s := getInfo(t, h)["state"]; s != stateEmpty {
			t.Errorf("state %v", s)
		}
	})
	t.Run("low", func(t *testing.T) {
		// testFunding pays about 2,000 default drips.
		h := newHarness(t, options{lowDrips: 5000})
		m := getInfo(t, h)
		if m["state"] != stateLow || !strings.Contains(m["state_message"].(string), "drips left") {
			t.Errorf("state %v: %v", m["state"], m["state_message"])
		}
	})
}

func TestInfoChallengeAndCap(t *testing.T) {
	h := newHarness(t, options{guard: &guard.Config{PoW: guard.PoWConfig{Difficulty: 12}, BalanceCap: 7_000_000}})
	m := getInfo(t, h)
	ch := m["challenge"].(map[string]any)
	if ch["required"] != true || ch["difficulty"] != float64(12) {
		t.Errorf("challenge %v", ch)
	}
	if m["balance_cap_ustx"] != float64(7000000) {
		t.Errorf("balance_cap_ustx %v", m["balance_cap_ustx"])
	}
}

func dripStatus(t *testing.T, h *harness, txid string) map[string]any {
	t.Helper()
	w := h.do(http.MethodGet, "/faucet/v1/drips/"+txid, nil, nil)
	if w.Code != http.StatusOK {
		t.Fatalf("drip status: %d %s", w.Code, w.Body)
	}
	return decodeMap(t, w.Body.Bytes())
}

// A drip is pending while in the mempool and confirmed, with its block, once
// mined; the record comes from the faucet's own history.
func TestDripStatusLifecycle(t *testing.T) {
	h := newHarness(t, options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.f.Run(ctx) }() // writes the history
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("engine: %v", err)
		}
	})

	to := newRecipient(t)
	w := h.drip("address=" + to)
	if w.Code != http.StatusOK {
		t.Fatalf("drip: %d %s", w.Code, w.Body)
	}
	txid := decodeMap(t, w.Body.Bytes())["txId"].(string)
	m := dripStatus(t, h, txid)
	if m["state"] != dripPending || m["tx_id"] != txid || m["recipient"] != to || m["amount_ustx"] != "500000000" {
		t.Fatalf("before mining: %v", m)
	}
	blk := h.dn.Mine()
	// The engine sees the block (its poll loop does this every second).
	if err := h.f.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	m = dripStatus(t, h, strings.TrimPrefix(txid, "0x"))
	if m["state"] != dripConfirmed || m["block_height"] != float64(blk.Height) {
		t.Fatalf("after mining block %d: %v", blk.Height, m)
	}
	if !strings.Contains(m["message"].(string), strconv.FormatUint(blk.Height, 10)) {
		t.Errorf("message %q", m["message"])
	}
}

// Without a transaction index on the node the faucet still learns a drip
// was mined: the sender's nonce moved past it.
func TestDripStatusWithoutTxIndex(t *testing.T) {
	h := newHarness(t, options{devnode: devnode.Config{NoTxIndex: true}})
	w := h.drip("address=" + newRecipient(t))
	txid := decodeMap(t, w.Body.Bytes())["txId"].(string)
	if m := dripStatus(t, h, txid); m["state"] != dripPending {
		t.Fatalf("before mining: %v", m)
	}
	h.dn.Mine()
	if err := h.f.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if m := dripStatus(t, h, txid); m["state"] != dripConfirmed || m["block_height"] != nil {
		t.Fatalf("after mining: %v", m)
	}
}

func TestDripStatusUnknownAndInvalid(t *testing.T) {
	h := newHarness(t, options{})
	m := dripStatus(t, h, "0x"+strings.Repeat("ab", 32))
	if m["state"] != dripUnknown || m["recipient"] != nil {
		t.Errorf("unknown txid: %v", m)
	}
	for _, bad := range []string{"0x1234", strings.Repeat("zz", 32), "%00"} {
		w := h.do(http.MethodGet, "/faucet/v1/drips/"+bad, nil, nil)
		m := assertError(t, w, http.StatusBadRequest, "invalid txid")
		if m["reason"] != "invalid_txid" {
			t.Errorf("%q: reason %v", bad, m["reason"])
		}
	}
}

func TestChallengeEndpoint(t *testing.T) {
	h := newHarness(t, options{guard: &guard.Config{PoW: guard.PoWConfig{Difficulty: 8, TTL: time.Minute}}})
	w := h.do(http.MethodPost, "/faucet/v1/challenge", nil, nil)
	if w.Code != http.StatusOK || w.Header().Get("Cache-Control") != "no-store" {
		t.Fatalf("status %d cache %q: %s", w.Code, w.Header().Get("Cache-Control"), w.Body)
	}
	m := decodeMap(t, w.Body.Bytes())
	assertKeys(t, m, "challenge", "difficulty", "algorithm", "expires_at", "expires_in_seconds")
	if in := m["expires_in_seconds"].(float64); in < 59 || in > 60 {
		t.Errorf("expires_in_seconds = %v, want 60", in)
	}
	if m["difficulty"] != float64(8) || m["algorithm"] != "sha256-leading-zero-bits" {
		t.Errorf("challenge %v", m)
	}
	exp, err := time.Parse(time.RFC3339, m["expires_at"].(string))
	if err != nil || time.Until(exp) > time.Minute+time.Second || time.Until(exp) < 50*time.Second {
		t.Errorf("expires_at %v (%v)", m["expires_at"], err)
	}
	if w := h.do(http.MethodGet, "/faucet/v1/challenge", nil, nil); w.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET challenge: %d", w.Code)
	}
	off := newHarness(t, options{})
	assertError(t, off.do(http.MethodPost, "/faucet/v1/challenge", nil, nil), http.StatusNotFound, "no proof of work")
}

// The funding gauges follow the engine: drips left, the threshold the
// alerts compare it with, and whether the node answered the last poll.
func TestFundingMetrics(t *testing.T) {
	h := newHarness(t, options{lowDrips: 250})
	if got := counterValue(t, h.reg, "faucet_node_up", map[string]string{}); got != 0 {
		t.Errorf("faucet_node_up before any poll = %v", got)
	}
	if err := h.f.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := counterValue(t, h.reg, "faucet_node_up", map[string]string{}); got != 1 {
		t.Errorf("faucet_node_up = %v", got)
	}
	left := counterValue(t, h.reg, "faucet_drips_left", map[string]string{"asset": "stx"})
	if want := float64(testFunding / (faucet.DefaultAmount + faucet.DefaultFeeFallback)); left != want {
		t.Errorf("faucet_drips_left = %v, want %v", left, want)
	}
	if got := counterValue(t, h.reg, "faucet_low_drips_threshold", map[string]string{"asset": "stx"}); got != 250 {
		t.Errorf("faucet_low_drips_threshold = %v", got)
	}
	if got := counterValue(t, h.reg, "faucet_funds_available_ustx", map[string]string{}); got != float64(testFunding) {
		t.Errorf("faucet_funds_available_ustx = %v", got)
	}
	h.dn.SetDown(true)
	_ = h.f.Sync(context.Background())
	if got := counterValue(t, h.reg, "faucet_node_up", map[string]string{}); got != 0 {
		t.Errorf("faucet_node_up with the node down = %v", got)
	}
}

// The treasury's writer reports its balance and refill counters.
func TestTreasuryMetrics(t *testing.T) {
	treasury := newKey(t)
	h := newHarness(t, options{faucetCfg: func(c *faucet.Config) { c.Refills.Treasury = treasury }})
	h.dn.Fund(treasury.TestnetAddress(), 7_000_000_000_000)
	h.dn.Mine()
	if err := h.f.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	addr := map[string]string{"address": treasury.TestnetAddress().String()}
	if got := counterValue(t, h.reg, "faucet_treasury_balance_ustx", addr); got != 7_000_000_000_000 {
		t.Errorf("faucet_treasury_balance_ustx = %v", got)
	}
	if got := counterValue(t, h.reg, "faucet_refills_total", map[string]string{"outcome": "sent"}); got != 0 {
		t.Errorf("refills sent = %v, want 0 (the key is well funded)", got)
	}
}

// TestInfoFundingBalance: each asset's funding.balance is what it can
// spend, in its base units: the keys' available sBTC, the BTC faucet's
// spendable coins.
func TestInfoFundingBalance(t *testing.T) {
	t.Run("sbtc", func(t *testing.T) {
		h := sbtcHarness(t, options{})
		sb := getInfo(t, h)["assets"].([]any)[1].(map[string]any) // reads the balances first
		tf, _ := h.f.TokenFunding("sbtc")
		if f := sb["funding"].(map[string]any); sb["asset"] != "sbtc" || tf.Available == 0 || f["balance"] != float64(tf.Available) {
			t.Fatalf("sBTC funding %v, want balance %d", f, tf.Available)
		}
	})
	t.Run("btc", func(t *testing.T) {
		e := newBTCEnv(t, options{})
		var b map[string]any
		for _, a := range getInfo(t, e.harness)["assets"].([]any) {
			if a.(map[string]any)["asset"] == "btc" {
				b = a.(map[string]any)
			}
		}
		want := e.bf.Status().Balance
		if f, _ := b["funding"].(map[string]any); want <= 0 || f["balance"] != float64(want) {
			t.Fatalf("BTC asset %v, want balance %d", b, want)
		}
	})
}

// Under `serve --devnet` info says so: the page then links drips to the
// faucet's own status, since no public explorer knows them.
func TestInfoDevnet(t *testing.T) {
	h := newHarness(t, options{devnet: true})
	if m := getInfo(t, h); m["devnet"] != true {
		t.Fatalf("devnet = %v, want true", m["devnet"])
	}
}
