package guard

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// lockoutChain has tokens on and the clock in the test's hands.
func lockoutChain(t *testing.T, failures Limiter, clock *clocktesting.FakeClock, rc *rejectCounter) *Chain {
	t.Helper()
	path := writeFile(t, t.TempDir(), "tokens", "ci "+plainToken+" 100/1h\n")
	cfg := Config{TokensFile: path, Failures: failures, Clock: clock}
	if rc != nil {
		cfg.OnReject = rc.add
	}
	return newChain(t, cfg)
}

// tokenReq is a drip request from ip with the given token ("" for none).
func tokenReq(ip, token string) Request {
	r := Request{ClientIP: netip.MustParseAddr(ip), Recipient: testPrincipal(1)}
	if token != "" {
		r.Authorization = "Bearer " + token
	}
	return r
}

const wrongToken = "wrong-TOKEN-0123456789abcdef"

func TestTokenLockout(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	rc := &rejectCounter{}
	c := lockoutChain(t, nil, clock, rc)
	ctx := context.Background()
	const guesser = "203.0.113.7"

	// 20 wrong tokens: the first 5 are judged, the rest refused with a
	// wait that grows to the cap and stays there.
	var waits []time.Duration
	for i := range 20 {
		_, err := c.Check(ctx, tokenReq(guesser, wrongToken))
		if i < 5 {
			wantRejection(t, err, CheckAPIToken, http.StatusUnauthorized, "token_invalid")
			continue
		}
		r := rejection(t, err, CheckTokenLockout, http.StatusTooManyRequests, "token_lockout")
		waits = append(waits, r.RetryAfter)
	}
	want := []time.Duration{20 * time.Minute, 40 * time.Minute, time.Hour}
	for i, w := range want {
		if waits[i] != w {
			t.Fatalf("Retry-After of refusal %d = %v, want %v (all: %v)", i+1, waits[i], w, waits)
		}
	}
	for i, w := range waits[len(want):] {
		if w != time.Hour {
			t.Fatalf("Retry-After of refusal %d = %v, want the 1h cap", len(want)+i+1, w)
		}
	}
	if got := rc.get(CheckAPIToken); got != 5 {
		t.Errorf("api_token rejections = %d, want 5", got)
	}
	if got := rc.get(CheckTokenLockout); got != 15 {
		t.Errorf("token_lockout rejections = %d, want 15", got)
	}

	// The right token is refused as well, and so is a drip without one,
	// for any recipient or asset.
	_, err := c.Check(ctx, tokenReq(guesser, plainToken))
	wantRejection(t, err, CheckTokenLockout, http.StatusTooManyRequests, "token_lockout")
	anon := tokenReq(guesser, "")
	anon.Recipient, anon.Asset = testPrincipal(2), "sbtc"
	_, err = c.Check(ctx, anon)
	if r := rejection(t, err, CheckTokenLockout, http.StatusTooManyRequests, "token_lockout"); r.RetryAfter != time.Hour {
		t.Errorf("anonymous Retry-After = %v, want 1h", r.RetryAfter)
	}

	// Another address is unaffected.
	_, err = c.Check(ctx, tokenReq("203.0.113.8", wrongToken))
	wantRejection(t, err, CheckAPIToken, http.StatusUnauthorized, "token_invalid")
	if g, err := c.Check(ctx, tokenReq("203.0.113.8", plainToken)); err != nil || g.Token == nil {
		t.Fatalf("right token from another address: %+v, %v", g, err)
	}

	// The lock-out lifts after its time, and the failures are forgotten:
	// five more are judged.
	clock.Step(time.Hour)
	if g, err := c.Check(ctx, tokenReq(guesser, plainToken)); err != nil || g.Token == nil {
		t.Fatalf("right token after the lock-out: %+v, %v", g, err)
	}
	if _, err := c.Check(ctx, anon); err != nil {
		t.Fatalf("anonymous drip after the lock-out: %v", err)
	}
	for range 5 {
		_, err := c.Check(ctx, tokenReq(guesser, wrongToken))
		wantRejection(t, err, CheckAPIToken, http.StatusUnauthorized, "token_invalid")
	}
	_, err = c.Check(ctx, tokenReq(guesser, wrongToken))
	wantRejection(t, err, CheckTokenLockout, http.StatusTooManyRequests, "token_lockout")
}

