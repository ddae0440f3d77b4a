package guard

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

var testSecret = []byte("0123456789abcdef-test-secret")

// fakeAccounts is a test double of the node's account read.
type fakeAccounts struct {
	mu       sync.Mutex
	balances map[string]node.Account
	err      error
	reads    int
}

func (f *fakeAccounts) Account(_ context.Context, principal string) (*node.Account, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if f.err != nil {
		return nil, f.err
	}
	a := f.balances[principal]
	return &a, nil
}

func (f *fakeAccounts) Reads() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads
}

// recordingSpent wraps a SpentChallenges and records the calls.
type recordingSpent struct {
	inner SpentChallenges
	mu    sync.Mutex
	calls []string
}

func (r *recordingSpent) SpendChallenge(ctx context.Context, id string, exp time.Time) (bool, error) {
	r.mu.Lock()
	r.calls = append(r.calls, id)
	r.mu.Unlock()
	return r.inner.SpendChallenge(ctx, id, exp)
}

func (r *recordingSpent) Calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

// failingSpent is a store that is down.
type failingSpent struct{}

var errStoreDown = errors.New("store down")

func (failingSpent) SpendChallenge(context.Context, string, time.Time) (bool, error) {
	return false, errStoreDown
}

func testPrincipal(b byte) stacks.Principal {
	return stacks.Principal{Address: stacks.Address{Version: stacks.AddressVersionTestnetSingleSig, Hash160: [20]byte{b, 1, 2, 3}}}
}

func mustPrefixes(t testing.TB, ss ...string) []netip.Prefix {
	t.Helper()
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

func newChain(t testing.TB, cfg Config) *Chain {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

func writeFile(t testing.TB, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// rejection asserts err is a *Rejection with the given check, status and
// reason, and returns it.
// wantRejection checks that err is that refusal.
func wantRejection(t testing.TB, err error, check string, status int, reason string) {
	t.Helper()
	_ = rejection(t, err, check, status, reason)
}

// rejection checks that err is that refusal and returns it.
func rejection(t testing.TB, err error, check string, status int, reason string) *Rejection {
	t.Helper()
	var r *Rejection
	if !errors.As(err, &r) {
		t.Fatalf("want a *Rejection (%s/%s), got %v", check, reason, err)
	}
	if r.Check != check || r.Status != status || r.Reason != reason {
		t.Fatalf("rejection = %s %d %s, want %s %d %s", r.Check, r.Status, r.Reason, check, status, reason)
	}
	if r.Message == "" {
		t.Fatal("rejection without a message")
	}
	return r
}

// solved returns a challenge from c solved at its difficulty.
func solved(t testing.TB, c *Chain) (token, solution string) {
	t.Helper()
	ch := c.Challenge()
	sol, err := Solve(context.Background(), ch.Token, ch.Difficulty)
	if err != nil {
		t.Fatal(err)
	}
	return ch.Token, sol
}
