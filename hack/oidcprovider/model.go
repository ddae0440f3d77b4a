package oidcprovider

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/hex"
	"net/url"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// ScopeGroups is the scope that releases the "groups" claim (as Dex does).
const ScopeGroups = "groups"

// DefaultScopes are the scopes Login asks for when given none.
var DefaultScopes = []string{oidc.ScopeOpenID, oidc.ScopeEmail, oidc.ScopeProfile, ScopeGroups}

const defaultLifetime = time.Hour

// randomID returns 128 random bits, hex encoded: ids, codes and tokens must not be guessable.
func randomID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (it panics instead)
	return hex.EncodeToString(b)
}

// opClient adapts a Client to op.Client.
type opClient struct {
	c        Client
	loginURL string // prefix; the auth request ID is appended
}

var _ op.Client = (*opClient)(nil)

func (c *opClient) GetID() string          { return c.c.ID }
func (c *opClient) RedirectURIs() []string { return c.c.RedirectURIs }

// PostLogoutRedirectURIs are the registered ones or, when none are, the origins of
// the redirect URIs (with and without a trailing slash), so "back to the home page"
// works without extra configuration.
func (c *opClient) PostLogoutRedirectURIs() []string {
	if len(c.c.PostLogoutRedirectURIs) > 0 {
		return c.c.PostLogoutRedirectURIs
	}
	var uris []string
	for _, r := range c.c.RedirectURIs {
		u, err := url.Parse(r)
		if err != nil || u.Host == "" {
			continue
		}
		origin := u.Scheme + "://" + u.Host
		uris = append(uris, origin, origin+"/")
	}
	return uris
}

// ApplicationType is web for public clients too: zitadel only accepts http
// redirect URIs (what tests use) for web clients outside dev mode.
func (c *opClient) ApplicationType() op.ApplicationType { return op.ApplicationTypeWeb }

func (c *opClient) AuthMethod() oidc.AuthMethod {
	if c.c.Secret == "" {
		return oidc.AuthMethodNone
	}
	return oidc.AuthMethodBasic
}

func (c *opClient) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}

func (c *opClient) GrantTypes() []oidc.GrantType {
	return []oidc.GrantType{oidc.GrantTypeCode, oidc.GrantTypeRefreshToken}
}

func (c *opClient) LoginURL(authRequestID string) string {
	return c.loginURL + url.QueryEscape(authRequestID)
}

func (c *opClient) AccessTokenType() op.AccessTokenType {
	if c.c.AccessTokenJWT {
		return op.AccessTokenTypeJWT
	}
	return op.AccessTokenTypeBearer
}

func (c *opClient) IDTokenLifetime() time.Duration { return orDefault(c.c.IDTokenLifetime) }
func (c *opClient) DevMode() bool                  { return false }
func (c *opClient) ClockSkew() time.Duration       { return 0 }

func (c *opClient) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}

func (c *opClient) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}

// IsScopeAllowed admits "groups" next to the standard scopes zitadel always keeps.
func (c *opClient) IsScopeAllowed(scope string) bool { return scope == ScopeGroups }

// IDTokenUserinfoClaimsAssertion is true so the ID token carries the user's claims
// even when an access token is issued too: relying parties read them from the ID token.
func (c *opClient) IDTokenUserinfoClaimsAssertion() bool { return true }

func orDefault(d time.Duration) time.Duration {
	if d <= 0 {
		return defaultLifetime
	}
	return d
}

// authRequest is one authorization request, from /authorize to the code exchange.
type authRequest struct {
	id           string
	created      time.Time
	clientID     string
	redirectURI  string
	state        string
	nonce        string
	scopes       []string
	responseType oidc.ResponseType
	responseMode oidc.ResponseMode
	challenge    *oidc.CodeChallenge
	prompt       []string

	// Set by a successful login.
	userID   string
	authTime time.Time
	done     bool
	code     string
}

var _ op.AuthRequest = (*authRequest)(nil)

func newAuthRequest(r *oidc.AuthRequest, now time.Time) *authRequest {
	a := &authRequest{
		id:           randomID(),
		created:      now,
		clientID:     r.ClientID,
		redirectURI:  r.RedirectURI,
		state:        r.State,
		nonce:        r.Nonce,
		scopes:       slices.Clone([]string(r.Scopes)),
		responseType: r.ResponseType,
		responseMode: r.ResponseMode,
		prompt:       slices.Clone([]string(r.Prompt)),
	}
	if r.CodeChallenge != "" {
		method := r.CodeChallengeMethod
		if method == "" {
			method = oidc.CodeChallengeMethodPlain // RFC 7636, section 4.3
		}
		a.challenge = &oidc.CodeChallenge{Challenge: r.CodeChallenge, Method: method}
	}
	return a
}

