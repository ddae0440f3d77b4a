package identity

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/server/guard"
)

func TestLooksLikeJWT(t *testing.T) {
	for tok, want := range map[string]bool{
		"eyJhbGciOiJSUzI1NiIsImtpZCI6IjEifQ.eyJzdWIiOiJ4In0.c2ln": true,
		"eyJhbGciOiJSUzI1NiJ9.e30.":                               true,
		"e3b0c44298fc1c149afbf4c8":                                false, // an API token
		"a.b.c":                                                   false, // not a JSON header
		"eyJ0eXAiOiJKV1QifQ.e30.c2ln":                             false, // no alg
		"eyJhbGciOiJSUzI1NiJ9.e30":                                false, // two parts
		"eyJhbGciOiJSUzI1NiJ9.e30.x.y":                            false,
	} {
		if got := LooksLikeJWT(tok); got != want {
			t.Errorf("LooksLikeJWT(%q) = %v", tok, got)
		}
	}
	if _, ok := BearerJWT("Basic eyJhbGciOiJSUzI1NiJ9.e30.c2ln"); ok {
		t.Error("a Basic credential taken as a bearer token")
	}
	if tok, ok := BearerJWT("bearer  eyJhbGciOiJSUzI1NiJ9.e30.c2ln "); !ok || tok != "eyJhbGciOiJSUzI1NiJ9.e30.c2ln" {
		t.Errorf("BearerJWT = %q %v", tok, ok)
	}
}

func TestTiers(t *testing.T) {
	tiers := Tiers{
		Anonymous: Tier{Name: AnonymousName, BudgetSharePercent: 50},
		SignedIn: []Tier{
			{Name: "team", Match: Match{Groups: []string{"devs"}, EmailDomains: []string{"example.com"}}, AmountPercent: 500},
			{Name: "verified", Match: Match{EmailVerified: true}, AmountPercent: 200, Limit: guard.Limit{Requests: 1, Window: time.Hour}},
		},
	}
	for _, c := range []struct {
		p    *Person
		want string
	}{
		{nil, AnonymousName},
		{&Person{Subject: "a", Email: "a@example.com", EmailVerified: true, Groups: []string{"devs"}}, "team"},
		{&Person{Subject: "b", Email: "b@EXAMPLE.com", EmailVerified: true, Groups: []string{"devs"}}, "team"},
		{&Person{Subject: "c", Email: "c@example.com", EmailVerified: false, Groups: []string{"devs"}}, AnonymousName}, // domain needs a verified email
		{&Person{Subject: "d", Email: "d@other.org", EmailVerified: true, Groups: []string{"devs"}}, "verified"},
		{&Person{Subject: "e", Email: "e@example.com", EmailVerified: true}, "verified"}, // no group
		{&Person{Subject: "f"}, AnonymousName},
	} {
		if got := tiers.Of(c.p).Name; got != c.want {
			t.Errorf("%+v: tier %s, want %s", c.p, got, c.want)
		}
	}
	if err := tiers.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []Tiers{
		{Anonymous: Tier{Name: AnonymousName}, SignedIn: []Tier{{Name: "anonymous"}}},
		{Anonymous: Tier{Name: AnonymousName}, SignedIn: []Tier{{Name: "Team"}}},
		{Anonymous: Tier{Name: AnonymousName}, SignedIn: []Tier{{Name: "t", BudgetSharePercent: 101}}},
		{Anonymous: Tier{Name: AnonymousName}, SignedIn: []Tier{{Name: "t", Limit: guard.Limit{Requests: 1}}}},
		{Anonymous: Tier{Name: AnonymousName}, AnonymousOff: true},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v validated", bad)
		}
	}
	// The key is the person, not their name or email, and names no one.
	a, b := &Person{Issuer: "https://i", Subject: "1", Email: "x@y"}, &Person{Issuer: "https://i", Subject: "1"}
	if a.Key() != b.Key() || a.Key() == (&Person{Issuer: "https://j", Subject: "1"}).Key() || strings.Contains(a.Key(), "x@y") {
		t.Errorf("keys %s %s", a.Key(), b.Key())
	}
}

func TestSealedCookies(t *testing.T) {
	s, err := newSealer([]byte("sixteen bytes or more"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.seal(cookieSession, session{Subject: "u1", Expires: time.Unix(2e9, 0)})
	if err != nil {
		t.Fatal(err)
	}
	var got session
	if !s.open(cookieSession, v, &got) || got.Subject != "u1" {
		t.Fatalf("open: %+v", got)
	}
	if s.open(cookieLogin, v, &got) {
		t.Fatal("a session cookie opened as the login cookie")
	}
	tampered := []byte(v)
	tampered[len(tampered)/2] ^= 1
	if s.open(cookieSession, string(tampered), &got) {
		t.Fatal("a tampered cookie opened")
	}
	other, _ := newSealer([]byte("another key of sixteen bytes"))
	if other.open(cookieSession, v, &got) {
		t.Fatal("another key opened the cookie")
	}
	if _, err := newSealer([]byte("short")); err == nil {
		t.Fatal("a short key accepted")
	}
}

func TestLocalPathAndOrigin(t *testing.T) {
	for in, want := range map[string]string{
		"/": "/", "/?asset=btc": "/?asset=btc", "": "/", "//evil.example": "/", "https://evil.example": "/", "/\\evil": "/", "relative": "/",
	} {
		if got := localPath(in); got != want {
			t.Errorf("localPath(%q) = %q", in, got)
		}
	}
	r := httptest.NewRequest("POST", "http://faucet.example/extended/v3/faucets/stx", nil)
	if !sameOrigin(r) {
		t.Error("a request without Origin (curl, a navigation) refused")
	}
	r.Header.Set("Origin", "http://faucet.example")
	if !sameOrigin(r) {
		t.Error("the page's own origin refused")
	}
	r.Header.Set("Origin", "https://evil.example")
	if sameOrigin(r) {
		t.Error("a foreign origin accepted")
	}
	r.Header.Del("Origin")
	r.Header.Set("Sec-Fetch-Site", "cross-site")
	if sameOrigin(r) {
		t.Error("a cross-site fetch accepted")
	}
}

func TestNewRefusesBadSettings(t *testing.T) {
	key := []byte("a session key of sixteen bytes")
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{ClientID: "x", SessionKey: key}, "oidc issuer: required"},
		{Config{Issuer: "accounts.example.com", ClientID: "x", SessionKey: key}, "want an http(s) URL"},
		{Config{Issuer: "https://a.example?x=1", ClientID: "x", SessionKey: key}, "no query"},
		{Config{Issuer: "https://a.example", SessionKey: key}, "client ID: required"},
		{Config{Issuer: "https://a.example", ClientID: "x", Scopes: []string{"email"}, SessionKey: key}, "must include openid"},
		{Config{Issuer: "https://a.example", ClientID: "x", PublicURL: "faucet.example.com", SessionKey: key}, "public URL"},
		{Config{Issuer: "https://a.example", ClientID: "x", PublicURL: "https://f.example/page", SessionKey: key}, "public URL"},
		{Config{Issuer: "https://a.example", ClientID: "x"}, "session key"},
	} {
		if _, err := New(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
}
