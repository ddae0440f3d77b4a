package oidcprovider

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
	"k8s.io/utils/clock"
)

const (
	// authRequestTTL bounds the time from /authorize to the code exchange.
	authRequestTTL = 15 * time.Minute
	// refreshTokenTTL is fixed: no test needs to tune it.
	refreshTokenTTL = 24 * time.Hour
)

var errBadCredentials = errors.New("invalid username or password")

// storage is the op.Storage of one Provider: all state lives here, none is global.
type storage struct {
	key      *signingKey
	loginURL string
	clock    clock.PassiveClock
	users    map[string]*User // by ID
	byName   map[string]*User // by Username
	clients  map[string]Client

	mu       sync.Mutex
	requests map[string]*authRequest // by ID
	codes    map[string]string       // code → auth request ID
	access   map[string]*token       // by token ID
	refresh  map[string]*token       // by token value
}

var (
	_ op.Storage                        = (*storage)(nil)
	_ op.CanSetUserinfoFromRequest      = (*storage)(nil)
	_ op.CanGetPrivateClaimsFromRequest = (*storage)(nil)
)

func newStorage(key *signingKey, loginURL string, users []User, clients []Client, clk clock.PassiveClock) *storage {
	s := &storage{
		key:      key,
		loginURL: loginURL,
		clock:    clk,
		users:    map[string]*User{},
		byName:   map[string]*User{},
		clients:  map[string]Client{},
		requests: map[string]*authRequest{},
		codes:    map[string]string{},
		access:   map[string]*token{},
		refresh:  map[string]*token{},
	}
	for i := range users {
		u := users[i]
		u.Groups = slices.Clone(u.Groups)
		s.users[u.ID] = &u
		s.byName[u.Username] = &u
	}
	for _, c := range clients {
		c.RedirectURIs = slices.Clone(c.RedirectURIs)
		c.PostLogoutRedirectURIs = slices.Clone(c.PostLogoutRedirectURIs)
		s.clients[c.ID] = c
	}
	return s
}

// sweep drops expired state so a long-running provider does not grow without bound.
// The caller holds s.mu.
func (s *storage) sweep(now time.Time) {
	for id, r := range s.requests {
		if now.Sub(r.created) > authRequestTTL {
			delete(s.codes, r.code)
			delete(s.requests, id)
		}
	}
	for id, t := range s.access {
		if now.After(t.expires) {
			delete(s.access, id)
		}
	}
	for v, t := range s.refresh {
		if now.After(t.expires) {
			delete(s.refresh, v)
		}
	}
}

func (s *storage) CreateAuthRequest(_ context.Context, r *oidc.AuthRequest, _ string) (op.AuthRequest, error) {
	a := newAuthRequest(r, s.clock.Now())
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweep(a.created)
	s.requests[a.id] = a
	cp := *a
	return &cp, nil
}

// requestLocked returns the live auth request; the caller holds s.mu.
func (s *storage) requestLocked(id string) (*authRequest, error) {
	a, ok := s.requests[id]
	if !ok || s.clock.Since(a.created) > authRequestTTL {
		return nil, fmt.Errorf("auth request %q: unknown or expired", id)
	}
	return a, nil
}

// AuthRequestByID returns a copy so the op never reads fields a login is writing.
func (s *storage) AuthRequestByID(_ context.Context, id string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, err := s.requestLocked(id)
	if err != nil {
		return nil, err
	}
	cp := *a
	return &cp, nil
}

func (s *storage) AuthRequestByCode(ctx context.Context, code string) (op.AuthRequest, error) {
	s.mu.Lock()
	id, ok := s.codes[code]
	s.mu.Unlock()
	if !ok {
		return nil, errors.New("unknown or used code")
	}
	return s.AuthRequestByID(ctx, id)
}

func (s *storage) SaveAuthCode(_ context.Context, id, code string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, err := s.requestLocked(id)
	if err != nil {
		return err
	}
	a.code = code
	s.codes[code] = id
	return nil
}

// DeleteAuthRequest runs when the code was exchanged: that makes codes single-use.
func (s *storage) DeleteAuthRequest(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a, ok := s.requests[id]; ok {
		delete(s.codes, a.code)
		delete(s.requests, id)
	}
	return nil
}

