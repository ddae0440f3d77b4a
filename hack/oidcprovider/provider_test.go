package oidcprovider_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/stxfaucet/faucet-operator/hack/oidcprovider"
)

const (
	webID       = "faucet-web"
	webSecret   = "s3cret/with+special&chars" // exercises form-encoding in HTTP basic
	webRedirect = "http://faucet.test/auth/callback"
	spaID       = "faucet-spa"
	spaRedirect = "http://localhost:3000/callback"
)

var (
	alice = oidcprovider.User{
		ID: "u-alice", Username: "alice", Password: "alice-pw",
		Email: "alice@example.com", EmailVerified: true, Name: "Alice Example",
		Groups: []string{"faucet-admins", "devs"},
	}
	bob = oidcprovider.User{
		ID: "u-bob", Username: "bob", Password: "bob-pw", Email: "bob@example.com", Name: "Bob",
	}
	webClient = oidcprovider.Client{
		ID: webID, Secret: webSecret, RedirectURIs: []string{webRedirect}, AccessTokenJWT: true,
		IDTokenLifetime: 10 * time.Minute, AccessTokenLifetime: 5 * time.Minute,
	}
	spaClient = oidcprovider.Client{ID: spaID, RedirectURIs: []string{spaRedirect}}
)

// userClaims are the claims the relying party reads.
type userClaims struct {
	Email             string   `json:"email"`
	EmailVerified     *bool    `json:"email_verified"`
	Name              string   `json:"name"`
	PreferredUsername string   `json:"preferred_username"`
	Groups            []string `json:"groups"`
	Scope             string   `json:"scope"`
	ClientID          string   `json:"client_id"`
}

