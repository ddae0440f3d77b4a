// Package oidcprovider runs a real OpenID Connect provider for tests: zitadel's
// OpenID-certified op package with an in-memory storage and a username/password
// login form. Tests never hand-sign tokens; they sign in here instead.
//
// Endpoints (relative to the issuer): /.well-known/openid-configuration, /keys,
// /authorize, /oauth/token, /userinfo, /oauth/introspect, /revoke, /end_session,
// /healthz, /ready, plus the login form at /login and /logged-out.
//
// Claims follow the granted scopes: "email" releases email and email_verified,
// "profile" name and preferred_username, "groups" the groups claim (when the user
// has groups). They appear in the ID token, in JWT access tokens and at userinfo.
package oidcprovider

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
	"k8s.io/utils/clock"
)

// User is a person who can sign in at the provider's login form.
type User struct {
	ID            string   `json:"id"`       // the token's sub; must not contain ':'
	Username      string   `json:"username"` // typed in the login form
	Password      string   `json:"password"`
	Email         string   `json:"email"`
	EmailVerified bool     `json:"emailVerified"`
	Name          string   `json:"name"`
	Groups        []string `json:"groups"` // the "groups" claim (ID token and access token) when non-empty
}

// Client is a registered relying party.
type Client struct {
	ID, Secret   string   // Secret "" = public client (PKCE only, auth method none)
	RedirectURIs []string // exact match
	// PostLogoutRedirectURIs are accepted at end_session (exact match); when empty,
	// the origins of RedirectURIs are, with and without a trailing slash.
	PostLogoutRedirectURIs []string
	// AccessTokenJWT: access tokens are JWTs signed by the provider's key (aud includes the client ID),
	// so a resource server can verify them against the JWKS; else opaque.
	AccessTokenJWT bool
	// IDTokenLifetime, AccessTokenLifetime: 0 = 1h
	IDTokenLifetime, AccessTokenLifetime time.Duration
}

// Config configures Start.
type Config struct {
	// Addr is where it listens ("127.0.0.1:0" when empty: a free port).
	Addr string
	// Issuer is the issuer URL; "" = "http://" + the listener's address (no trailing
	// slash; an unspecified listen IP such as ":9998" becomes 127.0.0.1).
	Issuer  string
	Users   []User
	Clients []Client
	Logger  *slog.Logger // nil: discard. Never call slog.SetDefault.
	// Clock dates and expires auth requests, access and refresh tokens
	// (nil: the real clock): a test steps a fake one past a lifetime
	// instead of waiting it out. The ID tokens' iat and exp are zitadel's,
	// on the real clock.
	Clock clock.PassiveClock
}

// Provider is a running (or closed) OpenID provider.
type Provider struct {
	issuer  string
	addr    string
	logger  *slog.Logger
	clock   clock.PassiveClock
	storage *storage
	handler http.Handler

	mu  sync.Mutex
	srv *http.Server // nil while closed
}

// Start serves the provider in this process until Close.
func Start(cfg Config) (*Provider, error) {
	if err := validate(cfg); err != nil {
		return nil, fmt.Errorf("oidcprovider: %w", err)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	addr := cfg.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := new(net.ListenConfig).Listen(context.Background(), "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("oidcprovider: listen on %s: %w", addr, err)
	}
	issuer := cfg.Issuer
	if issuer == "" {
		issuer = defaultIssuer(ln.Addr())
	}
	handler, st, err := newHandler(issuer, cfg, logger)
	if err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("oidcprovider: %w", err)
	}
	p := &Provider{issuer: issuer, addr: ln.Addr().String(), logger: logger, clock: cfg.Clock, storage: st, handler: handler}
	p.serve(ln)
	logger.Info("OpenID provider serving", "issuer", issuer, "addr", p.addr,
		"users", len(cfg.Users), "clients", len(cfg.Clients))
	return p, nil
}

// Issuer is the issuer URL, exactly as in the tokens' iss claim.
func (p *Provider) Issuer() string { return p.issuer }

// Addr is the host:port it listens on.
func (p *Provider) Addr() string { return p.addr }

// Close stops serving at once, dropping open connections (a provider that is
// "down"). Keys, users, clients and issued tokens are kept for Restart.
func (p *Provider) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.srv == nil {
		return nil
	}
	err := p.srv.Close()
	p.srv = nil
	if err != nil {
		return fmt.Errorf("oidcprovider: close: %w", err)
	}
	return nil
}

// Shutdown stops serving gracefully: it waits for requests in flight until ctx ends.
func (p *Provider) Shutdown(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.srv == nil {
		return nil
	}
	err := p.srv.Shutdown(ctx)
	p.srv = nil
	if err != nil {
		return fmt.Errorf("oidcprovider: shutdown: %w", err)
	}
	return nil
}

// Restart serves again on the same address, with the same keys, users and clients (a provider that came back).
func (p *Provider) Restart() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.srv != nil {
		return errors.New("oidcprovider: restart: still serving")
	}
	ln, err := new(net.ListenConfig).Listen(context.Background(), "tcp", p.addr)
	if err != nil {
		return fmt.Errorf("oidcprovider: restart: listen on %s: %w", p.addr, err)
	}
	p.serve(ln)
	p.logger.Info("OpenID provider serving again", "issuer", p.issuer, "addr", p.addr)
	return nil
}

