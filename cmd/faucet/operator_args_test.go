package main

// The operator and `faucet serve` live in one binary but meet only through
// command-line flags and environment variables. These tests hold the two
// ends together: the CRD's defaults are the server's defaults, and what the
// operator writes into the Deployment is what the server parses.

import (
	"encoding/json"
	"flag"
	"maps"
	"net"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
	"github.com/stxfaucet/faucet-operator/controllers"
	"github.com/stxfaucet/faucet-operator/server"
	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/nodepool"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/faucet"
	"github.com/stxfaucet/faucet-operator/server/guard"
	"github.com/stxfaucet/faucet-operator/server/identity"
	"github.com/stxfaucet/faucet-operator/server/options"
	"github.com/stxfaucet/faucet-operator/server/settings"
	"github.com/stxfaucet/faucet-operator/server/switches"
)

// crdSpecSchema reads the generated CRD and returns the schema of spec.
func crdSpecSchema(t *testing.T) apiextensionsv1.JSONSchemaProps {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", "faucet.stxfaucet.dev_faucetservers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(raw, &crd); err != nil {
		t.Fatalf("the CRD: %v", err)
	}
	if len(crd.Spec.Versions) != 1 {
		t.Fatalf("%d versions in the CRD; this test reads one", len(crd.Spec.Versions))
	}
	spec, ok := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	if !ok {
		t.Fatal("no spec in the CRD schema")
	}
	return spec
}

// crdDefaults returns the default of every field under the CRD's spec that
// has one, by dotted path ("fee.min"), as JSON.
func crdDefaults(t *testing.T) map[string]string {
	t.Helper()
	spec := crdSpecSchema(t)
	out := map[string]string{}
	var walk func(prefix string, s apiextensionsv1.JSONSchemaProps)
	walk = func(prefix string, s apiextensionsv1.JSONSchemaProps) {
		for name, p := range s.Properties {
			p2 := prefix + name
			if p.Default != nil {
				out[p2] = string(p.Default.Raw)
			}
			walk(p2+".", p)
		}
		if s.Items != nil && s.Items.Schema != nil {
			walk(prefix+"[].", *s.Items.Schema)
		}
	}
	walk("", spec)
	return out
}

// serveDefaults parses an empty `faucet serve` command line, with no
// FAUCET_ variable set: options.Defaults(), the one definition of serve's
// defaults.
func serveDefaults(t *testing.T) options.Serve {
	t.Helper()
	clearServeEnv(t)
	o := options.Defaults()
	if err := parseWithEnv(newServeFlags(&o), nil); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(o, options.Defaults()) {
		t.Fatalf("an empty command line parses to\n %+v\nnot options.Defaults()\n %+v", o, options.Defaults())
	}
	return o
}

// clearServeEnv unsets every FAUCET_ variable of `faucet serve` for the
// test: an empty value would still count as set.
func clearServeEnv(t *testing.T) {
	t.Helper()
	o := options.Defaults()
	newServeFlags(&o).VisitAll(func(f *flag.Flag) {
		t.Setenv(envName(f.Name), "") // restores the old value after the test
		os.Unsetenv(envName(f.Name))
	})
}

