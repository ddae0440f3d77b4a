package node_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stxfaucet/faucet-operator/server/chain/devnode"
	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/settings"
)

// These tests run the client against the simulated node over real HTTP:
// what the faucet reads of tokens and of /v2/pox, end to end.

func startDevnode(t *testing.T, cfg devnode.Config) (*devnode.Node, *node.Client) {
	t.Helper()
	dn := devnode.New(cfg)
	srv := httptest.NewServer(dn.Handler())
	t.Cleanup(srv.Close)
	c, err := node.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return dn, c
}

func asset(t *testing.T, id string) stacks.AssetInfo {
	t.Helper()
	a, err := stacks.ParseAssetID(id)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestTokenMetadataFromDevnode(t *testing.T) {
	sbtc := asset(t, settings.SBTCTestnet)
	usd := asset(t, "ST3F1X4QGV2SM8XD96X45M6RTQXKA1PZJZZCQAB4B.tusd-token::tusd")
	holder, err := stacks.ParsePrincipal("ST2ZRX0K27GW0SP3GJCEMHD95TQGJMKB7G9Y0X1MH")
	if err != nil {
		t.Fatal(err)
	}
	_, c := startDevnode(t, devnode.Config{Tokens: []devnode.TokenSpec{
		devnode.SBTCToken(sbtc, map[stacks.Address]uint64{holder.Address: 21}),
		{Asset: usd, Name: "Test USD", Symbol: "tUSD", Decimals: 6, Genesis: map[stacks.Address]uint64{holder.Address: 1_000_000}},
	}})
	ctx := context.Background()
	for _, tc := range []struct {
		asset   stacks.AssetInfo
		want    node.TokenMetadata
		balance uint64
	}{
		{sbtc, node.TokenMetadata{Decimals: 8, Symbol: "sBTC", Name: "sBTC"}, 21},
		{usd, node.TokenMetadata{Decimals: 6, Symbol: "tUSD", Name: "Test USD"}, 1_000_000},
	} {
		md, err := c.TokenMetadata(ctx, tc.asset.Contract)
		if err != nil {
			t.Fatalf("%s: %v", tc.asset, err)
		}
		if md != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.asset, md, tc.want)
		}
		if bal, err := c.TokenBalance(ctx, tc.asset.Contract, holder); err != nil || bal != tc.balance {
			t.Errorf("%s balance %d, %v; want %d", tc.asset, bal, err, tc.balance)
		}
	}

	// A contract the node does not have: its refusal, not an outage.
	missing, _ := stacks.ParseContractID("ST3F1X4QGV2SM8XD96X45M6RTQXKA1PZJZZCQAB4B.no-token")
	_, err = c.TokenMetadata(ctx, missing)
	var re *node.ReadOnlyError
	if !errors.As(err, &re) || re.Function != "get-decimals" || !strings.Contains(re.Cause, "NoSuchContract") || node.IsUnavailable(err) {
		t.Errorf("missing contract: %v (%T)", err, err)
	}
	// send-many-memo is a contract but no token: its getters are undefined.
	_, c = startDevnode(t, devnode.Config{SendManyContract: stacks.SendManyMemoTestnet})
	sendMany, _ := stacks.ParseContractID(stacks.SendManyMemoTestnet)
	if _, err := c.TokenMetadata(ctx, sendMany); !errors.As(err, &re) || !strings.Contains(re.Cause, "UndefinedFunction") {
		t.Errorf("send-many: %v", err)
	}
}

// PoX() reads the sBTC contract a 4.x node announces, and nothing from a
// 3.x one.
func TestPoXSBTCFromDevnode(t *testing.T) {
	sbtc := asset(t, settings.SBTCTestnet)
	_, c := startDevnode(t, devnode.Config{Tokens: []devnode.TokenSpec{devnode.SBTCToken(sbtc, nil)}, PoXSBTCContract: sbtc.Contract})
	pox, err := c.PoX(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got, err := stacks.ParseContractID(pox.Pox5SBTCContract)
	if err != nil || got != sbtc.Contract {
		t.Errorf("pox_5_sbtc_contract %q (%v), want %s", pox.Pox5SBTCContract, err, sbtc.Contract)
	}
	md, err := c.TokenMetadata(context.Background(), got)
	if err != nil || md.Decimals != 8 {
		t.Errorf("the announced token's metadata %+v, %v", md, err)
	}

	_, c = startDevnode(t, devnode.Config{TokenAsset: settings.SBTCTestnet})
	if pox, err = c.PoX(context.Background()); err != nil {
		t.Fatal(err)
	}
	if pox.Pox5SBTCContract != "" || pox.Pox5SBTCRegistryContract != "" {
		t.Errorf("3.x node: %q %q", pox.Pox5SBTCContract, pox.Pox5SBTCRegistryContract)
	}
}