func start(t *testing.T, cfg oidcprovider.Config) *oidcprovider.Provider {
	t.Helper()
	if cfg.Users == nil {
		cfg.Users = []oidcprovider.User{alice, bob}
	}
	if cfg.Clients == nil {
		cfg.Clients = []oidcprovider.Client{webClient, spaClient}
	}
	p, err := oidcprovider.Start(cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func login(t *testing.T, p *oidcprovider.Provider, c oidcprovider.Client, u oidcprovider.User, scopes []string) *oidcprovider.Tokens {
	t.Helper()
	tok, err := p.Login(t.Context(), c.ID, c.Secret, c.RedirectURIs[0], u.Username, u.Password, scopes)
	if err != nil {
		t.Fatalf("Login: %v", err)
	}
	return tok
}

func verifier(t *testing.T, ctx context.Context, issuer, clientID string) (*oidc.Provider, *oidc.IDTokenVerifier) {
	t.Helper()
	rp, err := oidc.NewProvider(ctx, issuer)
	if err != nil {
		t.Fatalf("go-oidc NewProvider(%s): %v", issuer, err)
	}
	v := rp.Verifier(&oidc.Config{ClientID: clientID})
	return rp, v
}

func claimsOf(t *testing.T, tok *oidc.IDToken) userClaims {
	t.Helper()
	var c userClaims
	if err := tok.Claims(&c); err != nil {
		t.Fatalf("claims: %v", err)
	}
	return c
}

func checkAlice(t *testing.T, what string, c userClaims) {
	t.Helper()
	if c.Email != alice.Email || c.EmailVerified == nil || !*c.EmailVerified || c.Name != alice.Name ||
		c.PreferredUsername != alice.Username || !slices.Equal(c.Groups, alice.Groups) {
		t.Errorf("%s claims = %+v, want alice's", what, c)
	}
}

func TestWebClientIDAndJWTAccessToken(t *testing.T) {
	p := start(t, oidcprovider.Config{})
	tok := login(t, p, webClient, alice, nil)
	if tok.Nonce == "" {
		t.Fatal("Login sent no nonce")
	}
	rp, v := verifier(t, t.Context(), p.Issuer(), webID)

	idt, err := v.Verify(t.Context(), tok.IDToken)
	if err != nil {
		t.Fatalf("verify ID token: %v", err)
	}
	if idt.Issuer != p.Issuer() || idt.Subject != alice.ID || !slices.Equal(idt.Audience, []string{webID}) {
		t.Errorf("ID token iss/sub/aud = %s/%s/%v", idt.Issuer, idt.Subject, idt.Audience)
	}
	if idt.Nonce != tok.Nonce {
		t.Errorf("ID token nonce = %q, Login sent %q", idt.Nonce, tok.Nonce)
	}
	if got := idt.Expiry.Sub(idt.IssuedAt); got != webClient.IDTokenLifetime {
		t.Errorf("ID token lifetime = %v, want %v", got, webClient.IDTokenLifetime)
	}
	if err := idt.VerifyAccessToken(tok.AccessToken); err != nil {
		t.Errorf("at_hash: %v", err)
	}
	checkAlice(t, "ID token", claimsOf(t, idt))

	// A resource server verifies the JWT access token against the same JWKS.
	at, err := v.Verify(t.Context(), tok.AccessToken)
	if err != nil {
		t.Fatalf("verify access token: %v", err)
	}
	ac := claimsOf(t, at)
	checkAlice(t, "access token", ac)
	if at.Subject != alice.ID || !slices.Contains(at.Audience, webID) || ac.ClientID != webID ||
		ac.Scope != "openid email profile groups" {
		t.Errorf("access token sub/aud/client_id/scope = %s/%v/%s/%q", at.Subject, at.Audience, ac.ClientID, ac.Scope)
	}
	if d := time.Until(tok.Expiry); d < 4*time.Minute || d > webClient.AccessTokenLifetime {
		t.Errorf("access token expiry in %v, want about %v", d, webClient.AccessTokenLifetime)
	}
	if at.Expiry.Sub(tok.Expiry).Abs() > 2*time.Second {
		t.Errorf("access token exp %v, token response said %v", at.Expiry, tok.Expiry)
	}

	info, err := rp.UserInfo(t.Context(), oauth2.StaticTokenSource(&oauth2.Token{AccessToken: tok.AccessToken}))
	if err != nil {
		t.Fatalf("userinfo: %v", err)
	}
	var uc userClaims
	if err := info.Claims(&uc); err != nil {
		t.Fatal(err)
	}
	checkAlice(t, "userinfo", uc)
}

func TestPublicClientPKCEWithOpaqueAccessToken(t *testing.T) {
	p := start(t, oidcprovider.Config{})
	tok := login(t, p, spaClient, bob, nil)
	rp, v := verifier(t, t.Context(), p.Issuer(), spaID)
	idt, err := v.Verify(t.Context(), tok.IDToken)
	if err != nil {
		t.Fatalf("verify ID token: %v", err)
	}
	c := claimsOf(t, idt)
	// bob has no groups and an unverified email: email_verified must still be present.
	if idt.Subject != bob.ID || c.Email != bob.Email || c.EmailVerified == nil || *c.EmailVerified || c.Groups != nil {
		t.Errorf("bob's ID token: sub %s, claims %+v", idt.Subject, c)
	}
	if strings.Count(tok.AccessToken, ".") == 2 {
		t.Errorf("access token %q looks like a JWT, want opaque", tok.AccessToken)
	}
	if _, err := rp.UserInfo(t.Context(), oauth2.StaticTokenSource(&oauth2.Token{AccessToken: tok.AccessToken})); err != nil {
		t.Errorf("userinfo with opaque token: %v", err)
	}
	// Two sign-ins use fresh nonces.
	if again := login(t, p, spaClient, bob, nil); again.Nonce == tok.Nonce {
		t.Errorf("nonce reused: %q", tok.Nonce)
	}
}

// TestPublicClientNeedsPKCE signs in by hand without a code challenge: the code
// must not be redeemable by a public client.
func TestPublicClientNeedsPKCE(t *testing.T) {
	p := start(t, oidcprovider.Config{})
	q := url.Values{"response_type": {"code"}, "client_id": {spaID}, "redirect_uri": {spaRedirect}, "scope": {"openid"}}
	resp, _ := send(t, http.MethodGet, p.Issuer()+"/authorize?"+q.Encode(), nil)
	form, err := resp.Location()
	if err != nil {
		t.Fatalf("authorize: %s: %v", resp.Status, err)
	}
	resp, _ = send(t, http.MethodPost, p.Issuer()+"/login", url.Values{
		"authRequestID": {form.Query().Get("authRequestID")}, "username": {bob.Username}, "password": {bob.Password}})
	resp, _ = send(t, http.MethodGet, resp.Header.Get("Location"), nil)
	cb, err := resp.Location()
	if err != nil || cb.Query().Get("code") == "" {
		t.Fatalf("no code: %s %v %v", resp.Status, cb, err)
	}
	status, body := tokenRequest(t, p.Issuer()+"/oauth/token", url.Values{"grant_type": {"authorization_code"},
		"code": {cb.Query().Get("code")}, "redirect_uri": {spaRedirect}, "client_id": {spaID}}, false)
	if status != http.StatusBadRequest || body["error_description"] != "PKCE required" {
		t.Errorf("code exchange without PKCE: %d %v, want 400", status, body)
	}
}

func TestScopesGateClaims(t *testing.T) {
	p := start(t, oidcprovider.Config{})
	tok := login(t, p, webClient, alice, []string{"openid", "email"})
	_, v := verifier(t, t.Context(), p.Issuer(), webID)
	for name, raw := range map[string]string{"ID token": tok.IDToken, "access token": tok.AccessToken} {
		idt, err := v.Verify(t.Context(), raw)
		if err != nil {
			t.Fatalf("verify %s: %v", name, err)
		}
		if c := claimsOf(t, idt); c.Email != alice.Email || c.Groups != nil || c.Name != "" {
			t.Errorf("%s with scopes openid email: %+v", name, c)
		}
	}
}

func TestRejectedLogins(t *testing.T) {
	p := start(t, oidcprovider.Config{})
	for name, try := range map[string]func() (*oidcprovider.Tokens, error){
		"wrong password": func() (*oidcprovider.Tokens, error) {
			return p.Login(t.Context(), webID, webSecret, webRedirect, "alice", "nope", nil)
		},
		"unknown user": func() (*oidcprovider.Tokens, error) {
			return p.Login(t.Context(), webID, webSecret, webRedirect, "mallory", "alice-pw", nil)
		},
	} {
		tok, err := try()
		if err == nil || tok != nil || !strings.Contains(err.Error(), "invalid username or password") {
			t.Errorf("%s: tokens %v, error %v; want the form's error", name, tok, err)
		}
	}
	if _, err := p.Login(t.Context(), webID, "wrong-secret", webRedirect, "alice", "alice-pw", nil); err == nil {
		t.Error("wrong client secret: no error")
	}
	if _, err := p.Login(t.Context(), webID, webSecret, "http://evil.test/cb", "alice", "alice-pw", nil); err == nil {
		t.Error("unregistered redirect URI: no error")
	}
}

// noRedirects is a client that shows each redirect, as a browser's network log would.
var noRedirects = &http.Client{
	Timeout:       10 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

func send(t *testing.T, method, u string, form url.Values) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, u, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// TestLoginFormContract walks the form as a browser test does: the ids it fills,
// an error without a redirect on a wrong password, then the redirect with a code.
func TestLoginFormContract(t *testing.T) {
	p := start(t, oidcprovider.Config{})
	q := url.Values{"response_type": {"code"}, "client_id": {webID}, "redirect_uri": {webRedirect},
		"scope": {"openid email"}, "state": {"st"}}
	resp, _ := send(t, http.MethodGet, p.Issuer()+"/authorize?"+q.Encode(), nil)
	formURL, err := resp.Location()
	if resp.StatusCode != http.StatusFound || err != nil || formURL.Path != "/login" {
		t.Fatalf("authorize: %s to %v (%v), want 302 to /login", resp.Status, formURL, err)
	}
	_, page := send(t, http.MethodGet, formURL.String(), nil)
	for _, want := range []string{`id="username" name="username"`, `id="password" name="password" type="password"`,
		`id="submit" type="submit"`, `method="post" action="/login"`, `name="authRequestID"`} {
		if !strings.Contains(page, want) {
			t.Errorf("login form lacks %s:\n%s", want, page)
		}
	}
	id := formURL.Query().Get("authRequestID")
	post := func(password string) (*http.Response, string) {
		return send(t, http.MethodPost, p.Issuer()+"/login",
			url.Values{"authRequestID": {id}, "username": {"alice"}, "password": {password}})
	}
	resp, page = post("wrong")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Location") != "" ||
		!strings.Contains(page, `id="error" role="alert">invalid username or password<`) {
		t.Errorf("wrong password: %s, location %q, page:\n%s", resp.Status, resp.Header.Get("Location"), page)
	}
	resp, _ = post(alice.Password)
	callback, err := resp.Location()
	if resp.StatusCode != http.StatusSeeOther || err != nil {
		t.Fatalf("right password: %s (%v), want 303", resp.Status, err)
	}
	resp, _ = send(t, http.MethodGet, callback.String(), nil)
	final, err := resp.Location()
	if err != nil || !strings.HasPrefix(final.String(), webRedirect+"?") || final.Query().Get("code") == "" ||
		final.Query().Get("state") != "st" {
		t.Errorf("callback redirected to %v (%v), want %s with code and state", final, err, webRedirect)
	}
}

func TestCloseAndRestart(t *testing.T) {
	p := start(t, oidcprovider.Config{})
	addr := p.Addr()
	before := login(t, p, webClient, alice, nil)

	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := oidc.NewProvider(t.Context(), p.Issuer()); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("discovery while closed: %v, want connection refused", err)
	}
	if _, err := p.Login(t.Context(), webID, webSecret, webRedirect, "alice", "alice-pw", nil); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("Login while closed: %v, want connection refused", err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}

	if err := p.Restart(); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if err := p.Restart(); err == nil {
		t.Error("Restart while serving: no error")
	}
	if p.Addr() != addr {
		t.Errorf("address after restart %s, want %s", p.Addr(), addr)
	}
	_, v := verifier(t, t.Context(), p.Issuer(), webID)
	for name, raw := range map[string]string{"ID token": before.IDToken, "access token": before.AccessToken} {
		if _, err := v.Verify(t.Context(), raw); err != nil {
			t.Errorf("%s issued before Close: %v", name, err)
		}
	}
	after := login(t, p, webClient, alice, nil)
	if _, err := v.Verify(t.Context(), after.IDToken); err != nil {
		t.Errorf("ID token after restart: %v", err)
	}
}

func TestOtherProvidersTokensAreRejected(t *testing.T) {
	a := start(t, oidcprovider.Config{})
	b := start(t, oidcprovider.Config{})
	// forger claims a's issuer but signs with its own key.
	forger := start(t, oidcprovider.Config{Issuer: a.Issuer()})
	_, va := verifier(t, t.Context(), a.Issuer(), webID)

	fromB := login(t, b, webClient, alice, nil)
	// go-oidc checks the signature (b's key is unknown to a) before the issuer.
	if _, err := va.Verify(t.Context(), fromB.IDToken); err == nil {
		t.Error("b's ID token verified at a")
	}
	forged := login(t, forger, webClient, alice, nil)
	for name, raw := range map[string]string{"ID token": forged.IDToken, "access token": forged.AccessToken} {
		if _, err := va.Verify(t.Context(), raw); err == nil || !strings.Contains(err.Error(), "signature") {
			t.Errorf("forged %s at a: %v, want a signature failure", name, err)
		}
	}
}

// TestExplicitIssuerWithPath is the Kubernetes case: the issuer names a service
// host (not resolvable here) and the listener is elsewhere.
func TestExplicitIssuerWithPath(t *testing.T) {
	const issuer = "http://oidc.faucet-e2e.svc:9998/realms/e2e"
	p := start(t, oidcprovider.Config{Issuer: issuer})
	if p.Issuer() != issuer {
		t.Fatalf("Issuer() = %s", p.Issuer())
	}
	tok := login(t, p, webClient, alice, nil)
	ctx := oidc.ClientContext(t.Context(), p.HTTPClient())
	_, v := verifier(t, ctx, issuer, webID)
	idt, err := v.Verify(ctx, tok.IDToken)
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	checkAlice(t, "ID token", claimsOf(t, idt))
}

// tokenRequest posts to the token endpoint, as the web client when basic is set.
func tokenRequest(t *testing.T, endpoint string, form url.Values, basic bool) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if basic {
		req.SetBasicAuth(url.QueryEscape(webID), url.QueryEscape(webSecret))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

func TestRefreshTokenRotation(t *testing.T) {
	p := start(t, oidcprovider.Config{})
	if tok := login(t, p, webClient, alice, nil); tok.RefreshToken != "" {
		t.Errorf("refresh token without offline_access")
	}
	tok := login(t, p, webClient, alice, []string{"openid", "email", "groups", "offline_access"})
	if tok.RefreshToken == "" {
		t.Fatal("no refresh token with offline_access")
	}
	rp, v := verifier(t, t.Context(), p.Issuer(), webID)
	refresh := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.RefreshToken}}
	status, body := tokenRequest(t, rp.Endpoint().TokenURL, refresh, true)
	if status != http.StatusOK {
		t.Fatalf("refresh: %d %v", status, body)
	}
	idt, err := v.Verify(t.Context(), body["id_token"].(string))
	if err != nil {
		t.Fatalf("refreshed ID token: %v", err)
	}
	if c := claimsOf(t, idt); idt.Subject != alice.ID || !slices.Equal(c.Groups, alice.Groups) {
		t.Errorf("refreshed ID token sub %s claims %+v", idt.Subject, c)
	}
	if body["refresh_token"] == tok.RefreshToken {
		t.Error("refresh token not rotated")
	}
	if status, body := tokenRequest(t, rp.Endpoint().TokenURL, refresh, true); status != http.StatusBadRequest || body["error"] != "invalid_grant" {
		t.Errorf("reused refresh token: %d %v, want 400 invalid_grant", status, body)
	}
}

func TestEndSession(t *testing.T) {
	p := start(t, oidcprovider.Config{})
	tok := login(t, p, spaClient, bob, nil)
	rp, _ := verifier(t, t.Context(), p.Issuer(), spaID)
	var disc struct {
		EndSession string `json:"end_session_endpoint"`
	}
	if err := rp.Claims(&disc); err != nil || disc.EndSession != p.Issuer()+"/end_session" {
		t.Fatalf("end_session_endpoint %q (%v)", disc.EndSession, err)
	}
	end := func(q url.Values) (*http.Response, string) {
		return send(t, http.MethodGet, disc.EndSession+"?"+q.Encode(), nil)
	}

	resp, _ := end(url.Values{"id_token_hint": {tok.IDToken}, "post_logout_redirect_uri": {"http://evil.test/"}})
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("unregistered post_logout_redirect_uri: %s, want 400", resp.Status)
	}
	// The redirect URI's origin is accepted without registering it.
	resp, _ = end(url.Values{"id_token_hint": {tok.IDToken}, "post_logout_redirect_uri": {"http://localhost:3000/"}, "state": {"s1"}})
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusFound || loc != "http://localhost:3000/?state=s1" {
		t.Errorf("logout: %s to %q", resp.Status, loc)
	}
	// Logout revoked bob's (opaque) access token.
	if _, err := rp.UserInfo(t.Context(), oauth2.StaticTokenSource(&oauth2.Token{AccessToken: tok.AccessToken})); err == nil {
		t.Error("userinfo after logout: no error")
	}
	resp, _ = end(url.Values{})
	if loc := resp.Header.Get("Location"); loc != p.Issuer()+"/logged-out" {
		t.Fatalf("logout without redirect: %s to %q", resp.Status, loc)
	}
	if resp, page := send(t, http.MethodGet, p.Issuer()+"/logged-out", nil); resp.StatusCode != http.StatusOK || !strings.Contains(page, "signed out") {
		t.Errorf("logged-out page: %s %q", resp.Status, page)
	}
}

