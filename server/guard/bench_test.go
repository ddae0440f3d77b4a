package guard

import (
	"context"
	"strconv"
	"testing"
	"time"
)

// BenchmarkSolve measures a client's work at difficulty 16 and reports the
// raw hash rate.
func BenchmarkSolve(b *testing.B) {
	c := newChain(b, Config{PoW: PoWConfig{Difficulty: 16, Secret: testSecret}})
	var hashes float64
	for b.Loop() {
		ch := c.Challenge()
		sol, err := Solve(context.Background(), ch.Token, 16)
		if err != nil {
			b.Fatal(err)
		}
		n, err := strconv.ParseUint(sol, 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		hashes += float64(n + 1)
	}
	b.ReportMetric(hashes/b.Elapsed().Seconds(), "hashes/s")
	b.ReportMetric(hashes/float64(b.N), "hashes/op")
}

// alwaysFresh lets one solved challenge be checked repeatedly, so the
// benchmark measures the server's verification, not the client's work.
type alwaysFresh struct{}

func (alwaysFresh) SpendChallenge(context.Context, string, time.Time) (bool, error) {
	return true, nil
}

// BenchmarkCheckPoW measures the server's cost of one anonymous drip check
// with a proof of work: decode, HMAC, solution hash, spend.
func BenchmarkCheckPoW(b *testing.B) {
	b.Run("verify", func(b *testing.B) {
		c := newChain(b, Config{PoW: PoWConfig{Difficulty: 16, Secret: testSecret}, Spent: alwaysFresh{}})
		tok, sol := solved(b, c)
		r := Request{Recipient: testPrincipal(1), Challenge: tok, Solution: sol}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.Check(context.Background(), r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("issue-solve-check", func(b *testing.B) {
		// The whole round trip with the in-memory replay store, at
		// difficulty 1 so that the client's work is negligible.
		c := newChain(b, Config{PoW: PoWConfig{Difficulty: 1, Secret: testSecret}})
		b.ReportAllocs()
		for b.Loop() {
			tok, sol := solved(b, c)
			if _, err := c.Check(context.Background(), Request{Recipient: testPrincipal(1), Challenge: tok, Solution: sol}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
