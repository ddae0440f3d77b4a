package identity

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"k8s.io/utils/clock"
)

// TokenError is a bearer token (or sign-in) that does not name a person.
// Reason is a stable code and Message one sentence a person can act on;
// neither ever contains the token.
type TokenError struct {
	Reason  string
	Message string
	// Unavailable: the provider could not be asked (down, unreachable);
	// the token may be good.
	Unavailable bool
	err         error // the cause, for logs (never the token)
}

func (e *TokenError) Error() string {
	if e.err != nil {
		return fmt.Sprintf("identity: %s: %s: %v", e.Reason, e.Message, e.err)
	}
	return fmt.Sprintf("identity: %s: %s", e.Reason, e.Message)
}

func (e *TokenError) Unwrap() error { return e.err }

// Reasons of TokenError.
const (
	ReasonTokenInvalid      = "token_invalid"
	ReasonTokenExpired      = "token_expired"
	ReasonTokenIssuer       = "token_wrong_issuer"
	ReasonTokenAudience     = "token_wrong_audience"
	ReasonTokenNoSubject    = "token_no_subject"
	ReasonSignInUnavailable = "sign_in_unavailable"
)

// LooksLikeJWT reports whether a bearer token has a JWT's shape (three
// base64url parts, the first a JSON header naming an algorithm): such a
// token is the provider's, anything else an API token.
func LooksLikeJWT(token string) bool {
	head, rest, ok := strings.Cut(token, ".")
	if !ok || strings.Count(rest, ".") != 1 || len(head) > 1024 {
		return false
	}
	b, err := base64.RawURLEncoding.DecodeString(head)
	if err != nil {
		return false
	}
	var h struct {
		Alg string `json:"alg"`
	}
	return json.Unmarshal(b, &h) == nil && h.Alg != ""
}

// claims are the token claims a person is made of. email_verified may be
// a string ("true") from some providers, groups a single string.
type claims struct {
	Issuer        string          `json:"iss"`
	Subject       string          `json:"sub"`
	Audience      json.RawMessage `json:"aud"`
	Email         string          `json:"email"`
	EmailVerified json.RawMessage `json:"email_verified"`
	Name          string          `json:"name"`
	Groups        json.RawMessage `json:"groups"`
}

func (c claims) audiences() []string {
	var one string
	if json.Unmarshal(c.Audience, &one) == nil {
		return []string{one}
	}
	var many []string
	_ = json.Unmarshal(c.Audience, &many)
	return many
}

func (c claims) person() *Person {
	p := &Person{Issuer: c.Issuer, Subject: c.Subject, Email: c.Email, Name: c.Name}
	var b bool
	var s string
	switch {
	case json.Unmarshal(c.EmailVerified, &b) == nil:
		p.EmailVerified = b
	case json.Unmarshal(c.EmailVerified, &s) == nil:
		p.EmailVerified = strings.EqualFold(s, "true")
	}
	var groups []string
	if json.Unmarshal(c.Groups, &groups) != nil {
		if json.Unmarshal(c.Groups, &s) == nil && s != "" {
			groups = []string{s}
		}
	}
	p.Groups = groups
	return p
}

// unverifiedClaims reads a JWT's payload without checking anything: only
// to say why a token is refused.
func unverifiedClaims(token string) (claims, bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return claims{}, false
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return claims{}, false
	}
	var c claims
	return c, json.Unmarshal(b, &c) == nil
}

// verifier checks bearer tokens against the issuer's keys, discovering
// the provider on first use (and again after a failure, at most every
// retry): a provider that is down at start delays nothing but sign-in.
type verifier struct {
	issuer    string
	audiences []string // accepted: the client ID first
	client    *clientOpt
	clock     clock.PassiveClock
	retry     time.Duration

	mu       sync.Mutex
	provider *oidc.Provider
	lastErr  error
	lastTry  time.Time
	probedAt time.Time
	probeErr error
}

// clientOpt carries the HTTP client the provider is reached with.
type clientOpt struct {
	ctx  func(context.Context) context.Context
	http *http.Client
}

// discover returns the provider, discovering it if needed.
func (v *verifier) discover(ctx context.Context) (*oidc.Provider, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.provider != nil {
		return v.provider, nil
	}
	if v.lastErr != nil && v.clock.Since(v.lastTry) < v.retry {
		return nil, v.lastErr
	}
	v.lastTry = v.clock.Now()
	// Discovery outlives the request that triggered it: the provider and
	// its key set are kept for every later one.
	dctx, cancel := context.WithTimeout(v.client.ctx(context.WithoutCancel(ctx)), 10*time.Second)
	defer cancel()
	p, err := oidc.NewProvider(dctx, v.issuer)
	if err != nil {
		v.lastErr = fmt.Errorf("discover the OpenID provider %s: %w", v.issuer, err)
		return nil, v.lastErr
	}
	v.provider, v.lastErr = p, nil
	return p, nil
}