func TestPromptNoneIsLoginRequired(t *testing.T) {
	p := start(t, oidcprovider.Config{})
	q := url.Values{"response_type": {"code"}, "client_id": {webID}, "redirect_uri": {webRedirect},
		"scope": {"openid"}, "state": {"st"}, "prompt": {"none"}}
	resp, _ := send(t, http.MethodGet, p.Issuer()+"/authorize?"+q.Encode(), nil)
	resp, _ = send(t, http.MethodGet, resp.Header.Get("Location"), nil)
	loc, err := resp.Location()
	if err != nil || loc.Query().Get("error") != "login_required" || loc.Query().Get("state") != "st" {
		t.Errorf("prompt=none: %s to %v (%v), want error=login_required", resp.Status, loc, err)
	}
}

func TestStartRejectsBadConfig(t *testing.T) {
	for name, cfg := range map[string]oidcprovider.Config{
		"duplicate user":   {Users: []oidcprovider.User{alice, alice}},
		"colon in sub":     {Users: []oidcprovider.User{{ID: "a:b", Username: "ab"}}},
		"no redirect":      {Clients: []oidcprovider.Client{{ID: "c"}}},
		"relative URI":     {Clients: []oidcprovider.Client{{ID: "c", RedirectURIs: []string{"/cb"}}}},
		"bad issuer":       {Issuer: "ftp://x"},
		"duplicate client": {Clients: []oidcprovider.Client{spaClient, spaClient}},
	} {
		if p, err := oidcprovider.Start(cfg); err == nil {
			_ = p.Close()
			t.Errorf("%s: Start succeeded", name)
		}
	}
}

