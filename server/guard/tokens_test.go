package guard

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/stxfaucet/faucet-operator/hack/eventually"
	"github.com/stxfaucet/faucet-operator/server/internal/logtest"
)

const (
	plainToken  = "plain-TOKEN-0123456789abcdef"
	hashedToken = "hashed-TOKEN-ZYXWVUTSRQPONMLK"
)

func sha256Hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func tokensFileContent() string {
	return "# test tokens\n\n" +
		"ci-pipeline " + plainToken + " 100/1h 5/10m # trailing comment\n" +
		"   workshop\tsha256:" + strings.ToUpper(sha256Hex(hashedToken)) + "  1000/24h\r\n"
}

func TestTokens(t *testing.T) {
	path := writeFile(t, t.TempDir(), "tokens", tokensFileContent())
	c := newChain(t, Config{TokensFile: path, PoW: PoWConfig{Difficulty: 20, Secret: testSecret}})
	if n := c.TokenCount(); n != 2 {
		t.Fatalf("TokenCount = %d, want 2", n)
	}
	ctx := context.Background()

	g, err := c.Check(ctx, Request{Recipient: testPrincipal(1), Authorization: "Bearer " + plainToken})
	if err != nil {
		t.Fatalf("plaintext entry: %v", err)
	}
	want := TokenQuota{Name: "ci-pipeline", Quota: Limit{Requests: 100, Window: time.Hour}, PerAddress: Limit{Requests: 5, Window: 10 * time.Minute}}
	if g.Token == nil || *g.Token != want || !g.SkipIPLimit || g.Bypassed != "api_token" {
		t.Fatalf("grant = %+v (token %+v), want token %+v", g, g.Token, want)
	}
	// The grant's quota is a copy: changing it does not change the set.
	g.Token.Name = "changed"

	for _, auth := range []string{"bearer " + hashedToken, "BEARER  " + hashedToken + " ", " Bearer " + hashedToken} {
		g, err = c.Check(ctx, Request{Recipient: testPrincipal(1), Authorization: auth})
		if err != nil {
			t.Fatalf("hashed entry via %q: %v", auth, err)
		}
		want := TokenQuota{Name: "workshop", Quota: Limit{Requests: 1000, Window: 24 * time.Hour}, PerAddress: Limit{Requests: 1000, Window: 24 * time.Hour}}
		if g.Token == nil || *g.Token != want {
			t.Fatalf("hashed entry grant token = %+v, want %+v", g.Token, want)
		}
	}
	g, _ = c.Check(ctx, Request{Recipient: testPrincipal(1), Authorization: "Bearer " + plainToken})
	if g.Token == nil || g.Token.Name != "ci-pipeline" {
		t.Fatalf("quota changed through a grant: %+v", g.Token)
	}
}

func TestTokenInvalid(t *testing.T) {
	path := writeFile(t, t.TempDir(), "tokens", tokensFileContent())
	var rejected []string
	// PoW off: an invalid token must not fall through to anonymous access.
	c := newChain(t, Config{TokensFile: path, OnReject: func(check string) { rejected = append(rejected, check) }})
	bad := []string{
		"Bearer not-a-known-token-at-all",
		"Bearer " + sha256Hex(plainToken), // the hash is not the token
		"Bearer sha256:" + sha256Hex(plainToken),
		"Bearer " + plainToken + "x",
		"Bearer",
		"Bearer ",
		"bearer " + plainToken + "x",
		"Bearer " + plainToken + " extra",
		"Bearer " + strings.Repeat("a", 5000),
	}
	for _, auth := range bad {
		_, err := c.Check(context.Background(), Request{Recipient: testPrincipal(1), Authorization: auth})
		r := rejection(t, err, CheckAPIToken, http.StatusUnauthorized, "token_invalid")
		if strings.Contains(r.Error(), plainToken) {
			t.Fatalf("rejection leaks the token: %v", r)
		}
	}
	if len(rejected) != len(bad) {
		t.Fatalf("OnReject called %d times, want %d", len(rejected), len(bad))
	}
	// Other schemes are not ours (an ingress's basic auth forwards its
	// header): the request is anonymous.
	for _, auth := range []string{"Basic " + plainToken, plainToken} {
		g, err := c.Check(context.Background(), Request{Recipient: testPrincipal(1), Authorization: auth})
		if err != nil || g.Bypassed != "" || g.Token != nil {
			t.Fatalf("%q: grant %+v, %v; want anonymous", auth[:5], g, err)
		}
	}
	// Without tokens configured a Bearer header is not ours either.
	c = newChain(t, Config{})
	g, err := c.Check(context.Background(), Request{Recipient: testPrincipal(1), Authorization: "Bearer " + plainToken})
	if err != nil || g.Token != nil {
		t.Fatalf("no tokens configured: grant %+v, %v; want anonymous", g, err)
	}
}