func (a *authRequest) GetID() string                         { return a.id }
func (a *authRequest) GetACR() string                        { return "" }
func (a *authRequest) GetAudience() []string                 { return []string{a.clientID} }
func (a *authRequest) GetAuthTime() time.Time                { return a.authTime }
func (a *authRequest) GetClientID() string                   { return a.clientID }
func (a *authRequest) GetCodeChallenge() *oidc.CodeChallenge { return a.challenge }
func (a *authRequest) GetNonce() string                      { return a.nonce }
func (a *authRequest) GetRedirectURI() string                { return a.redirectURI }
func (a *authRequest) GetResponseType() oidc.ResponseType    { return a.responseType }
func (a *authRequest) GetResponseMode() oidc.ResponseMode    { return a.responseMode }
func (a *authRequest) GetScopes() []string                   { return a.scopes }
func (a *authRequest) GetState() string                      { return a.state }
func (a *authRequest) GetSubject() string                    { return a.userID }
func (a *authRequest) Done() bool                            { return a.done }

func (a *authRequest) GetAMR() []string {
	if a.done {
		return []string{"pwd"}
	}
	return nil
}

// grant is what an access or refresh token stands for.
type grant struct {
	subject  string
	clientID string
	scopes   []string
	authTime time.Time
	amr      []string
}

func (g grant) GetAMR() []string       { return g.amr }
func (g grant) GetAudience() []string  { return []string{g.clientID} }
func (g grant) GetAuthTime() time.Time { return g.authTime }
func (g grant) GetClientID() string    { return g.clientID }
func (g grant) GetScopes() []string    { return g.scopes }
func (g grant) GetSubject() string     { return g.subject }

// refreshRequest is a refresh_token grant; the op may narrow its scopes.
type refreshRequest struct {
	grant
}

var _ op.RefreshTokenRequest = (*refreshRequest)(nil)

func (r *refreshRequest) SetCurrentScopes(scopes []string) { r.scopes = scopes }

// grantOf extracts the grant from the token requests this storage hands to the op.
func grantOf(req op.TokenRequest) (grant, bool) {
	switch r := req.(type) {
	case *authRequest:
		return grant{subject: r.userID, clientID: r.clientID, scopes: r.scopes, authTime: r.authTime, amr: r.GetAMR()}, true
	case *refreshRequest:
		return r.grant, true
	default:
		return grant{}, false
	}
}

// token is an issued access or refresh token.
type token struct {
	grant
	id      string
	expires time.Time
	// refresh links an access token to its refresh token (and back) for revocation.
	refresh string
}

// signingKey is the provider's RSA key, as both op.SigningKey and op.Key.
type signingKey struct {
	id  string
	key *rsa.PrivateKey
}

func (k *signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k *signingKey) Key() any                                    { return k.key }
func (k *signingKey) ID() string                                  { return k.id }

type publicKey struct{ *signingKey }

func (k publicKey) Algorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k publicKey) Use() string                        { return "sig" }
func (k publicKey) Key() any                           { return &k.key.PublicKey }

// userClaims are the user's claims released for the granted scopes, the same in
// the ID token, the JWT access token and userinfo:
//   - email: email, email_verified
//   - profile: name, preferred_username
//   - groups: groups (only when the user has some)
func userClaims(u *User, scopes []string) map[string]any {
	c := map[string]any{}
	if slices.Contains(scopes, oidc.ScopeEmail) {
		if u.Email != "" {
			c["email"] = u.Email
		}
		// Always set, also when false: zitadel's typed field would omit false.
		c["email_verified"] = u.EmailVerified
	}
	if slices.Contains(scopes, oidc.ScopeProfile) {
		if u.Name != "" {
			c["name"] = u.Name
		}
		c["preferred_username"] = u.Username
	}
	if slices.Contains(scopes, ScopeGroups) && len(u.Groups) > 0 {
		c["groups"] = slices.Clone(u.Groups)
	}
	return c
}

// scopeString is the RFC 9068 "scope" claim of a JWT access token.
func scopeString(scopes []string) string { return strings.Join(scopes, " ") }
