package options

import (
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/utils/clock"

	"github.com/stxfaucet/faucet-operator/server/guard"
	"github.com/stxfaucet/faucet-operator/server/identity"
)

// SignIn is sign-in through an OpenID Connect provider and the tiers of
// requesters.
type SignIn struct {
	Issuer           string
	ClientID         string
	ClientSecretFile string
	Scopes           NameList
	Audiences        NameList
	PublicURL        string
	SessionKeyFile   string
	SessionTTL       time.Duration
	Tiers            TierList
	// AnonymousDrips: drips without sign-in are served (the anonymous
	// tier); false answers them 401.
	AnonymousDrips bool
	// AnonymousShare is the anonymous tier's share of each budget in
	// percent; 0 is DefaultAnonymousShare with sign-in, 100 without.
	AnonymousShare         int
	AnonymousAmountPercent int
}

// DefaultAnonymousShare is the anonymous tier's share of every budget when
// people can sign in: a farm of anonymous clients takes at most half, and
// the rest stays for those signed in.
const DefaultAnonymousShare = 50

func defaultSignIn() SignIn {
	return SignIn{AnonymousDrips: true, SessionTTL: identity.DefaultSessionTTL, AnonymousAmountPercent: 100}
}

// BindFlags binds the --oidc-*, --session-*, --tier and --anonymous-* flags.
func (o *SignIn) BindFlags(fs *Flags) {
	fs.String(&o.Issuer, "oidc-issuer", "turn on sign-in: the OpenID Connect provider's issuer URL, exactly as its discovery document states it (e.g. https://accounts.google.com); needs --oidc-client-id")
	fs.String(&o.ClientID, "oidc-client-id", "the faucet's client ID at the provider; bearer tokens must name it (or an --oidc-audience) in aud")
	fs.String(&o.ClientSecretFile, "oidc-client-secret-file", "file holding the client secret (none for a public client: PKCE alone)")
	fs.Var(&o.Scopes, "oidc-scopes", "scopes asked for at sign-in, comma-separated (default openid,email,profile; add groups, or your provider's scope, for tiers that match groups)")
	fs.Var(&o.Audiences, "oidc-audience", "another aud accepted in bearer tokens besides the client ID (an access token issued for an API), comma-separated or repeated")
	fs.String(&o.PublicURL, "public-url", "the faucet's origin as browsers reach it (e.g. https://faucet.example.com), for the sign-in callback /faucet/v1/auth/callback; default: from each request's Host (and X-Forwarded-Proto behind --trusted-proxy-hops)")
	fs.String(&o.SessionKeyFile, "session-key-file", "file holding the key that seals sign-in cookies (16 bytes or more, shared by replicas); default: derived from the client secret")
	fs.Duration(&o.SessionTTL, "session-ttl", "how long the page stays signed in")
	fs.Var(&o.Tiers, "tier", "a sign-in tier, as comma-separated key=value pairs: name, and who is in it: email-verified=true, groups=a|b (one of), email-domains=example.com|example.org (a verified email at one of); what they get: amount-percent (of each asset's drip, default 100), limit (N/window per person and asset, default 20/24h), skip-pow (true skips the proof of work), budget-share (percent of each budget, default 100); repeat for more, in the order they are tried. With --oidc-issuer and no --tier: name=signed-in,email-verified=true,amount-percent=200,limit=20/24h,skip-pow=true")
	fs.Bool(&o.AnonymousDrips, "anonymous-drips", "serve drips without sign-in (false: only the sign-in tiers drip)")
	fs.Int(&o.AnonymousShare, "anonymous-budget-share", "the percent of each asset's budget drips without sign-in may take (0: "+strconv.Itoa(DefaultAnonymousShare)+" with --oidc-issuer, else 100)")
	fs.Int(&o.AnonymousAmountPercent, "anonymous-amount-percent", "the percent of each asset's drip a drip without sign-in gets")
}

// On reports whether sign-in is configured.
func (o *SignIn) On() bool { return o.Issuer != "" }