// checkLogin completes auth request id for the user if the password matches.
func (s *storage) checkLogin(id, username, password string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, err := s.requestLocked(id)
	if err != nil {
		return err
	}
	u, ok := s.byName[username]
	if !ok || subtle.ConstantTimeCompare([]byte(u.Password), []byte(password)) != 1 {
		return errBadCredentials
	}
	a.userID, a.authTime, a.done = u.ID, s.clock.Now(), true
	return nil
}

func (s *storage) newAccessToken(g grant) (*token, error) {
	c, ok := s.clients[g.clientID]
	if !ok {
		return nil, fmt.Errorf("unknown client %q", g.clientID)
	}
	t := &token{grant: g, id: randomID(), expires: s.clock.Now().Add(orDefault(c.AccessTokenLifetime))}
	s.access[t.id] = t
	return t, nil
}

func (s *storage) CreateAccessToken(_ context.Context, req op.TokenRequest) (string, time.Time, error) {
	g, ok := grantOf(req)
	if !ok {
		return "", time.Time{}, fmt.Errorf("unsupported token request %T", req)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.newAccessToken(g)
	if err != nil {
		return "", time.Time{}, err
	}
	return t.id, t.expires, nil
}

// CreateAccessAndRefreshTokens rotates refresh tokens: the one used is spent.
func (s *storage) CreateAccessAndRefreshTokens(_ context.Context, req op.TokenRequest, current string) (string, string, time.Time, error) {
	g, ok := grantOf(req)
	if !ok {
		return "", "", time.Time{}, fmt.Errorf("unsupported token request %T", req)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if current != "" {
		old, ok := s.refresh[current]
		if !ok {
			return "", "", time.Time{}, op.ErrInvalidRefreshToken
		}
		delete(s.refresh, current)
		delete(s.access, old.refresh)
	}
	at, err := s.newAccessToken(g)
	if err != nil {
		return "", "", time.Time{}, err
	}
	rt := &token{grant: g, id: randomID(), expires: s.clock.Now().Add(refreshTokenTTL), refresh: at.id}
	at.refresh = rt.id
	s.refresh[rt.id] = rt
	return at.id, rt.id, at.expires, nil
}

func (s *storage) TokenRequestByRefreshToken(_ context.Context, value string) (op.RefreshTokenRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.refresh[value]
	if !ok || s.clock.Now().After(t.expires) {
		return nil, op.ErrInvalidRefreshToken
	}
	g := t.grant
	g.scopes = slices.Clone(g.scopes)
	return &refreshRequest{grant: g}, nil
}

// TerminateSession (logout) revokes the user's tokens for the client. There is no
// login session to end: the provider sets no cookies and always shows the form.
func (s *storage) TerminateSession(_ context.Context, userID, clientID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, t := range s.access {
		if t.subject == userID && t.clientID == clientID {
			delete(s.access, id)
		}
	}
	for v, t := range s.refresh {
		if t.subject == userID && t.clientID == clientID {
			delete(s.refresh, v)
		}
	}
	return nil
}

func (s *storage) RevokeToken(_ context.Context, tokenOrID, _, clientID string) *oidc.Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.access[tokenOrID]; ok {
		if t.clientID != clientID {
			return oidc.ErrInvalidClient().WithDescription("token was not issued for this client")
		}
		delete(s.access, tokenOrID)
		return nil
	}
	if t, ok := s.refresh[tokenOrID]; ok {
		if t.clientID != clientID {
			return oidc.ErrInvalidClient().WithDescription("token was not issued for this client")
		}
		delete(s.refresh, tokenOrID)
		delete(s.access, t.refresh)
	}
	return nil // RFC 7009: an unknown token is not an error
}

func (s *storage) GetRefreshTokenInfo(_ context.Context, _ string, value string) (string, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.refresh[value]
	if !ok {
		return "", "", op.ErrInvalidRefreshToken
	}
	return t.subject, t.id, nil
}

func (s *storage) SigningKey(context.Context) (op.SigningKey, error) { return s.key, nil }

func (s *storage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}

func (s *storage) KeySet(context.Context) ([]op.Key, error) {
	return []op.Key{publicKey{s.key}}, nil
}

func (s *storage) GetClientByClientID(_ context.Context, id string) (op.Client, error) {
	c, ok := s.clients[id]
	if !ok {
		return nil, fmt.Errorf("unknown client %q", id)
	}
	return &opClient{c: c, loginURL: s.loginURL}, nil
}

func (s *storage) AuthorizeClientIDSecret(_ context.Context, id, secret string) error {
	c, ok := s.clients[id]
	if !ok || c.Secret == "" || subtle.ConstantTimeCompare([]byte(c.Secret), []byte(secret)) != 1 {
		return fmt.Errorf("client %q: bad credentials", id)
	}
	return nil
}

// SetUserinfoFromScopes is deprecated in zitadel; SetUserinfoFromRequest does the work.
func (s *storage) SetUserinfoFromScopes(context.Context, *oidc.UserInfo, string, string, []string) error {
	return nil
}

func (s *storage) SetUserinfoFromRequest(_ context.Context, info *oidc.UserInfo, req op.IDTokenRequest, scopes []string) error {
	return s.setUserinfo(info, req.GetSubject(), scopes)
}

func (s *storage) setUserinfo(info *oidc.UserInfo, userID string, scopes []string) error {
	u, ok := s.users[userID]
	if !ok {
		return fmt.Errorf("unknown user %q", userID)
	}
	// The ID token takes its sub from here, so it must always be set.
	info.Subject = u.ID
	for k, v := range userClaims(u, scopes) {
		info.AppendClaims(k, v)
	}
	return nil
}

// liveToken returns a copy of an unexpired access token.
func (s *storage) liveToken(id, subject string) (token, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.access[id]
	if !ok || s.clock.Now().After(t.expires) || t.subject != subject {
		return token{}, errors.New("access token invalid, expired or revoked")
	}
	return *t, nil
}

func (s *storage) SetUserinfoFromToken(_ context.Context, info *oidc.UserInfo, tokenID, subject, _ string) error {
	t, err := s.liveToken(tokenID, subject)
	if err != nil {
		return err
	}
	return s.setUserinfo(info, t.subject, t.scopes)
}

func (s *storage) SetIntrospectionFromToken(_ context.Context, resp *oidc.IntrospectionResponse, tokenID, subject, clientID string) error {
	t, err := s.liveToken(tokenID, subject)
	if err != nil {
		return err
	}
	if t.clientID != clientID {
		return fmt.Errorf("token was not issued for client %q", clientID)
	}
	info := new(oidc.UserInfo)
	if err := s.setUserinfo(info, t.subject, t.scopes); err != nil {
		return err
	}
	resp.SetUserInfo(info)
	resp.Scope = t.scopes
	resp.ClientID = t.clientID
	resp.Audience = t.GetAudience()
	resp.Expiration = oidc.FromTime(t.expires)
	resp.AuthTime = oidc.FromTime(t.authTime)
	return nil
}

// GetPrivateClaimsFromRequest gives JWT access tokens the user's claims for the
// granted scopes (zitadel's restricted list drops email and profile) and "scope".
func (s *storage) GetPrivateClaimsFromRequest(_ context.Context, req op.TokenRequest, _ []string) (map[string]any, error) {
	return s.privateClaims(req.GetSubject(), req.GetScopes())
}

func (s *storage) GetPrivateClaimsFromScopes(_ context.Context, userID, _ string, scopes []string) (map[string]any, error) {
	return s.privateClaims(userID, scopes)
}

func (s *storage) privateClaims(userID string, scopes []string) (map[string]any, error) {
	u, ok := s.users[userID]
	if !ok {
		return nil, fmt.Errorf("unknown user %q", userID)
	}
	c := userClaims(u, scopes)
	c["scope"] = scopeString(scopes)
	return c, nil
}

func (s *storage) GetKeyByIDAndClientID(context.Context, string, string) (*jose.JSONWebKey, error) {
	return nil, errors.New("JWT client authentication is not supported")
}

func (s *storage) ValidateJWTProfileScopes(context.Context, string, []string) ([]string, error) {
	return nil, errors.New("the JWT profile grant is not supported")
}

func (s *storage) Health(context.Context) error { return nil }
