package controllers

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
	"github.com/stxfaucet/faucet-operator/server/options"
)

// checkArgsParseBack fails unless serverArgs(fs), parsed by serve's own
// bindings onto its defaults, is the options.Serve the operator built:
// what the operator writes is what serve reads, every field of it. (cmd/
// faucet's TestOperatorArgsReachServe runs the same arguments through the
// real command line, environment included.)
func checkArgsParseBack(t *testing.T, fs *faucetv1alpha1.FaucetServer) {
	t.Helper()
	args := serverArgs(fs)
	if len(args) == 0 || args[0] != "serve" {
		t.Fatalf("args %q: want `serve` first", args)
	}
	got := options.Defaults()
	set := flag.NewFlagSet("serve", flag.ContinueOnError)
	set.SetOutput(io.Discard)
	got.BindFlags(options.NewFlags(set))
	if err := set.Parse(args[1:]); err != nil || set.NArg() != 0 {
		t.Fatalf("serve %q: %v (left over %q)", args[1:], err, set.Args())
	}
	if want := serverOptions(fs); !reflect.DeepEqual(got, want) {
		t.Errorf("serve %q parses to\n %+v\nthe operator built\n %+v", args[1:], got, want)
	}
}

// everyField is a FaucetServer with every field that reaches the faucet
// set away from its default.
func everyField(fs *faucetv1alpha1.FaucetServer) {
	abuseAndPage(fs)
	fs.Spec.Node.Timeout = &metav1.Duration{Duration: 15 * time.Second}
	fs.Spec.Node.PollInterval = &metav1.Duration{Duration: 20 * time.Second}
	fs.Spec.Node.BusyPollInterval = &metav1.Duration{Duration: 2 * time.Second}
	fs.Spec.Node.StallAfter = &metav1.Duration{Duration: 45 * time.Minute}
	fs.Spec.Node.HeadersSecretRef = &faucetv1alpha1.NodeHeadersSecretReference{Name: "hiro-api", Key: "headers.txt"}
	fs.Spec.ChainID = ptr.To(int64(2147483648))
	fs.Spec.KeySecretRef.Key = "faucet.txt"
	fs.Spec.Amounts = &faucetv1alpha1.Amounts{Default: ptr.To(int64(1_000_000)), StackingPaddingPercent: ptr.To(int32(7)), Stacking: ptr.To(int64(90_000_000_000))}
	fs.Spec.Fee = &faucetv1alpha1.Fee{Min: ptr.To(int64(200)), Max: ptr.To(int64(5000)), Fallback: ptr.To(int64(300))}
	fs.Spec.Memo = ptr.To("hello faucet")
	fs.Spec.RateLimits = &faucetv1alpha1.RateLimits{
		PerAddress:         &faucetv1alpha1.RateLimit{Requests: 3, Window: duration(10 * time.Minute)},
		StackingPerAddress: &faucetv1alpha1.RateLimit{Requests: 2, Window: duration(24 * time.Hour)},
		PerIP:              &faucetv1alpha1.RateLimit{Requests: 20, Window: duration(90 * time.Second)},
		TrustedProxyHops:   ptr.To(int32(2)),
	}
	fs.Spec.Suspend = true
	fs.Spec.LogLevel = "warn"
	fs.Spec.Funding = &faucetv1alpha1.FundingSpec{LowThreshold: ptr.To(int64(300))}
	fs.Spec.Batching = &faucetv1alpha1.BatchingSpec{
		MaxRecipients: ptr.To(int32(150)),
		Window:        ptr.To(duration(400 * time.Millisecond)),
		Contract:      ptr.To("ST1PQHQKV0RJXZFY1DGX8MNSNYVE3VGZJSRTPGZGM.send-many-memo"),
	}
	fs.Spec.Treasury = &faucetv1alpha1.TreasurySpec{
		KeySecretRef:     faucetv1alpha1.TreasuryKeyReference{Name: "faucet-treasury", Key: "treasury.txt"},
		RefillBelowUSTX:  ptr.To(int64(40_000_000)),
		RefillAmountUSTX: ptr.To(int64(400_000_000)),
	}
	sb := sbtcAsset(250_000, &faucetv1alpha1.AssetRateLimits{
		PerAddress: &faucetv1alpha1.RateLimit{Requests: 2, Window: duration(time.Hour)},
		PerIP:      &faucetv1alpha1.RateLimit{Requests: 9, Window: duration(10 * time.Minute)},
	})
	sb.Token.RefillBelow, sb.Token.RefillAmount = ptr.To(int64(5_000_000)), ptr.To(int64(50_000_000))
	sb.LowThreshold = ptr.To(int64(40))
	tusd := tokenAsset("tusd", testnetTUSD, 10_000_000, nil)
	b := btcSpec(true)
	b.Network = "signet"
	b.Amounts = &faucetv1alpha1.BTCAmounts{Default: ptr.To(int64(20_000)), Large: ptr.To(int64(2_000_000)), XLarge: ptr.To(int64(40_000_000))}
	b.StartHeight = ptr.To(int64(230_000))
	b.Fees = &faucetv1alpha1.BTCFees{FallbackRate: ptr.To(int64(3)), MinRate: ptr.To(int64(2)), MaxRate: ptr.To(int64(40))}
	btc := btcAsset(b)
	btc.RateLimits = &faucetv1alpha1.AssetRateLimits{
		PerAddress: &faucetv1alpha1.RateLimit{Requests: 4, Window: duration(2 * time.Hour)},
		PerIP:      &faucetv1alpha1.RateLimit{Requests: 8, Window: duration(20 * time.Minute)},
	}
	fs.Spec.Assets = faucetv1alpha1.AssetList{sb, tusd, btc}
	// The switches reach the faucet through the switches file, not flags.
	fs.Spec.SuspendedAssets = []string{"tusd", "stx"}
	fs.Spec.DisabledAssets = []string{"btc", "sbtc"}
	fs.Spec.MCP = &faucetv1alpha1.MCPSpec{Enabled: ptr.To(false)}
	fs.Spec.Budget = &faucetv1alpha1.BudgetSpec{
		Amount: ptr.To(int64(1_000_000_000_000)), Per: ptr.To(duration(12 * time.Hour)),
		ScaleBelowPercent: ptr.To(int32(30)), FloorPercent: ptr.To(int32(20)),
		Reserve: ptr.To(int64(50_000_000_000)), Target: ptr.To(int64(200_000_000_000)),
		StackingPercent: ptr.To(int32(40)),
	}
	fs.Spec.Assets[0].Budget = &faucetv1alpha1.BudgetSpec{Amount: ptr.To(int64(50_000_000)), Reserve: ptr.To(int64(1_000_000))}
	fs.Spec.Assets[2].Budget = &faucetv1alpha1.BudgetSpec{Amount: ptr.To(int64(0)), Target: ptr.To(int64(100_000_000))}
	withIdentity(fs)
}

