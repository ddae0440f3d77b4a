package options_test

import (
	"flag"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/guard"
	"github.com/stxfaucet/faucet-operator/server/identity"
	"github.com/stxfaucet/faucet-operator/server/options"
	"github.com/stxfaucet/faucet-operator/server/settings"
)

// parse binds serve's flags to a copy of Defaults() and parses args, as
// `faucet serve` does (without its environment variables).
func parse(t *testing.T, args ...string) options.Serve {
	t.Helper()
	o := options.Defaults()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.BindFlags(options.NewFlags(fs))
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %q: %v", args, err)
	}
	if fs.NArg() != 0 {
		t.Fatalf("parse %q: %q left over", args, fs.Args())
	}
	return o
}

// Defaults() is what an empty command line parses to: the flags' defaults
// are the struct's, written nowhere else.
func TestDefaultsAreTheFlagDefaults(t *testing.T) {
	if got, want := parse(t), options.Defaults(); !reflect.DeepEqual(got, want) {
		t.Errorf("an empty command line parses to\n %+v\nDefaults() is\n %+v", got, want)
	}
	if args := options.Defaults().Args(); len(args) != 0 {
		t.Errorf("Defaults().Args() = %q, want none", args)
	}
}

// everySet is a Serve with every field away from its default (a token with
// every key, the BTC network, lists of both address families, limits,
// durations), as one would not run it: Validate is not asked.
func everySet() options.Serve {
	return options.Serve{
		Node: options.Node{URLs: options.URLList{"https://node.example.com:20443"}, Timeout: 15 * time.Second, ChainID: 2147483648,
			HeadersFile: "/etc/faucet/node-headers/headers", PollInterval: 20 * time.Second, BusyPollInterval: 2 * time.Second},
		Keys: options.Keys{File: "/etc/faucet/keys/keys", TreasuryFile: "/etc/faucet/treasury/keys", RefillBelow: 40_000_000, RefillAmount: 400_000_000},
		Amounts: options.Amounts{Default: 1_000_000, Stacking: 90_000_000_000, StackingPadding: 7,
			Memo: "hello, faucet; = x"}, // the separators of --token mean nothing here
		Fees:     options.Fees{Min: 200, Max: 5000, Fallback: 300, Reserve: 1234},
		Sending:  options.Sending{MaxInFlight: 9, BusyWait: 1500 * time.Millisecond, StuckBlocks: 7},
		Batching: options.Batching{Max: 150, Window: 400 * time.Millisecond, Contract: "ST1PQHQKV0RJXZFY1DGX8MNSNYVE3VGZJSRTPGZGM.send-many-memo"},
		Limits: options.Limits{
			Address:          guard.Limit{Requests: 3, Window: 10 * time.Minute},
			Stacking:         guard.Limit{Requests: 2, Window: 24 * time.Hour},
			IP:               guard.Limit{Requests: 20, Window: 90 * time.Second},
			TrustedProxyHops: 2,
		},
		Abuse: options.Abuse{
			PoWDifficulty: 18, PoWRaiseAbove: guard.Limit{Requests: 120, Window: time.Minute}, PoWMaxDifficulty: 26,
			PoWTTL: 2 * time.Minute, TokensFile: "/etc/faucet/api-tokens/tokens",
			IPAllow: options.PrefixList{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8::/32"),
				netip.MustParsePrefix("203.0.113.7/32")},
			IPDeny:     options.PrefixList{netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("2001:db8:bad::1/128")},
			BalanceCap: 5_000_000_000, Suspend: true, SuspendAssets: options.NameList{"stx", "tusd"},
			DisableAssets: options.NameList{"btc", "sbtc"}, SwitchesFile: "/etc/faucet/switches/switches.json",
		},
		Budgets: options.Budgets{List: options.BudgetList{
			{Asset: "stx", Budget: guard.Budget{Amount: 2_000_000_000_000, Per: 12 * time.Hour, ScaleBelowPercent: 30, FloorPercent: 20,
				Reserve: 1_000_000_000, Target: 50_000_000_000_000, StackingPercent: 40}},
			{Asset: "btc", Budget: guard.Budget{Amount: 0, Per: guard.DefaultBudgetPer}},
		}},
		SignIn: options.SignIn{Issuer: "https://accounts.example.com", ClientID: "faucet", ClientSecretFile: "/etc/faucet/oidc/client-secret",
			Scopes: options.NameList{"openid", "email", "groups"}, Audiences: options.NameList{"faucet-api", "faucet-mcp"},
			PublicURL: "https://faucet.example.com", SessionKeyFile: "/etc/faucet/session/key", SessionTTL: 4 * time.Hour,
			Tiers: options.TierList{
				{Name: "team", Match: identity.Match{EmailVerified: true, Groups: []string{"devs", "ops"}, EmailDomains: []string{"example.com"}},
					AmountPercent: 500, Limit: guard.Limit{Requests: 100, Window: time.Hour}, SkipProofOfWork: true, BudgetSharePercent: 40},
				{Name: "verified", Match: identity.Match{EmailVerified: true}, AmountPercent: 150, Limit: guard.Limit{}, BudgetSharePercent: 100},
			},
			AnonymousDrips: false, AnonymousShare: 30, AnonymousAmountPercent: 50},
		Assets: options.Assets{
			Tokens: options.TokenList{
				{Name: "tusd", Asset: "ST2CY5V39NHDPWSXMW9QDT3HC3GD6Q6XX4CFRK9AG.tusd-token::tusd", Amount: 10_000_000,
					Limits: guard.AssetLimits{
						PerAddress: guard.Limit{Requests: 2, Window: time.Hour},
						PerIP:      guard.Limit{Requests: 9, Window: 90 * time.Second},
					},
					RefillBelow: 5_000_000, RefillAmount: 50_000_000, LowDrips: 40},
				// No asset: the sBTC contract the node names; no limits.
				{Name: "pox-sbtc", Amount: 1, Limits: guard.AssetLimits{}},
			},
			SBTC: options.SBTC{Asset: settings.SBTCTestnet, Amount: 250_000,
				Limits: guard.AssetLimits{
					PerAddress: guard.Limit{Requests: 2, Window: 48 * time.Hour},
					PerIP:      guard.Limit{Requests: 9, Window: 10 * time.Minute},
				},
				RefillBelow: 5_000_000, RefillAmount: 50_000_000},
		},
		BTC: options.BTC{
			RPCURLs: options.URLList{"http://bitcoind.btc.svc:38332"}, CredentialsFile: "/etc/faucet/btc-rpc/cookie", KeyFile: "/etc/faucet/btc-key/btc.txt",
			Network:     bitcoin.Signet,
			Amounts:     options.BTCAmounts{Default: 20_000, Large: 2_000_000, XLarge: 40_000_000},
			StartHeight: 230_000,
			Fees:        options.BTCFees{Fallback: 3, Min: 2, Max: 40},
			BatchMax:    17, RPCTimeout: 45 * time.Second,
			Limits: guard.AssetLimits{
				PerAddress: guard.Limit{Requests: 4, Window: 2 * time.Hour},
				PerIP:      guard.Limit{Requests: 8, Window: 20 * time.Minute},
			},
		},
		Store: options.Store{DSN: "postgresql://app:pa55@db:5432/app?sslmode=require", HistoryRetention: 72 * time.Hour},
		HTTP: options.HTTP{Listen: "127.0.0.1:8080", StatusCacheTTL: 3 * time.Second,
			ExplorerTxURL: "https://explorer.example.com/tx/{txid}?network=testnet", LowDrips: 300, StallAfter: 45 * time.Minute, ShutdownDelay: 8 * time.Second,
			PeerListen: "0.0.0.0:4000", PeerURL: "http://10.0.0.7:4000"},
		Log: options.Log{Level: "warn", Format: "text"},
		Devnet: options.Devnet{On: true, Keys: 9, BlockTime: 250 * time.Millisecond, Treasury: true,
			SBTC: false, TestToken: false, BTC: false, BTCBlockTime: 3 * time.Second},
	}
}