// TestCRDDefaultsAreTheServerDefaults: a FaucetServer that leaves a field
// out gets the CRD's default, which the operator passes on (as no flag at
// all when it is serve's default); a faucet run by hand gets the flag's
// default, options.Defaults(), which is the engine's. All three must
// agree, or the same faucet behaves differently under the operator.
func TestCRDDefaultsAreTheServerDefaults(t *testing.T) {
	defaults := crdDefaults(t)
	o := serveDefaults(t)

	num := func(raw string) uint64 {
		t.Helper()
		n, err := strconv.ParseUint(raw, 10, 64)
		if err != nil {
			t.Fatalf("default %s is not a number: %v", raw, err)
		}
		return n
	}
	str := func(raw string) string {
		t.Helper()
		var s string
		if err := json.Unmarshal([]byte(raw), &s); err != nil {
			t.Fatalf("default %s is not a string: %v", raw, err)
		}
		return s
	}
	dur := func(raw string) time.Duration {
		t.Helper()
		d, err := time.ParseDuration(str(raw))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	limit := func(raw string) guard.Limit {
		t.Helper()
		var l faucetv1alpha1.RateLimit
		if err := json.Unmarshal([]byte(raw), &l); err != nil {
			t.Fatalf("default %s is not a rate limit: %v", raw, err)
		}
		return guard.Limit{Requests: int(l.Requests), Window: l.Window.Duration}
	}
	same := func(what string, crd, engine, flagDefault any) {
		t.Helper()
		if crd != engine || engine != flagDefault {
			t.Errorf("%s: CRD default %v, engine default %v, serve flag default %v", what, crd, engine, flagDefault)
		}
	}
	_, listenPort, err := net.SplitHostPort(o.HTTP.Listen)
	if err != nil {
		t.Fatal(err)
	}
	// The guard applies its defaults to a zero Config and exports none of
	// them: read them off a chain built with nothing set.
	now := time.Unix(1_700_000_000, 0)
	chain, err := guard.New(guard.Config{Clock: clocktesting.NewFakeClock(now)})
	if err != nil {
		t.Fatal(err)
	}
	engineTTL := chain.Challenge().ExpiresAt.Sub(now)

	// Every CRD default, with its counterparts. A new default must be added
	// here, so nobody adds one without checking it against the server.
	checks := map[string]func(raw string){
		"amounts.default": func(raw string) { same("amounts.default", num(raw), faucet.DefaultAmount, o.Amounts.Default) },
		"amounts.stackingPaddingPercent": func(raw string) {
			same("amounts.stackingPaddingPercent", num(raw), faucet.DefaultStackingPadding, o.Amounts.StackingPadding)
		},
		"fee.min":      func(raw string) { same("fee.min", num(raw), faucet.DefaultFeeMin, o.Fees.Min) },
		"fee.max":      func(raw string) { same("fee.max", num(raw), faucet.DefaultFeeMax, o.Fees.Max) },
		"fee.fallback": func(raw string) { same("fee.fallback", num(raw), faucet.DefaultFeeFallback, o.Fees.Fallback) },
		"memo":         func(raw string) { same("memo", str(raw), faucet.DefaultMemo, o.Amounts.Memo) },
		"node.timeout": func(raw string) { same("node.timeout", dur(raw), node.DefaultTimeout, o.Node.Timeout) },
		"node.pollInterval": func(raw string) {
			same("node.pollInterval", dur(raw), faucet.DefaultPollInterval, o.Node.PollInterval)
			same("node.pollInterval (the node pool's probes)", dur(raw), nodepool.DefaultProbeInterval, o.Node.PollInterval)
		},
		"node.busyPollInterval": func(raw string) {
			same("node.busyPollInterval", dur(raw), faucet.DefaultBusyPollInterval, o.Node.BusyPollInterval)
		},
		"node.stallAfter": func(raw string) { same("node.stallAfter", dur(raw), options.DefaultStallAfter, o.HTTP.StallAfter) },
		"rateLimits.perAddress": func(raw string) {
			same("rateLimits.perAddress", limit(raw), guard.DefaultLimits().PerAddress, o.Limits.Address)
		},
		"rateLimits.stackingPerAddress": func(raw string) {
			same("rateLimits.stackingPerAddress", limit(raw), guard.DefaultLimits().StackingPerAddress, o.Limits.Stacking)
		},
		"rateLimits.perIP": func(raw string) {
			same("rateLimits.perIP", limit(raw), guard.DefaultLimits().PerIP, o.Limits.IP)
		},
		// Each entry of spec.assets, token or BTC, has rate limits of its
		// own, defaulted as a --token's and as BTC's.
		"assets.[].rateLimits": func(raw string) { same("assets[].rateLimits", raw, "{}", raw) },
		"assets.[].rateLimits.perAddress": func(raw string) {
			same("assets[].rateLimits.perAddress (token)", limit(raw), guard.DefaultAssetLimits().PerAddress, tokenFlagDefaults(t).PerAddress)
			same("assets[].rateLimits.perAddress (sbtc shorthand, BTC)", limit(raw), o.Assets.SBTC.Limits.PerAddress, o.BTC.Limits.PerAddress)
		},
		"assets.[].rateLimits.perIP": func(raw string) {
			same("assets[].rateLimits.perIP (token)", limit(raw), guard.DefaultAssetLimits().PerIP, tokenFlagDefaults(t).PerIP)
			same("assets[].rateLimits.perIP (sbtc shorthand, BTC)", limit(raw), o.Assets.SBTC.Limits.PerIP, o.BTC.Limits.PerIP)
		},
		"abuse.proofOfWork.difficulty": func(raw string) {
			same("abuse.proofOfWork.difficulty", num(raw), uint64(chain.Difficulty()), uint64(o.Abuse.PoWDifficulty))
			same("abuse.proofOfWork.difficulty constant", num(raw), uint64(guard.DefaultDifficulty), uint64(o.Abuse.PoWDifficulty))
		},
		// The guard's own default (24, or difficulty if higher) applies
		// only to a zero value, which the flag never passes.
		"abuse.proofOfWork.maxDifficulty": func(raw string) {
			same("abuse.proofOfWork.maxDifficulty", num(raw), uint64(guard.DefaultMaxDifficulty), uint64(o.Abuse.PoWMaxDifficulty))
		},
		"abuse.proofOfWork.ttl": func(raw string) {
			same("abuse.proofOfWork.ttl", dur(raw), engineTTL, o.Abuse.PoWTTL)
			same("abuse.proofOfWork.ttl constant", dur(raw), guard.DefaultChallengeTTL, o.Abuse.PoWTTL)
		},
		"page.explorerTxURL": func(raw string) {
			same("page.explorerTxURL", str(raw), server.DefaultExplorerTxURL, o.HTTP.ExplorerTxURL)
		},
		"batching.maxRecipients": func(raw string) {
			same("batching.maxRecipients", num(raw), uint64(faucet.DefaultBatchMax), uint64(o.Batching.Max))
		},
		"batching.contract": func(raw string) {
			same("batching.contract", str(raw), stacks.SendManyMemoTestnet, o.Batching.Contract)
		},
		// The Service port defaults to the port the server listens on, so
		// clients find the faucet where the Stacks Blockchain API would be.
		"service.port": func(raw string) {
			same("service.port", num(raw), uint64(controllers.DefaultServicePort), num(listenPort))
			same("container port", uint64(controllers.ServerPort), uint64(controllers.DefaultServicePort), num(listenPort))
		},
		// Operator-only defaults: no server flag, but a Go constant the
		// operator falls back to when the field is empty.
		"service.type": func(raw string) { same("service.type", str(raw), string(corev1.ServiceTypeClusterIP), str(raw)) },
		"keySecretRef.key": func(raw string) {
			same("keySecretRef.key", str(raw), faucetv1alpha1.DefaultKeySecretKey, str(raw))
		},
		"node.headersSecretRef.key": func(raw string) {
			same("node.headersSecretRef.key", str(raw), faucetv1alpha1.DefaultNodeHeadersSecretKey, str(raw))
		},
		"store.postgres.uriSecretRef.key": func(raw string) {
			same("store.postgres.uriSecretRef.key", str(raw), faucetv1alpha1.DefaultStoreURIKey, str(raw))
		},
		"abuse.apiTokens.secretRef.key": func(raw string) {
			same("abuse.apiTokens.secretRef.key", str(raw), faucetv1alpha1.DefaultAPITokensSecretKey, str(raw))
		},
		"store.embedded.size": func(raw string) {
			q := resource.MustParse(str(raw))
			want := resource.MustParse(faucetv1alpha1.DefaultEmbeddedStoreSize)
			same("store.embedded.size", q.Cmp(want) == 0, true, true)
		},
		"replicas": func(raw string) { same("replicas", num(raw), uint64(1), uint64(1)) },
		// An omitted store is the embedded one, which is what the
		// operator runs when spec.store is nil.
		"store": func(raw string) {
			same("store", raw, `{"embedded":{}}`, raw)
			same("store kind without spec.store", (&faucetv1alpha1.FaucetServer{}).StoreKind(), faucetv1alpha1.StoreEmbedded, faucetv1alpha1.StoreEmbedded)
		},
		// The btc entry of spec.assets: the CRD's defaults, the API's
		// constants and serve's flags agree.
		"assets.[].btc.amounts": func(raw string) { same("assets[].btc.amounts", raw, "{}", raw) },
		"assets.[].btc.amounts.default": func(raw string) {
			same("assets[].btc.amounts.default", num(raw), uint64(faucetv1alpha1.DefaultBTCAmount), uint64(o.BTC.Amounts.Default))
		},
		"assets.[].btc.amounts.large": func(raw string) {
			same("assets[].btc.amounts.large", num(raw), uint64(faucetv1alpha1.DefaultBTCLargeAmount), uint64(o.BTC.Amounts.Large))
		},
		"assets.[].btc.amounts.xlarge": func(raw string) {
			same("assets[].btc.amounts.xlarge", num(raw), uint64(faucetv1alpha1.DefaultBTCXLargeAmount), uint64(o.BTC.Amounts.XLarge))
		},
		"assets.[].btc.network": func(raw string) {
			same("assets[].btc.network", str(raw), faucetv1alpha1.DefaultBTCNetwork, o.BTC.Network.String())
		},
		"assets.[].btc.keySecretRef.key": func(raw string) {
			same("assets[].btc.keySecretRef.key", str(raw), faucetv1alpha1.DefaultBTCKeySecretKey, str(raw))
		},
		"assets.[].btc.rpc.credentialsSecretRef.key": func(raw string) {
			same("assets[].btc.rpc.credentialsSecretRef.key", str(raw), faucetv1alpha1.DefaultBTCCredentialsSecretKey, str(raw))
		},
		// Kubernetes' own defaults inside the core types of spec.extraEnv
		// and spec.imagePullSecrets: no faucet setting.
		"extraEnv.[].valueFrom.configMapKeyRef.name": func(raw string) { same("extraEnv configMapKeyRef.name", raw, `""`, raw) },
		"extraEnv.[].valueFrom.secretKeyRef.name":    func(raw string) { same("extraEnv secretKeyRef.name", raw, `""`, raw) },
		"extraEnv.[].valueFrom.fileKeyRef.optional":  func(raw string) { same("extraEnv fileKeyRef.optional", raw, "false", raw) },
		"imagePullSecrets.[].name":                   func(raw string) { same("imagePullSecrets.name", raw, `""`, raw) },
		// Groups default to {}, so their fields' defaults apply.
		"amounts":    func(raw string) { same("amounts", raw, "{}", raw) },
		"fee":        func(raw string) { same("fee", raw, "{}", raw) },
		"rateLimits": func(raw string) { same("rateLimits", raw, "{}", raw) },
		"service":    func(raw string) { same("service", raw, "{}", raw) },
		"mcp.enabled": func(raw string) {
			same("mcp.enabled", raw, strconv.FormatBool(o.HTTP.MCP), raw)
		},
	}
	budgetAndIdentityDefaults(t, checks, o, num, str, dur, limit, same)
	for _, p := range slices.Sorted(maps.Keys(defaults)) {
		check, ok := checks[p]
		if !ok {
			t.Errorf("spec.%s has a CRD default (%s) this test does not check against the server", p, defaults[p])
			continue
		}
		check(defaults[p])
	}
	for _, p := range slices.Sorted(maps.Keys(checks)) {
		if _, ok := defaults[p]; !ok {
			t.Errorf("spec.%s has no default in the CRD any more: update this test (and the operator's fallback)", p)
		}
	}
}

// budgetAndIdentityDefaults adds to checks the defaults of spec.budget,
// spec.assets[].budget and spec.identity: what a --budget or --tier that
// leaves a key out gets, and the sign-in flags' defaults.
func budgetAndIdentityDefaults(t *testing.T, checks map[string]func(string), o options.Serve,
	num func(string) uint64, str func(string) string, dur func(string) time.Duration, limit func(string) guard.Limit,
	same func(what string, crd, engine, flagDefault any)) {
	t.Helper()
	// A --budget that names only its asset and amount.
	bare, err := options.ParseBudget("asset=stx,amount=1")
	if err != nil {
		t.Fatal(err)
	}
	for _, prefix := range []string{"budget.", "assets.[].budget."} {
		checks[prefix+"per"] = func(raw string) {
			same(prefix+"per", dur(raw), guard.DefaultBudgetPer, bare.Per)
		}
		// The guard reads 0 as these defaults; the CRD refuses 0.
		checks[prefix+"scaleBelowPercent"] = func(raw string) {
			same(prefix+"scaleBelowPercent", num(raw), uint64(guard.DefaultScaleBelowPercent), uint64(bare.ScaleBelow()))
		}
		checks[prefix+"floorPercent"] = func(raw string) {
			same(prefix+"floorPercent", num(raw), uint64(guard.DefaultFloorPercent), uint64(bare.Floor()))
		}
	}
	// A --tier that names only itself.
	tier, err := options.ParseTier("name=t")
	if err != nil {
		t.Fatal(err)
	}
	// With sign-in on, which spec.identity always turns on.
	on := o.SignIn
	on.Issuer, on.ClientID = "https://accounts.example.com", "id"
	anonymous := on.TierSet().Anonymous
	checks["identity.sessionTTL"] = func(raw string) {
		same("identity.sessionTTL", dur(raw), identity.DefaultSessionTTL, o.SignIn.SessionTTL)
	}
	checks["identity.anonymous.enabled"] = func(raw string) {
		same("identity.anonymous.enabled", raw, strconv.FormatBool(!on.TierSet().AnonymousOff), strconv.FormatBool(o.SignIn.AnonymousDrips))
	}
	// The flag's default is 0, "50 with sign-in"; the CRD writes the 50.
	checks["identity.anonymous.budgetSharePercent"] = func(raw string) {
		same("identity.anonymous.budgetSharePercent", num(raw), uint64(options.DefaultAnonymousShare), uint64(anonymous.Share()))
	}
	checks["identity.anonymous.amountPercent"] = func(raw string) {
		same("identity.anonymous.amountPercent", num(raw), uint64(anonymous.Amount()), uint64(o.SignIn.AnonymousAmountPercent))
	}
	checks["identity.tiers.[].amountPercent"] = func(raw string) {
		same("identity.tiers[].amountPercent", num(raw), uint64(tier.Amount()), uint64(tier.AmountPercent))
	}
	checks["identity.tiers.[].budgetSharePercent"] = func(raw string) {
		same("identity.tiers[].budgetSharePercent", num(raw), uint64(tier.Share()), uint64(tier.BudgetSharePercent))
	}
	checks["identity.tiers.[].limit"] = func(raw string) {
		same("identity.tiers[].limit", limit(raw), tier.Limit, tier.Limit)
	}
	// Operator-only: the Secrets' data keys.
	checks["identity.oidc.clientSecretRef.key"] = func(raw string) {
		same("identity.oidc.clientSecretRef.key", str(raw), faucetv1alpha1.DefaultOIDCClientSecretKey, str(raw))
	}
	checks["identity.sessionKeySecretRef.key"] = func(raw string) {
		same("identity.sessionKeySecretRef.key", str(raw), faucetv1alpha1.DefaultSessionKeySecretKey, str(raw))
	}
}

// tokenFlagDefaults are the limits of a --token that names none.
func tokenFlagDefaults(t *testing.T) guard.AssetLimits {
	t.Helper()
	tok, err := options.ParseToken("name=tusd,asset=" + options.DevnetTestTokenAsset + ",amount=1")
	if err != nil {
		t.Fatal(err)
	}
	return tok.Limits
}

// TestLowThresholdDefaultIsTheServers: a FaucetServer that sets neither
// spec.funding.lowThreshold nor the deprecated spec.page.lowDrips passes no
// --low-drips, so its Funded condition and its faucet must fall back to the
// same number.
func TestLowThresholdDefaultIsTheServers(t *testing.T) {
	if low := serveDefaults(t).HTTP.LowDrips; faucetv1alpha1.DefaultLowThreshold != server.DefaultLowDrips || low != server.DefaultLowDrips {
		t.Errorf("DefaultLowThreshold %d, server.DefaultLowDrips %d, --low-drips default %d: one threshold, one default",
			faucetv1alpha1.DefaultLowThreshold, server.DefaultLowDrips, low)
	}
}

// TestCRDBatchLimitIsTheEngines: spec.batching.maxRecipients accepts what
// --batch-max accepts, 0 to faucet.MaxBatch.
func TestCRDBatchLimitIsTheEngines(t *testing.T) {
	p := crdSpecSchema(t).Properties["batching"].Properties["maxRecipients"]
	if p.Minimum == nil || *p.Minimum != 0 || p.Maximum == nil || *p.Maximum != float64(faucet.MaxBatch) {
		t.Errorf("spec.batching.maxRecipients: minimum %v, maximum %v; want 0 and faucet.MaxBatch (%d)", ptr.Deref(p.Minimum, -1), ptr.Deref(p.Maximum, -1), faucet.MaxBatch)
	}
	batchMax := func(n int) error {
		o := serveDefaults(t)
		o.Node.URLs, o.Keys.File = options.URLList{"http://stacks-node:20443"}, "/keys"
		o.Batching.Max = n
		return o.Validate()
	}
	for _, n := range []int{0, 1, 2, faucet.MaxBatch} {
		if err := batchMax(n); err != nil {
			t.Errorf("--batch-max=%d, which the CRD accepts: %v", n, err)
		}
	}
	if err := batchMax(faucet.MaxBatch + 1); err == nil || !strings.Contains(err.Error(), "--batch-max") {
		t.Errorf("--batch-max=%d: %v; the CRD refuses it", faucet.MaxBatch+1, err)
	}
}

// TestOperatorArgsReachServe runs the container args and env the operator
// writes into the faucet Deployment through the real `faucet serve` flag
// parsing, as the container would: every setting must arrive.
func TestOperatorArgsReachServe(t *testing.T) {
	const uri = "postgresql://app:pa55@faucet-db-rw:5432/app?sslmode=require"
	secrets := map[[2]string]string{{"faucet-db-app", "uri"}: uri}

	minimal := func() *faucetv1alpha1.FaucetServer {
		return &faucetv1alpha1.FaucetServer{
			ObjectMeta: metav1.ObjectMeta{Name: "faucet", Namespace: "testnet", UID: "uid-1"},
			Spec: faucetv1alpha1.FaucetServerSpec{
				Node:         faucetv1alpha1.NodeSpec{URL: "http://stacks-node:20443"},
				KeySecretRef: faucetv1alpha1.KeySecretReference{Name: "faucet-keys"},
			},
		}
	}
	// full sets every optional field, each away from its default.
	full := func(store faucetv1alpha1.StoreSpec, replicas int32) *faucetv1alpha1.FaucetServer {
		fs := minimal()
		fs.Spec = faucetv1alpha1.FaucetServerSpec{
			Node: faucetv1alpha1.NodeSpec{URL: "https://node.example.com:20443", Timeout: &metav1.Duration{Duration: 15 * time.Second},
				PollInterval: &metav1.Duration{Duration: 20 * time.Second}, BusyPollInterval: &metav1.Duration{Duration: 2 * time.Second},
				StallAfter: &metav1.Duration{Duration: 45 * time.Minute}},
			ChainID:      ptr.To(int64(2147483648)),
			KeySecretRef: faucetv1alpha1.KeySecretReference{Name: "faucet-keys", Key: "faucet.txt"},
			Amounts: &faucetv1alpha1.Amounts{
				Default: ptr.To(int64(1_000_000)), StackingPaddingPercent: ptr.To(int32(7)), Stacking: ptr.To(int64(90_000_000_000)),
			},
			Fee:  &faucetv1alpha1.Fee{Min: ptr.To(int64(200)), Max: ptr.To(int64(5000)), Fallback: ptr.To(int64(300))},
			Memo: ptr.To("hello faucet"),
			RateLimits: &faucetv1alpha1.RateLimits{
				PerAddress:         &faucetv1alpha1.RateLimit{Requests: 3, Window: metav1.Duration{Duration: 10 * time.Minute}},
				StackingPerAddress: &faucetv1alpha1.RateLimit{Requests: 2, Window: metav1.Duration{Duration: 24 * time.Hour}},
				PerIP:              &faucetv1alpha1.RateLimit{Requests: 20, Window: metav1.Duration{Duration: 90 * time.Second}},
				TrustedProxyHops:   ptr.To(int32(2)),
			},
			Replicas:          ptr.To(replicas),
			Store:             &store,
			Suspend:           true,
			Image:             "registry.example.com/faucet:v2",
			Service:           &faucetv1alpha1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Port: ptr.To(int32(80))},
			PodAnnotations:    map[string]string{"a": "b"},
			PriorityClassName: "low",
			LogLevel:          "warn",
			// Not a FAUCET_ name (the CRD refuses those): nothing serve reads.
			ExtraEnv: []corev1.EnvVar{{Name: "LANG", Value: "C.UTF-8"}},
			Abuse: &faucetv1alpha1.AbuseSpec{
				ProofOfWork: &faucetv1alpha1.ProofOfWork{
					Difficulty:    ptr.To(int32(18)),
					RaiseAbove:    &faucetv1alpha1.RateLimit{Requests: 120, Window: metav1.Duration{Duration: time.Minute}},
					MaxDifficulty: ptr.To(int32(26)),
					TTL:           &metav1.Duration{Duration: 2 * time.Minute},
				},
				APITokens: &faucetv1alpha1.APITokens{SecretRef: faucetv1alpha1.APITokensSecretReference{
					Name: "faucet-api-tokens", Key: "tokens.txt",
				}},
				IPAllow:        []string{"10.0.0.0/8", "2001:db8::/32", "203.0.113.7"},
				IPDeny:         []string{"198.51.100.0/24", "2001:db8:bad::1"},
				BalanceCapUSTX: ptr.To(int64(5_000_000_000)),
			},
			Page: &faucetv1alpha1.PageSpec{
				ExplorerTxURL: ptr.To("https://explorer.example.com/tx/{txid}?network=testnet"),
				LowDrips:      ptr.To(int32(250)), // deprecated: lowThreshold below wins
			},
			Funding: &faucetv1alpha1.FundingSpec{LowThreshold: ptr.To(int64(300))},
			Batching: &faucetv1alpha1.BatchingSpec{
				MaxRecipients: ptr.To(int32(150)),
				Window:        &metav1.Duration{Duration: 400 * time.Millisecond},
				Contract:      ptr.To("ST1PQHQKV0RJXZFY1DGX8MNSNYVE3VGZJSRTPGZGM.send-many-memo"),
			},
			Treasury: &faucetv1alpha1.TreasurySpec{
				KeySecretRef:     faucetv1alpha1.TreasuryKeyReference{Name: "faucet-treasury", Key: "treasury.txt"},
				RefillBelowUSTX:  ptr.To(int64(40_000_000)),
				RefillAmountUSTX: ptr.To(int64(400_000_000)),
			},
			Assets: faucetv1alpha1.AssetList{{
				Name: "sbtc",
				Token: &faucetv1alpha1.TokenSpec{
					AssetIdentifier: settings.SBTCTestnet, Amount: 250_000,
					RefillBelow: ptr.To(int64(5_000_000)), RefillAmount: ptr.To(int64(50_000_000)),
				},
				RateLimits: &faucetv1alpha1.AssetRateLimits{
					PerAddress: &faucetv1alpha1.RateLimit{Requests: 2, Window: metav1.Duration{Duration: time.Hour}},
					PerIP:      &faucetv1alpha1.RateLimit{Requests: 9, Window: metav1.Duration{Duration: 10 * time.Minute}},
				},
				LowThreshold: ptr.To(int64(40)),
				Budget:       &faucetv1alpha1.BudgetSpec{Amount: ptr.To(int64(50_000_000)), Per: &metav1.Duration{Duration: time.Hour}, Reserve: ptr.To(int64(1_000_000))},
			}, {
				Name:  "tusd",
				Token: &faucetv1alpha1.TokenSpec{AssetIdentifier: options.DevnetTestTokenAsset, Amount: 10_000_000},
			}, {
				Name: "btc",
				BTC: &faucetv1alpha1.BTCSpec{
					Network: "signet",
					RPC: faucetv1alpha1.BTCRPCSpec{URL: "http://bitcoind.btc.svc:38332",
						CredentialsSecretRef: &faucetv1alpha1.BTCCredentialsSecretReference{Name: "bitcoind-rpc", Key: "cookie"}},
					KeySecretRef: faucetv1alpha1.BTCKeySecretReference{Name: "faucet-btc", Key: "btc.txt"},
					Amounts:      &faucetv1alpha1.BTCAmounts{Default: ptr.To(int64(20_000)), Large: ptr.To(int64(2_000_000)), XLarge: ptr.To(int64(40_000_000))},
					StartHeight:  ptr.To(int64(230_000)),
					Fees:         &faucetv1alpha1.BTCFees{FallbackRate: ptr.To(int64(3)), MinRate: ptr.To(int64(2)), MaxRate: ptr.To(int64(40))},
				},
				RateLimits: &faucetv1alpha1.AssetRateLimits{
					PerAddress: &faucetv1alpha1.RateLimit{Requests: 4, Window: metav1.Duration{Duration: 2 * time.Hour}},
					PerIP:      &faucetv1alpha1.RateLimit{Requests: 8, Window: metav1.Duration{Duration: 20 * time.Minute}},
				},
				// Off, but with a target to shrink drips by.
				Budget: &faucetv1alpha1.BudgetSpec{Amount: ptr.To(int64(0)), Per: &metav1.Duration{Duration: 24 * time.Hour}, Target: ptr.To(int64(100_000_000))},
			}},
			Budget: &faucetv1alpha1.BudgetSpec{
				Amount: ptr.To(int64(1_000_000_000_000)), Per: &metav1.Duration{Duration: 12 * time.Hour},
				ScaleBelowPercent: ptr.To(int32(30)), FloorPercent: ptr.To(int32(20)),
				Reserve: ptr.To(int64(50_000_000_000)), Target: ptr.To(int64(200_000_000_000)),
				StackingPercent: ptr.To(int32(40)),
			},
			Identity: &faucetv1alpha1.IdentitySpec{
				OIDC: faucetv1alpha1.OIDCSpec{
					IssuerURL:       "https://keycloak.example.com/realms/faucet",
					ClientID:        "stx-faucet",
					ClientSecretRef: &faucetv1alpha1.OIDCClientSecretReference{Name: "faucet-oidc", Key: "secret.txt"},
					Scopes:          []string{"openid", "email", "groups"},
					Audiences:       []string{"api://faucet", "https://faucet.example.com/api"},
				},
				PublicURL:           "https://faucet.example.com",
				SessionKeySecretRef: &faucetv1alpha1.SessionKeySecretReference{Name: "faucet-session", Key: "key.txt"},
				SessionTTL:          &metav1.Duration{Duration: 8 * time.Hour},
				Anonymous: &faucetv1alpha1.AnonymousSpec{
					Enabled: ptr.To(false), BudgetSharePercent: ptr.To(int32(30)), AmountPercent: ptr.To(int32(50)),
				},
				Tiers: []faucetv1alpha1.TierSpec{{
					Name:          "staff",
					Match:         &faucetv1alpha1.TierMatch{Groups: []string{"faucet-staff", "Stacks Devs"}},
					AmountPercent: ptr.To(int32(1000)), Limit: &faucetv1alpha1.RateLimit{Requests: 100, Window: metav1.Duration{Duration: time.Hour}},
					SkipProofOfWork: true,
				}, {
					Name:               "verified",
					Match:              &faucetv1alpha1.TierMatch{EmailVerified: true, EmailDomains: []string{"example.com", "example.org"}},
					BudgetSharePercent: ptr.To(int32(60)),
				}},
			},
		}
		return fs
	}
	postgres := faucetv1alpha1.StoreSpec{Postgres: &faucetv1alpha1.PostgresStore{
		URISecretRef: faucetv1alpha1.SecretKeyReference{Name: "faucet-db-app", Key: "uri"},
	}}
	embedded := faucetv1alpha1.StoreSpec{Embedded: &faucetv1alpha1.EmbeddedStore{
		Size: ptr.To(resource.MustParse("5Gi")), StorageClassName: ptr.To("fast"),
	}}
	defaults := serveDefaults(t)

	tests := map[string]struct {
		// fs is the FaucetServer the operator reconciles
		fs *faucetv1alpha1.FaucetServer
		// want is the parsed `faucet serve` configuration, from the
		// defaults
		want func(o *options.Serve)
	}{
		"minimal: the server's defaults, the embedded store on its volume": {
			fs: minimal(),
			want: func(o *options.Serve) {
				o.Node.URLs = options.URLList{"http://stacks-node:20443"}
				o.Keys.File = "/etc/faucet/keys/keys"
				o.Store.DSN = "/var/lib/faucet/faucet.db"
			},
		},
		"every optional field, Postgres store": {
			fs:   full(postgres, 3),
			want: fullOptions(uri),
		},
		"every optional field, embedded store": {
			fs:   full(embedded, 1),
			want: fullOptions("/var/lib/faucet/faucet.db"),
		},
		"sign-in with a public client: the session key, no client secret, the faucet's default tier": {
			fs: func() *faucetv1alpha1.FaucetServer {
				fs := minimal()
				fs.Spec.Identity = &faucetv1alpha1.IdentitySpec{
					OIDC:                faucetv1alpha1.OIDCSpec{IssuerURL: "http://dex.auth.svc:5556/dex", ClientID: "faucet"},
					SessionKeySecretRef: &faucetv1alpha1.SessionKeySecretReference{Name: "faucet-session", Key: faucetv1alpha1.DefaultSessionKeySecretKey},
				}
				return fs
			}(),
			want: func(o *options.Serve) {
				o.Node.URLs = options.URLList{"http://stacks-node:20443"}
				o.Keys.File = "/etc/faucet/keys/keys"
				o.Store.DSN = "/var/lib/faucet/faucet.db"
				o.SignIn.Issuer, o.SignIn.ClientID = "http://dex.auth.svc:5556/dex", "faucet"
				o.SignIn.SessionKeyFile = "/etc/faucet/session/session-key"
			},
		},
		"several tokens, sbtc without an identifier (the node's /v2/pox names it), BTC between them": {
			fs: func() *faucetv1alpha1.FaucetServer {
				fs := minimal()
				fs.Spec.Assets = faucetv1alpha1.AssetList{
					{Name: "sbtc", Token: &faucetv1alpha1.TokenSpec{Amount: 100_000}},
					{Name: "btc", BTC: &faucetv1alpha1.BTCSpec{RPC: faucetv1alpha1.BTCRPCSpec{URL: "http://bitcoind:18443"},
						KeySecretRef: faucetv1alpha1.BTCKeySecretReference{Name: "faucet-btc"}}},
					{Name: "tusd", Token: &faucetv1alpha1.TokenSpec{AssetIdentifier: options.DevnetTestTokenAsset, Amount: 10_000_000}},
					{Name: "teur", Token: &faucetv1alpha1.TokenSpec{AssetIdentifier: "ST1PQHQKV0RJXZFY1DGX8MNSNYVE3VGZJSRTPGZGM.teur-token::teur", Amount: 5},
						RateLimits: &faucetv1alpha1.AssetRateLimits{PerIP: &faucetv1alpha1.RateLimit{Requests: 1, Window: metav1.Duration{Duration: time.Hour}}}},
				}
				return fs
			}(),
			want: func(o *options.Serve) {
				o.Node.URLs = options.URLList{"http://stacks-node:20443"}
				o.Keys.File = "/etc/faucet/keys/keys"
				o.Store.DSN = "/var/lib/faucet/faucet.db"
				def := guard.DefaultAssetLimits()
				o.Assets.Tokens = options.TokenList{
					{Name: "sbtc", Amount: 100_000, Limits: def},
					{Name: "tusd", Asset: options.DevnetTestTokenAsset, Amount: 10_000_000, Limits: def},
					{Name: "teur", Asset: "ST1PQHQKV0RJXZFY1DGX8MNSNYVE3VGZJSRTPGZGM.teur-token::teur", Amount: 5,
						Limits: guard.AssetLimits{PerAddress: def.PerAddress, PerIP: guard.Limit{Requests: 1, Window: time.Hour}}},
				}
				o.BTC.RPCURLs, o.BTC.KeyFile = options.URLList{"http://bitcoind:18443"}, "/etc/faucet/btc-key/key"
			},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			clearServeEnv(t)
			d := controllers.DeploymentFor(tt.fs, "img")
			pod := d.Spec.Template.Spec
			c := pod.Containers[0]
			if len(c.Command) != 0 || len(c.Args) == 0 || c.Args[0] != "serve" {
				t.Fatalf("command %q args %q: want the image's entrypoint with `serve`", c.Command, c.Args)
			}
			// The kubelet's part: resolve the environment.
			for _, e := range c.Env {
				value := e.Value
				if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP" {
					value = "10.244.0.7" // the pod's IP, from the downward API
					t.Setenv(e.Name, value)
					continue
				}
				if e.ValueFrom != nil {
					ref := e.ValueFrom.SecretKeyRef
					if ref == nil {
						t.Fatalf("env %s: only Secret references and the pod's IP are resolved here", e.Name)
					}
					v, ok := secrets[[2]string{ref.Name, ref.Key}]
					if !ok {
						t.Fatalf("env %s: no Secret %s key %s", e.Name, ref.Name, ref.Key)
					}
					value = v
				}
				t.Setenv(e.Name, value)
			}
			got := options.Defaults()
			if err := parseWithEnv(newServeFlags(&got), c.Args[1:]); err != nil {
				t.Fatalf("faucet serve %q: %v", c.Args[1:], err)
			}
			// The kubelet's part again: the switches' ConfigMap, as a file.
			const switchesPath = "/etc/faucet/switches/switches.json"
			if got.Abuse.SwitchesFile != switchesPath {
				t.Fatalf("--switches-file %q, want the ConfigMap's mount %s", got.Abuse.SwitchesFile, switchesPath)
			}
			file := filepath.Join(t.TempDir(), "switches.json")
			if err := os.WriteFile(file, []byte(controllers.SwitchesConfigMapFor(tt.fs).Data["switches.json"]), 0o600); err != nil {
				t.Fatal(err)
			}
			got.Abuse.SwitchesFile = file
			// What the CRD accepts, serve's own checks accept too.
			if err := got.Validate(); err != nil {
				t.Errorf("faucet serve %q: %v", c.Args[1:], err)
			}
			if st, err := switches.ReadFile(file); err != nil || st.Suspend != tt.fs.Spec.Suspend {
				t.Errorf("switches %+v (%v), want suspend %v", st, err, tt.fs.Spec.Suspend)
			}
			got.Abuse.SwitchesFile = switchesPath
			want := defaults
			// The lame duck the pod's grace period is sized for: a pod
			// of several replicas has one.
			if ptr.Deref(tt.fs.Spec.Replicas, 1) > 1 {
				want.HTTP.ShutdownDelay = 8 * time.Second
			}
			tt.want(&want)
			want.Abuse.SwitchesFile = switchesPath // every pod follows its ConfigMap
			// Every field of options.Serve: one added to it is compared
			// without touching this test.
			if !reflect.DeepEqual(got, want) {
				t.Errorf("faucet serve %q parsed\n %+v\nwant\n %+v", c.Args[1:], got, want)
			}
			// The operator writes only what differs from serve's
			// defaults: each argument alone changes them. Where the pod
			// listens and how it logs, its contract with the probes and
			// the log pipeline, are written always, whatever the image's
			// defaults.
			always := []string{"--listen=:3999", "--shutdown-delay=" + want.HTTP.ShutdownDelay.String(), "--log-format=json"}
			for _, a := range always {
				if !slices.Contains(c.Args, a) {
					t.Errorf("args %q lack %s", c.Args, a)
				}
			}
			for _, a := range c.Args[1:] {
				if slices.Contains(always, a) {
					continue
				}
				one := options.Defaults()
				if err := parseFlags(newServeFlags(&one), []string{a}, false); err != nil || reflect.DeepEqual(one, options.Defaults()) {
					t.Errorf("argument %q is serve's default (%v): the operator writes only what differs", a, err)
				}
			}

			// The files the flags name are where the volumes put them.
			checkOnVolume(t, pod, got.Keys.File, true)
			for _, f := range []string{got.Abuse.TokensFile, got.Keys.TreasuryFile, got.BTC.KeyFile, got.BTC.CredentialsFile,
				got.SignIn.ClientSecretFile, got.SignIn.SessionKeyFile} {
				if f != "" {
					checkOnVolume(t, pod, f, true)
				}
			}
			if !strings.Contains(got.Store.DSN, "://") {
				checkOnVolume(t, pod, got.Store.DSN, false)
			}
			// The URI, password included, is never in the Deployment.
			raw, err := json.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(raw), "pa55") || strings.Contains(string(raw), "faucet-db-rw") {
				t.Errorf("the Deployment carries the Postgres URI: %s", raw)
			}
		})
	}
}

