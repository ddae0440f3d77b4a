package guard

import (
	"context"
	"net/http"
	"net/netip"
	"testing"
)

func TestDenyList(t *testing.T) {
	c := newChain(t, Config{Deny: mustPrefixes(t, "203.0.113.0/24", "2001:db8:bad::/48", "::ffff:198.51.100.0/120")})
	cases := []struct {
		ip     string
		denied bool
	}{
		{"203.0.113.7", true},
		{"203.0.114.1", false},
		{"2001:db8:bad:1::5", true},
		{"2001:db8:beef::1", false},
		{"::ffff:203.0.113.9", true}, // mapped IPv4 counts as IPv4
		{"198.51.100.200", true},     // a mapped prefix matches plain IPv4
		{"198.51.101.1", false},
	}
	for _, tc := range cases {
		_, err := c.Check(context.Background(), Request{ClientIP: netip.MustParseAddr(tc.ip), Recipient: testPrincipal(1)})
		if tc.denied {
			wantRejection(t, err, CheckDenyList, http.StatusForbidden, "ip_denied")
		} else if err != nil {
			t.Errorf("%s: %v", tc.ip, err)
		}
	}
	// An unknown client address is not denied.
	if _, err := c.Check(context.Background(), Request{Recipient: testPrincipal(1)}); err != nil {
		t.Errorf("zero IP: %v", err)
	}
}

func TestDenyListRefusesTokens(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "tokens", "ci "+plainToken+" 100/1h\n")
	c := newChain(t, Config{TokensFile: path, Deny: mustPrefixes(t, "192.0.2.0/24")})
	r := Request{ClientIP: netip.MustParseAddr("192.0.2.10"), Recipient: testPrincipal(1), Authorization: "Bearer " + plainToken}
	_, err := c.Check(context.Background(), r)
	wantRejection(t, err, CheckDenyList, http.StatusForbidden, "ip_denied")
	r.ClientIP = netip.MustParseAddr("192.0.3.10")
	if g, err := c.Check(context.Background(), r); err != nil || g.Token == nil {
		t.Fatalf("same token elsewhere: grant %+v, err %v", g, err)
	}
}

func TestAllowListBypassesPoW(t *testing.T) {
	c := newChain(t, Config{
		Allow: mustPrefixes(t, "10.0.0.0/8", "fd00::/8"),
		PoW:   PoWConfig{Difficulty: 20, Secret: testSecret},
	})
	for _, ip := range []string{"10.1.2.3", "::ffff:10.9.9.9", "fd00::1"} {
		g, err := c.Check(context.Background(), Request{ClientIP: netip.MustParseAddr(ip), Recipient: testPrincipal(1)})
		if err != nil {
			t.Fatalf("%s: %v", ip, err)
		}
		if !g.SkipIPLimit || g.Bypassed != "ip_allow" || g.Token != nil {
			t.Fatalf("%s: grant %+v", ip, g)
		}
	}
	_, err := c.Check(context.Background(), Request{ClientIP: netip.MustParseAddr("11.0.0.1"), Recipient: testPrincipal(1)})
	wantRejection(t, err, CheckProofOfWork, http.StatusPreconditionRequired, "challenge_required")
}

func TestPrefixValidation(t *testing.T) {
	if _, err := New(Config{Deny: []netip.Prefix{{}}}); err == nil {
		t.Error("an invalid deny prefix was accepted")
	}
	if _, err := New(Config{Allow: mustPrefixes(t, "::ffff:0:0/90")}); err == nil {
		t.Error("a mapped prefix shorter than /96 was accepted")
	}
	// Unmasked prefixes are masked.
	c := newChain(t, Config{Deny: mustPrefixes(t, "192.0.2.77/24")})
	_, err := c.Check(context.Background(), Request{ClientIP: netip.MustParseAddr("192.0.2.1")})
	wantRejection(t, err, CheckDenyList, http.StatusForbidden, "ip_denied")
}
