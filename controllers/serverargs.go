package controllers

import (
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
	"github.com/stxfaucet/faucet-operator/server/guard"
	"github.com/stxfaucet/faucet-operator/server/identity"
	"github.com/stxfaucet/faucet-operator/server/options"
	"github.com/stxfaucet/faucet-operator/server/settings"
)

// serverArgs are the faucet pod's command line: `faucet serve` with the
// FaucetServer's settings, rendered by the same options serve parses them
// with, so a flag's name is written only there.
func serverArgs(fs *faucetv1alpha1.FaucetServer) []string {
	o := serverOptions(fs)
	// Where the pod listens, how it logs and how long it stays a lame duck
	// are the pod's contract with its probes, the cluster's log pipeline
	// and its grace period: written out, whatever the image's defaults.
	return append([]string{"serve"}, o.Args("listen", "log-format", "shutdown-delay")...)
}

// serverOptions are the spec on serve's defaults. Unset optional fields
// keep the defaults, which are the CRD's defaults (a test holds the two
// together).
func serverOptions(fs *faucetv1alpha1.FaucetServer) options.Serve {
	o := options.Defaults()
	o.HTTP.Listen = ":" + strconv.Itoa(ServerPort)
	o.HTTP.ShutdownDelay = lameDuckOf(fs)
	o.Log.Format = "json"
	for _, set := range []func(*faucetv1alpha1.FaucetServer, *options.Serve){
		setNodeAndKeys, setAmountsAndFees, setLimitsAndAbuse, setAssets, setBTC, setService, setBudgets, setIdentity,
	} {
		set(fs, &o)
	}
	return o
}

// setInt sets *dst to an optional spec integer when it is set.
func setInt[T ~int64 | ~uint64 | ~int | ~uint, V ~int32 | ~int64](dst *T, v *V) {
	if v != nil {
		*dst = T(*v)
	}
}

// setDuration sets *dst to an optional spec duration when it is set.
func setDuration(dst *time.Duration, d *metav1.Duration) {
	if d != nil {
		*dst = d.Duration
	}
}

func setLimit(dst *guard.Limit, l *faucetv1alpha1.RateLimit) {
	if l != nil {
		*dst = guard.Limit{Requests: int(l.Requests), Window: l.Window.Duration}
	}
}

// setNodeAndKeys: the node and its headers, the keys (files on Secret
// volumes: only their paths are flags) and the treasury.
func setNodeAndKeys(fs *faucetv1alpha1.FaucetServer, o *options.Serve) {
	s := fs.Spec
	o.Node.URLs = s.Node.NodeURLs()
	setDuration(&o.Node.Timeout, s.Node.Timeout)
	setDuration(&o.Node.PollInterval, s.Node.PollInterval)
	setDuration(&o.Node.BusyPollInterval, s.Node.BusyPollInterval)
	setDuration(&o.HTTP.StallAfter, s.Node.StallAfter)
	setInt(&o.Node.ChainID, s.ChainID)
	if ref := fs.NodeHeadersSecretKey(); ref != nil {
		o.Node.HeadersFile = path.Join(nodeHeadersMountPath, ref.Key)
	}
	o.Keys.File = path.Join(keysMountPath, fs.KeySecretKey().Key)
	if ref := fs.TreasurySecretKey(); ref != nil {
		o.Keys.TreasuryFile = path.Join(treasuryMountPath, ref.Key)
		setInt(&o.Keys.RefillBelow, s.Treasury.RefillBelowUSTX)
		setInt(&o.Keys.RefillAmount, s.Treasury.RefillAmountUSTX)
	}
}

// setAmountsAndFees: STX's amounts, the fees and batching.
func setAmountsAndFees(fs *faucetv1alpha1.FaucetServer, o *options.Serve) {
	s := fs.Spec
	if a := s.Amounts; a != nil {
		setInt(&o.Amounts.Default, a.Default)
		setInt(&o.Amounts.StackingPadding, a.StackingPaddingPercent)
		setInt(&o.Amounts.Stacking, a.Stacking)
	}
	if f := s.Fee; f != nil {
		setInt(&o.Fees.Min, f.Min)
		setInt(&o.Fees.Max, f.Max)
		setInt(&o.Fees.Fallback, f.Fallback)
	}
	if s.Memo != nil {
		o.Amounts.Memo = *s.Memo
	}
	if b := s.Batching; b != nil {
		setInt(&o.Batching.Max, b.MaxRecipients)
		if b.Window != nil {
			o.Batching.Window = b.Window.Duration
		}
		if b.Contract != nil {
			o.Batching.Contract = *b.Contract
		}
	}
}

