package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/stxfaucet/faucet-operator/hack/eventually"
	"github.com/stxfaucet/faucet-operator/server/chain/devnode"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/faucet"
	"github.com/stxfaucet/faucet-operator/server/guard"
	"github.com/stxfaucet/faucet-operator/server/options"
	"github.com/stxfaucet/faucet-operator/server/settings"
)

// checkServe parses args as `faucet serve` does (without FAUCET_
// variables) and validates them as it does before starting anything.
func checkServe(t *testing.T, args ...string) (options.Serve, error) {
	t.Helper()
	o := options.Defaults()
	if err := parseFlags(newServeFlags(&o), args, false); err != nil {
		return o, err
	}
	err := o.Validate()
	return o, err
}

// realNode is a command line against a real node, plus args.
func realNode(args ...string) []string {
	return append([]string{"--node-url", "http://stacks-node:20443", "--key-file", "/keys"}, args...)
}

// withTreasury is realNode's with a treasury, plus args.
func withTreasury(args ...string) []string {
	return realNode(append([]string{"--treasury-key-file", "/treasury"}, args...)...)
}

// The sBTC flags are a shorthand for a token named sbtc: --sbtc-amount
// turns it on, at --sbtc-asset or, without it, at the contract the node
// names in /v2/pox; the devnet turns it on by default at its own (which
// it announces in /v2/pox). Mainnet tokens and refill settings without a
// treasury are refused, naming the flags.
func TestSBTCFlags(t *testing.T) {
	fromPoX := faucet.Token{Name: "sbtc", FromPoX: true, Asset: stacks.AssetInfo{Name: "sbtc-token"}}
	testnet, err := stacks.ParseAssetID(settings.SBTCTestnet)
	if err != nil {
		t.Fatal(err)
	}
	other := "ST2CY5V39NHDPWSXMW9QDT3HC3GD6Q6XX4CFRK9AG.my-sbtc::sbtc-token"
	otherAsset, _ := stacks.ParseAssetID(other)
	for _, tc := range []struct {
		name string
		args []string
		// want is the sbtc engine token; zero: sBTC off
		want faucet.Token
		// wantAsset is where the devnet deploys sBTC ("" off the devnet)
		wantAsset   string
		wantErrText string
	}{
		{name: "off by default", args: realNode()},
		{name: "on", args: realNode("--sbtc-asset", settings.SBTCTestnet, "--sbtc-amount", "1000"),
			want: faucet.Token{Name: "sbtc", Asset: testnet, Amount: 1000}},
		{name: "amount alone: the contract the node names in /v2/pox", args: realNode("--sbtc-amount", "1000"),
			want: withAmount(fromPoX, 1000)},
		{name: "devnet default: its own sBTC, found in its /v2/pox", args: []string{"--devnet"},
			want: withAmount(fromPoX, options.DevnetSBTCAmount), wantAsset: settings.SBTCTestnet},
		{name: "devnet amount", args: []string{"--devnet", "--sbtc-amount", "7"}, want: withAmount(fromPoX, 7), wantAsset: settings.SBTCTestnet},
		{name: "devnet at another identifier", args: []string{"--devnet", "--sbtc-asset", other},
			want: faucet.Token{Name: "sbtc", Asset: otherAsset, Amount: options.DevnetSBTCAmount}, wantAsset: other},
		{name: "devnet without sBTC", args: []string{"--devnet", "--devnet-sbtc=false"}},
		{name: "asset without amount", args: realNode("--sbtc-asset", settings.SBTCTestnet),
			wantErrText: "--sbtc-asset needs --sbtc-amount"},
		{name: "bad asset", args: realNode("--sbtc-asset", "SN3VMHXEN64ZZF71JQ5VESXDWTR301XTTXGF4J8F1.sbtc-token", "--sbtc-amount", "1"),
			wantErrText: "--token sbtc (or --sbtc-asset/--sbtc-amount): bad asset identifier"},
		{name: "mainnet asset", args: realNode("--sbtc-asset", "SM3VDXK3WZZSA84XXFKAFAF15NNZX32CTSG82JFQ4.sbtc-token::sbtc-token", "--sbtc-amount", "1"),
			wantErrText: "mainnet contract"},
		{name: "refill without treasury", args: realNode("--sbtc-amount", "1", "--sbtc-refill-below", "5"),
			wantErrText: "--sbtc-refill-below and --sbtc-refill-amount need a treasury"},
		{name: "refill without sBTC", args: withTreasury("--sbtc-refill-amount", "5"),
			wantErrText: "need the sBTC faucet on: --sbtc-amount"},
		{name: "refill amount below threshold", args: withTreasury("--sbtc-amount", "1", "--sbtc-refill-below", "10", "--sbtc-refill-amount", "5"),
			wantErrText: "below the token refill threshold"},
		{name: "refill", args: withTreasury("--sbtc-asset", settings.SBTCTestnet, "--sbtc-amount", "1", "--sbtc-refill-below", "10", "--sbtc-refill-amount", "50"),
			want: faucet.Token{Name: "sbtc", Asset: testnet, Amount: 1, RefillBelow: 10, RefillAmount: 50}},
		{name: "a token named sbtc beside the shorthand", args: realNode("--sbtc-amount", "1", "--token", "name=sbtc,amount=2"),
			wantErrText: "the name sbtc is given twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := checkServe(t, tc.args...)
			if tc.wantErrText != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErrText) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErrText)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tokens, err := engineTokens(&o)
			if err != nil {
				t.Fatal(err)
			}
			var got faucet.Token
			for _, tok := range tokens {
				if tok.Name == "sbtc" {
					got = tok
				}
			}
			if got != tc.want {
				t.Fatalf("sBTC token %+v, want %+v", got, tc.want)
			}
			if tc.wantAsset != "" && o.DevnetSBTCAsset() != tc.wantAsset {
				t.Errorf("the devnet deploys sBTC at %s, want %s", o.DevnetSBTCAsset(), tc.wantAsset)
			}
			if l := o.RateLimits().Of("sbtc"); tc.want.Name != "" && l != guard.DefaultAssetLimits() {
				t.Errorf("sBTC limits %+v, want the default ones", l)
			}
		})
	}
}

