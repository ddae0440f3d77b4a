package identity

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
	"k8s.io/utils/clock"
)

// Paths of the sign-in endpoints, under the faucet's own prefix.
const (
	PathLogin    = "/faucet/v1/auth/login"
	PathCallback = "/faucet/v1/auth/callback"
	PathLogout   = "/faucet/v1/auth/logout"
	PathSession  = "/faucet/v1/auth/session"
)

// Cookie names.
const (
	cookieSession = "faucet_session"
	cookieLogin   = "faucet_login"
)

// Defaults of Config.
const (
	DefaultSessionTTL = 12 * time.Hour
	loginTTL          = 10 * time.Minute
	discoveryRetry    = 5 * time.Second
)

// DefaultScopes are asked for at sign-in: the person's subject, email and
// name. Add "groups" (or the provider's own scope) for tiers that match
// on groups.
var DefaultScopes = []string{oidc.ScopeOpenID, "email", "profile"}

// Config configures sign-in.
type Config struct {
	// Issuer is the provider's issuer URL, exactly as its discovery
	// document states it.
	Issuer string
	// ClientID and ClientSecret are the faucet's client at the provider;
	// the secret may be empty for a public client (PKCE alone).
	ClientID, ClientSecret string
	// Scopes are asked for at sign-in (nil: DefaultScopes).
	Scopes []string
	// Audiences are accepted in a bearer token's aud besides ClientID (an
	// access token issued for an API the provider names otherwise).
	Audiences []string
	// PublicURL is the faucet's URL as browsers reach it, for the
	// callback address; "" derives it from each request (Host, and
	// X-Forwarded-Proto behind a trusted proxy).
	PublicURL string
	// TrustForwardedProto: a trusted proxy sets X-Forwarded-Proto.
	TrustForwardedProto bool
	// SessionKey seals the cookies (at least 16 bytes); replicas must
	// share it.
	SessionKey []byte
	// SessionTTL is how long a page stays signed in (0: 12 h).
	SessionTTL time.Duration
	// KeepGroup, when set, says which groups a session keeps (those tiers
	// match on), so the cookie stays small; nil keeps them all.
	KeepGroup func(string) bool
	// HTTPClient reaches the provider (nil: http.DefaultClient).
	HTTPClient *http.Client
	// Clock judges the cookies' and tokens' expiry and paces the retries
	// of discovery (nil: the real clock).
	Clock  clock.PassiveClock
	Logger *slog.Logger
}

// Service is sign-in: the page's authorization-code flow with PKCE and a
// sealed session cookie, and bearer tokens checked against the issuer's
// keys. It makes no network call until the first sign-in or token.
type Service struct {
	cfg    Config
	seal   *sealer
	verify *verifier
	log    *slog.Logger
}

// New checks cfg and returns the service.
func New(cfg Config) (*Service, error) {
	if err := checkIssuer(cfg.Issuer); err != nil {
		return nil, err
	}
	if strings.TrimSpace(cfg.ClientID) == "" {
		return nil, errors.New("oidc client ID: required")
	}
	if cfg.PublicURL != "" {
		u, err := url.Parse(cfg.PublicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return nil, fmt.Errorf("public URL %q: want the faucet's origin, such as https://faucet.example.com", cfg.PublicURL)
		}
		cfg.PublicURL = strings.TrimSuffix(cfg.PublicURL, "/")
	}
	if cfg.Scopes == nil {
		cfg.Scopes = DefaultScopes
	}
	if !slices.Contains(cfg.Scopes, oidc.ScopeOpenID) {
		return nil, errors.New("oidc scopes: must include openid")
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = http.DefaultClient
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	seal, err := newSealer(cfg.SessionKey)
	if err != nil {
		return nil, err
	}
	client := cfg.HTTPClient
	s := &Service{cfg: cfg, seal: seal, log: cfg.Logger,
		verify: &verifier{issuer: cfg.Issuer, audiences: append([]string{cfg.ClientID}, cfg.Audiences...), clock: cfg.Clock, retry: discoveryRetry,
			client: &clientOpt{ctx: func(ctx context.Context) context.Context { return oidc.ClientContext(ctx, client) }, http: client}}}
	return s, nil
}

// checkIssuer refuses an issuer URL that cannot be one.
func checkIssuer(issuer string) error {
	u, err := url.Parse(issuer)
	switch {
	case issuer == "":
		return errors.New("oidc issuer: required")
	case err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
		return fmt.Errorf("oidc issuer %q: want an http(s) URL such as https://accounts.example.com", issuer)
	case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return fmt.Errorf("oidc issuer %q: no query, fragment or user info", issuer)
	}
	return nil
}

// Issuer is the configured issuer.
func (s *Service) Issuer() string { return s.cfg.Issuer }

// Person is the person r names: by a bearer token that looks like a JWT
// (other bearer tokens are API tokens, not ours), else by the page's
// session cookie when the request comes from the page's own origin. nil
// without either; a token that does not verify is a *TokenError.
func (s *Service) Person(r *http.Request) (*Person, error) {
	if tok, ok := BearerJWT(r.Header.Get("Authorization")); ok {
		return s.verify.verify(r.Context(), tok)
	}
	if !sameOrigin(r) {
		return nil, nil
	}
	for _, c := range r.CookiesNamed(cookieSession) {
		var sess session
		if s.seal.open(cookieSession, c.Value, &sess) && s.cfg.Clock.Now().Before(sess.Expires) {
			return sess.person(), nil
		}
	}
	return nil, nil // no session, or an expired or foreign one

}

// BearerJWT returns the token of "Bearer <jwt>".
func BearerJWT(header string) (string, bool) {
	scheme, tok, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, LooksLikeJWT(tok)
}

// sameOrigin reports whether a cookie-carrying request comes from the
// faucet's own pages: a browser sends Origin on every cross-origin request
// and on same-origin POSTs; a request without it (a navigation, curl) is
// not a forgery a cookie could ride on.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return r.Header.Get("Sec-Fetch-Site") != "cross-site"
	}
	u, err := url.Parse(o)
	return err == nil && strings.EqualFold(u.Host, r.Host)
}

// Ready says whether the provider can be reached now.
func (s *Service) Ready(ctx context.Context) error {
	if _, err := s.verify.discover(ctx); err != nil {
		return err
	}
	return s.verify.reachable(ctx)
}

// oauth is the OAuth 2 client of r's sign-in.
func (s *Service) oauth(ctx context.Context, r *http.Request) (*oauth2.Config, *oidc.Provider, error) {
	p, err := s.verify.discover(ctx)
	if err != nil {
		return nil, nil, err
	}
	return &oauth2.Config{ClientID: s.cfg.ClientID, ClientSecret: s.cfg.ClientSecret, Endpoint: p.Endpoint(),
		RedirectURL: s.origin(r) + PathCallback, Scopes: s.cfg.Scopes}, p, nil
}

// origin is the faucet's origin as the browser of r reaches it.
func (s *Service) origin(r *http.Request) string {
	if s.cfg.PublicURL != "" {
		return s.cfg.PublicURL
	}
	scheme := "http"
	if r.TLS != nil || (s.cfg.TrustForwardedProto && strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")) {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// secure reports whether cookies for r must be Secure.
func (s *Service) secure(r *http.Request) bool {
	return strings.HasPrefix(s.origin(r), "https://")
}