func (o *SignIn) validate() error {
	if o.On() {
		// The service's own checks, each put to the flag it is about.
		for _, c := range []struct {
			flag string
			cfg  identity.Config
		}{
			{"--oidc-issuer", identity.Config{Issuer: o.Issuer, ClientID: "x"}},
			{"--oidc-client-id", identity.Config{Issuer: o.Issuer, ClientID: o.ClientID}},
			{"--oidc-scopes", identity.Config{Issuer: o.Issuer, ClientID: "x", Scopes: o.scopes()}},
			{"--public-url", identity.Config{Issuer: o.Issuer, ClientID: "x", PublicURL: o.PublicURL}},
		} {
			c.cfg.SessionKey = make([]byte, 32)
			if _, err := identity.New(c.cfg); err != nil {
				return fmt.Errorf("%s: %w", c.flag, err)
			}
		}
	}
	switch {
	case !o.On() && (o.ClientID != "" || o.ClientSecretFile != "" || len(o.Tiers) > 0 || !o.AnonymousDrips || o.SessionKeyFile != ""):
		return errors.New("--oidc-client-id, --oidc-client-secret-file, --session-key-file, --tier and --anonymous-drips=false need sign-in: --oidc-issuer")
	case o.AnonymousShare < 0 || o.AnonymousShare > 100:
		return fmt.Errorf("--anonymous-budget-share must be a percent, 0 to 100, got %d", o.AnonymousShare)
	case o.SessionTTL <= 0:
		return fmt.Errorf("--session-ttl must be positive, got %s", o.SessionTTL)
	}
	t := o.TierSet()
	if err := t.Validate(); err != nil {
		return fmt.Errorf("--tier: %w", err)
	}
	return nil
}

// TierSet is the tiers the flags configure.
func (o *SignIn) TierSet() identity.Tiers {
	t := identity.Tiers{
		Anonymous:    identity.Tier{Name: identity.AnonymousName, AmountPercent: o.AnonymousAmountPercent, BudgetSharePercent: o.AnonymousShare},
		AnonymousOff: !o.AnonymousDrips,
	}
	if o.On() {
		if t.Anonymous.BudgetSharePercent == 0 {
			t.Anonymous.BudgetSharePercent = DefaultAnonymousShare
		}
		t.SignedIn = []identity.Tier(o.Tiers)
		if len(t.SignedIn) == 0 {
			t.SignedIn = []identity.Tier{identity.DefaultSignedIn()}
		}
	}
	return t
}

// TierList is the repeatable --tier flag; one value may also hold several
// tiers separated by ';' (FAUCET_TIER).
type TierList []identity.Tier

// ArgName is the placeholder -h shows after the flag's name.
func (*TierList) ArgName() string { return "name=…,…" }

func (l *TierList) String() string { return joinList(l, ";", TierString) }

// Set adds the tiers of v.
func (l *TierList) Set(v string) error { return addEach(l, v, ";", ParseTier) }

// TierString is t as --tier takes it.
func TierString(t identity.Tier) string {
	parts := []string{"name=" + t.Name}
	if t.Match.EmailVerified {
		parts = append(parts, "email-verified=true")
	}
	if len(t.Match.Groups) > 0 {
		parts = append(parts, "groups="+strings.Join(t.Match.Groups, "|"))
	}
	if len(t.Match.EmailDomains) > 0 {
		parts = append(parts, "email-domains="+strings.Join(t.Match.EmailDomains, "|"))
	}
	parts = append(parts, "amount-percent="+strconv.Itoa(t.Amount()), "limit="+LimitString(t.Limit))
	if t.SkipProofOfWork {
		parts = append(parts, "skip-pow=true")
	}
	return strings.Join(append(parts, "budget-share="+strconv.Itoa(t.Share())), ",")
}

// NewTier is the tier --tier name=NAME gives: the drip as configured, 20
// drips a day per person and asset, the proof of work, the whole budget.
func NewTier(name string) identity.Tier {
	return identity.Tier{Name: name, AmountPercent: 100, BudgetSharePercent: 100, Limit: guard.Limit{Requests: 20, Window: 24 * time.Hour}}
}