// Access and refresh tokens expire by Config.Clock: a fake one stepped past
// a lifetime, instead of waiting it out.
func TestTokensExpireOnTheProvidersClock(t *testing.T) {
	// Near the real time: zitadel dates the ID tokens on that.
	clk := clocktesting.NewFakeClock(time.Now())
	p := start(t, oidcprovider.Config{Clock: clk})

	tok := login(t, p, spaClient, bob, nil) // an opaque access token of 1h
	rp, _ := verifier(t, t.Context(), p.Issuer(), spaID)
	userinfo := func() error {
		_, err := rp.UserInfo(t.Context(), oauth2.StaticTokenSource(&oauth2.Token{AccessToken: tok.AccessToken}))
		return err
	}
	clk.Step(time.Hour - time.Second)
	if err := userinfo(); err != nil {
		t.Fatalf("userinfo a second before the access token expires: %v", err)
	}
	clk.Step(2 * time.Second)
	if err := userinfo(); err == nil {
		t.Fatal("userinfo took an access token a second past its expiry")
	}

	web := login(t, p, webClient, alice, []string{"openid", "offline_access"})
	rpWeb, _ := verifier(t, t.Context(), p.Issuer(), webID)
	refresh := func(token string) (int, map[string]any) {
		return tokenRequest(t, rpWeb.Endpoint().TokenURL, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {token}}, true)
	}
	clk.Step(24*time.Hour - time.Second)
	status, body := refresh(web.RefreshToken)
	if status != http.StatusOK {
		t.Fatalf("refresh a second before the refresh token expires: %d %v", status, body)
	}
	clk.Step(24*time.Hour + time.Second)
	if status, body := refresh(body["refresh_token"].(string)); status != http.StatusBadRequest || body["error"] != "invalid_grant" {
		t.Errorf("refresh a second past the rotated token's expiry: %d %v, want 400 invalid_grant", status, body)
	}
}