// sameAsDefault lists the fields of got, by path, that equal def's: a
// struct is compared field by field, anything else as a whole.
func sameAsDefault(path string, got, def reflect.Value) []string {
	if got.Kind() != reflect.Struct || got.Type() == reflect.TypeFor[netip.Prefix]() {
		if reflect.DeepEqual(got.Interface(), def.Interface()) {
			return []string{path}
		}
		return nil
	}
	var out []string
	for i := range got.NumField() {
		f := got.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		out = append(out, sameAsDefault(path+"."+f.Name, got.Field(i), def.Field(i))...)
	}
	return out
}

// For a Serve with every field set, parsing Args() gives it back: what
// the operator renders is what serve parses.
func TestArgsRoundTrip(t *testing.T) {
	o := everySet()
	// A field added to Serve must be set above, or this test would not
	// cover its flag.
	if same := sameAsDefault("Serve", reflect.ValueOf(o), reflect.ValueOf(options.Defaults())); len(same) > 0 {
		t.Fatalf("everySet leaves fields at their default: %v", same)
	}
	tok := reflect.ValueOf(o.Assets.Tokens[0])
	if same := sameAsDefault("Token", tok, reflect.Zero(tok.Type())); len(same) > 0 {
		t.Fatalf("everySet's first token leaves fields unset: %v", same)
	}

	args := o.Args()
	got := parse(t, args...)
	if !reflect.DeepEqual(got, o) {
		t.Errorf("Args() %q parses to\n %+v\nwant\n %+v", args, got, o)
	}
	// One argument per flag, each --name=value, in the order -h lists
	// them.
	var order []string
	for _, g := range options.FlagGroups() {
		order = append(order, g.Names...)
	}
	last := -1
	for _, a := range args {
		name, _, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		i := slices.Index(order, name)
		if !strings.HasPrefix(a, "--") || !ok || i < 0 {
			t.Errorf("argument %q is not --flag=value", a)
			continue
		}
		if i <= last {
			t.Errorf("argument %q is out of -h's order (or given twice)", a)
		}
		last = i
	}
	for _, want := range []string{
		"--btc-network=signet", "--limit-ip=20/1m30s", "--suspend=true", "--devnet-sbtc=false",
		"--budget=asset=stx,amount=2000000000000,per=12h0m0s,scale-below=30,floor=20,reserve=1000000000,target=50000000000000,stacking=40;" +
			"asset=btc,amount=0,per=24h0m0s",
		"--ip-allow=10.0.0.0/8,2001:db8::/32,203.0.113.7/32",
		"--token=name=tusd,asset=ST2CY5V39NHDPWSXMW9QDT3HC3GD6Q6XX4CFRK9AG.tusd-token::tusd,amount=10000000," +
			"limit-address=2/1h0m0s,limit-ip=9/1m30s,refill-below=5000000,refill-amount=50000000,low-drips=40;" +
			"name=pox-sbtc,amount=1,limit-address=0,limit-ip=0",
	} {
		if !slices.Contains(args, want) {
			t.Errorf("Args() lacks %q: %q", want, args)
		}
	}
}

