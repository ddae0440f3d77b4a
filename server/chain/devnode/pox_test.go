package devnode

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/settings"
)

// A node configured with PoXSBTCContract answers /v2/pox as the 4.x
// fixture does: the same keys in the same order, pox-5 active, epochs up
// to Epoch40 with its doubled read limits, and the configured sBTC token
// with its deployer's registry.
func TestPoX4xAnnouncesSBTC(t *testing.T) {
	asset := mustAsset(t, settings.SBTCTestnet)
	h := newHarness(t, Config{Tokens: []TokenSpec{SBTCToken(asset, nil)}, PoXSBTCContract: asset.Contract})
	body := []byte(h.get("/v2/pox").body)
	raw := fixture(t, "v2-pox-pox5.json")
	if got, want := keysOf(t, body), keysOf(t, raw); !reflect.DeepEqual(got, want) {
		t.Errorf("pox keys\n got %v\nwant %v", got, want)
	}
	var got, want node.PoXInfo
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	if got.Pox5SBTCContract != "SN3VMHXEN64ZZF71JQ5VESXDWTR301XTTXGF4J8F1.sbtc-token" ||
		got.Pox5SBTCRegistryContract != "SN3VMHXEN64ZZF71JQ5VESXDWTR301XTTXGF4J8F1.sbtc-registry" {
		t.Errorf("sbtc contracts %q %q", got.Pox5SBTCContract, got.Pox5SBTCRegistryContract)
	}
	if got.ContractID != "ST000000000000000000002AMW42H.pox-5" || got.CurrentEpoch != "Epoch40" {
		t.Errorf("contract %q epoch %q", got.ContractID, got.CurrentEpoch)
	}
	ids := func(es []node.Epoch) []string {
		var out []string
		for _, e := range es {
			out = append(out, e.EpochID)
		}
		return out
	}
	if g, w := ids(got.Epochs), ids(want.Epochs); !reflect.DeepEqual(g, w) {
		t.Errorf("epochs %v, fixture %v", g, w)
	}
	last, wantLast := got.Epochs[len(got.Epochs)-1], want.Epochs[len(want.Epochs)-1]
	if last.BlockLimit != wantLast.BlockLimit || last.NetworkEpoch != wantLast.NetworkEpoch || last.EndHeight != wantLast.EndHeight {
		t.Errorf("Epoch40 %+v, fixture %+v", last, wantLast)
	}
	// PoX-5's flat minimum, as in the fixture.
	if got.MinAmountUstx != want.MinAmountUstx || got.CurrentCycle.MinThresholdUstx != want.CurrentCycle.MinThresholdUstx ||
		got.NextCycle.MinThresholdUstx != want.NextCycle.MinThresholdUstx || got.NextCycle.MinIncrementUstx != want.NextCycle.MinIncrementUstx {
		t.Errorf("minimums %d %d %d %d, fixture %d", got.MinAmountUstx, got.CurrentCycle.MinThresholdUstx,
			got.NextCycle.MinThresholdUstx, got.NextCycle.MinIncrementUstx, want.MinAmountUstx)
	}
	if e, ok := got.EpochAt(got.CurrentBurnchainBlockHeight); !ok || e.EpochID != "Epoch40" {
		t.Errorf("EpochAt(current) = %v %v", e, ok)
	}
	if len(got.ContractVersions) != len(want.ContractVersions) {
		t.Fatalf("contract versions %+v", got.ContractVersions)
	}
	pox5 := got.ContractVersions[4]
	start, _ := got.EpochStart("Epoch40")
	if pox5.ContractID != got.ContractID || pox5.ActivationBurnchainBlockHeight != start ||
		pox5.FirstRewardCycleID != start/got.RewardCycleLength+1 || got.RewardCycleID < pox5.FirstRewardCycleID {
		t.Errorf("pox-5 %+v with Epoch40 at %d, cycle %d", pox5, start, got.RewardCycleID)
	}
	for i, v := range got.ContractVersions[:4] {
		if name := v.ContractID[strings.IndexByte(v.ContractID, '.')+1:]; name != poxContracts3x[i].name {
			t.Errorf("contract version %d is %s", i, v.ContractID)
		}
	}

	// /v2/info's peer_version carries Epoch 4.0's network byte.
	var info, wantInfo node.Info
	if err := json.Unmarshal([]byte(h.get("/v2/info").body), &info); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(fixture(t, "v2-info-4x.json"), &wantInfo); err != nil {
		t.Fatal(err)
	}
	if info.PeerVersion != wantInfo.PeerVersion {
		t.Errorf("peer_version %#x, a 4.x testnet node sends %#x", info.PeerVersion, wantInfo.PeerVersion)
	}

	// In mainnet mode a 4.x node names the fixed mainnet contracts.
	h.n.SetMainnet(true)
	pox, err := h.c.PoX(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if pox.Pox5SBTCContract != "SM3VDXK3WZZSA84XXFKAFAF15NNZX32CTSG82JFQ4.sbtc-token" ||
		pox.Pox5SBTCRegistryContract != "SM3VDXK3WZZSA84XXFKAFAF15NNZX32CTSG82JFQ4.sbtc-registry" || pox.ContractID != "SP000000000000000000002Q6VF78.pox-5" {
		t.Errorf("mainnet: %q %q %q", pox.ContractID, pox.Pox5SBTCContract, pox.Pox5SBTCRegistryContract)
	}
}

// Without PoXSBTCContract the node is a 3.x one: neither field is sent, not
// even as null, and nothing names pox-5 or Epoch 4.0, even with tokens
// deployed.
func TestPoX3xOmitsSBTC(t *testing.T) {
	h := newHarness(t, Config{TokenAsset: settings.SBTCTestnet})
	body := h.get("/v2/pox").body
	for _, s := range []string{"pox_5_sbtc_contract", "pox_5_sbtc_registry_contract", "pox-5", "Epoch40"} {
		if strings.Contains(body, s) {
			t.Errorf("a 3.x /v2/pox mentions %s: %s", s, body)
		}
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatal(err)
	}
	if string(m["contract_id"]) != `"ST000000000000000000002AMW42H.pox-4"` || string(m["current_epoch"]) != `"Epoch30"` {
		t.Errorf("contract_id %s current_epoch %s", m["contract_id"], m["current_epoch"])
	}
}

// activeContract follows active_pox_contract: a contract is active only
// once the burn height is past its activation height.
func TestActivePoXContract(t *testing.T) {
	s := newPoXSchedule(mustAsset(t, settings.SBTCTestnet).Contract)
	for _, tc := range []struct {
		burn uint64
		want string
	}{{0, "pox"}, {104, "pox"}, {105, "pox-2"}, {132, "pox-3"}, {133, "pox-4"}, {pox5Activation, "pox-4"}, {pox5Activation + 1, "pox-5"}} {
		if got := s.activeContract(tc.burn); got != tc.want {
			t.Errorf("activeContract(%d) = %s, want %s", tc.burn, got, tc.want)
		}
	}
	if got := newPoXSchedule(stacks.ContractID{}).activeContract(GenesisBurnHeight + 1_000); got != "pox-4" {
		t.Errorf("3.x node: %s", got)
	}
}

func mustAsset(t testing.TB, id string) stacks.AssetInfo {
	t.Helper()
	a, err := stacks.ParseAssetID(id)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
