package oidcprovider

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"time"

	"golang.org/x/net/html"
	"k8s.io/utils/clock"
)

// Tokens are what a token response gave.
type Tokens struct {
	IDToken, AccessToken, RefreshToken string
	Expiry                             time.Time // the access token's
	// Nonce is the random nonce Login sent; Login checked the ID token carries it.
	Nonce string
}

// maxHops bounds the redirects and form posts of one sign-in.
const maxHops = 10

// Login runs the authorization-code flow with PKCE (S256) the way a browser would — GET the
// authorize endpoint, follow to the provider's login form, POST username and password, follow
// redirects until the redirect to redirectURI — and exchanges the code at the token endpoint
// (client secret by HTTP basic when the client has one). It never follows the final redirect to
// redirectURI (that server may not exist). scopes nil = openid, email, profile, groups.
//
// It sends a random state and nonce and checks both. It connects to the provider's
// listener whatever host the issuer names, so it also works with an explicit Issuer
// that does not resolve here. It does not verify the tokens: that is the test's job.
func (p *Provider) Login(ctx context.Context, clientID, clientSecret, redirectURI, username, password string, scopes []string) (*Tokens, error) {
	return login(ctx, p.browser(), p.clock, p.issuer, clientID, clientSecret, redirectURI, username, password, scopes)
}

// LoginAt is Login against a provider running elsewhere (bin/oidc-provider in
// a pod), reached with hc under issuer. Tokens.Expiry is on the real clock, the
// provider's there.
func LoginAt(ctx context.Context, hc *http.Client, issuer, clientID, clientSecret, redirectURI, username, password string, scopes []string) (*Tokens, error) {
	b := *hc
	b.Jar, _ = cookiejar.New(nil) // never fails with nil options
	b.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return login(ctx, &b, clock.RealClock{}, issuer, clientID, clientSecret, redirectURI, username, password, scopes)
}

// login signs in and dates Tokens.Expiry by clk, the provider's clock.
func login(ctx context.Context, hc *http.Client, clk clock.PassiveClock, issuer, clientID, clientSecret, redirectURI, username, password string, scopes []string) (*Tokens, error) {
	if scopes == nil {
		scopes = DefaultScopes
	}
	disc, err := discover(ctx, hc, issuer)
	if err != nil {
		return nil, err
	}
	verifier := randomID() + randomID() // 64 characters, within RFC 7636's 43..128
	sum := sha256.Sum256([]byte(verifier))
	state, nonce := randomID(), randomID()
	q := url.Values{
		"response_type":         {"code"},
		"client_id":             {clientID},
		"redirect_uri":          {redirectURI},
		"scope":                 {strings.Join(scopes, " ")},
		"state":                 {state},
		"nonce":                 {nonce},
		"code_challenge":        {base64.RawURLEncoding.EncodeToString(sum[:])},
		"code_challenge_method": {"S256"},
	}
	callback, err := signIn(ctx, hc, disc.AuthorizationEndpoint+"?"+q.Encode(), redirectURI, username, password)
	if err != nil {
		return nil, fmt.Errorf("oidcprovider: login as %q: %w", username, err)
	}
	code, err := codeFrom(callback, state)
	if err != nil {
		return nil, fmt.Errorf("oidcprovider: login as %q: %w", username, err)
	}
	tokens, err := exchange(ctx, hc, clk, disc.TokenEndpoint, clientID, clientSecret, url.Values{
		"grant_type":    {"authorization_code"},
		"code":          {code},
		"redirect_uri":  {redirectURI},
		"code_verifier": {verifier},
	})
	if err != nil {
		return nil, fmt.Errorf("oidcprovider: login as %q: %w", username, err)
	}
	tokens.Nonce = nonce
	got, err := idTokenNonce(tokens.IDToken)
	switch {
	case err != nil:
		return nil, fmt.Errorf("oidcprovider: login as %q: the ID token's nonce: %w", username, err)
	case got != nonce:
		return nil, fmt.Errorf("oidcprovider: login as %q: ID token nonce %q, sent %q", username, got, nonce)
	}
	return tokens, nil
}

// HTTPClient returns a client that reaches this provider under its issuer URL
// whatever the issuer's host resolves to here (an explicit Issuer such as
// http://oidc.faucet-e2e.svc:9998 is dialed at Addr); other hosts are dialed as
// usual. Pass it to go-oidc with oidc.ClientContext. Keep-alives are off, so it
// holds no connections.
func (p *Provider) HTTPClient() *http.Client {
	return &http.Client{Transport: p.transport(), Timeout: 30 * time.Second}
}