// fullOptions is what `faucet serve` must see for the every-field
// FaucetServer of TestOperatorArgsReachServe, with store.
func fullOptions(store string) func(o *options.Serve) {
	return func(o *options.Serve) {
		o.Node = options.Node{URLs: options.URLList{"https://node.example.com:20443"}, Timeout: 15 * time.Second, ChainID: 2147483648,
			PollInterval: 20 * time.Second, BusyPollInterval: 2 * time.Second}
		o.Keys = options.Keys{File: "/etc/faucet/keys/faucet.txt", TreasuryFile: "/etc/faucet/treasury/treasury.txt",
			RefillBelow: 40_000_000, RefillAmount: 400_000_000}
		o.Amounts = options.Amounts{Default: 1_000_000, Stacking: 90_000_000_000, StackingPadding: 7, Memo: "hello faucet"}
		o.Fees.Min, o.Fees.Max, o.Fees.Fallback = 200, 5000, 300
		o.Batching = options.Batching{Max: 150, Window: 400 * time.Millisecond, Contract: "ST1PQHQKV0RJXZFY1DGX8MNSNYVE3VGZJSRTPGZGM.send-many-memo"}
		o.Limits = options.Limits{
			Address:          guard.Limit{Requests: 3, Window: 10 * time.Minute},
			Stacking:         guard.Limit{Requests: 2, Window: 24 * time.Hour},
			IP:               guard.Limit{Requests: 20, Window: 90 * time.Second},
			TrustedProxyHops: 2,
		}
		o.Abuse = options.Abuse{
			PoWDifficulty:    18,
			PoWRaiseAbove:    guard.Limit{Requests: 120, Window: time.Minute},
			PoWMaxDifficulty: 26,
			PoWTTL:           2 * time.Minute,
			TokensFile:       "/etc/faucet/api-tokens/tokens.txt",
			IPAllow: options.PrefixList{
				netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8::/32"), netip.MustParsePrefix("203.0.113.7/32"),
			},
			IPDeny:     options.PrefixList{netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("2001:db8:bad::1/128")},
			BalanceCap: 5_000_000_000,
		}
		o.Assets.Tokens = options.TokenList{{
			Name: "sbtc", Asset: settings.SBTCTestnet, Amount: 250_000,
			Limits: guard.AssetLimits{
				PerAddress: guard.Limit{Requests: 2, Window: time.Hour},
				PerIP:      guard.Limit{Requests: 9, Window: 10 * time.Minute},
			},
			RefillBelow: 5_000_000, RefillAmount: 50_000_000, LowDrips: 40,
		}, {
			Name: "tusd", Asset: options.DevnetTestTokenAsset, Amount: 10_000_000, Limits: guard.DefaultAssetLimits(),
		}}
		o.BTC.RPCURLs = options.URLList{"http://bitcoind.btc.svc:38332"}
		o.BTC.CredentialsFile = "/etc/faucet/btc-rpc/cookie"
		o.BTC.KeyFile = "/etc/faucet/btc-key/btc.txt"
		o.BTC.Network = bitcoin.Signet
		o.BTC.Amounts = options.BTCAmounts{Default: 20_000, Large: 2_000_000, XLarge: 40_000_000}
		o.BTC.StartHeight = 230_000
		o.BTC.Fees = options.BTCFees{Fallback: 3, Min: 2, Max: 40}
		o.BTC.Limits = guard.AssetLimits{
			PerAddress: guard.Limit{Requests: 4, Window: 2 * time.Hour},
			PerIP:      guard.Limit{Requests: 8, Window: 20 * time.Minute},
		}
		o.Store.DSN = store
		o.HTTP.ExplorerTxURL = "https://explorer.example.com/tx/{txid}?network=testnet"
		o.HTTP.LowDrips = 300 // spec.funding.lowThreshold, the one threshold
		o.HTTP.StallAfter = 45 * time.Minute
		o.Log.Level = "warn"
		o.Budgets.List = options.BudgetList{
			{Asset: "stx", Budget: guard.Budget{Amount: 1_000_000_000_000, Per: 12 * time.Hour, ScaleBelowPercent: 30, FloorPercent: 20,
				Reserve: 50_000_000_000, Target: 200_000_000_000, StackingPercent: 40}},
			{Asset: "sbtc", Budget: guard.Budget{Amount: 50_000_000, Per: time.Hour, Reserve: 1_000_000}},
			{Asset: "btc", Budget: guard.Budget{Amount: 0, Per: guard.DefaultBudgetPer, Target: 100_000_000}},
		}
		o.SignIn = options.SignIn{
			Issuer: "https://keycloak.example.com/realms/faucet", ClientID: "stx-faucet",
			ClientSecretFile: "/etc/faucet/oidc/secret.txt",
			Scopes:           options.NameList{"openid", "email", "groups"},
			Audiences:        options.NameList{"api://faucet", "https://faucet.example.com/api"},
			PublicURL:        "https://faucet.example.com",
			SessionKeyFile:   "/etc/faucet/session/key.txt",
			SessionTTL:       8 * time.Hour,
			Tiers: options.TierList{{
				Name: "staff", Match: identity.Match{Groups: []string{"faucet-staff", "Stacks Devs"}},
				AmountPercent: 1000, Limit: guard.Limit{Requests: 100, Window: time.Hour}, SkipProofOfWork: true, BudgetSharePercent: 100,
			}, {
				Name: "verified", Match: identity.Match{EmailVerified: true, EmailDomains: []string{"example.com", "example.org"}},
				AmountPercent: 100, Limit: guard.Limit{Requests: 20, Window: 24 * time.Hour}, BudgetSharePercent: 60,
			}},
			AnonymousDrips: false, AnonymousShare: 30, AnonymousAmountPercent: 50,
		}
	}
}

