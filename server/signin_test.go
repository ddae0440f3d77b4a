package server

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/hack/oidcprovider"
	"github.com/stxfaucet/faucet-operator/server/guard"
	"github.com/stxfaucet/faucet-operator/server/identity"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

// Sign-in is tested against a real OpenID provider (zitadel/oidc's OP, in
// process): real discovery, keys, login form, code flow with PKCE and
// tokens. Nothing here signs a token itself.

const (
	testClientID     = "faucet"
	testClientSecret = "faucet-client-secret-0123456789"
	testRedirect     = "http://127.0.0.1:1/faucet/v1/auth/callback" // for tokens fetched without the faucet's callback
)

var testUsers = []oidcprovider.User{
	{ID: "u-alice", Username: "alice", Password: "alice-pass", Email: "alice@example.com", EmailVerified: true, Name: "Alice", Groups: []string{"devs"}},
	{ID: "u-bob", Username: "bob", Password: "bob-pass", Email: "bob@example.com", Name: "Bob"},
	{ID: "u-carol", Username: "carol", Password: "carol-pass", Email: "carol@example.org", EmailVerified: true, Name: "Carol"},
}

// startProvider starts an OP with the test users, the faucet's client
// (redirects: extra, and testRedirect) and a client "other".
func startProvider(t *testing.T, issuer string, redirects ...string) *oidcprovider.Provider {
	t.Helper()
	p, err := oidcprovider.Start(oidcprovider.Config{Issuer: issuer, Users: testUsers, Clients: []oidcprovider.Client{
		{ID: testClientID, Secret: testClientSecret, RedirectURIs: append(redirects, testRedirect), AccessTokenJWT: true},
		{ID: "other", Secret: "other-client-secret-0123456789", RedirectURIs: []string{testRedirect}, AccessTokenJWT: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// tokens signs user in at p for client (as a browser would) and returns
// the tokens.
func tokens(t *testing.T, p *oidcprovider.Provider, client, secret, user string) *oidcprovider.Tokens {
	t.Helper()
	for _, u := range testUsers {
		if u.Username == user {
			tok, err := p.Login(t.Context(), client, secret, testRedirect, u.Username, u.Password, []string{"openid", "email", "profile", "groups"})
			if err != nil {
				t.Fatalf("sign in %s: %v", user, err)
			}
			return tok
		}
	}
	t.Fatalf("no user %s", user)
	return nil
}

// signInService is sign-in at p for the faucet's client.
func signInService(t *testing.T, p *oidcprovider.Provider, clk clock.PassiveClock) *identity.Service {
	t.Helper()
	svc, err := identity.New(identity.Config{Issuer: p.Issuer(), ClientID: testClientID, ClientSecret: testClientSecret,
		Scopes: []string{"openid", "email", "profile", "groups"}, SessionKey: []byte("a session key of the test, 32 b"), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// testTiers: anonymous drips take half of each budget; a verified email
// gets twice the drip, 3 an hour, no proof of work.
func testTiers() *identity.Tiers {
	return &identity.Tiers{
		Anonymous: identity.Tier{Name: identity.AnonymousName, BudgetSharePercent: 50},
		SignedIn: []identity.Tier{{Name: "verified", Match: identity.Match{EmailVerified: true}, AmountPercent: 200,
			Limit: guard.Limit{Requests: 3, Window: time.Hour}, SkipProofOfWork: true, BudgetSharePercent: 100}},
	}
}

func bearer(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }

// from is a request from client IP ip behind one trusted proxy.
func from(ip string, hdr map[string]string) map[string]string {
	out := map[string]string{"X-Forwarded-For": ip}
	for k, v := range hdr {
		out[k] = v
	}
	return out
}

// An anonymous farm (a fresh address and IP per drip) empties the
// anonymous half of the budget and no more; signed-in people go on being
// served from the rest at their tier's amount, until their own limit,
// whatever address or IP they use; a person matching no tier is served
// as anonymous.
func TestSignInTiersAndShares(t *testing.T) {
	p := startProvider(t, "")
	// Four keys: the farm's drips stay within the mempool's chain of 25
	// per key without a block.
	h := newHarness(t, options{keys: 4, hops: 1, tiers: testTiers(), signIn: signInService(t, p, nil),
		limits: guard.Limits{PerAddress: guard.Limit{Requests: 5, Window: time.Hour}, PerIP: guard.Limit{Requests: 5, Window: time.Hour},
			Budgets: map[string]guard.Budget{"stx": {Amount: 20_000 * ustx, Per: time.Hour}}}})
	var farm uint64
	for i := 0; ; i++ {
		w := h.dripV3(`{"address":"`+newRecipient(t)+`"}`, from("10.1.0."+strconv.Itoa(i), nil))
		if w.Code == http.StatusOK {
			farm += paidSTX(t, w)
			continue
		}
		if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Header().Get("RateLimit"), `"budget-anonymous";r=0`) {
			t.Fatalf("farm drip %d: %d %s %s", i, w.Code, w.Header(), w.Body)
		}
		break
	}
	if farm > 10_000*ustx || farm < 10_000*ustx-50*ustx {
		t.Fatalf("the farm took %d µSTX of an anonymous share of 10,000 STX", farm)
	}
	body := assertError(t, h.drip("address="+newRecipient(t)), http.StatusInternalServerError, "budget")
	if d, _ := body["detail"].(string); !strings.Contains(d, "anonymous share (50 %)") || !strings.Contains(d, "sign in") {
		t.Fatalf("v1 detail: %v", body)
	}

	alice := tokens(t, p, testClientID, testClientSecret, "alice")
	for i := range 3 {
		hdr := from("10.2.0."+strconv.Itoa(i), bearer(alice.IDToken))
		el, _ := h.eligibility("asset=stx&address="+newRecipient(t), hdr)
		if !el.Eligible || el.Tier != "verified" || !el.SignedIn || el.Amount != strconv.Itoa(1000*ustx) {
			t.Fatalf("alice's eligibility %d: %+v", i, el)
		}
		w := h.dripV3(`{"address":"`+newRecipient(t)+`"}`, hdr)
		if w.Code != http.StatusOK || paidSTX(t, w) != 1000*ustx {
			t.Fatalf("alice's drip %d: %d %s", i, w.Code, w.Body)
		}
	}
	hdr := from("10.3.0.1", bearer(alice.IDToken))
	w := h.dripV3(`{"address":"`+newRecipient(t)+`"}`, hdr)
	if w.Code != http.StatusTooManyRequests || !strings.Contains(w.Header().Get("RateLimit"), `"person";r=0`) {
		t.Fatalf("alice's fourth drip from a new IP and address: %d %s %s", w.Code, w.Header(), w.Body)
	}
	if el, _ := h.eligibility("asset=stx&address="+newRecipient(t), hdr); el.Eligible || el.Reason != reasonRateLimited {
		t.Fatalf("alice's eligibility past her limit: %+v", el)
	}
	// Carol's JWT access token names her as well as an ID token does.
	carol := tokens(t, p, testClientID, testClientSecret, "carol")
	if w := h.dripV3(`{"address":"`+newRecipient(t)+`"}`, from("10.4.0.1", bearer(carol.AccessToken))); w.Code != http.StatusOK || paidSTX(t, w) != 1000*ustx {
		t.Fatalf("carol's access token: %d %s", w.Code, w.Body)
	}
	// Bob has no verified email: no tier of his own, so the anonymous
	// share, which the farm emptied.
	bob := tokens(t, p, testClientID, testClientSecret, "bob")
	w = h.dripV3(`{"address":"`+newRecipient(t)+`"}`, from("10.5.0.1", bearer(bob.IDToken)))
	if w.Code != http.StatusServiceUnavailable {
		t.Fatalf("bob: %d %s", w.Code, w.Body)
	}
	for _, tok := range []string{alice.IDToken, carol.AccessToken, bob.IDToken} {
		if strings.Contains(h.logs.String(), tok) {
			t.Fatal("a token reached the log")
		}
	}
}

// A tier that skips the proof of work needs no solution; anonymous drips
// still do.
func TestSignInSkipsProofOfWork(t *testing.T) {
	p := startProvider(t, "")
	h := newHarness(t, options{tiers: testTiers(), signIn: signInService(t, p, nil), guard: &guard.Config{PoW: guard.PoWConfig{Difficulty: 12}}})
	if w := h.dripV3(`{"address":"`+newRecipient(t)+`"}`, nil); w.Code != http.StatusPreconditionRequired {
		t.Fatalf("anonymous drip without a proof of work: %d %s", w.Code, w.Body)
	}
	alice := tokens(t, p, testClientID, testClientSecret, "alice")
	if w := h.dripV3(`{"address":"`+newRecipient(t)+`"}`, bearer(alice.IDToken)); w.Code != http.StatusOK {
		t.Fatalf("alice without a proof of work: %d %s", w.Code, w.Body)
	}
}

// Tokens that name nobody are refused with 401 and a reason a person can
// act on — never served as anonymous.
func TestBearerTokenRefusals(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	clk.Step(time.Since(clk.Now())) // the provider issues tokens on the real clock
	p := startProvider(t, "")
	h := newHarness(t, options{tiers: testTiers(), signIn: signInService(t, p, clk), clock: clk})
	otherIssuer := startProvider(t, "")
	// A provider of its own, with its own key, that calls itself by p's
	// issuer: its tokens claim everything p's would.
	forged := tokens(t, startProvider(t, p.Issuer()), testClientID, testClientSecret, "alice").IDToken
	cases := []struct {
		name, token, reason, text string
	}{
		{"another audience", tokens(t, p, "other", "other-client-secret-0123456789", "alice").IDToken, identity.ReasonTokenAudience, "not for this faucet"},
		{"another issuer", tokens(t, otherIssuer, testClientID, testClientSecret, "alice").IDToken, identity.ReasonTokenIssuer, "not by this faucet's sign-in provider"},
		{"a forged signature", forged, identity.ReasonTokenInvalid, "signature does not verify"},
		{"not a token", "eyJhbGciOiJSUzI1NiJ9.e30.c2ln", identity.ReasonTokenIssuer, "issued by"},
	}
	// An opaque token (a provider's access token that is no JWT): no API
	// tokens here, so nothing could check it.
	cases = append(cases, struct{ name, token, reason, text string }{"an opaque token", "ya29.a0AfH6SMBx-opaque", identity.ReasonTokenInvalid, "not a JWT this faucet can check"})
	valid := tokens(t, p, testClientID, testClientSecret, "alice").IDToken
	for _, c := range cases {
		w := h.do(http.MethodPost, "/extended/v1/faucets/stx?address="+newRecipient(t), nil, bearer(c.token))
		body := assertError(t, w, http.StatusUnauthorized, c.text)
		if body["reason"] != c.reason || !strings.HasPrefix(w.Header().Get("WWW-Authenticate"), `Bearer error="invalid_token"`) {
			t.Errorf("%s: %v %q", c.name, body, w.Header().Get("WWW-Authenticate"))
		}
		v3 := h.dripV3(`{"address":"`+newRecipient(t)+`"}`, bearer(c.token))
		if v3.Code != http.StatusUnauthorized || !strings.Contains(v3.Body.String(), c.text) {
			t.Errorf("%s, v3: %d %s", c.name, v3.Code, v3.Body)
		}
		if el, _ := h.eligibility("asset=stx&address="+newRecipient(t), bearer(c.token)); el.Eligible || el.Reason != c.reason {
			t.Errorf("%s, eligibility: %+v", c.name, el)
		}
	}
	if w := h.dripV3(`{"address":"`+newRecipient(t)+`"}`, bearer(valid)); w.Code != http.StatusOK {
		t.Fatalf("the valid token: %d %s", w.Code, w.Body)
	}
	clk.Step(2 * time.Hour)
	w := h.dripV3(`{"address":"`+newRecipient(t)+`"}`, bearer(valid))
	if w.Code != http.StatusUnauthorized || !strings.Contains(w.Body.String(), "expired") {
		t.Fatalf("the valid token two hours later: %d %s", w.Code, w.Body)
	}
	for _, tok := range []string{valid, forged, cases[0].token} {
		if strings.Contains(h.logs.String(), tok) || strings.Contains(h.logs.String(), tok[len(tok)-20:]) {
			t.Fatal("a token reached the log")
		}
	}
}

// A provider that is down: a bearer token cannot be checked (a temporary
// failure, 503 on v3), sign-in answers 503, and drips without sign-in go
// on; once it is back (after the retry interval), tokens verify again.
func TestSignInProviderDown(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	p := startProvider(t, "")
	alice := tokens(t, p, testClientID, testClientSecret, "alice")
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, options{tiers: testTiers(), signIn: signInService(t, p, clk)})
	w := h.dripV3(`{"address":"`+newRecipient(t)+`"}`, bearer(alice.IDToken))
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" || !strings.Contains(w.Body.String(), "cannot be reached") {
		t.Fatalf("a token while the provider is down, v3: %d %s", w.Code, w.Body)
	}
	if w := h.do(http.MethodGet, identity.PathLogin, nil, map[string]string{"Accept": "text/html"}); w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "Drips without sign-in still work") {
		t.Fatalf("sign-in while the provider is down: %d %s", w.Code, w.Body)
	}
	if w := h.dripV3(`{"address":"`+newRecipient(t)+`"}`, nil); w.Code != http.StatusOK {
		t.Fatalf("an anonymous drip while the provider is down: %d %s", w.Code, w.Body)
	}
	if err := p.Restart(); err != nil {
		t.Fatal(err)
	}
	clk.Step(10 * time.Second) // past the discovery retry interval
	if w := h.dripV3(`{"address":"`+newRecipient(t)+`"}`, bearer(alice.IDToken)); w.Code != http.StatusOK || paidSTX(t, w) != 1000*ustx {
		t.Fatalf("alice once the provider is back: %d %s", w.Code, w.Body)
	}
	if w := h.do(http.MethodGet, identity.PathLogin, nil, nil); w.Code != http.StatusFound {
		t.Fatalf("sign-in with the provider back: %d %s", w.Code, w.Body)
	}
	// Down again, after it was discovered: sign-in says so rather than
	// sending browsers to a dead link; tokens still verify with the keys
	// already fetched.
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	clk.Step(10 * time.Second)
	if w := h.do(http.MethodGet, identity.PathLogin, nil, nil); w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), identity.ReasonSignInUnavailable) {
		t.Fatalf("sign-in once the provider went down again: %d %s", w.Code, w.Body)
	}
	if w := h.dripV3(`{"address":"`+newRecipient(t)+`"}`, bearer(alice.IDToken)); w.Code != http.StatusOK {
		t.Fatalf("alice's token with the provider down and its keys known: %d %s", w.Code, w.Body)
	}
}

// The page's sign-in, as a browser goes through it: the faucet's login
// redirects to the provider's form, the form posts back, the callback sets
// the session cookie; same-origin drips then count as the person, a
// cross-origin request's cookie does not, and sign-out ends it.
func TestSignInPageSession(t *testing.T) {
	var handler http.Handler
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handler.ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	p := startProvider(t, "", srv.URL+identity.PathCallback)
	h := newHarness(t, options{tiers: testTiers(), signIn: signInService(t, p, nil)})
	handler = h.h

	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	resp, err := browser.Get(srv.URL + identity.PathLogin + "?return=/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	action, form := loginForm(t, resp.Request.URL, page)
	form.Set("username", "alice")
	form.Set("password", "alice-pass")
	resp, err = browser.PostForm(action, form)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Request.URL.String() != srv.URL+"/" {
		t.Fatalf("signed in, landed on %s, want the page", resp.Request.URL)
	}
	sess := session(t, browser, srv.URL)
	if !sess.SignedIn || sess.Email != "alice@example.com" || sess.Tier.Name != "verified" {
		t.Fatalf("session %+v", sess)
	}
	drip := func(origin string) (int, uint64) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/extended/v3/faucets/stx", strings.NewReader(`{"address":"`+newRecipient(t)+`"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", origin)
		resp, err := browser.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b struct {
			Amount map[string]string `json:"amount"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&b)
		v, _ := strconv.ParseUint(b.Amount["stx"], 10, 64)
		return resp.StatusCode, v
	}
	if code, amt := drip(srv.URL); code != http.StatusOK || amt != 1000*ustx {
		t.Fatalf("a signed-in page drip: %d %d", code, amt)
	}
	if code, amt := drip("https://evil.example"); code != http.StatusOK || amt != 500*ustx {
		t.Fatalf("a cross-origin request with the cookie: %d %d, want an anonymous drip", code, amt)
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+identity.PathLogout, nil)
	req.Header.Set("Origin", srv.URL)
	resp, err = browser.Do(req)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("sign out: %v %v", resp, err)
	}
	resp.Body.Close()
	if s := session(t, browser, srv.URL); s.SignedIn || s.Tier.Name != identity.AnonymousName {
		t.Fatalf("after sign-out: %+v", s)
	}
	// A callback without the sign-in's cookie is refused.
	if w := h.do(http.MethodGet, identity.PathCallback+"?code=x&state=y", nil, nil); w.Code != http.StatusBadRequest {
		t.Fatalf("a stray callback: %d %s", w.Code, w.Body)
	}
}

func session(t *testing.T, c *http.Client, base string) sessionBody {
	t.Helper()
	resp, err := c.Get(base + identity.PathSession)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s sessionBody
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

var (
	formAction  = regexp.MustCompile(`<form[^>]*action="([^"]*)"`)
	hiddenInput = regexp.MustCompile(`<input[^>]*type="hidden"[^>]*name="([^"]+)"[^>]*value="([^"]*)"`)
)

// loginForm reads the provider's login form: where it posts and its
// hidden fields.
func loginForm(t *testing.T, base *url.URL, page []byte) (string, url.Values) {
	t.Helper()
	m := formAction.FindSubmatch(page)
	if m == nil {
		t.Fatalf("no form in %s", page)
	}
	action, err := base.Parse(string(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	form := url.Values{}
	for _, h := range hiddenInput.FindAllSubmatch(page, -1) {
		form.Set(string(h[1]), string(h[2]))
	}
	return action.String(), form
}

// MCP clients send the person's token in their Authorization header: the
// tools see the same tier, amount, limit and refusals as the HTTP routes.
func TestSignInOverMCP(t *testing.T) {
	p := startProvider(t, "")
	h := newHarness(t, options{tiers: testTiers(), signIn: signInService(t, p, nil)})
	alice := tokens(t, p, testClientID, testClientSecret, "alice")
	cs := mcpSession(t, h, http.Header{"Authorization": {"Bearer " + alice.AccessToken}})
	el, _ := call(t, cs, toolEligibility, map[string]any{"asset": "stx", "address": newRecipient(t)})
	if el["eligible"] != true || el["tier"] != "verified" || el["amount"] != strconv.Itoa(1000*ustx) {
		t.Fatalf("eligibility over MCP: %v", el)
	}
	for i := range 3 {
		d, fail := call(t, cs, toolRequestDrip, map[string]any{"asset": "stx", "address": newRecipient(t)})
		if fail != nil || d["amount"] != strconv.Itoa(1000*ustx) {
			t.Fatalf("drip %d over MCP: %v %+v", i, d, fail)
		}
	}
	if _, fail := call(t, cs, toolRequestDrip, map[string]any{"asset": "stx", "address": newRecipient(t)}); fail == nil || fail.Reason != reasonRateLimited {
		t.Fatalf("alice's fourth drip over MCP: %+v", fail)
	}
	other := tokens(t, p, "other", "other-client-secret-0123456789", "carol")
	bad := mcpSession(t, h, http.Header{"Authorization": {"Bearer " + other.IDToken}})
	if _, fail := call(t, bad, toolRequestDrip, map[string]any{"asset": "stx", "address": newRecipient(t)}); fail == nil || fail.Reason != identity.ReasonTokenAudience {
		t.Fatalf("a token for another client over MCP: %+v", fail)
	}
}

// A faucet that drips to signed-in developers only still serves its API
// tokens: the operator handed them out and their quotas bound them. No
// token is still 401 sign_in_required, and a wrong one the token check's
// 401.
func TestSignInOnlyServesAPITokens(t *testing.T) {
	p := startProvider(t, "")
	const token = "ci-token-5d2c0f6e1a9b4c3d"
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte("ci "+token+" 2/1h\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tiers := testTiers()
	tiers.AnonymousOff = true
	h := newHarness(t, options{tiers: tiers, signIn: signInService(t, p, nil), guard: &guard.Config{TokensFile: file}})
	body := assertError(t, h.drip("address="+newRecipient(t)), http.StatusUnauthorized, "signed-in developers only")
	if body["reason"] != reasonSignInRequired {
		t.Errorf("no sign-in, no token: %v", body)
	}
	if el, _ := h.eligibility("asset=stx&address="+newRecipient(t), bearer(token)); !el.Eligible {
		t.Errorf("eligibility with the API token: %+v", el)
	}
	for i := range 2 {
		if w := h.dripV3(`{"address":"`+newRecipient(t)+`"}`, bearer(token)); w.Code != http.StatusOK {
			t.Fatalf("API token drip %d: %d %s", i, w.Code, w.Body)
		}
	}
	if w := h.dripV3(`{"address":"`+newRecipient(t)+`"}`, bearer(token)); w.Code != http.StatusTooManyRequests {
		t.Errorf("a third drip past the token's quota of 2: %d %s", w.Code, w.Body)
	}
	body = assertError(t, h.do(http.MethodPost, "/extended/v1/faucets/stx?address="+newRecipient(t), nil, bearer("ci-token-wrong-000000000")), http.StatusUnauthorized, "")
	if body["reason"] != "token_invalid" {
		t.Errorf("a wrong API token: %v", body)
	}
	alice := tokens(t, p, testClientID, testClientSecret, "alice")
	if w := h.dripV3(`{"address":"`+newRecipient(t)+`"}`, bearer(alice.IDToken)); w.Code != http.StatusOK {
		t.Errorf("alice signed in: %d %s", w.Code, w.Body)
	}
}
