package guard

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func powChain(t testing.TB, difficulty int, clock *clocktesting.FakeClock) *Chain {
	t.Helper()
	cfg := Config{PoW: PoWConfig{Difficulty: difficulty, Secret: testSecret}}
	if clock != nil {
		cfg.Clock = clock
	}
	return newChain(t, cfg)
}

func TestPoWSolveAndCheck(t *testing.T) {
	c := powChain(t, 10, nil)
	if !c.Required() || c.Difficulty() != 10 {
		t.Fatalf("Required %v Difficulty %d", c.Required(), c.Difficulty())
	}
	ch := c.Challenge()
	if ch.Difficulty != 10 || ch.Algorithm != "sha256-leading-zero-bits" {
		t.Fatalf("challenge %+v", ch)
	}
	if d := time.Until(ch.ExpiresAt); d < 4*time.Minute || d > 5*time.Minute {
		t.Fatalf("expires in %v, want about 5m", d)
	}
	for _, r := range ch.Token {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			t.Fatalf("token %q has %q: not URL/header safe", ch.Token, r)
		}
	}
	sol, err := Solve(context.Background(), ch.Token, ch.Difficulty)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(ch.Token + ":" + sol))
	if leadingZeroBits(&sum) < 10 {
		t.Fatalf("Solve returned %s with %d zero bits", sol, leadingZeroBits(&sum))
	}
	g, err := c.Check(context.Background(), Request{Recipient: testPrincipal(1), Challenge: ch.Token, Solution: sol})
	if err != nil {
		t.Fatal(err)
	}
	if g != (Grant{}) {
		t.Fatalf("anonymous grant %+v", g)
	}
	// Two challenges never share an id.
	if a, b := c.Challenge().Token, c.Challenge().Token; a == b {
		t.Fatal("two challenges are identical")
	}
}

func TestPoWMissing(t *testing.T) {
	c := powChain(t, 8, nil)
	tok, sol := solved(t, c)
	for _, r := range []Request{{}, {Challenge: tok}, {Solution: sol}, {Challenge: " ", Solution: sol}} {
		r.Recipient = testPrincipal(1)
		_, err := c.Check(context.Background(), r)
		rej := rejection(t, err, CheckProofOfWork, http.StatusPreconditionRequired, "challenge_required")
		if !strings.Contains(rej.Message, "POST /faucet/v1/challenge") || !strings.Contains(rej.Message, "X-Faucet-Solution") {
			t.Fatalf("message %q does not say how", rej.Message)
		}
	}
}

func TestPoWWrongSolution(t *testing.T) {
	c := powChain(t, 12, nil)
	ch := c.Challenge()
	// A counter that falls short of the difficulty.
	var wrong string
	for n := 0; ; n++ {
		s := strconv.Itoa(n)
		sum := sha256.Sum256([]byte(ch.Token + ":" + s))
		if leadingZeroBits(&sum) < 12 {
			wrong = s
			break
		}
	}
	good, err := Solve(context.Background(), ch.Token, 12)
	if err != nil {
		t.Fatal(err)
	}
	for _, sol := range []string{wrong, "abc", "-1", "1e5", good + "x", strings.Repeat("1", 21), "12 34"} {
		_, err := c.Check(context.Background(), Request{Recipient: testPrincipal(1), Challenge: ch.Token, Solution: sol})
		wantRejection(t, err, CheckProofOfWork, http.StatusBadRequest, "challenge_invalid")
	}
	// Refused attempts did not spend the challenge.
	if _, err := c.Check(context.Background(), Request{Recipient: testPrincipal(1), Challenge: ch.Token, Solution: good}); err != nil {
		t.Fatal(err)
	}
}

func TestPoWTampered(t *testing.T) {
	c := powChain(t, 4, nil)
	ch := c.Challenge()
	payloadPart, macPart, _ := strings.Cut(ch.Token, ".")
	p, err := b64.DecodeString(payloadPart)
	if err != nil {
		t.Fatal(err)
	}
	lowered := append([]byte(nil), p...)
	lowered[33] = 0 // claim difficulty 0 under the old signature
	later := append([]byte(nil), p...)
	binary.BigEndian.PutUint64(later[25:33], binary.BigEndian.Uint64(p[25:33])+3600)
	flipped := []byte(ch.Token)
	flipped[5] ^= 1

	tokens := map[string]string{
		"lowered difficulty": b64.EncodeToString(lowered) + "." + macPart,
		"extended expiry":    b64.EncodeToString(later) + "." + macPart,
		"flipped character":  string(flipped),
		"no signature":       payloadPart,
		"empty signature":    payloadPart + ".",
		"extra segment":      ch.Token + ".x",
		"truncated mac":      payloadPart + "." + macPart[:20],
		"garbage":            "%%%.###",
		"huge":               strings.Repeat("A", 5000) + "." + macPart,
	}
	for name, tok := range tokens {
		// Solved honestly against the tampered token, so only the signature
		// or format can refuse it.
		sol, err := Solve(context.Background(), tok, 4)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Check(context.Background(), Request{Recipient: testPrincipal(1), Challenge: tok, Solution: sol})
		var r *Rejection
		if !errors.As(err, &r) || r.Reason != "challenge_invalid" || r.Status != http.StatusBadRequest {
			t.Errorf("%s: got %v, want challenge_invalid", name, err)
		}
	}
}