// ParseTier reads one --tier value.
func ParseTier(s string) (identity.Tier, error) {
	t := NewTier("")
	set := func(k, v string) error { return setTier(&t, k, v) }
	if _, err := setPairs(s, "name, email-verified, groups, email-domains, amount-percent, limit, skip-pow, budget-share", "--tier ", set); err != nil {
		return identity.Tier{}, err
	}
	if t.Name == "" {
		return identity.Tier{}, errors.New("--tier: name is required, e.g. name=verified,email-verified=true,amount-percent=200")
	}
	return t, nil
}

func setTier(t *identity.Tier, k, v string) error {
	var err error
	list := func() []string {
		var out []string
		for p := range strings.SplitSeq(v, "|") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
		return out
	}
	switch k {
	case "name":
		t.Name = v
	case "email-verified":
		t.Match.EmailVerified, err = strconv.ParseBool(v)
	case "groups":
		t.Match.Groups = list()
	case "email-domains":
		t.Match.EmailDomains = list()
	case "amount-percent":
		t.AmountPercent, err = strconv.Atoi(v)
		if err == nil && (t.AmountPercent < 1 || t.AmountPercent > 10000) {
			return errors.New("want a percent of the drip, 1 to 10000")
		}
	case "limit":
		t.Limit, err = ParseLimit(v)
	case "skip-pow":
		t.SkipProofOfWork, err = strconv.ParseBool(v)
	case "budget-share":
		t.BudgetSharePercent, err = strconv.Atoi(v)
		if err == nil && (t.BudgetSharePercent < 1 || t.BudgetSharePercent > 100) {
			return errors.New("want a percent of the budget, 1 to 100")
		}
	default:
		return errors.New("unknown key")
	}
	return err
}

// Service builds the sign-in service, reading its files (nil when sign-in
// is off). warn is set when the session key had to be made up: sessions
// then end with the process and do not carry across replicas.
func (o *SignIn) Service(trustProxy bool, clk clock.PassiveClock, log *slog.Logger) (svc *identity.Service, warn string, err error) {
	if !o.On() {
		return nil, "", nil
	}
	var secret string
	if o.ClientSecretFile != "" {
		b, err := os.ReadFile(o.ClientSecretFile)
		if err != nil {
			return nil, "", fmt.Errorf("--oidc-client-secret-file: %w", err)
		}
		if secret = strings.TrimSpace(string(b)); secret == "" {
			return nil, "", fmt.Errorf("--oidc-client-secret-file %s is empty", o.ClientSecretFile)
		}
	}
	var key []byte
	switch {
	case o.SessionKeyFile != "":
		b, err := os.ReadFile(o.SessionKeyFile)
		if err != nil {
			return nil, "", fmt.Errorf("--session-key-file: %w", err)
		}
		if key = []byte(strings.TrimSpace(string(b))); len(key) < 16 {
			return nil, "", fmt.Errorf("--session-key-file %s: the key must be at least 16 bytes", o.SessionKeyFile)
		}
	case len(secret) >= 16:
		key = []byte("client secret:" + secret)
	default:
		key = make([]byte, 32)
		_, _ = rand.Read(key)
		warn = "no --session-key-file and no client secret of 16 bytes or more: sign-in sessions are sealed with a key of this process alone, lost at restart and not shared by replicas"
	}
	svc, err = identity.New(identity.Config{
		Issuer: o.Issuer, ClientID: o.ClientID, ClientSecret: secret, Scopes: o.scopes(), Audiences: o.Audiences,
		PublicURL: o.PublicURL, TrustForwardedProto: trustProxy, SessionKey: key, SessionTTL: o.SessionTTL,
		KeepGroup: o.keepGroup(), HTTPClient: &http.Client{Timeout: 10 * time.Second}, Logger: log, Clock: clk,
	})
	if err != nil {
		return nil, "", err
	}
	return svc, warn, nil
}

// keepGroup keeps in sessions the groups the tiers match on.
func (o *SignIn) keepGroup() func(string) bool {
	t := o.TierSet()
	return func(g string) bool {
		for _, tier := range t.SignedIn {
			if slices.Contains(tier.Match.Groups, g) {
				return true
			}
		}
		return false
	}
}

// scopes are --oidc-scopes, nil when not given (the service's default).
func (o *SignIn) scopes() []string {
	if len(o.Scopes) == 0 {
		return nil
	}
	return o.Scopes
}