func TestTokensFileErrors(t *testing.T) {
	const secret = "SECRETSECRETSECRET-do-not-print"
	cases := []struct {
		name, content string
		line          int
	}{
		{"too few fields", "ok " + secret + "\n", 1},
		{"too many fields", "a " + secret + " 1/1h 1/1h 1/1h\n", 1},
		{"short token", "# c\nname short-secret 1/1h\n", 2},
		{"swapped name and token", secret + "-" + strings.Repeat("x", 60) + " name 1/1h\n", 1},
		{"bad name chars", "na/me " + secret + " 1/1h\n", 1},
		{"bad hash length", "name sha256:abcd 1/1h\n", 1},
		{"bad hash digit", "name sha256:" + strings.Repeat("z", 64) + " 1/1h\n", 1},
		{"bad quota", "name " + secret + " 100\n", 1},
		{"bad quota count", "name " + secret + " x/1h\n", 1},
		{"zero quota", "name " + secret + " 0/1h\n", 1},
		{"bad quota duration", "name " + secret + " 1/forever\n", 1},
		{"bad per-address", "name " + secret + " 1/1h 2/-1h\n", 1},
		{"non-printable token", "name " + secret + "\x01abc 1/1h\n", 1},
		{"unknown key", "name " + secret + " 1/1h SECRET=x\n", 1},
		{"from twice", "name " + secret + " 1/1h from=2026-12-05T09:00:00Z from=2026-12-05T10:00:00Z\n", 1},
		{"a time not in RFC 3339", "name " + secret + " 1/1h until=2026-12-05\n", 1},
		{"until before from", "name " + secret + " 1/1h from=2026-12-05T09:00:00Z until=2026-12-05T08:00:00Z\n", 1},
		{"a window and too many fields", "name " + secret + " 1/1h 1/1h 1/1h until=2026-12-05T08:00:00Z\n", 1},
		{"duplicate name", "a " + secret + " 1/1h\n\n\na " + secret + "2 1/1h\n", 4},
		{"duplicate token", "a " + secret + " 1/1h\nb sha256:" + sha256Hex(secret) + " 1/1h\n", 2},
		// A token shaped like a name, in the name column, duplicated.
		{"duplicate name that is a token", secret + " tokentokentokentoken1 1/1h\n" + secret + " tokentokentokentoken2 1/1h\n", 2},
	}
	dir := t.TempDir()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, dir, "tokens-"+strings.ReplaceAll(tc.name, " ", "-"), tc.content)
			_, err := New(Config{TokensFile: path})
			if err == nil {
				t.Fatal("New accepted a bad tokens file")
			}
			msg := err.Error()
			if !strings.Contains(msg, path) || !strings.Contains(msg, "line "+itoa(tc.line)+":") {
				t.Errorf("error %q does not name %s line %d", msg, path, tc.line)
			}
			if strings.Contains(msg, "SECRET") || strings.Contains(msg, "tokentoken") {
				t.Errorf("error leaks the token: %q", msg)
			}
		})
	}
	if _, err := New(Config{TokensFile: dir + "/missing"}); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing file: %v", err)
	}
	// Only comments: a valid, empty set.
	path := writeFile(t, dir, "empty", "# nothing yet\n\n")
	if c := newChain(t, Config{TokensFile: path}); c.TokenCount() != 0 {
		t.Errorf("TokenCount = %d", c.TokenCount())
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// replaceFile swaps the file in atomically, as the kubelet does for a
// Secret volume, so the reloader never sees it half written.
func replaceFile(t *testing.T, dir, name, content string) {
	t.Helper()
	tmp := writeFile(t, dir, "."+name+".tmp", content)
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

func TestTokensReload(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "tokens", "one "+plainToken+" 10/1h\n")
	logs := &syncBuffer{}
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	c := newChain(t, Config{
		TokensFile:   path,
		TokensReload: time.Minute,
		Logger:       slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Clock:        clk,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	// Run's ticker is the clock's only waiter: a step before it exists
	// would tick nothing.
	eventually.True(t, 5*time.Second, "Run's ticker", clk.HasWaiters)

	valid := func(tok string) bool {
		_, err := c.Check(context.Background(), Request{Recipient: testPrincipal(1), Authorization: "Bearer " + tok})
		return err == nil
	}
	// waitFor lets one reload interval pass, then waits for its reload.
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		clk.Step(time.Minute)
		eventually.True(t, 5*time.Second, what, cond)
	}

	// A changed file is picked up.
	replaceFile(t, dir, "tokens", "one "+plainToken+" 10/1h\ntwo sha256:"+sha256Hex(hashedToken)+" 10/1h\n")
	waitFor("the second token", func() bool { return c.TokenCount() == 2 && valid(hashedToken) })

	// A broken file revokes every token (fail closed), and the log names
	// the line only.
	replaceFile(t, dir, "tokens", "one "+plainToken+" 10/1h\nthree "+hashedToken+"-new broken\n")
	waitFor("the reload error", func() bool { return strings.Contains(logs.String(), "line 2") })
	if c.TokenCount() != 0 || valid(plainToken) || valid(hashedToken) {
		t.Fatalf("a broken reload left %d tokens in force", c.TokenCount())
	}
	// Reported once, not at every reload (each tick runs reloadTokens).
	c.reloadTokens()
	c.reloadTokens()
	if n := strings.Count(logs.String(), "reload failed"); n != 1 {
		t.Errorf("reload error logged %d times, want 1", n)
	}

	// A fixed file brings them back; a deleted one revokes them again.
	replaceFile(t, dir, "tokens", "one "+plainToken+" 10/1h\ntwo sha256:"+sha256Hex(hashedToken)+" 10/1h\n")
	waitFor("the fixed file", func() bool { return c.TokenCount() == 2 && valid(plainToken) })
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	waitFor("the missing-file error", func() bool { return strings.Count(logs.String(), "reload failed") == 2 })
	if c.TokenCount() != 0 {
		t.Fatal("a missing file left tokens in force")
	}

	// Removing a token revokes it.
	replaceFile(t, dir, "tokens", "two sha256:"+sha256Hex(hashedToken)+" 10/1h\n")
	waitFor("the revocation", func() bool { return c.TokenCount() == 1 && !valid(plainToken) })
	if !valid(hashedToken) {
		t.Fatal("the remaining token stopped working")
	}

	out := logs.String()
	for _, secret := range []string{plainToken, hashedToken} {
		if strings.Contains(out, secret) {
			t.Fatalf("logs contain a token: %s", out)
		}
	}
}

// The lookup compares against every entry whichever matches, and picks
// the right one.
func TestTokenLookupConstantTimePath(t *testing.T) {
	const n = 7
	set := &tokenSet{}
	for i := range n {
		tok := "token-number-" + itoa(i) + "-padding-padding"
		set.entries = append(set.entries, tokenEntry{hash: sha256.Sum256([]byte(tok)), quota: TokenQuota{Name: itoa(i)}})
	}
	for i := range n {
		idx, found, compared := set.lookup("token-number-" + itoa(i) + "-padding-padding")
		if !found || idx != i || compared != n {
			t.Errorf("entry %d: index %d found %v compared %d, want %d true %d", i, idx, found, compared, i, n)
		}
	}
	if _, found, compared := set.lookup("unknown-token-value-here"); found || compared != n {
		t.Errorf("unknown: found %v compared %d, want false %d", found, compared, n)
	}
	if _, found, _ := (&tokenSet{}).lookup("x"); found {
		t.Error("empty set found a token")
	}
}

func TestParseQuota(t *testing.T) {
	good := map[string]Limit{
		"100/1h":  {Requests: 100, Window: time.Hour},
		"1/30s":   {Requests: 1, Window: 30 * time.Second},
		"5/1h30m": {Requests: 5, Window: 90 * time.Minute},
	}
	for s, want := range good {
		if got, err := parseQuota(s); err != nil || got != want {
			t.Errorf("parseQuota(%q) = %+v, %v", s, got, err)
		}
	}
	for _, s := range []string{"", "100", "/1h", "1/", "-1/1h", "1/0s", "1/1", "1.5/1h", "2000000000/1h"} {
		if _, err := parseQuota(s); err == nil {
			t.Errorf("parseQuota(%q) accepted", s)
		}
	}
}

// syncBuffer is a log sink safe for concurrent writers.
type syncBuffer = logtest.Buffer

// A token with from= and until= is accepted only between them: before, a
// 403 token_not_active that says when it opens, after, one that says when
// it closed. Those refusals are of a right token, so they never count
// towards a lock-out.
func TestTokenWindow(t *testing.T) {
	const event, always = "event-code-7f3a9c21d4", "always-on-token-0b6e2"
	opens := time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)
	content := "workshop " + event + " 50/1h 5/1h from=2026-12-05T09:00:00Z until=2026-12-05T18:00:00+01:00 # the Lisbon workshop\n" +
		"ci " + always + " 10/1h\n"
	clk := clocktesting.NewFakeClock(opens.Add(-time.Hour))
	c := newChain(t, Config{TokensFile: writeFile(t, t.TempDir(), "tokens", content), Clock: clk})
	ctx := context.Background()
	req := func(tok string) Request {
		return Request{ClientIP: netip.MustParseAddr("198.51.100.9"), Recipient: testPrincipal(1), Authorization: "Bearer " + tok}
	}
	refused := func(when, want string) {
		t.Helper()
		_, err := c.Check(ctx, req(event))
		var rej *Rejection
		if !errors.As(err, &rej) || rej.Status != 403 || rej.Reason != ReasonTokenNotActive || rej.Message != want {
			t.Fatalf("%s: %v, want 403 %s %q", when, err, ReasonTokenNotActive, want)
		}
	}
	for range 8 { // more than the lock-out's 5 wrong tokens
		refused("an hour early", "The API token workshop is accepted from 5 Dec 2026 09:00 UTC.")
	}
	if _, err := c.Check(ctx, req(always)); err != nil {
		t.Fatalf("a token without a window: %v", err)
	}
	clk.SetTime(opens)
	g, err := c.Check(ctx, req(event))
	if err != nil || g.Token == nil || g.Token.Name != "workshop" || !g.Token.From.Equal(opens) || !g.Token.Until.Equal(opens.Add(8*time.Hour)) {
		t.Fatalf("at the opening: %+v, %v", g.Token, err)
	}
	clk.SetTime(opens.Add(8*time.Hour - time.Second))
	if _, err := c.Check(ctx, req(event)); err != nil {
		t.Fatalf("a second before the close: %v", err)
	}
	clk.SetTime(opens.Add(8 * time.Hour))
	refused("at the close", "The API token workshop expired at 5 Dec 2026 17:00 UTC.")
}