func TestPoWOtherSecret(t *testing.T) {
	c := powChain(t, 4, nil)
	other := newChain(t, Config{PoW: PoWConfig{Difficulty: 4, Secret: []byte("another-secret-of-enough-length")}})
	tok, sol := solved(t, other)
	_, err := c.Check(context.Background(), Request{Recipient: testPrincipal(1), Challenge: tok, Solution: sol})
	wantRejection(t, err, CheckProofOfWork, http.StatusBadRequest, "challenge_invalid")
	// A replica with the same secret accepts it.
	twin := newChain(t, Config{PoW: PoWConfig{Difficulty: 4, Secret: []byte("another-secret-of-enough-length")}})
	if _, err := twin.Check(context.Background(), Request{Recipient: testPrincipal(1), Challenge: tok, Solution: sol}); err != nil {
		t.Fatal(err)
	}
}

func TestPoWExpired(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	c := newChain(t, Config{Clock: clock, PoW: PoWConfig{Difficulty: 4, Secret: testSecret, TTL: time.Minute}})
	ch := c.Challenge()
	if !ch.ExpiresAt.Equal(clock.Now().Add(time.Minute)) {
		t.Fatalf("ExpiresAt %v, want %v", ch.ExpiresAt, clock.Now().Add(time.Minute))
	}
	sol, _ := Solve(context.Background(), ch.Token, ch.Difficulty)
	tok2, sol2 := solved(t, c)

	clock.Step(time.Minute - time.Second)
	if _, err := c.Check(context.Background(), Request{Recipient: testPrincipal(1), Challenge: tok2, Solution: sol2}); err != nil {
		t.Fatalf("just before expiry: %v", err)
	}
	clock.Step(time.Second)
	_, err := c.Check(context.Background(), Request{Recipient: testPrincipal(1), Challenge: ch.Token, Solution: sol})
	wantRejection(t, err, CheckProofOfWork, http.StatusBadRequest, "challenge_expired")
}

func TestPoWIssuedInTheFuture(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	ahead := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	ahead.Step(time.Hour)
	issuer := newChain(t, Config{Clock: ahead, PoW: PoWConfig{Difficulty: 4, Secret: testSecret, TTL: 2 * time.Hour}})
	c := newChain(t, Config{Clock: clock, PoW: PoWConfig{Difficulty: 4, Secret: testSecret}})
	tok, sol := solved(t, issuer)
	_, err := c.Check(context.Background(), Request{Recipient: testPrincipal(1), Challenge: tok, Solution: sol})
	wantRejection(t, err, CheckProofOfWork, http.StatusBadRequest, "challenge_invalid")
}

func TestPoWBelowBase(t *testing.T) {
	low := powChain(t, 4, nil)
	tok, sol := solved(t, low)
	// The operator raised the base difficulty: old easy challenges are void.
	high := powChain(t, 8, nil)
	_, err := high.Check(context.Background(), Request{Recipient: testPrincipal(1), Challenge: tok, Solution: sol})
	wantRejection(t, err, CheckProofOfWork, http.StatusBadRequest, "challenge_invalid")
}