// reachable says whether the provider answers its discovery document
// now: sign-in sends a browser there, and a provider that went down after
// it was discovered must answer 503, not a dead link. An answer is kept
// for a few seconds either way.
func (v *verifier) reachable(ctx context.Context) error {
	v.mu.Lock()
	if !v.probedAt.IsZero() && v.clock.Since(v.probedAt) < probeTTL {
		err := v.probeErr
		v.mu.Unlock()
		return err
	}
	v.mu.Unlock()
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(pctx, http.MethodGet, strings.TrimSuffix(v.issuer, "/")+"/.well-known/openid-configuration", nil)
	if err == nil {
		var resp *http.Response
		if resp, err = v.client.http.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("discovery answered %s", resp.Status)
			}
		}
	}
	if err != nil {
		err = fmt.Errorf("the OpenID provider %s: %w", v.issuer, err)
	}
	v.mu.Lock()
	v.probedAt, v.probeErr = v.clock.Now(), err
	v.mu.Unlock()
	return err
}

// How long a reachability answer is kept, and how long it may take.
const (
	probeTTL     = 5 * time.Second
	probeTimeout = 3 * time.Second
)

// verify checks token and returns its person.
func (v *verifier) verify(ctx context.Context, token string) (*Person, error) {
	c, ok := unverifiedClaims(token)
	if !ok {
		return nil, &TokenError{Reason: ReasonTokenInvalid, Message: "the bearer token is not a well-formed JWT"}
	}
	if c.Issuer != v.issuer {
		return nil, &TokenError{Reason: ReasonTokenIssuer,
			Message: fmt.Sprintf("the token was issued by %s, not by this faucet's sign-in provider %s", quoteClaim(c.Issuer), v.issuer)}
	}
	if !slices.ContainsFunc(c.audiences(), func(a string) bool { return slices.Contains(v.audiences, a) }) {
		return nil, &TokenError{Reason: ReasonTokenAudience,
			Message: fmt.Sprintf("the token is for %s, not for this faucet (%s): sign in to the faucet's client", quoteAudiences(c.audiences()), v.audiences[0])}
	}
	p, err := v.discover(ctx)
	if err != nil {
		return nil, &TokenError{Reason: ReasonSignInUnavailable, Unavailable: true,
			Message: "the sign-in provider cannot be reached to check the token; try again shortly, or drip without it", err: err}
	}
	vctx, cancel := context.WithTimeout(v.client.ctx(ctx), 10*time.Second)
	defer cancel()
	idt, err := p.Verifier(&oidc.Config{SkipClientIDCheck: true, Now: v.clock.Now}).Verify(vctx, token)
	var expired *oidc.TokenExpiredError
	switch {
	case errors.As(err, &expired):
		return nil, &TokenError{Reason: ReasonTokenExpired,
			Message: "the token expired at " + expired.Expiry.UTC().Format(time.RFC3339) + "; sign in again for a fresh one"}
	case err != nil && unreachable(err):
		return nil, &TokenError{Reason: ReasonSignInUnavailable, Unavailable: true,
			Message: "the sign-in provider's keys cannot be fetched to check the token; try again shortly, or drip without it", err: err}
	case err != nil:
		return nil, &TokenError{Reason: ReasonTokenInvalid, Message: "the token's signature does not verify against the sign-in provider's keys", err: err}
	}
	var vc claims
	if err := idt.Claims(&vc); err != nil {
		return nil, &TokenError{Reason: ReasonTokenInvalid, Message: "the token's claims do not parse", err: err}
	}
	if vc.Subject == "" {
		return nil, &TokenError{Reason: ReasonTokenNoSubject, Message: "the token names no subject (sub)"}
	}
	return vc.person(), nil
}

// unreachable reports whether err is the provider not answering, rather
// than the token failing.
func unreachable(err error) bool {
	var ue *url.Error
	var ne net.Error
	return errors.As(err, &ue) || errors.As(err, &ne) || strings.HasPrefix(err.Error(), "fetching keys")
}

// quoteClaim quotes a claim from an unverified token for a message,
// bounded and printable.
func quoteClaim(s string) string {
	if len(s) > 100 {
		s = s[:100] + "…"
	}
	return fmt.Sprintf("%q", s)
}

func quoteAudiences(a []string) string {
	if len(a) == 0 {
		return "no audience"
	}
	q := make([]string, 0, min(len(a), 5))
	for _, s := range a[:min(len(a), 5)] {
		q = append(q, quoteClaim(s))
	}
	return strings.Join(q, ", ")
}
