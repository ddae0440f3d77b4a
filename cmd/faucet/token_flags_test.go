package main

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/guard"
	"github.com/stxfaucet/faucet-operator/server/options"
)

const (
	tusdAsset = "ST2CY5V39NHDPWSXMW9QDT3HC3GD6Q6XX4CFRK9AG.tusd-token::tusd"
	eurAsset  = "ST2CY5V39NHDPWSXMW9QDT3HC3GD6Q6XX4CFRK9AG.eur-token::eur"
)

// --token adds SIP-010 tokens, in order, each with its own limits (the
// default ones unless given), refills and threshold of "low"; one value
// may hold several, separated by ';', as FAUCET_TOKEN does.
func TestTokenFlags(t *testing.T) {
	tusd := options.Token{Name: "tusd", Asset: tusdAsset, Amount: 10_000_000, Limits: guard.DefaultAssetLimits()}
	eur := options.Token{Name: "eur", Asset: eurAsset, Amount: 5,
		Limits:      guard.AssetLimits{PerAddress: guard.Limit{Requests: 1, Window: time.Hour}},
		RefillBelow: 100, RefillAmount: 1000, LowDrips: 3}
	const eurFlag = "name=eur,asset=" + eurAsset + ",amount=5,limit-address=1/1h,limit-ip=0,refill-below=100,refill-amount=1000,low-drips=3"
	for name, args := range map[string][]string{
		"repeated":           withTreasury("--token", "name=tusd,asset="+tusdAsset+",amount=10000000", "--token", eurFlag),
		"one value, two":     withTreasury("--token", "name=tusd,asset="+tusdAsset+",amount=10000000;"+eurFlag),
		"spaces and a blank": withTreasury("--token", " name=tusd, asset="+tusdAsset+" ,amount=10000000 ; ;"+eurFlag+";"),
	} {
		t.Run(name, func(t *testing.T) {
			o, err := checkServe(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := o.TokenList(), []options.Token{tusd, eur}; !reflect.DeepEqual(got, want) {
				t.Fatalf("tokens\n %+v\nwant\n %+v", got, want)
			}
			engine, err := engineTokens(&o)
			if err != nil {
				t.Fatal(err)
			}
			if len(engine) != 2 || engine[1].Name != "eur" || engine[1].Asset.String() != eurAsset || engine[1].FromPoX ||
				engine[1].Amount != 5 || engine[1].RefillBelow != 100 || engine[1].RefillAmount != 1000 {
				t.Errorf("engine tokens %+v", engine)
			}
			l := o.RateLimits()
			if l.Of("tusd") != guard.DefaultAssetLimits() || l.Of("eur") != eur.Limits {
				t.Errorf("limits: tusd %+v, eur %+v", l.Of("tusd"), l.Of("eur"))
			}
			if got := o.LowDrips(); !reflect.DeepEqual(got, map[string]int{"eur": 3}) {
				t.Errorf("LowDrips %v", got)
			}
			// What Args renders, serve parses back.
			back, err := checkServe(t, o.Args()...)
			if err != nil || !reflect.DeepEqual(back, o) {
				t.Errorf("Args %q parse to %+v, %v; want %+v", o.Args(), back, err, o)
			}
		})
	}

	t.Run("FAUCET_TOKEN", func(t *testing.T) {
		clearServeEnv(t)
		t.Setenv("FAUCET_TOKEN", "name=tusd,asset="+tusdAsset+",amount=10000000;"+eurFlag)
		o := options.Defaults()
		if err := parseWithEnv(newServeFlags(&o), withTreasury()); err != nil {
			t.Fatal(err)
		}
		if got := o.Assets.Tokens; !reflect.DeepEqual([]options.Token(got), []options.Token{tusd, eur}) {
			t.Errorf("FAUCET_TOKEN gave %+v", got)
		}
	})

	t.Run("sbtc without an asset: the sBTC contract the node names", func(t *testing.T) {
		o, err := checkServe(t, realNode("--token", "name=sbtc,amount=9")...)
		if err != nil {
			t.Fatal(err)
		}
		engine, err := engineTokens(&o)
		if err != nil || len(engine) != 1 || !engine[0].FromPoX || engine[0].Asset != (stacks.AssetInfo{Name: "sbtc-token"}) {
			t.Errorf("engine tokens %+v, %v", engine, err)
		}
	})

	t.Run("the devnet's tUSD", func(t *testing.T) {
		names := func(args ...string) []string {
			t.Helper()
			o, err := checkServe(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, tok := range o.TokenList() {
				out = append(out, tok.Name+"="+tok.Asset)
			}
			return out
		}
		if got, want := names("--devnet"), []string{"sbtc=", "tusd=" + options.DevnetTestTokenAsset}; !slices.Equal(got, want) {
			t.Errorf("--devnet: %q, want %q", got, want)
		}
		if got, want := names("--devnet", "--devnet-test-token=false", "--devnet-sbtc=false"), []string(nil); !slices.Equal(got, want) {
			t.Errorf("--devnet without its tokens: %q", got)
		}
		// A token of the user's named tusd replaces the devnet's.
		if got, want := names("--devnet", "--devnet-sbtc=false", "--token", "name=tusd,asset="+eurAsset+",amount=1"), []string{"tusd=" + eurAsset}; !slices.Equal(got, want) {
			t.Errorf("--devnet --token name=tusd: %q, want %q", got, want)
		}
	})
}

// A mistake in --token is a usage error (exit 2) of one line naming the
// flag and what is wrong.
func TestTokenFlagErrors(t *testing.T) {
	keyFile := writeKeyFile(t)
	real := []string{"serve", "--node-url", "http://127.0.0.1:1", "--key-file", keyFile, "--store", "memory"}
	for _, c := range []struct {
		name string
		args []string
		env  string // FAUCET_TOKEN
		want string // stderr's first line
	}{
		{name: "unknown key", args: []string{"--token", "name=x,amount=1,colour=red"},
			want: `faucet serve: invalid value "name=x,amount=1,colour=red" for --token: colour: unknown key`},
		{name: "no name", args: []string{"--token", "asset=" + tusdAsset + ",amount=1"},
			want: `faucet serve: invalid value "asset=` + tusdAsset + `,amount=1" for --token: name and amount are required, e.g. name=tusd,asset=ADDR.contract::token,amount=1000000`},
		{name: "no amount", args: []string{"--token", "name=tusd,asset=" + tusdAsset},
			want: `faucet serve: invalid value "name=tusd,asset=` + tusdAsset + `" for --token: name and amount are required, e.g. name=tusd,asset=ADDR.contract::token,amount=1000000`},
		{name: "not a number", args: []string{"--token", "name=x,amount=lots"},
			want: `faucet serve: invalid value "name=x,amount=lots" for --token: amount: want a whole number, 0 or more`},
		{name: "a key twice", args: []string{"--token", "name=x,amount=1,amount=2"},
			want: `faucet serve: invalid value "name=x,amount=1,amount=2" for --token: "amount=2": want key=value pairs, each key once (name, asset, amount, limit-address, limit-ip, refill-below, refill-amount, low-drips)`},
		{name: "bad limit", args: []string{"--token", "name=x,amount=1,limit-ip=5"},
			want: `faucet serve: invalid value "name=x,amount=1,limit-ip=5" for --token: limit-ip: want N/window, e.g. 5/5m, or 0 to disable`},
		{name: "in FAUCET_TOKEN", env: "name=x,amount=1;name=y",
			want: `faucet serve: invalid value "name=x,amount=1;name=y" in FAUCET_TOKEN for --token: name and amount are required, e.g. name=tusd,asset=ADDR.contract::token,amount=1000000`},
		{name: "bad asset", args: []string{"--token", "name=tusd,asset=ST2CY5V39NHDPWSXMW9QDT3HC3GD6Q6XX4CFRK9AG.tusd-token,amount=1"},
			want: `faucet serve: --token tusd: bad asset identifier "ST2CY5V39NHDPWSXMW9QDT3HC3GD6Q6XX4CFRK9AG.tusd-token": want ADDR.contract::token`},
		{name: "mainnet asset", args: []string{"--token", "name=tusd,asset=SM3VDXK3WZZSA84XXFKAFAF15NNZX32CTSG82JFQ4.tusd-token::tusd,amount=1"},
			want: `faucet serve: --token tusd: token tusd: SM3VDXK3WZZSA84XXFKAFAF15NNZX32CTSG82JFQ4.tusd-token::tusd is a mainnet contract; the faucet is testnet only`},
		{name: "bad name", args: []string{"--token", "name=USD,asset=" + tusdAsset + ",amount=1"},
			want: `faucet serve: --token USD: token name "USD": want 1 to 32 lower-case letters, digits or '-', starting with a letter`},
		{name: "STX's name", args: []string{"--token", "name=stx,asset=" + tusdAsset + ",amount=1"},
			want: `faucet serve: --token stx: token name "stx" is STX's`},
		{name: "zero amount", args: []string{"--token", "name=tusd,asset=" + tusdAsset + ",amount=0"},
			want: `faucet serve: --token tusd: token tusd: the amount per drip must be positive`},
		{name: "duplicate names", args: []string{"--token", "name=tusd,asset=" + tusdAsset + ",amount=1", "--token", "name=tusd,asset=" + eurAsset + ",amount=2"},
			want: `faucet serve: --token tusd: the name tusd is given twice`},
		{name: "no asset, not sbtc", args: []string{"--token", "name=tusd,amount=1"},
			want: `faucet serve: --token tusd: asset=ADDR.contract::token is required (only sbtc may leave it out, to use the contract the node names in /v2/pox)`},
		{name: "refill without a treasury", args: []string{"--token", "name=tusd,asset=" + tusdAsset + ",amount=1,refill-below=10"},
			want: `faucet serve: --token tusd: refill-below and refill-amount need a treasury: --treasury-key-file (or --devnet-treasury)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			clearServeEnv(t)
			if c.env != "" {
				t.Setenv("FAUCET_TOKEN", c.env)
			}
			stdout, stderr, code := runCLI(t, append(slices.Clone(real), c.args...)...)
			if want := c.want + "\nRun 'faucet serve -h' for the flags.\n"; code != exitUsage || stderr != want || stdout != "" {
				t.Errorf("exit %d, stderr:\n%s\nwant exit 2 and:\n%s\nstdout: %q", code, stderr, want, stdout)
			}
		})
	}
	stdout, _, _ := runCLI(t, "serve", "-h")
	if !strings.Contains(stdout, "\nassets:\n  --token name=…,asset=…,amount=…\n") {
		t.Errorf("serve -h lacks --token under assets:\n%s", stdout)
	}
}
