package devnode

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

func TestInfoReflectsState(t *testing.T) {
	h := newHarness(t, Config{})
	ctx := context.Background()
	before, err := h.c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tip0 := h.n.Tip()
	if before.StacksTipHeight != 0 || before.BurnBlockHeight != GenesisBurnHeight || before.StacksTip != tip0.Hash {
		t.Fatalf("genesis info %+v", before)
	}
	if before.NetworkID != stacks.ChainIDTestnet || before.ParentNetworkID != 3669344250 || before.PeerVersion != 0xfacade0b {
		t.Errorf("ids: network %d parent %d peer %#x", before.NetworkID, before.ParentNetworkID, before.PeerVersion)
	}
	if before.ServerVersion != ServerVersion || before.GenesisChainstateHash != genesisChainstateHash {
		t.Errorf("server %q genesis %q", before.ServerVersion, before.GenesisChainstateHash)
	}
	if before.UnanchoredTip != nil || before.UnanchoredSeq != nil || before.ExitAtBlockHeight != nil {
		t.Error("unanchored_tip/seq and exit_at_block_height must be null")
	}
	if before.IsFullySynced == nil || !*before.IsFullySynced || before.TenureHeight == nil {
		t.Error("is_fully_synced must be true and tenure_height present")
	}

	h.n.Mine()
	prev := h.n.Mine()
	if b := h.n.Mine(); b.ParentHash != prev.Hash {
		t.Errorf("block 3 parent %q, want block 2 %q", b.ParentHash, prev.Hash)
	}
	after, err := h.c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tip := h.n.Tip()
	switch {
	case after.StacksTipHeight != 3 || tip.Height != 3:
		t.Errorf("height %d / %d, want 3", after.StacksTipHeight, tip.Height)
	case after.BurnBlockHeight != GenesisBurnHeight+3 || tip.BurnHeight != after.BurnBlockHeight:
		t.Errorf("burn height %d", after.BurnBlockHeight)
	case *after.TenureHeight != 3:
		t.Errorf("tenure height %d", *after.TenureHeight)
	case after.StacksTip != tip.Hash || after.StacksTip == before.StacksTip || len(after.StacksTip) != 64:
		t.Errorf("stacks_tip %q", after.StacksTip)
	case after.StacksTipConsensusHash != tip.ConsensusHash || after.StacksTipConsensusHash == before.StacksTipConsensusHash || len(after.StacksTipConsensusHash) != 40:
		t.Errorf("consensus hash %q", after.StacksTipConsensusHash)
	case after.PoxConsensus != tip.ConsensusHash:
		t.Errorf("pox_consensus %q", after.PoxConsensus)
	case after.StableBurnBlockHeight != after.BurnBlockHeight-7 || after.StablePoxConsensus == after.PoxConsensus:
		t.Errorf("stable %d %q", after.StableBurnBlockHeight, after.StablePoxConsensus)
	}
	ibh, err := after.IndexBlockHash()
	if err != nil || ibh != tip.IndexBlockHash {
		t.Errorf("index block hash %q (%v), tip says %q", ibh, err, tip.IndexBlockHash)
	}
	// Seven blocks later the stable consensus hash is the one reported now.
	for range stableConfirmations {
		h.n.Mine()
	}
	later, _ := h.c.Info(ctx)
	if later.StablePoxConsensus != after.PoxConsensus {
		t.Errorf("stable consensus %q, want the tip's from 7 blocks ago %q", later.StablePoxConsensus, after.PoxConsensus)
	}

	h.n.SetSynced(false)
	if info, _ := h.c.Info(ctx); *info.IsFullySynced {
		t.Error("SetSynced(false) not reflected")
	}
}