// Args() writes only what differs from the default, so a setting equal
// to its default passes no flag.
func TestArgsOnlyWhatDiffers(t *testing.T) {
	o := options.Defaults()
	o.Node.URLs = options.URLList{"http://stacks-node:20443"}
	o.Amounts.Default = options.Defaults().Amounts.Default // set, but to the default
	o.Limits.IP = guard.Limit{}                            // 0: off
	o.Assets.SBTC.Amount = 1000
	want := []string{"--node-url=http://stacks-node:20443", "--limit-ip=0", "--sbtc-amount=1000"}
	if got := o.Args(); !slices.Equal(got, want) {
		t.Errorf("Args() = %q, want %q", got, want)
	}
	if got := parse(t, want...); !reflect.DeepEqual(got, o) {
		t.Errorf("parsed back %+v, want %+v", got, o)
	}
}

// Several nodes: the flag repeated and a comma-separated value give the
// same list, each URL once, and Args writes it back as one value.
func TestSeveralNodeURLs(t *testing.T) {
	a, b := "http://node-a:20443", "https://user:secret@node-b:20443"
	want := options.URLList{a, b}
	for _, args := range [][]string{
		{"--node-url=" + a, "--node-url=" + b},
		{"--node-url=" + a + "," + b},
		{"--node-url=" + a + ", " + b, "--node-url=" + a},
	} {
		if got := parse(t, args...).Node.URLs; !slices.Equal(got, want) {
			t.Errorf("%q: URLs %q, want %q", args, got, want)
		}
	}
	o := options.Defaults()
	o.Node.URLs = want
	if got := o.Args(); !slices.Equal(got, []string{"--node-url=" + a + "," + b}) {
		t.Errorf("Args() = %q", got)
	}
	o.Keys.File = "/keys"
	o.Node.URLs = options.URLList{a, "node-c:20443"}
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--node-url node-c:20443: needs a scheme") {
		t.Errorf("a URL without a scheme among several: %v", err)
	}
}

// -h's sections list every flag the bindings bind, each once.
func TestFlagGroupsListEveryFlagOnce(t *testing.T) {
	o := options.Defaults()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	flags := options.NewFlags(fs)
	o.BindFlags(flags)
	var bound []string
	fs.VisitAll(func(f *flag.Flag) { bound = append(bound, f.Name) })
	if names := flags.Names(); !slices.Equal(slices.Sorted(slices.Values(names)), bound) {
		t.Errorf("Names() %q, the flag set has %q", names, bound)
	}
	seen := map[string]string{}
	for _, g := range options.FlagGroups() {
		if g.Title == "" || len(g.Names) == 0 {
			t.Errorf("group %+v: no title or no flags", g)
		}
		for _, n := range g.Names {
			if prev, ok := seen[n]; ok {
				t.Errorf("--%s is in %q and %q", n, prev, g.Title)
			}
			seen[n] = g.Title
			if fs.Lookup(n) == nil {
				t.Errorf("group %q lists --%s, which serve does not bind", g.Title, n)
			}
		}
	}
	for _, n := range bound {
		if _, ok := seen[n]; !ok {
			t.Errorf("--%s is in no group", n)
		}
	}
}