// serve starts an http.Server on ln; the caller holds p.mu or owns p alone.
func (p *Provider) serve(ln net.Listener) {
	srv := &http.Server{
		Handler:           p.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(p.logger.Handler(), slog.LevelWarn),
	}
	p.srv = srv
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			p.logger.Error("OpenID provider stopped serving", "addr", p.addr, "error", err)
		}
	}()
}

func validate(cfg Config) error {
	ids, names := map[string]bool{}, map[string]bool{}
	for _, u := range cfg.Users {
		switch {
		case u.ID == "" || u.Username == "":
			return fmt.Errorf("user %q/%q: id and username are required", u.ID, u.Username)
		case strings.Contains(u.ID, ":"):
			// zitadel's opaque access tokens encode "tokenID:subject".
			return fmt.Errorf("user id %q: must not contain ':'", u.ID)
		case ids[u.ID] || names[u.Username]:
			return fmt.Errorf("user %q/%q: duplicate id or username", u.ID, u.Username)
		}
		ids[u.ID], names[u.Username] = true, true
	}
	clients := map[string]bool{}
	for _, c := range cfg.Clients {
		if c.ID == "" || clients[c.ID] {
			return fmt.Errorf("client %q: empty or duplicate id", c.ID)
		}
		clients[c.ID] = true
		if len(c.RedirectURIs) == 0 {
			return fmt.Errorf("client %q: no redirect URIs", c.ID)
		}
		for _, r := range append(append([]string{}, c.RedirectURIs...), c.PostLogoutRedirectURIs...) {
			if u, err := url.Parse(r); err != nil || !u.IsAbs() || u.Host == "" {
				return fmt.Errorf("client %q: redirect URI %q is not an absolute URL", c.ID, r)
			}
		}
	}
	return nil
}

// defaultIssuer is "http://host:port" of the listener, with a dialable host.
func defaultIssuer(a net.Addr) string {
	tcp, ok := a.(*net.TCPAddr)
	if !ok {
		return "http://" + a.String()
	}
	ip := tcp.IP
	if ip.IsUnspecified() {
		ip = net.IPv4(127, 0, 0, 1)
	}
	return "http://" + net.JoinHostPort(ip.String(), fmt.Sprint(tcp.Port))
}

// newHandler builds zitadel's OP with a fresh signing key and the login UI around it.
func newHandler(issuer string, cfg Config, logger *slog.Logger) (http.Handler, *storage, error) {
	u, err := url.Parse(issuer)
	if err != nil {
		return nil, nil, fmt.Errorf("issuer %q: %w", issuer, err)
	}
	// The OP routes relative to the issuer; a path in the issuer is stripped first.
	prefix := strings.TrimSuffix(u.Path, "/")
	base := strings.TrimSuffix(issuer, "/")

	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, nil, fmt.Errorf("generate signing key: %w", err)
	}
	key := &signingKey{id: randomID(), key: rsaKey}
	st := newStorage(key, base+"/login?"+loginRequestParam+"=", cfg.Users, cfg.Clients, cfg.Clock)

	opConfig := &op.Config{
		DefaultLogoutRedirectURI: base + loggedOutPath,
		CodeMethodS256:           true,
		AuthMethodPost:           true,
		GrantTypeRefreshToken:    true,
		SupportedScopes: []string{oidc.ScopeOpenID, oidc.ScopeProfile, oidc.ScopeEmail,
			ScopeGroups, oidc.ScopeOfflineAccess},
		SupportedClaims: append(append([]string{}, op.DefaultSupportedClaims...), "groups", "scope"),
	}
	// Opaque access tokens are encrypted with this key; random per provider.
	if _, err := rand.Read(opConfig.CryptoKey[:]); err != nil {
		return nil, nil, fmt.Errorf("generate token key: %w", err)
	}
	opConfig.CryptoKeyId = randomID()
	provider, err := op.NewProvider(opConfig, st, op.StaticIssuer(issuer), op.WithAllowInsecure())
	if err != nil {
		return nil, nil, fmt.Errorf("create OpenID provider for issuer %q: %w", issuer, err)
	}

	ui := &loginUI{storage: st, op: provider, callback: op.AuthCallbackURL(provider),
		action: prefix + "/login", logger: logger}
	withIssuer := op.NewIssuerInterceptor(provider.IssuerFromRequest)
	mux := http.NewServeMux()
	mux.Handle("GET /login", withIssuer.HandlerFunc(ui.show))
	mux.Handle("POST /login", withIssuer.HandlerFunc(ui.submit))
	mux.HandleFunc("GET "+loggedOutPath, loggedOut)
	mux.Handle("/", provider)

	var h http.Handler = mux
	if prefix != "" {
		h = http.StripPrefix(prefix, mux)
	}
	return logRequests(logger, cfg.Clock, h), st, nil
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// logRequests logs method, path, status and duration (by clk); never the query,
// which carries codes. Probe paths are matched without the issuer's path prefix
// only (enough for logs).
func logRequests(logger *slog.Logger, clk clock.PassiveClock, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := clk.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r)
		level := slog.LevelInfo
		if r.URL.Path == "/healthz" || r.URL.Path == "/ready" {
			level = slog.LevelDebug // kubelet probes would drown the log
		}
		logger.LogAttrs(r.Context(), level, "http request",
			slog.String("method", r.Method), slog.String("path", r.URL.Path),
			slog.Int("status", sw.status), slog.String("duration", clk.Since(start).String()))
	})
}