// TestWireShapesMatchFixtures compares our JSON with real-node captures key
// by key, and /v2/pox at genesis with the regtest capture value by value
// (we start at its burn height, so the derived cycle fields must agree).
func TestWireShapesMatchFixtures(t *testing.T) {
	h := newHarness(t, Config{})

	t.Run("info", func(t *testing.T) {
		got := keysOf(t, []byte(h.get("/v2/info").body))
		want := keysOf(t, fixture(t, "v2-info-mainnet-nakamoto.json"))
		// The clarinet capture drops server_version; exit_at_block_height is
		// sent as null by current nodes (getinfo.rs).
		extra := map[string]bool{"server_version": true, "exit_at_block_height": true}
		var filtered []string
		for _, k := range got {
			if !extra[k] {
				filtered = append(filtered, k)
			}
		}
		if !reflect.DeepEqual(filtered, want) {
			t.Errorf("info keys\n got %v\nwant %v", got, want)
		}
	})

	t.Run("pox", func(t *testing.T) {
		body := []byte(h.get("/v2/pox").body)
		raw := fixture(t, "v2-pox-regtest-pox4.json")
		// current_epoch is newer than this capture (getpoxinfo.rs sends it
		// after epochs); everything else must match in order.
		got0 := slices.DeleteFunc(keysOf(t, body), func(k string) bool { return k == "current_epoch" })
		if want := keysOf(t, raw); !reflect.DeepEqual(got0, want) {
			t.Errorf("pox keys\n got %v\nwant %v", got0, want)
		}
		var got, want map[string]json.RawMessage
		_ = json.Unmarshal(body, &got)
		_ = json.Unmarshal(raw, &want)
		for _, k := range []string{"contract_id", "first_burnchain_block_height", "current_burnchain_block_height",
			"prepare_phase_block_length", "reward_phase_block_length", "reward_slots", "rejection_fraction",
			"epochs", "prepare_cycle_length", "reward_cycle_id", "reward_cycle_length",
			"rejection_votes_left_required", "next_reward_cycle_in", "contract_versions"} {
			if string(got[k]) != string(want[k]) {
				t.Errorf("%s\n got %s\nwant %s", k, got[k], want[k])
			}
		}
		for _, k := range []string{"current_cycle", "next_cycle"} {
			if g, w := keysOf(t, got[k]), keysOf(t, want[k]); !reflect.DeepEqual(g, w) {
				t.Errorf("%s keys %v, want %v", k, g, w)
			}
		}
		var gp, wp node.PoXInfo
		_ = json.Unmarshal(body, &gp)
		_ = json.Unmarshal(raw, &wp)
		gn, wn := gp.NextCycle, wp.NextCycle
		if gn.ID != wn.ID || gn.PreparePhaseStartBlockHeight != wn.PreparePhaseStartBlockHeight ||
			gn.BlocksUntilPreparePhase != wn.BlocksUntilPreparePhase || gn.RewardPhaseStartBlockHeight != wn.RewardPhaseStartBlockHeight ||
			gn.BlocksUntilRewardPhase != wn.BlocksUntilRewardPhase || gn.UstxUntilPoxRejection != nil {
			t.Errorf("next_cycle %+v, fixture %+v", gn, wn)
		}
		if gp.CurrentCycle.ID != wp.CurrentCycle.ID {
			t.Errorf("current cycle %d, fixture %d", gp.CurrentCycle.ID, wp.CurrentCycle.ID)
		}
	})

	t.Run("account with proof", func(t *testing.T) {
		got := keysOf(t, []byte(h.get("/v2/accounts/"+fixturePrincipal).body))
		if want := keysOf(t, fixture(t, "v2-accounts-with-proof.json")); !reflect.DeepEqual(got, want) {
			t.Errorf("keys %v, want %v", got, want)
		}
	})
}