func (p *Provider) transport() *http.Transport {
	issuerHost := ""
	if u, err := url.Parse(p.issuer); err == nil {
		issuerHost = u.Host
		if u.Port() == "" {
			port := "80"
			if u.Scheme == "https" {
				port = "443"
			}
			issuerHost = net.JoinHostPort(u.Hostname(), port)
		}
	}
	listener := p.addr
	if host, port, err := net.SplitHostPort(p.addr); err == nil {
		if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
			listener = net.JoinHostPort("127.0.0.1", port)
		}
	}
	return &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if addr == issuerHost {
				addr = listener
			}
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
		DisableKeepAlives: true,
	}
}

// browser is HTTPClient with a cookie jar that does not follow redirects: Login
// follows them itself, to stop at redirectURI.
func (p *Provider) browser() *http.Client {
	hc := p.HTTPClient()
	hc.Jar, _ = cookiejar.New(nil) // never fails with nil options
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return hc
}

type discoveryDoc struct {
	Issuer                string `json:"issuer"`
	AuthorizationEndpoint string `json:"authorization_endpoint"`
	TokenEndpoint         string `json:"token_endpoint"`
}

func discover(ctx context.Context, hc *http.Client, issuer string) (*discoveryDoc, error) {
	u := strings.TrimSuffix(issuer, "/") + "/.well-known/openid-configuration"
	body, resp, err := do(ctx, hc, http.MethodGet, u, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("oidcprovider: discovery: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("oidcprovider: discovery: %s: %s", resp.Status, snippet(body))
	}
	var d discoveryDoc
	if err := json.Unmarshal(body, &d); err != nil {
		return nil, fmt.Errorf("oidcprovider: discovery: %w", err)
	}
	if d.Issuer != issuer {
		return nil, fmt.Errorf("oidcprovider: discovery: issuer %q, want %q", d.Issuer, issuer)
	}
	return &d, nil
}

// do sends one request and reads the (bounded) body.
func do(ctx context.Context, hc *http.Client, method, u string, form url.Values, header http.Header) ([]byte, *reply, error) {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, nil, fmt.Errorf("build %s request: %w", method, err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("%s %s: %w", method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, nil, fmt.Errorf("%s %s: read body: %w", method, req.URL.Path, err)
	}
	r := &reply{StatusCode: resp.StatusCode, Status: resp.Status, URL: resp.Request.URL}
	r.location, r.locationErr = resp.Location()
	return b, r, nil
}

// reply is what do keeps of a response once its body is read and closed.
type reply struct {
	StatusCode  int
	Status      string
	URL         *url.URL // the request's, redirects followed by the client
	location    *url.URL
	locationErr error
}

// Location is the response's Location, resolved against its request.
func (r *reply) Location() (*url.URL, error) { return r.location, r.locationErr }

// signIn walks from the authorize URL through the login form to the redirect to
// redirectURI, and returns that redirect's URL.
func signIn(ctx context.Context, hc *http.Client, authorizeURL, redirectURI, username, password string) (*url.URL, error) {
	method, target, posted := http.MethodGet, authorizeURL, false
	var form url.Values
	for range maxHops {
		body, resp, err := do(ctx, hc, method, target, form, nil)
		if err != nil {
			return nil, err
		}
		switch {
		case resp.StatusCode >= 300 && resp.StatusCode < 400:
			loc, err := resp.Location()
			if err != nil {
				return nil, fmt.Errorf("%s redirect without location: %w", resp.Status, err)
			}
			if sameEndpoint(loc, redirectURI) {
				return loc, nil
			}
			method, target, form = http.MethodGet, loc.String(), nil
		case resp.StatusCode == http.StatusOK && posted:
			return nil, fmt.Errorf("sign-in rejected: %s", errorText(body))
		case resp.StatusCode == http.StatusOK:
			action, fields, err := parseForm(body, resp.URL)
			if err != nil {
				return nil, fmt.Errorf("login form at %s: %w", resp.URL.Path, err)
			}
			fields.Set("username", username)
			fields.Set("password", password)
			method, target, form, posted = http.MethodPost, action, fields, true
		default:
			return nil, fmt.Errorf("%s %s: %s: %s", method, resp.URL.Path, resp.Status, snippet(body))
		}
	}
	return nil, fmt.Errorf("no redirect to %s after %d steps", redirectURI, maxHops)
}

func sameEndpoint(u *url.URL, endpoint string) bool {
	e, err := url.Parse(endpoint)
	return err == nil && u.Scheme == e.Scheme && strings.EqualFold(u.Host, e.Host) && u.Path == e.Path
}

// parseForm reads the first form of a page: its action and the inputs' values.
func parseForm(page []byte, base *url.URL) (string, url.Values, error) {
	z := html.NewTokenizer(bytes.NewReader(page))
	var action *url.URL
	fields := url.Values{}
	for {
		switch z.Next() {
		case html.ErrorToken:
			return "", nil, errors.New("no complete form on the page")
		case html.StartTagToken, html.SelfClosingTagToken:
			t := z.Token()
			switch {
			case t.Data == "form" && action == nil:
				a, err := base.Parse(attr(t, "action"))
				if err != nil {
					return "", nil, fmt.Errorf("form action: %w", err)
				}
				action = a
			case t.Data == "input" && action != nil && attr(t, "name") != "":
				fields.Set(attr(t, "name"), attr(t, "value"))
			}
		case html.EndTagToken:
			if t := z.Token(); t.Data == "form" && action != nil {
				return action.String(), fields, nil
			}
		}
	}
}

func attr(t html.Token, name string) string {
	for _, a := range t.Attr {
		if a.Key == name {
			return a.Val
		}
	}
	return ""
}

// errorText is the text of the page's id="error" element (the form's message).
func errorText(page []byte) string {
	z := html.NewTokenizer(bytes.NewReader(page))
	inError := false
	var text strings.Builder
	for {
		switch z.Next() {
		case html.ErrorToken:
			return "the login form was shown again (no error message)"
		case html.StartTagToken:
			if t := z.Token(); attr(t, "id") == "error" {
				inError = true
			}
		case html.TextToken:
			if inError {
				text.Write(z.Text())
			}
		case html.EndTagToken:
			if inError {
				return strings.TrimSpace(text.String())
			}
		}
	}
}

func codeFrom(callback *url.URL, state string) (string, error) {
	q := callback.Query()
	if e := q.Get("error"); e != "" {
		return "", fmt.Errorf("authorization error %s: %s", e, q.Get("error_description"))
	}
	if q.Get("state") != state {
		return "", fmt.Errorf("redirect state %q, sent %q", q.Get("state"), state)
	}
	code := q.Get("code")
	if code == "" {
		return "", errors.New("redirect without code")
	}
	return code, nil
}

// exchange posts a token request; a confidential client authenticates with HTTP
// basic (RFC 6749 section 2.3.1: both parts form-encoded), a public one sends client_id.
func exchange(ctx context.Context, hc *http.Client, clk clock.PassiveClock, endpoint, clientID, secret string, form url.Values) (*Tokens, error) {
	header := http.Header{"Accept": {"application/json"}}
	if secret == "" {
		form.Set("client_id", clientID)
	} else {
		creds := url.QueryEscape(clientID) + ":" + url.QueryEscape(secret)
		header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(creds)))
	}
	start := clk.Now()
	body, resp, err := do(ctx, hc, http.MethodPost, endpoint, form, header)
	if err != nil {
		return nil, fmt.Errorf("token request: %w", err)
	}
	var tr struct {
		AccessToken      string `json:"access_token"`
		IDToken          string `json:"id_token"`
		RefreshToken     string `json:"refresh_token"`
		ExpiresIn        int64  `json:"expires_in"`
		Error            string `json:"error"`
		ErrorDescription string `json:"error_description"`
	}
	if err := json.Unmarshal(body, &tr); err != nil {
		return nil, fmt.Errorf("token response %s: %w: %s", resp.Status, err, snippet(body))
	}
	if resp.StatusCode != http.StatusOK || tr.Error != "" {
		return nil, fmt.Errorf("token response %s: %s: %s", resp.Status, tr.Error, tr.ErrorDescription)
	}
	if tr.AccessToken == "" || tr.IDToken == "" {
		return nil, fmt.Errorf("token response without access or ID token: %s", snippet(body))
	}
	return &Tokens{
		IDToken:      tr.IDToken,
		AccessToken:  tr.AccessToken,
		RefreshToken: tr.RefreshToken,
		Expiry:       start.Add(time.Duration(tr.ExpiresIn) * time.Second),
	}, nil
}

// idTokenNonce reads the nonce claim without verifying the signature.
func idTokenNonce(idToken string) (string, error) {
	parts := strings.Split(idToken, ".")
	if len(parts) != 3 {
		return "", errors.New("ID token is not a JWS")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", fmt.Errorf("decode ID token payload: %w", err)
	}
	var c struct {
		Nonce string `json:"nonce"`
	}
	if err := json.Unmarshal(payload, &c); err != nil {
		return "", fmt.Errorf("parse ID token payload: %w", err)
	}
	return c.Nonce, nil
}

func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