// checkOnVolume fails unless file lies on a volume mount of the container,
// read-only or writable as wanted, and, for a Secret volume, is one of the
// files it projects.
func checkOnVolume(t *testing.T, pod corev1.PodSpec, file string, readOnly bool) {
	t.Helper()
	for _, m := range pod.Containers[0].VolumeMounts {
		rel, ok := strings.CutPrefix(file, m.MountPath+"/")
		if !ok {
			continue
		}
		if m.ReadOnly != readOnly {
			t.Errorf("%s is on mount %s with readOnly %v", file, m.MountPath, m.ReadOnly)
		}
		for _, v := range pod.Volumes {
			if v.Name != m.Name {
				continue
			}
			if v.Secret != nil && !slices.ContainsFunc(v.Secret.Items, func(k corev1.KeyToPath) bool { return k.Path == rel }) {
				t.Errorf("Secret volume %s does not project %s", v.Name, rel)
			}
			if !readOnly && v.PersistentVolumeClaim == nil {
				t.Errorf("%s is writable but not on a PersistentVolumeClaim: it would not survive a restart", file)
			}
			return
		}
		t.Errorf("mount %s has no volume", m.Name)
		return
	}
	t.Errorf("%s is on no volume mount (mounts %+v): the read-only root filesystem", path.Dir(file), pod.Containers[0].VolumeMounts)
}