func withAmount(t faucet.Token, amount uint64) faucet.Token {
	t.Amount = amount
	return t
}

// --sbtc-limit-address and --sbtc-limit-ip are sBTC's buckets, apart from
// STX's; 0 turns one off.
func TestSBTCLimitFlags(t *testing.T) {
	o, err := checkServe(t, realNode("--sbtc-amount", "1", "--sbtc-limit-address", "2/1h", "--sbtc-limit-ip", "0")...)
	if err != nil {
		t.Fatal(err)
	}
	want := guard.AssetLimits{PerAddress: guard.Limit{Requests: 2, Window: time.Hour}}
	if got := o.RateLimits().Of("sbtc"); got != want {
		t.Errorf("sBTC limits %+v, want %+v", got, want)
	}
	if got := o.RateLimits(); got.PerAddress != guard.DefaultLimits().PerAddress || got.PerIP != guard.DefaultLimits().PerIP {
		t.Errorf("STX limits %+v changed with sBTC's", got)
	}
}

// `faucet serve --sbtc-amount N` without --sbtc-asset against a node that
// names the sBTC contract in /v2/pox (an Epoch 4.0 node) drips that
// contract's sBTC, and says where the identifier came from.
func TestServeSBTCFromPoX(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a devnode and serve")
	}
	asset, err := stacks.ParseAssetID(settings.SBTCTestnet)
	if err != nil {
		t.Fatal(err)
	}
	key, err := stacks.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keyFile, []byte(key.Hex()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	dn := devnode.New(devnode.Config{
		BlockTime: 200 * time.Millisecond,
		Genesis:   map[stacks.Address]uint64{key.TestnetAddress(): devnetFunding},
		Tokens: []devnode.TokenSpec{devnode.SBTCToken(asset, map[stacks.Address]uint64{
			key.TestnetAddress(): 1_000_000,
		})},
		PoXSBTCContract: asset.Contract,
	})
	nodeURL, err := serveDevnode(ctx, dn, "127.0.0.1:0", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	listen := freeAddr(t)
	wg.Go(func() {
		if err := run(ctx, clock.RealClock{}, []string{"serve", "--node-url", nodeURL, "--key-file", keyFile, "--store", "memory",
			"--listen", listen, "--log-level", "error", "--sbtc-amount", "1234"}, io.Discard, io.Discard); err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	base := "http://" + listen
	waitReady(t, base)

	var sbtc struct {
		AssetIdentifier *string `json:"asset_identifier"`
		AssetSource     string  `json:"asset_source"`
		Amount          uint64  `json:"amount"`
		State           string  `json:"state"`
	}
	eventually.True(t, 30*time.Second, "/faucet/v1/info names the sBTC contract the node named, and sBTC is ready", func() bool {
		resp, err := http.Get(base + "/faucet/v1/info")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var info struct {
			Assets []json.RawMessage `json:"assets"`
		}
		if json.NewDecoder(resp.Body).Decode(&info) != nil {
			return false
		}
		for _, raw := range info.Assets {
			var a struct {
				Asset string `json:"asset"`
			}
			if json.Unmarshal(raw, &a) == nil && a.Asset == "sbtc" && json.Unmarshal(raw, &sbtc) == nil {
				return sbtc.AssetIdentifier != nil && sbtc.State == "ready"
			}
		}
		return false
	})
	if *sbtc.AssetIdentifier != settings.SBTCTestnet || sbtc.AssetSource != "pox_5_sbtc_contract" || sbtc.Amount != 1234 {
		t.Fatalf("sBTC in /faucet/v1/info: %s from %q, %d per drip", *sbtc.AssetIdentifier, sbtc.AssetSource, sbtc.Amount)
	}

	to, err := stacks.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(base+"/extended/v1/faucets/sbtc?address="+to.TestnetAddress().String(), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	var body struct {
		Success bool   `json:"success"`
		TxID    string `json:"txId"`
	}
	if err == nil {
		err = json.Unmarshal(raw, &body)
	}
	if err != nil || resp.StatusCode != http.StatusOK || !body.Success {
		t.Fatalf("sBTC drip: %d %s %v", resp.StatusCode, raw, err)
	}
	recipient := stacks.Principal{Address: to.TestnetAddress()}
	eventually.True(t, 20*time.Second, "the recipient holds the drip's sBTC", func() bool {
		return dn.TokenBalance(recipient) == 1234
	})
}