// setLimitsAndAbuse: STX's limits and the abuse checks.
func setLimitsAndAbuse(fs *faucetv1alpha1.FaucetServer, o *options.Serve) {
	s := fs.Spec
	if rl := s.RateLimits; rl != nil {
		setLimit(&o.Limits.Address, rl.PerAddress)
		setLimit(&o.Limits.Stacking, rl.StackingPerAddress)
		setLimit(&o.Limits.IP, rl.PerIP)
		setInt(&o.Limits.TrustedProxyHops, rl.TrustedProxyHops)
	}
	a := s.Abuse
	if a == nil {
		return
	}
	if p := a.ProofOfWork; p != nil {
		setInt(&o.Abuse.PoWDifficulty, p.Difficulty)
		setLimit(&o.Abuse.PoWRaiseAbove, p.RaiseAbove)
		setInt(&o.Abuse.PoWMaxDifficulty, p.MaxDifficulty)
		if p.TTL != nil {
			o.Abuse.PoWTTL = p.TTL.Duration
		}
	}
	if ref := fs.APITokensSecretKey(); ref != nil {
		o.Abuse.TokensFile = path.Join(apiTokensMountPath, ref.Key)
	}
	// The CRD checks the lists (CEL, isCIDR/isIP); one it did not check
	// would fail the pod's start, saying which entry.
	_ = o.Abuse.IPAllow.Set(strings.Join(a.IPAllow, ","))
	_ = o.Abuse.IPDeny.Set(strings.Join(a.IPDeny, ","))
	setInt(&o.Abuse.BalanceCap, a.BalanceCapUSTX)
}

// setAssets: every token of spec.assets as a --token, in spec order; a
// token without an identifier is the contract the node names in /v2/pox
// (Asset "").
func setAssets(fs *faucetv1alpha1.FaucetServer, o *options.Serve) {
	for _, a := range fs.Tokens() {
		t := options.Token{Name: a.Name, Asset: a.Token.AssetIdentifier, Amount: uint64(max(a.Token.Amount, 0)),
			Limits: guard.DefaultAssetLimits()}
		setAssetLimits(&t.Limits, a.RateLimits)
		// The server refuses refills without a treasury; the CRD refuses
		// them too, so this only guards an unvalidated object.
		if fs.Spec.Treasury != nil {
			setInt(&t.RefillBelow, a.Token.RefillBelow)
			setInt(&t.RefillAmount, a.Token.RefillAmount)
		}
		// As for --low-drips, 1 means to the faucet what 0 means to the
		// Funded condition; 0 would be "the faucet's threshold".
		if a.LowThreshold != nil {
			t.LowDrips = int(max(*a.LowThreshold, 1))
		}
		o.Assets.Tokens = append(o.Assets.Tokens, t)
	}
}

func setAssetLimits(dst *guard.AssetLimits, rl *faucetv1alpha1.AssetRateLimits) {
	if rl != nil {
		setLimit(&dst.PerAddress, rl.PerAddress)
		setLimit(&dst.PerIP, rl.PerIP)
	}
}

// setBTC: the BTC faucet, from the btc entry of spec.assets; its key and
// credentials are files on Secret volumes.
func setBTC(fs *faucetv1alpha1.FaucetServer, o *options.Serve) {
	a := fs.BTCAsset()
	if a == nil {
		return
	}
	b := a.BTC
	o.BTC.RPCURLs = b.RPC.RPCURLs()
	if ref := fs.BTCCredentialsSecretKey(); ref != nil {
		o.BTC.CredentialsFile = path.Join(btcCredentialsMountPath, ref.Key)
	}
	o.BTC.KeyFile = path.Join(btcKeyMountPath, fs.BTCKeySecretKey().Key)
	_ = o.BTC.Network.UnmarshalText([]byte(fs.BTCNetwork())) // the CRD's enum
	if am := b.Amounts; am != nil {
		setInt(&o.BTC.Amounts.Default, am.Default)
		setInt(&o.BTC.Amounts.Large, am.Large)
		setInt(&o.BTC.Amounts.XLarge, am.XLarge)
	}
	setInt(&o.BTC.StartHeight, b.StartHeight)
	if f := b.Fees; f != nil {
		setInt(&o.BTC.Fees.Fallback, f.FallbackRate)
		setInt(&o.BTC.Fees.Min, f.MinRate)
		setInt(&o.BTC.Fees.Max, f.MaxRate)
	}
	setAssetLimits(&o.BTC.Limits, a.RateLimits)
}

// setService: the page, the funding threshold, the switches file, MCP,
// logs and the store.
func setService(fs *faucetv1alpha1.FaucetServer, o *options.Serve) {
	s := fs.Spec
	if p := s.Page; p != nil && p.ExplorerTxURL != nil {
		o.HTTP.ExplorerTxURL = *p.ExplorerTxURL
	}
	// The one threshold of the Funded condition, the page and the
	// faucet_low_drips_threshold metric (the chart's FaucetLow alert).
	// The faucet refuses 0; 1 means the same to it: only an empty faucet
	// (no drip left) is below it, and that one is empty, not low.
	if low, set := fs.LowThreshold(); set {
		o.HTTP.LowDrips = int(max(low, 1))
	}
	// The switches are not flags: the faucet follows them in the
	// ConfigMap, so switching restarts nothing.
	o.Abuse.SwitchesFile = path.Join(switchesMountPath, switchesFile)
	if m := s.MCP; m != nil && m.Enabled != nil {
		o.HTTP.MCP = *m.Enabled
	}
	if s.LogLevel != "" {
		o.Log.Level = s.LogLevel
	}
	if fs.StoreKind() == faucetv1alpha1.StoreEmbedded {
		o.Store.DSN = path.Join(dataMountPath, storeFile)
	}
}