// A right token before the lock-out passes and is no failure; the fifth
// failure locks the address out even for the right token.
func TestTokenLockoutRightTokenBefore(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	c := lockoutChain(t, nil, clock, nil)
	ctx := context.Background()
	const client = "2001:db8:1:2::10"
	for range 4 {
		_, err := c.Check(ctx, tokenReq(client, wrongToken))
		wantRejection(t, err, CheckAPIToken, http.StatusUnauthorized, "token_invalid")
		if g, err := c.Check(ctx, tokenReq(client, plainToken)); err != nil || g.Token == nil {
			t.Fatalf("right token after a failure: %+v, %v", g, err)
		}
	}
	// The fifth failure comes from another address of the same /64.
	_, err := c.Check(ctx, tokenReq("2001:db8:1:2::99", wrongToken))
	wantRejection(t, err, CheckAPIToken, http.StatusUnauthorized, "token_invalid")
	_, err = c.Check(ctx, tokenReq(client, plainToken))
	if r := rejection(t, err, CheckTokenLockout, http.StatusTooManyRequests, "token_lockout"); r.RetryAfter <= 0 || r.RetryAfter > time.Hour {
		t.Fatalf("Retry-After %v", r.RetryAfter)
	}
	// Another /64 is another client.
	if g, err := c.Check(ctx, tokenReq("2001:db8:1:3::10", plainToken)); err != nil || g.Token == nil {
		t.Fatalf("right token from another /64: %+v, %v", g, err)
	}
	// Spread-out failures never lock out: one every 16 minutes stays under
	// every tier.
	c = lockoutChain(t, nil, clock, nil)
	for i := range 12 {
		clock.Step(16 * time.Minute)
		_, err := c.Check(ctx, tokenReq("198.51.100.1", wrongToken))
		wantRejection(t, err, CheckAPIToken, http.StatusUnauthorized, "token_invalid")
		if g, err := c.Check(ctx, tokenReq("198.51.100.1", plainToken)); err != nil || g.Token == nil {
			t.Fatalf("round %d: right token: %+v, %v", i, g, err)
		}
	}
}

// Replicas sharing the failure store share the count: failures spread over
// two chains lock the address out on both.
func TestTokenLockoutSharedByReplicas(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	shared := NewMemoryLimiter()
	a, b := lockoutChain(t, shared, clock, nil), lockoutChain(t, shared, clock, nil)
	ctx := context.Background()
	const guesser = "203.0.113.7"
	for i := range 5 {
		c := a
		if i%2 == 1 {
			c = b
		}
		_, err := c.Check(ctx, tokenReq(guesser, wrongToken))
		wantRejection(t, err, CheckAPIToken, http.StatusUnauthorized, "token_invalid")
	}
	for _, c := range []*Chain{a, b} {
		_, err := c.Check(ctx, tokenReq(guesser, wrongToken))
		wantRejection(t, err, CheckTokenLockout, http.StatusTooManyRequests, "token_lockout")
		_, err = c.Check(ctx, tokenReq(guesser, plainToken))
		wantRejection(t, err, CheckTokenLockout, http.StatusTooManyRequests, "token_lockout")
	}
}

// Many concurrent drips with the right token from one address never lock
// it out: a right token does not touch the failure count.
func TestTokenLockoutConcurrentRightTokens(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	c := lockoutChain(t, nil, clock, nil)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for range 50 {
		wg.Go(func() {
			if _, err := c.Check(ctx, tokenReq("203.0.113.7", plainToken)); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("right token refused: %v", err)
	}
}

// A store failure is an error, not a refusal and not a pass; a request
// without a client address is never counted.
func TestTokenLockoutStoreError(t *testing.T) {
	c := lockoutChain(t, failingLimiter{}, clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0)), nil)
	ctx := context.Background()
	_, err := c.Check(ctx, tokenReq("203.0.113.7", wrongToken))
	var r *Rejection
	if !errors.Is(err, errLimiterDown) || errors.As(err, &r) {
		t.Fatalf("Check with the store down = %v, want the store's error", err)
	}
	// A right token asks no store.
	if g, err := c.Check(ctx, tokenReq("203.0.113.7", plainToken)); err != nil || g.Token == nil {
		t.Fatalf("right token with the store down: %+v, %v", g, err)
	}
	_, err = c.Check(ctx, Request{Recipient: testPrincipal(1), Authorization: "Bearer " + wrongToken})
	wantRejection(t, err, CheckAPIToken, http.StatusUnauthorized, "token_invalid")
}