// Validate's errors name the flag to change.
// checkValidate fails t unless err is nil when want is "", or an error
// containing want.
func checkValidate(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("Validate: %v", err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Errorf("Validate: %v, want an error containing %q", err, want)
	}
}

func TestValidateNamesTheFlag(t *testing.T) {
	real := func(o *options.Serve) {
		o.Node.URLs, o.Keys.File = options.URLList{"http://stacks-node:20443"}, "/keys"
	}
	devnet := func(o *options.Serve) { o.Devnet.On = true }
	treasury := func(o *options.Serve) { real(o); o.Keys.TreasuryFile = "/treasury" }
	for name, tc := range map[string]struct {
		base   func(*options.Serve)
		mutate func(*options.Serve)
		want   string // "" = valid
	}{
		"a real node":                {base: real, mutate: func(*options.Serve) {}},
		"the devnet":                 {base: devnet, mutate: func(*options.Serve) {}},
		"a treasury with refills":    {base: treasury, mutate: func(o *options.Serve) { o.Keys.RefillBelow, o.Keys.RefillAmount = 10, 10 }},
		"no node":                    {base: func(*options.Serve) {}, mutate: func(*options.Serve) {}, want: "--node-url and --key-file are required"},
		"node URL without a scheme":  {base: real, mutate: func(o *options.Serve) { o.Node.URLs = options.URLList{"localhost:20443"} }, want: "--node-url localhost:20443: needs a scheme"},
		"zero node timeout":          {base: real, mutate: func(o *options.Serve) { o.Node.Timeout = 0 }, want: "--node-timeout must be positive"},
		"chain id over 32 bits":      {base: real, mutate: func(o *options.Serve) { o.Node.ChainID = 1 << 32 }, want: "--chain-id 4294967296"},
		"zero amount":                {base: real, mutate: func(o *options.Serve) { o.Amounts.Default = 0 }, want: "--amount must be positive"},
		"long memo":                  {base: real, mutate: func(o *options.Serve) { o.Amounts.Memo = strings.Repeat("m", 35) }, want: "--memo"},
		"negative batch window":      {base: real, mutate: func(o *options.Serve) { o.Batching.Window = -time.Second }, want: "--batch-window must be positive"},
		"bad batch contract":         {base: real, mutate: func(o *options.Serve) { o.Batching.Contract = "nope" }, want: "--batch-contract"},
		"batch too big":              {base: real, mutate: func(o *options.Serve) { o.Batching.Max = 201 }, want: "--batch-max"},
		"refills without a treasury": {base: real, mutate: func(o *options.Serve) { o.Keys.RefillBelow = 10 }, want: "--refill-below and --refill-amount need a treasury"},
		"refill below its threshold": {base: treasury, mutate: func(o *options.Serve) { o.Keys.RefillBelow, o.Keys.RefillAmount = 10, 9 }, want: "--refill-below/--refill-amount"},
		"sBTC asset without amount":  {base: real, mutate: func(o *options.Serve) { o.Assets.SBTC.Asset = settings.SBTCTestnet }, want: "--sbtc-asset needs --sbtc-amount"},
		"sBTC refill without sBTC":   {base: treasury, mutate: func(o *options.Serve) { o.Assets.SBTC.RefillBelow = 5 }, want: "--sbtc-refill-below and --sbtc-refill-amount need the sBTC faucet on"},
		"sBTC refill without a treasury": {base: real, mutate: func(o *options.Serve) { o.Assets.SBTC.Amount, o.Assets.SBTC.RefillAmount = 1, 5 },
			want: "--sbtc-refill-below and --sbtc-refill-amount need a treasury"},
		"sBTC mainnet asset": {base: real, mutate: func(o *options.Serve) {
			o.Assets.SBTC.Asset, o.Assets.SBTC.Amount = "SM3VDXK3WZZSA84XXFKAFAF15NNZX32CTSG82JFQ4.sbtc-token::sbtc-token", 1
		}, want: "--sbtc-asset/--sbtc-amount"},
		"sBTC limit without a window": {base: real, mutate: func(o *options.Serve) {
			o.Assets.SBTC.Amount, o.Assets.SBTC.Limits.PerIP = 1, guard.Limit{Requests: 1}
		}, want: "--sbtc-asset/--sbtc-amount) limit-ip: the window must be a positive duration"},
		"token twice": {base: real, mutate: func(o *options.Serve) {
			t := options.Token{Name: "tusd", Asset: "ST2CY5V39NHDPWSXMW9QDT3HC3GD6Q6XX4CFRK9AG.tusd-token::tusd", Amount: 1}
			o.Assets.Tokens = options.TokenList{t, t}
		}, want: "--token tusd: the name tusd is given twice"},
		"a token named sbtc beside --sbtc-amount": {base: real, mutate: func(o *options.Serve) {
			o.Assets.SBTC.Amount = 1
			o.Assets.Tokens = options.TokenList{{Name: "sbtc", Asset: settings.SBTCTestnet, Amount: 1}}
		}, want: "the name sbtc is given twice"},
		"token bad asset": {base: real, mutate: func(o *options.Serve) {
			o.Assets.Tokens = options.TokenList{{Name: "tusd", Asset: "ST2CY5V39NHDPWSXMW9QDT3HC3GD6Q6XX4CFRK9AG.tusd-token", Amount: 1}}
		}, want: "--token tusd: bad asset identifier"},
		"token bad name": {base: real, mutate: func(o *options.Serve) {
			o.Assets.Tokens = options.TokenList{{Name: "Big Coin", Asset: settings.SBTCTestnet, Amount: 1}}
		}, want: "--token Big Coin"},
		"token zero amount": {base: real, mutate: func(o *options.Serve) {
			o.Assets.Tokens = options.TokenList{{Name: "tusd", Asset: settings.SBTCTestnet}}
		}, want: "--token tusd: token tusd: the amount per drip must be positive"},
		"token refill without a treasury": {base: real, mutate: func(o *options.Serve) {
			o.Assets.Tokens = options.TokenList{{Name: "tusd", Asset: settings.SBTCTestnet, Amount: 1, RefillBelow: 5}}
		}, want: "--token tusd: refill-below and refill-amount need a treasury"},
		"token refill below its threshold": {base: treasury, mutate: func(o *options.Serve) {
			o.Assets.Tokens = options.TokenList{{Name: "tusd", Asset: settings.SBTCTestnet, Amount: 1, RefillBelow: 10, RefillAmount: 9}}
		}, want: "--token tusd: token refill amount 9 is below the token refill threshold 10"},
		"BTC key without URL":   {base: real, mutate: func(o *options.Serve) { o.BTC.KeyFile = "/btc" }, want: "--btc-key-file needs --btc-rpc-url"},
		"BTC URL without key":   {base: real, mutate: func(o *options.Serve) { o.BTC.RPCURLs = options.URLList{"http://btc:18443"} }, want: "--btc-rpc-url needs --btc-key-file"},
		"BTC beside the devnet": {base: devnet, mutate: func(o *options.Serve) { o.BTC.RPCURLs, o.BTC.KeyFile = options.URLList{"http://btc:18443"}, "/btc" }, want: "--devnet runs its own btcd"},
		"BTC URL without a scheme": {base: real, mutate: func(o *options.Serve) { o.BTC.RPCURLs, o.BTC.KeyFile = options.URLList{"btc:18443"}, "/btc" },
			want: "--btc-rpc-url btc:18443: needs a scheme"},
		"BTC fee rates":         {base: real, mutate: func(o *options.Serve) { o.BTC.Fees.Min = 0 }, want: "--btc-min-fee-rate 0"},
		"BTC fee cap":           {base: real, mutate: func(o *options.Serve) { o.BTC.Fees.Max = bitcoin.MaxFeeRate + 1 }, want: "--btc-max-fee-rate"},
		"BTC batch":             {base: real, mutate: func(o *options.Serve) { o.BTC.BatchMax = 0 }, want: "--btc-batch-max must be 1..500"},
		"BTC timeout":           {base: real, mutate: func(o *options.Serve) { o.BTC.RPCTimeout = 0 }, want: "--btc-rpc-timeout must be positive"},
		"explorer URL":          {base: real, mutate: func(o *options.Serve) { o.HTTP.ExplorerTxURL = "https://explorer/tx" }, want: "--explorer-tx-url"},
		"zero low drips":        {base: real, mutate: func(o *options.Serve) { o.HTTP.LowDrips = 0 }, want: "--low-drips must be at least 1"},
		"zero history":          {base: real, mutate: func(o *options.Serve) { o.Store.HistoryRetention = 0 }, want: "--history-retention must be positive"},
		"log level":             {base: real, mutate: func(o *options.Serve) { o.Log.Level = "loud" }, want: "--log-level"},
		"log format":            {base: real, mutate: func(o *options.Serve) { o.Log.Format = "xml" }, want: "--log-format"},
		"devnet with a node":    {base: devnet, mutate: func(o *options.Serve) { o.Node.URLs = options.URLList{"http://x:1"} }, want: "drop --node-url, --key-file and --treasury-key-file"},
		"devnet keys":           {base: devnet, mutate: func(o *options.Serve) { o.Devnet.Keys = 101 }, want: "--devnet-keys must be 1..100"},
		"devnet block time":     {base: devnet, mutate: func(o *options.Serve) { o.Devnet.BlockTime = 0 }, want: "--block-time must be positive"},
		"devnet BTC block time": {base: devnet, mutate: func(o *options.Serve) { o.Devnet.BTCBlockTime = 0 }, want: "--btc-block-time must be positive"},
		"devnet treasury without the devnet": {base: real, mutate: func(o *options.Serve) { o.Devnet.Treasury = true },
			want: "--devnet-treasury needs --devnet"},
		"suspend an asset it drips": {base: devnet, mutate: func(o *options.Serve) { _ = o.Abuse.SuspendAssets.Set("stx, tusd,btc,stx") }},
		"suspend an asset it does not drip": {base: real, mutate: func(o *options.Serve) { _ = o.Abuse.SuspendAssets.Set("stx,tusd") },
			want: "--suspend-asset tusd: the faucet drips no such asset; it drips stx"},
		// The incumbent's assets may be turned off whether configured or not.
		"turn off the incumbent's assets": {base: real, mutate: func(o *options.Serve) { _ = o.Abuse.DisableAssets.Set("stx,sbtc,btc") }},
		"turn off an unknown asset": {base: real, mutate: func(o *options.Serve) { _ = o.Abuse.DisableAssets.Set("tusd") },
			want: "--disable-asset tusd: the faucet knows no such asset"},
		"switches file and flags": {base: real, mutate: func(o *options.Serve) { o.Abuse.Suspend, o.Abuse.SwitchesFile = true, "/x" },
			want: "--switches-file replaces --suspend"},
		"switches file missing": {base: real, mutate: func(o *options.Serve) { o.Abuse.SwitchesFile = "/nonexistent/switches.json" },
			want: "--switches-file: read switches file"},
		// The operator may name an asset before the pods that drip it
		// roll out: warned of when applied, never a refusal to start.
		"switches file naming an asset it does not drip": {base: real, mutate: func(o *options.Serve) {
			o.Abuse.SwitchesFile = filepath.Join(t.TempDir(), "switches.json")
			_ = os.WriteFile(o.Abuse.SwitchesFile, []byte(`{"suspendedAssets":["tusd"],"disabledAssets":["doge"]}`), 0o600)
		}},
		"a budget for an asset it does not drip": {base: real, mutate: func(o *options.Serve) {
			o.Budgets.List = options.BudgetList{{Asset: "doge", Budget: guard.Budget{Amount: 1, Per: time.Hour}}}
		}, want: "--budget asset=doge: the faucet drips no such asset"},
		"a budget given twice": {base: real, mutate: func(o *options.Serve) {
			b := options.Budget{Asset: "stx", Budget: guard.Budget{Amount: 1, Per: time.Hour}}
			o.Budgets.List = options.BudgetList{b, b}
		}, want: "--budget asset=stx: given twice"},
		"a budget period under a minute": {base: real, mutate: func(o *options.Serve) {
			o.Budgets.List = options.BudgetList{{Asset: "stx", Budget: guard.Budget{Amount: 1, Per: time.Second}}}
		}, want: "--budget asset=stx: per must be at least a minute"},
		"a stacking share of STX's budget": {base: real, mutate: func(o *options.Serve) {
			o.Budgets.List = options.BudgetList{{Asset: "stx", Budget: guard.Budget{Amount: 1, Per: time.Hour, StackingPercent: 100}}}
		}},
		"a stacking share of a token's budget": {base: devnet, mutate: func(o *options.Serve) {
			o.Budgets.List = options.BudgetList{{Asset: options.DevnetTestTokenName, Budget: guard.Budget{Amount: 1, Per: time.Hour, StackingPercent: 30}}}
		}, want: "--budget asset=" + options.DevnetTestTokenName + ": stacking: stacking drips are STX only; set it on --budget asset=stx"},
		"a stacking share of BTC's budget": {base: devnet, mutate: func(o *options.Serve) {
			o.Budgets.List = options.BudgetList{{Asset: "btc", Budget: guard.Budget{Amount: 1, Per: time.Hour, StackingPercent: 50}}}
		}, want: "--budget asset=btc: stacking: stacking drips are STX only"},
		"a stacking share over 100": {base: real, mutate: func(o *options.Serve) {
			o.Budgets.List = options.BudgetList{{Asset: "stx", Budget: guard.Budget{Amount: 1, Per: time.Hour, StackingPercent: 101}}}
		}, want: "--budget asset=stx: stacking must be a percent"},
		"a target under the reserve": {base: real, mutate: func(o *options.Serve) {
			o.Budgets.List = options.BudgetList{{Asset: "stx", Budget: guard.Budget{Amount: 1, Per: time.Hour, Reserve: 5, Target: 5}}}
		}, want: "target (5) must be above the reserve (5)"},
		"sign-in":                  {base: real, mutate: func(o *options.Serve) { o.SignIn.Issuer, o.SignIn.ClientID = "https://accounts.example.com", "faucet" }},
		"an issuer without scheme": {base: real, mutate: func(o *options.Serve) { o.SignIn.Issuer, o.SignIn.ClientID = "accounts.example.com", "faucet" }, want: "--oidc-issuer: oidc issuer"},
		"an issuer with a query": {base: real, mutate: func(o *options.Serve) {
			o.SignIn.Issuer, o.SignIn.ClientID = "https://a.example.com/?realm=x", "faucet"
		}, want: "--oidc-issuer: oidc issuer"},
		"no client ID": {base: real, mutate: func(o *options.Serve) { o.SignIn.Issuer = "https://accounts.example.com" }, want: "--oidc-client-id: oidc client ID: required"},
		"scopes without openid": {base: real, mutate: func(o *options.Serve) {
			o.SignIn.Issuer, o.SignIn.ClientID, o.SignIn.Scopes = "https://a.example", "f", options.NameList{"email"}
		}, want: "--oidc-scopes: oidc scopes: must include openid"},
		"a public URL with a path": {base: real, mutate: func(o *options.Serve) {
			o.SignIn.Issuer, o.SignIn.ClientID, o.SignIn.PublicURL = "https://a.example", "f", "https://f.example/faucet"
		}, want: "--public-url"},
		"tiers without sign-in": {base: real, mutate: func(o *options.Serve) { o.SignIn.Tiers = options.TierList{{Name: "x"}} }, want: "need sign-in: --oidc-issuer"},
		"two tiers of one name": {base: real, mutate: func(o *options.Serve) {
			o.SignIn.Issuer, o.SignIn.ClientID, o.SignIn.Tiers = "https://a.example", "f", options.TierList{{Name: "x"}, {Name: "x"}}
		}, want: `--tier: tier "x": two tiers share the name`},
		"an anonymous share over 100": {base: real, mutate: func(o *options.Serve) {
			o.SignIn.Issuer, o.SignIn.ClientID, o.SignIn.AnonymousShare = "https://a.example", "f", 101
		}, want: "--anonymous-budget-share must be a percent"},
		"switches file that is not JSON": {base: real, mutate: func(o *options.Serve) {
			o.Abuse.SwitchesFile = filepath.Join(t.TempDir(), "switches.json")
			_ = os.WriteFile(o.Abuse.SwitchesFile, []byte(`suspend: true`), 0o600)
		}, want: "--switches-file: switches:"},
	} {
		t.Run(name, func(t *testing.T) {
			o := options.Defaults()
			tc.base(&o)
			tc.mutate(&o)
			checkValidate(t, o.Validate(), tc.want)
		})
	}
}

