package guard

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
)

// rejectCounter records OnReject calls.
type rejectCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (r *rejectCounter) add(check string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == nil {
		r.n = map[string]int{}
	}
	r.n[check]++
}

func (r *rejectCounter) get(check string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[check]
}

func (r *rejectCounter) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, v := range r.n {
		n += v
	}
	return n
}

// fullChain has every check on: the rich recipient is testPrincipal(9).
func fullChain(t *testing.T, spent SpentChallenges, rc *rejectCounter, logs *syncBuffer) (*Chain, *fakeAccounts) {
	t.Helper()
	path := writeFile(t, t.TempDir(), "tokens", "ci "+plainToken+" 100/1h\n")
	accts := &fakeAccounts{balances: map[string]node.Account{testPrincipal(9).String(): {Balance: 1000 * stx}}}
	cfg := Config{
		Deny:       mustPrefixes(t, "192.0.2.0/24"),
		Allow:      mustPrefixes(t, "10.0.0.0/8"),
		TokensFile: path,
		PoW:        PoWConfig{Difficulty: 8, Secret: testSecret},
		BalanceCap: 500 * stx,
		BalanceTTL: time.Nanosecond, // read every time
		Accounts:   accts,
		Spent:      spent,
		OnReject:   rc.add,
	}
	if logs != nil {
		cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return newChain(t, cfg), accts
}

func TestChainOrder(t *testing.T) {
	rc := &rejectCounter{}
	c, accts := fullChain(t, nil, rc, nil)
	ctx := context.Background()
	denied := netip.MustParseAddr("192.0.2.1")

	// Deny comes before the token check: an invalid token from a denied IP
	// is refused as denied, and nothing else is consulted.
	_, err := c.Check(ctx, Request{ClientIP: denied, Recipient: testPrincipal(9), Authorization: "Bearer wrong"})
	wantRejection(t, err, CheckDenyList, http.StatusForbidden, "ip_denied")
	if accts.Reads() != 0 {
		t.Fatal("a denied request read a balance")
	}
	// The token check comes before the proof of work and the balance.
	_, err = c.Check(ctx, Request{Recipient: testPrincipal(9), Authorization: "Bearer wrong"})
	wantRejection(t, err, CheckAPIToken, http.StatusUnauthorized, "token_invalid")
	// The proof of work comes before the balance.
	_, err = c.Check(ctx, Request{Recipient: testPrincipal(9)})
	wantRejection(t, err, CheckProofOfWork, http.StatusPreconditionRequired, "challenge_required")
	if accts.Reads() != 0 {
		t.Fatal("balance read before the earlier checks passed")
	}
	// A token skips the proof of work but not the balance cap.
	_, err = c.Check(ctx, Request{Recipient: testPrincipal(9), Authorization: "Bearer " + plainToken})
	wantRejection(t, err, CheckBalanceCap, http.StatusForbidden, "balance_cap")
	g, err := c.Check(ctx, Request{Recipient: testPrincipal(1), Authorization: "Bearer " + plainToken})
	if err != nil || g.Token == nil || g.Bypassed != "api_token" || !g.SkipIPLimit {
		t.Fatalf("token grant %+v, %v", g, err)
	}
	// A token from an allow-listed address is still a token grant.
	g, err = c.Check(ctx, Request{ClientIP: netip.MustParseAddr("10.0.0.1"), Recipient: testPrincipal(1), Authorization: "Bearer " + plainToken})
	if err != nil || g.Bypassed != "api_token" || g.Token == nil {
		t.Fatalf("token from allow-listed IP: %+v, %v", g, err)
	}
	// The allow list skips the proof of work but not the balance cap.
	allowed := netip.MustParseAddr("10.1.1.1")
	_, err = c.Check(ctx, Request{ClientIP: allowed, Recipient: testPrincipal(9)})
	wantRejection(t, err, CheckBalanceCap, http.StatusForbidden, "balance_cap")
	g, err = c.Check(ctx, Request{ClientIP: allowed, Recipient: testPrincipal(1)})
	if err != nil || g.Bypassed != "ip_allow" || !g.SkipIPLimit || g.Token != nil {
		t.Fatalf("allow grant %+v, %v", g, err)
	}

	want := map[string]int{CheckDenyList: 1, CheckAPIToken: 1, CheckProofOfWork: 1, CheckBalanceCap: 2}
	for check, n := range want {
		if got := rc.get(check); got != n {
			t.Errorf("OnReject(%s) called %d times, want %d", check, got, n)
		}
	}
	if rc.total() != 5 {
		t.Errorf("OnReject called %d times in all, want 5", rc.total())
	}
}

// The challenge is spent before the balance read: one solved challenge
// cannot be replayed to make the node read account after account.
func TestChainSpendsBeforeBalanceRead(t *testing.T) {
	rc := &rejectCounter{}
	spent := &recordingSpent{inner: NewMemorySpent(nil)}
	c, _ := fullChain(t, spent, rc, nil)
	ctx := context.Background()
	tok, sol := solved(t, c)

	// Refused by the balance cap: the challenge is spent all the same…
	_, err := c.Check(ctx, Request{Recipient: testPrincipal(9), Challenge: tok, Solution: sol})
	wantRejection(t, err, CheckBalanceCap, http.StatusForbidden, "balance_cap")
	if spent.Calls() != 1 {
		t.Fatalf("%d spends, want 1", spent.Calls())
	}
	// …so replaying it is refused before any balance read.
	_, err = c.Check(ctx, Request{Recipient: testPrincipal(2), Challenge: tok, Solution: sol})
	wantRejection(t, err, CheckProofOfWork, http.StatusForbidden, "challenge_replayed")
	if rc.get(CheckProofOfWork) != 1 || rc.get(CheckBalanceCap) != 1 {
		t.Fatalf("OnReject counts %v", rc.n)
	}
	// A fresh one serves a drip to an address below the cap.
	tok, sol = solved(t, c)
	if _, err := c.Check(ctx, Request{Recipient: testPrincipal(1), Challenge: tok, Solution: sol}); err != nil {
		t.Fatal(err)
	}
	if spent.Calls() != 3 {
		t.Fatalf("%d spends, want 3", spent.Calls())
	}
	// Token and allow-listed drips never spend.
	if _, err := c.Check(ctx, Request{Recipient: testPrincipal(1), Authorization: "Bearer " + plainToken, Challenge: tok, Solution: sol}); err != nil {
		t.Fatal(err)
	}
	if spent.Calls() != 3 {
		t.Fatalf("a token drip spent a challenge: %d spends", spent.Calls())
	}
}

func TestChainStoreError(t *testing.T) {
	rc := &rejectCounter{}
	c, _ := fullChain(t, failingSpent{}, rc, nil)
	tok, sol := solved(t, c)
	_, err := c.Check(context.Background(), Request{Recipient: testPrincipal(1), Challenge: tok, Solution: sol})
	var r *Rejection
	if err == nil || errors.As(err, &r) || !errors.Is(err, errStoreDown) {
		t.Fatalf("store failure: %v, want a wrapped non-rejection error", err)
	}
	if rc.total() != 0 {
		t.Fatal("an infrastructure error was counted as a rejection")
	}
	// The failed drip did not count towards the adaptive rate either; the
	// chain stays usable.
	if c.Difficulty() != 8 {
		t.Fatalf("difficulty %d", c.Difficulty())
	}
}

func TestChainNeverLogsSecrets(t *testing.T) {
	logs := &syncBuffer{}
	rc := &rejectCounter{}
	c, accts := fullChain(t, nil, rc, logs)
	accts.err = errors.New("node down")
	ctx := context.Background()
	auth := "Bearer " + plainToken
	_, _ = c.Check(ctx, Request{Recipient: testPrincipal(1), Authorization: auth})
	_, _ = c.Check(ctx, Request{Recipient: testPrincipal(1), Authorization: "Bearer " + plainToken + "-wrong"})
	tok, sol := solved(t, c)
	_, _ = c.Check(ctx, Request{Recipient: testPrincipal(1), Challenge: tok, Solution: sol})
	c.reloadTokens()
	out := logs.String()
	if out == "" {
		t.Fatal("expected some log output (the balance warning)")
	}
	for _, s := range []string{plainToken, string(testSecret)} {
		if strings.Contains(out, s) {
			t.Fatalf("logs contain a secret: %s", out)
		}
	}
}

func TestRejectionError(t *testing.T) {
	r := &Rejection{Check: CheckBalanceCap, Status: 403, Reason: "balance_cap", Message: "Too rich."}
	var err error = r
	if s := err.Error(); !strings.Contains(s, "balance_cap") || !strings.Contains(s, "403") || !strings.Contains(s, "Too rich.") {
		t.Fatalf("Error() = %q", s)
	}
	if len(CheckNames) != 5 || CheckNames[0] != "ip_deny" || CheckNames[1] != "token_lockout" || CheckNames[4] != "balance_cap" {
		t.Fatalf("CheckNames %v", CheckNames)
	}
}

func TestRunWithoutTokensFile(t *testing.T) {
	c := newChain(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return when ctx ended")
	}
	if _, err := New(Config{TokensReload: -time.Second}); err == nil {
		t.Fatal("a negative reload interval was accepted")
	}
}

func TestMemorySpent(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	s := NewMemorySpent(clock)
	ctx := context.Background()
	exp := clock.Now().Add(time.Minute)
	if fresh, err := s.SpendChallenge(ctx, "a", exp); !fresh || err != nil {
		t.Fatalf("first spend %v %v", fresh, err)
	}
	if fresh, _ := s.SpendChallenge(ctx, "a", exp); fresh {
		t.Fatal("second spend was fresh")
	}
	if fresh, _ := s.SpendChallenge(ctx, "b", exp); !fresh {
		t.Fatal("another id was not fresh")
	}
	// Expired ids are swept.
	clock.Step(2 * time.Minute)
	if fresh, _ := s.SpendChallenge(ctx, "c", clock.Now().Add(time.Minute)); !fresh {
		t.Fatal("c not fresh")
	}
	if n := s.size(); n != 1 {
		t.Fatalf("%d ids kept after expiry, want 1", n)
	}
	if NewMemorySpent(nil) == nil {
		t.Fatal("NewMemorySpent returned nil")
	}
}