func TestPoWReplayConcurrent(t *testing.T) {
	c := powChain(t, 8, nil)
	tok, sol := solved(t, c)
	const n = 32
	var ok, replayed, other atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-start
			_, err := c.Check(context.Background(), Request{Recipient: testPrincipal(1), Challenge: tok, Solution: sol})
			var r *Rejection
			switch {
			case err == nil:
				ok.Add(1)
			case errors.As(err, &r) && r.Reason == "challenge_replayed" && r.Status == http.StatusForbidden:
				replayed.Add(1)
			default:
				other.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	if ok.Load() != 1 || replayed.Load() != n-1 || other.Load() != 0 {
		t.Fatalf("ok %d replayed %d other %d, want 1 %d 0", ok.Load(), replayed.Load(), other.Load(), n-1)
	}
}

func TestPoWDifficultyZero(t *testing.T) {
	c := newChain(t, Config{}) // no secret needed when PoW can never be required
	if c.Required() || c.Difficulty() != 0 {
		t.Fatalf("Required %v Difficulty %d", c.Required(), c.Difficulty())
	}
	if _, err := c.Check(context.Background(), Request{Recipient: testPrincipal(1)}); err != nil {
		t.Fatal(err)
	}
	ch := c.Challenge()
	if ch.Difficulty != 0 || ch.Token == "" {
		t.Fatalf("challenge %+v", ch)
	}
	if sol, err := Solve(context.Background(), ch.Token, 0); err != nil || sol != "0" {
		t.Fatalf("Solve at 0 = %q, %v", sol, err)
	}
	// Headers sent anyway are ignored, even garbage.
	if _, err := c.Check(context.Background(), Request{Recipient: testPrincipal(1), Challenge: "junk", Solution: "x"}); err != nil {
		t.Fatal(err)
	}
}

func TestSolveErrors(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Solve(ctx, "abc", 40); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	for _, d := range []int{-1, 65} {
		if _, err := Solve(context.Background(), "abc", d); err == nil {
			t.Errorf("difficulty %d accepted", d)
		}
	}
	if _, err := Solve(context.Background(), "", 1); err == nil {
		t.Error("empty token accepted")
	}
}

func TestLeadingZeroBits(t *testing.T) {
	cases := []struct {
		prefix []byte
		want   int
	}{
		{[]byte{0x80}, 0},
		{[]byte{0x01}, 7},
		{[]byte{0x00, 0x40}, 9},
		{[]byte{0x00, 0x00, 0x0f}, 20},
	}
	for _, tc := range cases {
		var s [32]byte
		copy(s[:], tc.prefix)
		if got := leadingZeroBits(&s); got != tc.want {
			t.Errorf("%x: %d, want %d", tc.prefix, got, tc.want)
		}
	}
	var zero [32]byte
	if leadingZeroBits(&zero) != 256 {
		t.Error("all zero")
	}
}

func TestPoWConfigValidation(t *testing.T) {
	bad := []PoWConfig{
		{Difficulty: -1, Secret: testSecret},
		{Difficulty: 33, Secret: testSecret},
		{Difficulty: 8},                          // no secret
		{Difficulty: 8, Secret: []byte("short")}, // < 16 bytes
		{RaiseAbove: limit(10, time.Minute)},     // raise needs a secret
		{RaiseAbove: limit(10, 0), Secret: testSecret},
		{Difficulty: 8, Secret: testSecret, TTL: -time.Second},
		{Difficulty: 8, Secret: testSecret, TTL: time.Millisecond},
		{Difficulty: 8, Secret: testSecret, MaxDifficulty: 4},
		{Difficulty: 8, Secret: testSecret, MaxDifficulty: 40},
		{Difficulty: 8, Secret: testSecret, RaiseStep: -1},
	}
	for i, p := range bad {
		_, err := New(Config{PoW: p})
		if err == nil {
			t.Errorf("case %d (%+v) accepted", i, p)
			continue
		}
		if p.Secret != nil && strings.Contains(err.Error(), string(p.Secret)) {
			t.Errorf("case %d: error leaks the secret: %v", i, err)
		}
	}
	// Defaults.
	c := newChain(t, Config{PoW: PoWConfig{Difficulty: 30, Secret: testSecret}})
	if c.pow.TTL != 5*time.Minute || c.pow.RaiseStep != 2 || c.pow.MaxDifficulty != 30 {
		t.Errorf("defaults: %+v", c.pow)
	}
	c = newChain(t, Config{PoW: PoWConfig{Difficulty: 8, Secret: testSecret}})
	if c.pow.MaxDifficulty != 24 {
		t.Errorf("MaxDifficulty default %d", c.pow.MaxDifficulty)
	}
	// The chain keeps its own copy of the secret.
	secret := append([]byte(nil), testSecret...)
	c = newChain(t, Config{PoW: PoWConfig{Difficulty: 4, Secret: secret}})
	tok, sol := solved(t, c)
	secret[0] ^= 0xff
	if _, err := c.Check(context.Background(), Request{Recipient: testPrincipal(1), Challenge: tok, Solution: sol}); err != nil {
		t.Fatalf("changing the caller's slice changed the key: %v", err)
	}
}