// setBudgets: spec.budget as STX's --budget, then each entry of
// spec.assets with a budget, in spec order. An asset without one keeps the
// faucet's default budget.
func setBudgets(fs *faucetv1alpha1.FaucetServer, o *options.Serve) {
	add := func(asset string, b *faucetv1alpha1.BudgetSpec) {
		if b == nil || b.Amount == nil {
			return // the CRD requires amount; --budget cannot go without it
		}
		ob := options.Budget{Asset: asset, Budget: guard.Budget{Amount: uint64(max(*b.Amount, 0)), Per: guard.DefaultBudgetPer}}
		if b.Per != nil {
			ob.Per = b.Per.Duration
		}
		setInt(&ob.ScaleBelowPercent, b.ScaleBelowPercent)
		setInt(&ob.FloorPercent, b.FloorPercent)
		setInt(&ob.Reserve, nonNegative(b.Reserve))
		setInt(&ob.Target, nonNegative(b.Target))
		// Stacking drips are STX's alone: serve refuses a stacking share
		// on any other asset's --budget, as the CRD does on spec.assets.
		if asset == settings.AssetSTX {
			setInt(&ob.StackingPercent, b.StackingPercent)
		}
		o.Budgets.List = append(o.Budgets.List, ob)
	}
	add(settings.AssetSTX, fs.Spec.Budget)
	for _, a := range fs.Spec.Assets {
		if a.Token != nil || a.BTC != nil {
			add(a.Name, a.Budget)
		}
	}
}

// nonNegative is v, or nil when v is negative, which the CRD refuses: a
// negative number would wrap around as a uint64.
func nonNegative(v *int64) *int64 {
	if v == nil || *v < 0 {
		return nil
	}
	return v
}

// setIdentity: sign-in and the tiers, from spec.identity. The client
// secret and the session key are files on Secret volumes: only their
// paths are flags.
func setIdentity(fs *faucetv1alpha1.FaucetServer, o *options.Serve) {
	id := fs.Spec.Identity
	if id == nil {
		return
	}
	s := &o.SignIn
	s.Issuer, s.ClientID, s.PublicURL = id.OIDC.IssuerURL, id.OIDC.ClientID, id.PublicURL
	if ref := fs.OIDCClientSecretKey(); ref != nil {
		s.ClientSecretFile = path.Join(oidcClientSecretMountPath, ref.Key)
	}
	if ref := fs.SessionKeySecretKey(); ref != nil {
		s.SessionKeyFile = path.Join(sessionKeyMountPath, ref.Key)
	}
	// An empty list is the default (nil), as serve parses it back.
	if len(id.OIDC.Scopes) > 0 {
		s.Scopes = slices.Clone(id.OIDC.Scopes)
	}
	if len(id.OIDC.Audiences) > 0 {
		s.Audiences = slices.Clone(id.OIDC.Audiences)
	}
	if id.SessionTTL != nil {
		s.SessionTTL = id.SessionTTL.Duration
	}
	if a := id.Anonymous; a != nil {
		if a.Enabled != nil {
			s.AnonymousDrips = *a.Enabled
		}
		setInt(&s.AnonymousShare, a.BudgetSharePercent)
		setInt(&s.AnonymousAmountPercent, a.AmountPercent)
	}
	for _, t := range id.Tiers {
		s.Tiers = append(s.Tiers, tierOf(t))
	}
}

// tierOf is a sign-in tier as --tier takes it: what --tier gives a tier
// that names nothing but its name (the CRD's defaults are the same), with
// the spec's fields over it.
func tierOf(t faucetv1alpha1.TierSpec) identity.Tier {
	tier := options.NewTier(t.Name)
	if m := t.Match; m != nil {
		tier.Match.EmailVerified = m.EmailVerified
		if len(m.Groups) > 0 {
			tier.Match.Groups = slices.Clone(m.Groups)
		}
		if len(m.EmailDomains) > 0 {
			tier.Match.EmailDomains = slices.Clone(m.EmailDomains)
		}
	}
	setInt(&tier.AmountPercent, t.AmountPercent)
	setLimit(&tier.Limit, t.Limit)
	tier.SkipProofOfWork = t.SkipProofOfWork
	setInt(&tier.BudgetSharePercent, t.BudgetSharePercent)
	return tier
}