// TestServerArgsParseBack: for a minimal FaucetServer and one with every
// field set (either store), the pod's arguments parse to the options the
// operator built, and those are valid with the switches file the pod
// mounts from the switches' ConfigMap; a minimal one is serve's defaults
// but for the node, the keys, the store and the switches file.
func TestServerArgsParseBack(t *testing.T) {
	for name, fs := range map[string]*faucetv1alpha1.FaucetServer{
		"minimal":                          fixture(),
		"every field":                      fixture(everyField),
		"every field, a Postgres store":    fixture(everyField, postgres(3)),
		"BTC without credentials":          fixture(withBTC(btcSpec(false))),
		"sbtc without rate limits":         fixture(withAssets(sbtcAsset(1, nil))),
		"sbtc from /v2/pox, no identifier": fixture(withAssets(faucetv1alpha1.AssetSpec{Name: "sbtc", Token: &faucetv1alpha1.TokenSpec{Amount: 7}})),
		"three tokens, BTC between them": fixture(withAssets(sbtcAsset(1, nil), tokenAsset("tusd", testnetTUSD, 2, nil), btcAsset(btcSpec(false)),
			tokenAsset("teur", "ST1PQHQKV0RJXZFY1DGX8MNSNYVE3VGZJSRTPGZGM.teur-token::teur", 3, nil))),
	} {
		t.Run(name, func(t *testing.T) {
			checkArgsParseBack(t, fs)
			o := serverOptions(fs)
			if o.Abuse.SwitchesFile != "/etc/faucet/switches/switches.json" {
				t.Fatalf("switches file %q", o.Abuse.SwitchesFile)
			}
			// Validate reads the switches file: give it what the kubelet
			// projects from the ConfigMap into the pod.
			o.Abuse.SwitchesFile = writeSwitchesFile(t, fs)
			// And the headers file, which it reads too, from its Secret.
			if o.Node.HeadersFile != "" {
				o.Node.HeadersFile = writeHeadersFile(t, "x-api-key: "+testAPIKey)
			}
			if err := o.Validate(); err != nil {
				t.Errorf("the operator's options do not validate: %v", err)
			}
		})
	}
	want := options.Defaults()
	want.Node.URLs, want.Keys.File, want.Store.DSN = options.URLList{"http://stacks-node:20443"}, "/etc/faucet/keys/keys", "/var/lib/faucet/faucet.db"
	want.Abuse.SwitchesFile = "/etc/faucet/switches/switches.json"
	if got := serverOptions(fixture()); !reflect.DeepEqual(got, want) {
		t.Errorf("a minimal FaucetServer's options\n %+v\nwant serve's defaults but for the node, keys and store\n %+v", got, want)
	}
}

// writeSwitchesFile writes the switches.json of fs's switches' ConfigMap
// to a file of t's, as the kubelet projects it into the pod, and returns
// its path.
func writeSwitchesFile(t *testing.T, fs *faucetv1alpha1.FaucetServer) string {
	t.Helper()
	data, ok := switchesFor(fs).Data["switches.json"]
	if !ok {
		t.Fatal("the switches' ConfigMap has no switches.json")
	}
	p := filepath.Join(t.TempDir(), "switches.json")
	if err := os.WriteFile(p, []byte(data), 0o444); err != nil {
		t.Fatal(err)
	}
	return p
}