// The builders hand the engines what the settings say: every token (the
// sBTC shorthand first, then --token's, then the devnet's test token)
// with its limits, and BTC's.
func TestTokensAndLimits(t *testing.T) {
	o := everySet()
	o.Devnet.On, o.Devnet.TestToken = true, true
	names := func(ts []options.Token) []string {
		var out []string
		for _, t := range ts {
			out = append(out, t.Name)
		}
		return out
	}
	if got, want := names(o.TokenList()), []string{"sbtc", "tusd", "pox-sbtc"}; !slices.Equal(got, want) {
		t.Errorf("TokenList %q, want %q (the devnet's tusd is not added twice)", got, want)
	}
	l := o.RateLimits()
	if l.PerAddress != o.Limits.Address || l.StackingPerAddress != o.Limits.Stacking || l.PerIP != o.Limits.IP {
		t.Errorf("STX limits %+v", l)
	}
	for name, want := range map[string]guard.AssetLimits{
		"sbtc": o.Assets.SBTC.Limits, "tusd": o.Assets.Tokens[0].Limits, "pox-sbtc": {}, "btc": o.BTC.Limits,
	} {
		if got := l.Of(name); got != want {
			t.Errorf("limits of %s: %+v, want %+v", name, got, want)
		}
	}
	if got := o.LowDrips(); len(got) != 1 || got["tusd"] != 40 {
		t.Errorf("LowDrips %v, want only tusd's 40", got)
	}
	tokens := o.TokenList()
	if a, fromPoX, err := tokens[0].AssetInfo(); err != nil || fromPoX || a.String() != settings.SBTCTestnet ||
		tokens[0].Amount != 250_000 || tokens[0].RefillBelow != 5_000_000 || tokens[0].RefillAmount != 50_000_000 {
		t.Errorf("sBTC's token %+v: %v, %v, %v", tokens[0], a, fromPoX, err)
	}
	if a, fromPoX, err := tokens[2].AssetInfo(); err != nil || !fromPoX || a.Name != "sbtc-token" || a.Contract != (stacks.ContractID{}) {
		t.Errorf("a token without an asset is the sBTC contract the node names: %+v", a)
	}

	// The devnet turns sBTC (found in its /v2/pox) and tUSD on by default.
	d := options.Defaults()
	d.Devnet.On = true
	got := d.TokenList()
	if len(got) != 2 || got[0].Name != "sbtc" || got[0].Asset != "" || got[0].Amount != options.DevnetSBTCAmount ||
		got[1].Name != options.DevnetTestTokenName || got[1].Asset != options.DevnetTestTokenAsset || got[1].Amount != options.DevnetTestTokenAmount {
		t.Errorf("the devnet's tokens: %+v", got)
	}
	for _, tok := range got {
		if tok.Limits != guard.DefaultAssetLimits() {
			t.Errorf("devnet token %s has limits %+v, want the default ones", tok.Name, tok.Limits)
		}
	}
	if d.DevnetSBTCAsset() != settings.SBTCTestnet {
		t.Errorf("the devnet deploys sBTC at %s", d.DevnetSBTCAsset())
	}
	d.Devnet.SBTC, d.Devnet.TestToken = false, false
	if got := d.TokenList(); len(got) != 0 {
		t.Errorf("--devnet-sbtc=false --devnet-test-token=false: tokens %+v", got)
	}
	if def := options.Defaults(); len(def.TokenList()) != 0 {
		t.Errorf("tokens by default: %+v", def.TokenList())
	}
}

