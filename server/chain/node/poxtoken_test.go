package node

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/settings"
)

// TestPoXToken: the token of the contract a 4.x node names in /v2/pox
// (testdata/v2-pox-pox5.json is a testnet node's answer); the testnet
// default from a node that names none (a 3.x answer); an error, never a
// default, for a mainnet or malformed contract or no answer at all.
func TestPoXToken(t *testing.T) {
	read := func(file string) *PoXInfo {
		t.Helper()
		var p PoXInfo
		if err := json.Unmarshal(fixture(t, file), &p); err != nil {
			t.Fatal(err)
		}
		return &p
	}
	def, err := stacks.ParseAssetID(settings.SBTCTestnet)
	if err != nil {
		t.Fatal(err)
	}
	named := read("v2-pox-pox5.json")
	other := &PoXInfo{Pox5SBTCContract: "ST2CY5V39NHDPWSXMW9QDT3HC3GD6Q6XX4CFRK9AG.my-sbtc"}
	for _, tc := range []struct {
		name       string
		pox        *PoXInfo
		want       string // the asset identifier
		wantSource string
		wantErr    string
	}{
		{"a testnet 4.x node names today's contract", named,
			"SN3VMHXEN64ZZF71JQ5VESXDWTR301XTTXGF4J8F1.sbtc-token::sbtc-token", settings.SourcePoX, ""},
		{"the node's contract wins over the default", other,
			"ST2CY5V39NHDPWSXMW9QDT3HC3GD6Q6XX4CFRK9AG.my-sbtc::sbtc-token", settings.SourcePoX, ""},
		{"a 3.x node names none: the testnet default", read("v2-pox-regtest-pox4.json"),
			def.String(), settings.SourceDefault, ""},
		{"a mainnet 4.x node", read("v2-pox-pox5-mainnet.json"), "", "", "SM3VDXK3WZZSA84XXFKAFAF15NNZX32CTSG82JFQ4.sbtc-token is a mainnet contract"},
		{"a malformed contract", &PoXInfo{Pox5SBTCContract: "sbtc-token"}, "", "", `"sbtc-token"`},
		{"no answer", nil, "", "", "no /v2/pox answer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, source, err := tc.pox.Token("sbtc-token")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || source != "" || !a.IsZero() {
					t.Fatalf("%s from %q, %v; want an error containing %q", a, source, err, tc.wantErr)
				}
				if tc.pox != nil && !errors.Is(err, ErrPoXTokenNotTestnet) {
					t.Fatalf("%v is not ErrPoXTokenNotTestnet", err)
				}
				return
			}
			if err != nil || a.String() != tc.want || source != tc.wantSource {
				t.Fatalf("%s from %q, %v; want %s from %q", a, source, err, tc.want, tc.wantSource)
			}
		})
	}
	if def.String() != named.Pox5SBTCContract+"::sbtc-token" {
		t.Errorf("the default %s is not the contract today's testnet nodes name, %s", def, named.Pox5SBTCContract)
	}
}
