package settings

import (
	"bytes"
	"encoding/hex"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

func TestRefill(t *testing.T) {
	for _, c := range []struct {
		name                  string
		below, amount, cost   uint64
		wantBelow, wantAmount uint64
		wantErr               bool
	}{
		{name: "defaults from the drip's cost", cost: 1_000, wantBelow: 20_000, wantAmount: 200_000},
		{name: "a threshold given, the amount its default multiple", below: 5, cost: 1_000, wantBelow: 5, wantAmount: 50},
		{name: "both given", below: 5, amount: 7, cost: 1, wantBelow: 5, wantAmount: 7},
		{name: "a refill below its threshold", below: 10, amount: 9, cost: 1, wantBelow: 10, wantAmount: 9, wantErr: true},
		{name: "a zero cost counts as one", wantBelow: 20, wantAmount: 200},
		{name: "saturates instead of wrapping", cost: math.MaxUint64, wantBelow: math.MaxUint64, wantAmount: math.MaxUint64},
	} {
		t.Run(c.name, func(t *testing.T) {
			below, amount, err := Refill(c.below, c.amount, c.cost)
			if below != c.wantBelow || amount != c.wantAmount || (err != nil) != c.wantErr {
				t.Errorf("Refill(%d, %d, %d) = %d, %d, %v; want %d, %d, error %v", c.below, c.amount, c.cost, below, amount, err, c.wantBelow, c.wantAmount, c.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), "must lift a key above it") {
				t.Errorf("error %q does not say why", err)
			}
		})
	}
}

func TestFunding(t *testing.T) {
	if got := DripCost(500, 100); got != 600 {
		t.Errorf("DripCost(500, 100) = %d", got)
	}
	if got := DripCost(math.MaxUint64, 1); got != math.MaxUint64 {
		t.Errorf("DripCost does not saturate: %d", got)
	}
	if got := DripCost(0, 0); got != 1 {
		t.Errorf("DripCost(0, 0) = %d, want 1 (it divides)", got)
	}
	for _, c := range []struct {
		left, low uint64
		want      FundingLevel
	}{{0, 100, FundsEmpty}, {99, 100, FundsLow}, {100, 100, FundsOK}, {0, 0, FundsEmpty}} {
		if got := LevelOf(c.left, c.low); got != c.want {
			t.Errorf("LevelOf(%d, %d) = %s, want %s", c.left, c.low, got, c.want)
		}
	}
}

func TestValidAssetName(t *testing.T) {
	for name, want := range map[string]bool{
		"stx": true, "tusd": true, "my-token2": true, strings.Repeat("a", 32): true,
		"": false, "Stx": false, "2fa": false, "a_b": false, "a.b": false, strings.Repeat("a", 33): false,
	} {
		if got := ValidAssetName(name); got != want {
			t.Errorf("ValidAssetName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestOrDefault(t *testing.T) {
	if got := OrDefault(0, 5); got != 5 {
		t.Errorf("zero: %d", got)
	}
	if got := OrDefault(-1, 5); got != 5 {
		t.Errorf("negative: %d", got)
	}
	if got := OrDefault(3, 5); got != 3 {
		t.Errorf("set: %d", got)
	}
	if got := OrDefault(time.Duration(0), time.Second); got != time.Second {
		t.Errorf("duration: %s", got)
	}
}

// SBTCTestnet is a testnet multisig (SN, version 21) contract's token: the
// hash160 below is what an independent c32check decoder reads from its
// address, with the checksum it carries, so a typo in the constant fails.
func TestSBTCTestnet(t *testing.T) {
	a, err := stacks.ParseAssetID(SBTCTestnet)
	if err != nil {
		t.Fatalf("%s: %v", SBTCTestnet, err)
	}
	addr := a.Contract.Address
	if addr.Version != stacks.AddressVersionTestnetMultiSig || !addr.IsTestnet() || a.Contract.Name != "sbtc-token" || a.Name != "sbtc-token" {
		t.Fatalf("%s: version %d, contract %q, token %q", SBTCTestnet, addr.Version, a.Contract.Name, a.Name)
	}
	want, _ := hex.DecodeString("f748f5d5313ff79c32b976ecf5bcd60600f75aec")
	if !bytes.Equal(addr.Hash160[:], want) {
		t.Fatalf("hash160 %x, want %x", addr.Hash160, want)
	}
	if got := (stacks.Address{Version: stacks.AddressVersionTestnetMultiSig, Hash160: [20]byte(want)}).String(); got != "SN3VMHXEN64ZZF71JQ5VESXDWTR301XTTXGF4J8F1" {
		t.Fatalf("the hash160 encodes as %s", got)
	}
	if _, err := stacks.ParseTestnetPrincipal(a.Contract.String()); err != nil {
		t.Fatalf("not a testnet principal: %v", err)
	}
}