// ParseLimit reads N/window; 0 is off.
func TestParseLimit(t *testing.T) {
	for _, c := range []struct {
		in, str string // str: LimitString of the parsed limit
		want    guard.Limit
	}{
		{"5/5m", "5/5m0s", guard.Limit{Requests: 5, Window: 5 * time.Minute}},
		{"1/48h", "1/48h0m0s", guard.Limit{Requests: 1, Window: 48 * time.Hour}},
		{"0", "0", guard.Limit{}},
	} {
		got, err := options.ParseLimit(c.in)
		if err != nil || got != c.want {
			t.Errorf("%q → %+v %v", c.in, got, err)
		}
		if s := options.LimitString(got); s != c.str {
			t.Errorf("LimitString(%+v) = %q, want %q", got, s, c.str)
		}
	}
	for bad, want := range map[string]string{
		"5": "want N/window", "x/5m": "request count", "0/5m": "request count", "-1/5m": "request count",
		"5/0s": "positive duration", "5/soon": "want a duration", "5/5": "needs a unit",
	} {
		if _, err := options.ParseLimit(bad); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", bad, err, want)
		}
	}
	if got := options.LimitString(guard.Limit{}); got != "0" {
		t.Errorf("LimitString of no limit: %q", got)
	}
}

// A token is comma-separated key=value pairs; each key at most once.
func TestParseToken(t *testing.T) {
	got, err := options.ParseToken("name=tusd,asset=ST2CY5V39NHDPWSXMW9QDT3HC3GD6Q6XX4CFRK9AG.tusd-token::tusd,amount=10," +
		"limit-address=1/1h,limit-ip=0,refill-below=100,refill-amount=1000,low-drips=7")
	want := options.Token{Name: "tusd", Asset: "ST2CY5V39NHDPWSXMW9QDT3HC3GD6Q6XX4CFRK9AG.tusd-token::tusd", Amount: 10,
		Limits:      guard.AssetLimits{PerAddress: guard.Limit{Requests: 1, Window: time.Hour}},
		RefillBelow: 100, RefillAmount: 1000, LowDrips: 7}
	if err != nil || got != want {
		t.Fatalf("ParseToken: %+v, %v; want %+v", got, err, want)
	}
	if back, err := options.ParseToken(want.String()); err != nil || back != want {
		t.Errorf("String %q parses to %+v, %v", want.String(), back, err)
	}
	minimal, err := options.ParseToken("amount=5, name=x")
	if err != nil || minimal != (options.Token{Name: "x", Amount: 5, Limits: guard.DefaultAssetLimits()}) {
		t.Errorf("a token with name and amount only: %+v, %v; want the default limits and no asset", minimal, err)
	}
	for in, want := range map[string]string{
		"name=x,amount=1,colour=red":   `colour: unknown key`,
		"name=x":                       "name and amount are required",
		"amount=1":                     "name and amount are required",
		"name=x,amount=lots":           "amount: want a whole number, 0 or more",
		"name=x,amount=-1":             "amount: want a whole number, 0 or more",
		"name=x,amount=1,low-drips=-1": "low-drips: want a whole number, 0 or more",
		"name=x,amount=1,name=y":       "each key once",
		"name=x,amount=1,limit-ip=5":   "limit-ip: want N/window",
		"name=x,amount=1,":             "want key=value pairs",
		"name=x,amount=1,refill-below": "want key=value pairs",
	} {
		if _, err := options.ParseToken(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error containing %q", in, err, want)
		}
	}
}