func TestPoXReflectsState(t *testing.T) {
	alice := newWallet(t)
	h := newHarness(t, Config{Genesis: map[stacks.Address]uint64{alice.addr: 80_000_000}})
	ctx := context.Background()
	pox, err := h.c.PoX(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if pox.ContractID != "ST000000000000000000002AMW42H.pox-4" || pox.CurrentEpoch != "Epoch30" {
		t.Errorf("contract %q epoch %q", pox.ContractID, pox.CurrentEpoch)
	}
	if pox.MinAmountUstx != DefaultMinAmountUstx || pox.NextCycle.MinThresholdUstx != DefaultMinAmountUstx || pox.CurrentCycle.MinThresholdUstx != DefaultMinAmountUstx {
		t.Errorf("min amount %d / %d", pox.MinAmountUstx, pox.NextCycle.MinThresholdUstx)
	}
	if pox.TotalLiquidSupplyUstx != 80_000_000 || pox.PoxActivationThresholdUstx != 800_000 || pox.NextCycle.MinIncrementUstx != 10_000 {
		t.Errorf("supply-derived fields %d %d %d", pox.TotalLiquidSupplyUstx, pox.PoxActivationThresholdUstx, pox.NextCycle.MinIncrementUstx)
	}
	// Unlock-height consumers need distinct Epoch 2.1 / 2.2 / 2.5 starts.
	var starts []uint64
	for _, id := range []string{"Epoch21", "Epoch22", "Epoch25", "Epoch30"} {
		s, ok := pox.EpochStart(id)
		if !ok {
			t.Fatalf("%s missing", id)
		}
		starts = append(starts, s)
	}
	if !slices.IsSorted(starts) || len(slices.Compact(slices.Clone(starts))) != len(starts) {
		t.Errorf("epoch starts %v must be distinct and increasing", starts)
	}
	if e, ok := pox.EpochAt(pox.CurrentBurnchainBlockHeight); !ok || e.EpochID != pox.CurrentEpoch {
		t.Errorf("EpochAt(current) = %v %v", e, ok)
	}

	h.n.SetMinAmountUstx(90_000_000_000)
	// Mine into the prepare phase (235..239) and then into cycle 12 (240).
	for range 9 {
		h.n.Mine()
	}
	pox, _ = h.c.PoX(ctx)
	if pox.CurrentBurnchainBlockHeight != 236 || pox.NextCycle.BlocksUntilPreparePhase != -1 || pox.NextCycle.BlocksUntilRewardPhase != 4 || pox.NextRewardCycleIn != 4 {
		t.Errorf("in prepare phase: %+v", pox.NextCycle)
	}
	if pox.MinAmountUstx != 90_000_000_000 || pox.NextCycle.MinThresholdUstx != 90_000_000_000 {
		t.Errorf("SetMinAmountUstx not reflected: %d", pox.MinAmountUstx)
	}
	for range 4 {
		h.n.Mine()
	}
	pox, _ = h.c.PoX(ctx)
	if pox.RewardCycleID != 12 || pox.CurrentCycle.ID != 12 || pox.NextCycle.ID != 13 || pox.NextCycle.RewardPhaseStartBlockHeight != 260 || pox.NextRewardCycleIn != 20 {
		t.Errorf("cycle 12: id %d next %+v", pox.RewardCycleID, pox.NextCycle)
	}
}

func TestAccounts(t *testing.T) {
	h := newHarness(t, Config{})
	alice, bob := newWallet(t), newWallet(t)
	ctx := context.Background()

	type wire struct {
		Balance      string  `json:"balance"`
		Locked       string  `json:"locked"`
		UnlockHeight uint64  `json:"unlock_height"`
		Nonce        uint64  `json:"nonce"`
		BalanceProof *string `json:"balance_proof"`
		NonceProof   *string `json:"nonce_proof"`
	}
	read := func(path string) wire {
		t.Helper()
		r := h.get(path)
		if r.status != http.StatusOK || r.contentType != "application/json" {
			t.Fatalf("%s: %d %q %s", path, r.status, r.contentType, r.body)
		}
		var w wire
		if err := json.Unmarshal([]byte(r.body), &w); err != nil {
			t.Fatal(err)
		}
		return w
	}

	// Unknown: 200, zeros, and empty proofs (the key was never written).
	unknown := read("/v2/accounts/" + alice.addr.String())
	if unknown.Balance != "0x00000000000000000000000000000000" || unknown.Locked != unknown.Balance || unknown.Nonce != 0 ||
		unknown.BalanceProof == nil || *unknown.BalanceProof != "" || unknown.NonceProof == nil || *unknown.NonceProof != "" {
		t.Errorf("unknown account %+v", unknown)
	}
	if r := h.get("/v2/accounts/" + alice.addr.String() + "?proof=0"); r.body != `{"balance":"0x00000000000000000000000000000000","locked":"0x00000000000000000000000000000000","unlock_height":0,"nonce":0}` {
		t.Errorf("proof=0 body %s", r.body)
	}

	h.n.Fund(alice.addr, 1_000_000)
	funded := read("/v2/accounts/" + alice.addr.String() + "?proof=1")
	if funded.Balance != node.FormatU128(1_000_000) || !strings.HasPrefix(*funded.BalanceProof, "0x") || *funded.NonceProof != "" {
		t.Errorf("funded %+v", funded)
	}
	for _, q := range []string{"?proof=0", "?proof=true", "?proof="} {
		if w := read("/v2/accounts/" + alice.addr.String() + q); w.BalanceProof != nil || w.NonceProof != nil {
			t.Errorf("%s must omit proofs: %+v", q, w)
		}
	}

	// Nonce counts confirmed txs only.
	h.mustAccept(alice.send(t, bob.principal(), 10, 0, 180, ""))
	if acct, _ := h.c.Account(ctx, alice.addr.String()); acct.Nonce != 0 || acct.Balance != 1_000_000 {
		t.Errorf("pending tx leaked into account: %+v", acct)
	}
	h.n.Mine()
	sent := read("/v2/accounts/" + alice.addr.String())
	if sent.Nonce != 1 || !strings.HasPrefix(*sent.NonceProof, "0x") || *sent.BalanceProof == *funded.BalanceProof {
		t.Errorf("after mining %+v", sent)
	}

	// A contract principal is an account like any other.
	if w := read("/v2/accounts/" + bob.addr.String() + ".some-contract_v2?proof=0"); w.Balance != node.FormatU128(0) {
		t.Errorf("contract %+v", w)
	}

	addr := alice.addr.String()
	last := "Z"
	if strings.HasSuffix(addr, "Z") {
		last = "Y"
	}
	badChecksum := addr[:len(addr)-1] + last
	bad := []struct {
		path   string
		status int
		body   string
	}{
		{"/v2/accounts/" + badChecksum, http.StatusBadRequest, "Failed to decode: Failed to parse `principal` field"}, // bad checksum
		{"/v2/accounts/not-a-principal", http.StatusNotFound, "No such file or directory"},
		{"/v2/accounts/", http.StatusNotFound, "No such file or directory"},
		{"/v2/accounts/" + alice.addr.String() + "/extra", http.StatusNotFound, "No such file or directory"},
	}
	for _, b := range bad {
		if r := h.get(b.path); r.status != b.status || r.contentType != "text/plain" || r.body != b.body {
			t.Errorf("%s: %d %q %q", b.path, r.status, r.contentType, r.body)
		}
	}
}

func TestRoutes(t *testing.T) {
	h := newHarness(t, Config{FeeRate: 3})
	tests := []struct {
		method, path string
		status       int
		body         string
	}{
		{http.MethodGet, "/v2/fees/transfer", 200, "3"},
		{http.MethodGet, "/v2/info?tip=latest", 200, ""},
		{http.MethodGet, "/v2/pox?tip=" + strings.Repeat("0", 64), 200, ""},
		{http.MethodGet, "/v2/nope", 404, "No such file or directory"},
		{http.MethodGet, "/v2/info/", 404, "No such file or directory"},
		{http.MethodGet, "/v2/transactions", 404, "No such file or directory"},
		{http.MethodPost, "/v2/info", 404, "No such file or directory"},
		{http.MethodPut, "/v2/transactions", 404, "No such file or directory"},
		{http.MethodGet, "/v2/transactions/unconfirmed/" + strings.Repeat("A", 64), 404, "No such file or directory"},
		{http.MethodGet, "/v2/transactions/unconfirmed/" + strings.Repeat("a", 64), 404, "Transaction " + strings.Repeat("a", 64) + " not found in mempool or unconfirmed microblock stream"},
	}
	for _, tt := range tests {
		r := h.do(tt.method, tt.path, "", nil)
		if r.status != tt.status || (tt.body != "" && r.body != tt.body) {
			t.Errorf("%s %s: %d %q, want %d %q", tt.method, tt.path, r.status, r.body, tt.status, tt.body)
		}
		if r.status == 404 && r.contentType != "text/plain" {
			t.Errorf("%s %s: content type %q", tt.method, tt.path, r.contentType)
		}
	}
	rate, err := h.c.TransferFeeRate(context.Background())
	if err != nil || rate != 3 {
		t.Errorf("TransferFeeRate = %d, %v", rate, err)
	}
	h.n.SetFeeRate(7)
	if rate, _ := h.c.TransferFeeRate(context.Background()); rate != 7 {
		t.Errorf("after SetFeeRate: %d", rate)
	}
}

func TestPostTransactionBodies(t *testing.T) {
	alice, bob := newWallet(t), newWallet(t)
	tx := alice.send(t, bob.principal(), 1000, 0, 180, "")
	raw := tx.Serialize()
	txHex := hex.EncodeToString(raw)
	okBody := `"` + tx.TxID().String() + `"`

	tests := []struct {
		name        string
		contentType string
		body        []byte
		status      int
		want        string // exact body, or a prefix when it ends in "…"
	}{
		{"octet-stream", "application/octet-stream", raw, 200, okBody},
		{"json", "application/json", []byte(`{"tx":"` + txHex + `"}`), 200, okBody},
		{"json with charset", "application/json; charset=utf-8", []byte(`{"tx":"` + txHex + `","extra":1}`), 200, okBody},
		{"json with attachment", "application/json", []byte(`{"tx":"` + txHex + `","attachment":"00ff"}`), 200, okBody},
		{"json 0x prefix", "application/json", []byte(`{"tx":"0x` + txHex + `"}`), 400, "Failed to decode: Failed to parse tx"},
		{"json odd hex", "application/json", []byte(`{"tx":"abc"}`), 400, "Failed to decode: Failed to parse tx"},
		{"json not an object", "application/json", []byte(`"` + txHex + `"`), 400, "Failed to decode: Failed to parse body"},
		{"json without tx", "application/json", []byte(`{"transaction":"` + txHex + `"}`), 400, "Failed to decode: Failed to parse body"},
		{"json bad attachment", "application/json", []byte(`{"tx":"` + txHex + `","attachment":"zz"}`), 400, "Failed to decode: Failed to parse attachment"},
		{"empty body", "application/octet-stream", nil, 400, "Failed to decode: Invalid Http request: expected non-zero-length body for PostTransaction"},
		{"missing content type", "", raw, 400, "Failed to decode: Missing Content-Type for transaction"},
		{"text/plain", "text/plain", raw, 400, "Failed to decode: Wrong Content-Type for transaction; expected application/json or application/octet-stream"},
		{"octet-stream with parameters", "application/octet-stream; x=y", raw, 400, "Failed to decode: Wrong Content-Type for transaction; expected application/json or application/octet-stream"},
		{"garbage", "application/octet-stream", []byte{0x80, 0x80, 0, 0}, 400, "Failed to decode: Failed to deserialize posted transaction: …"},
		{"trailing byte", "application/octet-stream", append(append([]byte(nil), raw...), 0), 400, "Failed to decode: Failed to deserialize posted transaction: …"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Config{Genesis: map[stacks.Address]uint64{alice.addr: aliceFunds}})
			r := h.do(http.MethodPost, "/v2/transactions", tt.contentType, tt.body)
			wantCT := "text/plain"
			if tt.status == 200 {
				wantCT = "application/json"
			}
			if r.status != tt.status || r.contentType != wantCT {
				t.Fatalf("got %d %q %s, want %d %s", r.status, r.contentType, r.body, tt.status, wantCT)
			}
			if prefix, ok := strings.CutSuffix(tt.want, "…"); ok {
				if !strings.HasPrefix(r.body, prefix) || len(r.body) == len(prefix) {
					t.Errorf("body %q, want prefix %q and a detail", r.body, prefix)
				}
			} else if r.body != tt.want {
				t.Errorf("body %q, want %q", r.body, tt.want)
			}
		})
	}

	t.Run("client sees a DecodeError", func(t *testing.T) {
		h := newHarness(t, Config{})
		_, err := h.c.Broadcast(context.Background(), []byte{1, 2, 3})
		var de *node.DecodeError
		if !errors.As(err, &de) || !strings.Contains(de.Message, "Failed to deserialize posted transaction") {
			t.Fatalf("err = %v", err)
		}
		if _, err := h.n.Submit([]byte{1, 2, 3}); !errors.As(err, new(*DecodeError)) {
			t.Fatalf("Submit err = %v", err)
		}
	})

	t.Run("body limit", func(t *testing.T) {
		// Declared length over MAX_PAYLOAD_LEN: refused before reading.
		n := New(Config{})
		req := httptest.NewRequest(http.MethodPost, "/v2/transactions", strings.NewReader("x"))
		req.Header.Set("Content-Type", "application/octet-stream")
		req.ContentLength = MaxPayloadLen + 1
		rec := httptest.NewRecorder()
		n.Handler().ServeHTTP(rec, req)
		if rec.Code != 400 || rec.Body.String() != "Failed to decode: Invalid Http request: PostTransaction body is too big" {
			t.Fatalf("declared: %d %q", rec.Code, rec.Body.String())
		}
		// Undeclared (chunked) and too long: cut off by the reader.
		req = httptest.NewRequest(http.MethodPost, "/v2/transactions", strings.NewReader(strings.Repeat("x", MaxPayloadLen+1)))
		req.Header.Set("Content-Type", "application/octet-stream")
		req.ContentLength = -1
		rec = httptest.NewRecorder()
		n.Handler().ServeHTTP(rec, req)
		if rec.Code != 400 || rec.Body.String() != "Failed to decode: Invalid Http request: PostTransaction body is too big" {
			t.Fatalf("chunked: %d %q", rec.Code, rec.Body.String())
		}
	})
}

func TestUnconfirmed(t *testing.T) {
	alice, bob := newWallet(t), newWallet(t)
	h := newHarness(t, Config{Genesis: map[stacks.Address]uint64{alice.addr: aliceFunds}})
	tx := alice.send(t, bob.principal(), 1000, 0, 180, "")
	id := h.mustAccept(tx)
	r := h.get("/v2/transactions/unconfirmed/" + id.String())
	if r.status != 200 || r.body != `{"tx":"`+hex.EncodeToString(tx.Serialize())+`","status":"Mempool"}` {
		t.Fatalf("%d %s", r.status, r.body)
	}
}
